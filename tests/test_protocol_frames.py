"""FrameDecoder: frames come out whole and in order however the stream is chopped, and absurd sizes are refused."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer.errors import ConfigError, ProtocolError
from aioproducer.protocol import FrameDecoder


def frame(correlation_id: int, payload: bytes) -> bytes:
    """Built with struct directly, not with our encoder: the decoder is judged against the wire format itself."""
    return struct.pack(">ii", len(payload) + 4, correlation_id) + payload


FRAMES = [(1, b"alpha"), (2, b""), (3, bytes(range(256)) * 40), (-7, b"\x00\x00\x00\x05")]
STREAM = b"".join(frame(cid, payload) for cid, payload in FRAMES)


def test_whole_stream_at_once() -> None:
    assert FrameDecoder().feed(STREAM) == FRAMES


def test_byte_by_byte() -> None:
    decoder = FrameDecoder()
    out = []
    for i in range(len(STREAM)):
        out += decoder.feed(STREAM[i : i + 1])
    assert out == FRAMES
    assert decoder.buffered == 0


def test_trailing_partial_frame_waits_for_the_rest() -> None:
    decoder = FrameDecoder()
    cut = len(STREAM) - 3
    assert decoder.feed(STREAM[:cut]) == FRAMES[:-1]
    assert decoder.buffered == len(frame(*FRAMES[-1])) - 3
    assert decoder.feed(STREAM[cut:]) == FRAMES[-1:]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, len(STREAM)), max_size=12))
def test_any_chunking_yields_the_same_frames(cuts: list[int]) -> None:
    decoder = FrameDecoder()
    points = [0, *sorted(cuts), len(STREAM)]
    out = []
    for start, end in itertools.pairwise(points):
        out += decoder.feed(memoryview(STREAM)[start:end])
    assert out == FRAMES


def test_accepts_bytearray_and_memoryview() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(bytearray(frame(1, b"x"))) == [(1, b"x")]
    assert decoder.feed(memoryview(frame(2, b"y"))) == [(2, b"y")]


def test_payload_is_independent_of_later_feeds() -> None:
    decoder = FrameDecoder()
    ((_, payload),) = decoder.feed(frame(1, b"keep"))
    decoder.feed(frame(2, b"overwrite"))
    assert payload == b"keep" and isinstance(payload, bytes)


@pytest.mark.parametrize("size", [-1, -(2**31), 0, 3])
def test_sizes_below_a_correlation_id_are_refused(size: int) -> None:
    with pytest.raises(ProtocolError, match="invalid frame size"):
        FrameDecoder().feed(struct.pack(">i", size) + b"\x00" * 8)


def test_size_above_max_is_refused_before_buffering_it() -> None:
    decoder = FrameDecoder(max_frame_bytes=1024)
    assert decoder.feed(frame(1, b"z" * 1020)) == [(1, b"z" * 1020)]  # exactly the max is fine
    with pytest.raises(ProtocolError, match="1025"):
        decoder.feed(struct.pack(">i", 1025))


def test_http_response_is_not_mistaken_for_a_frame() -> None:
    """A TLS or HTTP peer answers with text whose first 4 bytes read as a huge size: fail fast, do not wait."""
    with pytest.raises(ProtocolError):
        FrameDecoder().feed(b"HTTP/1.1 400 Bad Request\r\n")


def test_decoder_stays_broken_after_an_error() -> None:
    decoder = FrameDecoder()
    with pytest.raises(ProtocolError):
        decoder.feed(struct.pack(">i", -5))
    with pytest.raises(ProtocolError, match="earlier error"):
        decoder.feed(frame(1, b"ok"))


def test_max_frame_bytes_must_fit_a_correlation_id() -> None:
    with pytest.raises(ConfigError):
        FrameDecoder(max_frame_bytes=3)
