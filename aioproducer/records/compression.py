"""Record-batch codecs: none, gzip, snappy, lz4 and zstd, with Kafka's framing and KIP-390 levels.

Pure byte-in/byte-out functions; owns no record layout (see `aioproducer.records`) and never does I/O.
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum
from typing import Any

import lz4.frame
import zstandard

from aioproducer.errors import ConfigError, ProtocolError

__all__ = ["CompressionType", "compress", "decompress", "validate_level"]


class CompressionType(IntEnum):
    """The codec ids stored in bits 0-2 of a record batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        """The codec for a `compression.type` value: 'none', 'gzip', 'snappy', 'lz4' or 'zstd'."""
        member = _BY_NAME.get(name.lower()) if isinstance(name, str) else None
        if member is None:
            raise ConfigError(f"unknown compression type {name!r}; expected one of {', '.join(_BY_NAME)}")
        return member


_BY_NAME = {member.name.lower(): member for member in CompressionType}

# KIP-390 ranges as Java enforces them (GzipCompression, Lz4Compression, ZstdCompression). Gzip also accepts
# Deflater.DEFAULT_COMPRESSION (-1); zstd's floor is Zstd.minCompressionLevel() (-(1 << 17)).
_LEVEL_RANGES: dict[CompressionType, tuple[int, int]] = {
    CompressionType.GZIP: (1, 9),
    CompressionType.LZ4: (1, 17),
    CompressionType.ZSTD: (-(1 << 17), 22),
}
_GZIP_DEFAULT_LEVEL = -1
_ZSTD_DEFAULT_LEVEL = 3


def validate_level(ctype: CompressionType, level: int | None) -> None:
    """Raise ConfigError unless `level` is None or inside the codec's KIP-390 range (none/snappy take no level)."""
    if level is None:
        return
    if isinstance(level, bool) or not isinstance(level, int):
        raise ConfigError(f"compression level must be an int, got {type(level).__name__}")
    bounds = _LEVEL_RANGES.get(ctype)
    if bounds is None:
        raise ConfigError(f"compression type {ctype.name.lower()} takes no level (got {level})")
    low, high = bounds
    if ctype is CompressionType.GZIP and level == _GZIP_DEFAULT_LEVEL:
        return
    if not low <= level <= high:
        raise ConfigError(f"{ctype.name.lower()} compression level must be in [{low}, {high}], got {level}")


def compress(ctype: CompressionType, data: bytes, level: int | None = None) -> bytes:
    """Compress a records section with `ctype`, framed the way Java and librdkafka consumers read it."""
    try:
        ctype = CompressionType(ctype)
    except ValueError:
        raise ConfigError(f"unknown compression type {ctype!r}") from None
    validate_level(ctype, level)
    if ctype is CompressionType.NONE:
        return bytes(data)
    if ctype is CompressionType.GZIP:
        return _gzip_compress(data, _GZIP_DEFAULT_LEVEL if level is None else level)
    if ctype is CompressionType.SNAPPY:
        return _snappy_compress(data)
    if ctype is CompressionType.LZ4:
        return _lz4_compress(data, level)
    return _zstd_compress(data, _ZSTD_DEFAULT_LEVEL if level is None else level)


def decompress(ctype: CompressionType, data: bytes) -> bytes:
    """Undo `compress` (and what other clients write); corrupt or truncated input raises ProtocolError."""
    try:
        ctype = CompressionType(ctype)
    except ValueError:
        raise ProtocolError(f"unknown compression codec id {ctype!r}") from None
    try:
        if ctype is CompressionType.NONE:
            return bytes(data)
        if ctype is CompressionType.GZIP:
            return _gzip_decompress(data)
        if ctype is CompressionType.SNAPPY:
            return _snappy_decompress(data)
        if ctype is CompressionType.LZ4:
            return _lz4_decompress(data)
        return _zstd_decompress(data)
    except ConfigError:  # a missing optional codec package, not corrupt data
        raise
    except (zlib.error, RuntimeError, zstandard.ZstdError, ValueError) as exc:
        raise ProtocolError(f"corrupt {ctype.name.lower()} data: {exc}") from exc


