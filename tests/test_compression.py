"""Codec tests: KIP-390 levels, the framing Java and librdkafka expect, and decoding what other writers produce."""

from __future__ import annotations

import gzip
import os
import struct
import sys
import zlib

import aiokafka.codec
import cramjam
import lz4.frame
import pytest
import zstandard

from aioproducer.errors import ConfigError, ProtocolError
from aioproducer.records.compression import CompressionType, compress, decompress, validate_level

CODECS = [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4, CompressionType.ZSTD]
# Compressible text plus random bytes, longer than one lz4 block (64 KiB) and several xerial blocks (32 KiB).
PAYLOAD = b"".join(b"record %06d: the quick brown fox\n" % i for i in range(4000)) + os.urandom(3000)
SAMPLES = [b"", b"x", b"hello kafka", os.urandom(1000), PAYLOAD]


def test_from_name_maps_every_kafka_compression_type() -> None:
    names = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
    assert {name: int(CompressionType.from_name(name)) for name in names} == names


@pytest.mark.parametrize("bad", ["brotli", "", "gzip ", 3])
def test_from_name_rejects_unknown_names(bad: object) -> None:
    with pytest.raises(ConfigError):
        CompressionType.from_name(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("ctype", "good", "bad"),
    [
        (CompressionType.GZIP, [1, 9, -1], [0, 10, -2]),
        (CompressionType.LZ4, [1, 9, 17], [0, 18]),
        (CompressionType.ZSTD, [-131072, -1, 0, 3, 22], [-131073, 23]),
    ],
)
def test_validate_level_follows_kip_390_ranges(ctype: CompressionType, good: list[int], bad: list[int]) -> None:
    validate_level(ctype, None)
    for level in good:
        validate_level(ctype, level)
    for level in bad:
        with pytest.raises(ConfigError):
            validate_level(ctype, level)


@pytest.mark.parametrize("ctype", [CompressionType.NONE, CompressionType.SNAPPY])
def test_codecs_without_levels_reject_a_level(ctype: CompressionType) -> None:
    validate_level(ctype, None)
    with pytest.raises(ConfigError):
        validate_level(ctype, 1)


@pytest.mark.parametrize("level", [True, 3.0, "3"])
def test_validate_level_rejects_non_int_levels(level: object) -> None:
    with pytest.raises(ConfigError):
        validate_level(CompressionType.ZSTD, level)  # type: ignore[arg-type]


def test_compress_rejects_out_of_range_level() -> None:
    with pytest.raises(ConfigError):
        compress(CompressionType.GZIP, b"data", level=11)


@pytest.mark.parametrize("ctype", list(CompressionType))
@pytest.mark.parametrize("data", SAMPLES, ids=lambda d: f"{len(d)}B")
def test_round_trip(ctype: CompressionType, data: bytes) -> None:
    assert decompress(ctype, compress(ctype, data)) == data


@pytest.mark.parametrize(
    ("ctype", "level"), [(CompressionType.GZIP, 1), (CompressionType.LZ4, 12), (CompressionType.ZSTD, -5)]
)
def test_round_trip_with_levels(ctype: CompressionType, level: int) -> None:
    assert decompress(ctype, compress(ctype, PAYLOAD, level)) == PAYLOAD


def test_gzip_is_the_gzip_container_and_honours_the_level() -> None:
    fast, best = compress(CompressionType.GZIP, PAYLOAD, 1), compress(CompressionType.GZIP, PAYLOAD, 9)
    assert gzip.decompress(fast) == gzip.decompress(best) == PAYLOAD
    # RFC 1952 XFL byte: zlib writes 4 for its fastest level and 2 for its best.
    assert (fast[8], best[8]) == (4, 2)


def test_snappy_uses_java_xerial_framing_with_32k_blocks() -> None:
    framed = compress(CompressionType.SNAPPY, PAYLOAD)
    assert framed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(framed):
        (length,) = struct.unpack_from(">i", framed, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(framed[pos + 4 : pos + 4 + length])))
        pos += 4 + length
    assert b"".join(blocks) == PAYLOAD
    assert [len(b) for b in blocks[:-1]] == [32 * 1024] * (len(blocks) - 1)
    assert aiokafka.codec.snappy_decode(framed) == PAYLOAD


def test_lz4_frame_matches_what_java_writes() -> None:
    framed = compress(CompressionType.LZ4, PAYLOAD)
    # Magic, then FLG 0x60 (version 01, independent blocks, no checksums, no content size) and BD 0x40 (64 KiB):
    # the descriptor of Java's Lz4BlockOutputStream, whose reader rejects dependent blocks.
    assert framed[:4] == struct.pack("<I", 0x184D2204)
    assert framed[4:6] == b"\x60\x40"
    info = lz4.frame.get_frame_info(framed)
    assert (info["block_linked"], info["content_checksum"], info["block_size"]) == (False, False, 64 * 1024)
    assert bytes(cramjam.lz4.decompress(framed)) == PAYLOAD