# --- gzip -------------------------------------------------------------------------------------------------------

_GZIP_WBITS = 16 + zlib.MAX_WBITS  # gzip container, as Java's GZIPOutputStream writes


def _gzip_compress(data: bytes, level: int) -> bytes:
    compressor = zlib.compressobj(level, zlib.DEFLATED, _GZIP_WBITS)
    return compressor.compress(data) + compressor.flush()


def _gzip_decompress(data: bytes) -> bytes:
    # Java's GZIPInputStream reads concatenated members, so a batch may legally hold several.
    out = bytearray()
    rest = bytes(data)
    while True:
        inflater = zlib.decompressobj(_GZIP_WBITS)
        out += inflater.decompress(rest)
        if not inflater.eof:
            raise ProtocolError("truncated gzip data")
        rest = inflater.unused_data
        if not rest:
            return bytes(out)


# --- snappy -----------------------------------------------------------------------------------------------------

# Java's SnappyOutputStream (xerial) framing: magic, version 1, compatible version 1, then length-prefixed blocks
# of 32 KiB input each. librdkafka and Java both read it; both also read raw snappy.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_BLOCK_LEN = struct.Struct(">i")


def _cramjam() -> Any:
    try:
        import cramjam
    except ImportError:
        raise ConfigError("snappy compression needs the cramjam package: pip install aioproducer[snappy]") from None
    return cramjam


def _snappy_compress(data: bytes) -> bytes:
    snappy = _cramjam().snappy
    parts = [_XERIAL_HEADER]
    view = memoryview(data)
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        parts.append(_BLOCK_LEN.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes) -> bytes:
    cramjam = _cramjam()
    try:
        if not data.startswith(_XERIAL_MAGIC) or len(data) < len(_XERIAL_HEADER):
            return bytes(cramjam.snappy.decompress_raw(data))
        return _xerial_decompress(cramjam.snappy, memoryview(data))
    except cramjam.DecompressionError as exc:
        raise ProtocolError(f"corrupt snappy data: {exc}") from exc


def _xerial_decompress(snappy: Any, view: memoryview) -> bytes:
    out = bytearray()
    pos = len(_XERIAL_HEADER)
    while pos < len(view):
        if pos + 4 > len(view):
            raise ProtocolError("truncated xerial snappy block length")
        (length,) = _BLOCK_LEN.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > len(view):
            raise ProtocolError("truncated xerial snappy block")
        out += snappy.decompress_raw(view[pos : pos + length])
        pos += length
    return bytes(out)


# --- lz4 --------------------------------------------------------------------------------------------------------


def _lz4_compress(data: bytes, level: int | None) -> bytes:
    # KIP-57 framing as Java's Lz4BlockOutputStream writes it: 64 KiB independent blocks (Java's reader rejects
    # dependent ones), no block or content checksum and no content size. Without a level we use lz4's fast mode,
    # as librdkafka does; levels >= 3 select lz4hc like Java's highCompressor.
    return bytes(
        lz4.frame.compress(
            data,
            compression_level=0 if level is None else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            block_checksum=False,
            store_size=False,
        )
    )


def _lz4_decompress(data: bytes) -> bytes:
    return bytes(lz4.frame.decompress(data))


# --- zstd -------------------------------------------------------------------------------------------------------


def _zstd_compress(data: bytes, level: int) -> bytes:
    # A fresh (de)compressor per call: zstandard's contexts must not be shared between threads, and a sender may
    # compress off the event loop.
    return bytes(zstandard.ZstdCompressor(level=level).compress(data))


def _zstd_decompress(data: bytes) -> bytes:
    # Java's ZstdOutputStream writes frames without a content size, which one-shot decompress() refuses; stream
    # each frame instead, and accept several concatenated frames as zstd's own streaming reader does.
    out = bytearray()
    rest = bytes(data)
    decompressor = zstandard.ZstdDecompressor()
    while True:
        stream = decompressor.decompressobj()
        out += stream.decompress(rest)
        if not stream.eof:
            raise ProtocolError("truncated zstd data")
        rest = stream.unused_data
        if not rest:
            return bytes(out)