def test_zstd_is_a_standard_frame() -> None:
    framed = compress(CompressionType.ZSTD, PAYLOAD)
    reader = zstandard.ZstdDecompressor().stream_reader(framed)
    assert reader.read(len(PAYLOAD) + 1) == PAYLOAD
    assert aiokafka.codec.zstd_decode(framed) == PAYLOAD


def test_decompress_reads_raw_snappy_as_librdkafka_writes_it() -> None:
    assert decompress(CompressionType.SNAPPY, bytes(cramjam.snappy.compress_raw(PAYLOAD))) == PAYLOAD


def test_decompress_reads_another_clients_xerial_snappy() -> None:
    framed = aiokafka.codec.snappy_encode(PAYLOAD, xerial_compatible=True, xerial_blocksize=4096)
    assert decompress(CompressionType.SNAPPY, framed) == PAYLOAD


def test_decompress_reads_concatenated_gzip_members() -> None:
    assert decompress(CompressionType.GZIP, gzip.compress(b"first ") + gzip.compress(b"second")) == b"first second"


def test_decompress_reads_lz4_frames_with_checksums_linked_blocks_and_size() -> None:
    framed = lz4.frame.compress(PAYLOAD, block_linked=True, content_checksum=True, block_checksum=True, store_size=True)
    assert decompress(CompressionType.LZ4, framed) == PAYLOAD


def test_decompress_reads_zstd_frames_without_content_size_as_java_writes_them() -> None:
    framed = zstandard.ZstdCompressor(write_content_size=False).compress(PAYLOAD)
    with pytest.raises(zstandard.ZstdError):
        zstandard.ZstdDecompressor().decompress(framed)  # the one-shot API cannot, hence the streaming path
    assert decompress(CompressionType.ZSTD, framed) == PAYLOAD


def test_decompress_reads_several_zstd_frames() -> None:
    framed = zstandard.ZstdCompressor().compress(b"one ") + zstandard.ZstdCompressor().compress(b"two")
    assert decompress(CompressionType.ZSTD, framed) == b"one two"


@pytest.mark.parametrize("ctype", CODECS)
def test_truncated_input_raises_protocol_error(ctype: CompressionType) -> None:
    framed = compress(ctype, PAYLOAD)
    for cut in (1, len(framed) // 2, len(framed) - 1):
        with pytest.raises(ProtocolError):
            decompress(ctype, framed[:cut])


@pytest.mark.parametrize("ctype", CODECS)
@pytest.mark.parametrize("garbage", [b"\x00" * 32, b"\xff" * 7, b"not compressed at all, really"])
def test_garbage_raises_protocol_error(ctype: CompressionType, garbage: bytes) -> None:
    with pytest.raises(ProtocolError):
        decompress(ctype, garbage)


def test_corrupt_xerial_block_raises_protocol_error() -> None:
    framed = bytearray(compress(CompressionType.SNAPPY, PAYLOAD))
    framed[16:20] = struct.pack(">i", 10**6)  # first block claims more bytes than exist
    with pytest.raises(ProtocolError):
        decompress(CompressionType.SNAPPY, bytes(framed))


def test_gzip_with_a_bad_checksum_raises_protocol_error() -> None:
    framed = bytearray(compress(CompressionType.GZIP, PAYLOAD))
    framed[-5] ^= 0xFF  # inside the CRC-32 trailer
    with pytest.raises(ProtocolError):
        decompress(CompressionType.GZIP, bytes(framed))
    assert zlib.crc32(PAYLOAD) != struct.unpack("<I", bytes(framed[-8:-4]))[0]


def test_snappy_without_cramjam_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: decompress once reported a missing cramjam as corrupt data (ConfigError is a ValueError)."""
    monkeypatch.setitem(sys.modules, "cramjam", None)  # makes `import cramjam` raise ImportError
    for call in (lambda: compress(CompressionType.SNAPPY, b"x"), lambda: decompress(CompressionType.SNAPPY, b"x")):
        with pytest.raises(ConfigError, match=r"pip install aioproducer\[snappy\]"):
            call()


def test_unknown_codec_ids_raise_typed_errors() -> None:
    with pytest.raises(ConfigError):
        compress(9, b"data")  # type: ignore[arg-type]
    with pytest.raises(ProtocolError):
        decompress(5, b"data")  # type: ignore[arg-type]
    assert decompress(1, compress(CompressionType.GZIP, b"data")) == b"data"  # type: ignore[arg-type]
