"""Splits a byte stream into Kafka response frames (int32 size, int32 correlation id, payload), sans I/O.

Owns stream reassembly and the frame-size guard only; it never looks inside a payload and never reads a socket.
"""

from __future__ import annotations

from aioproducer.errors import ConfigError, ProtocolError
from aioproducer.protocol.primitives import INT32

__all__ = ["DEFAULT_MAX_FRAME_BYTES", "FrameDecoder"]

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
_SIZE = 4
_CORRELATION_ID = 4


class FrameDecoder:
    """Feed it bytes as they arrive; it returns each complete `(correlation_id, payload)` once.

    The payload is the frame after its correlation id (response header tagged fields included, for flexible
    versions). A frame size below 4 or above `max_frame_bytes` raises ProtocolError, like Java's
    NetworkReceive guards against garbage from a non-Kafka peer; after that the decoder stays broken, since the
    stream has lost its framing and the connection must be closed.
    """

    __slots__ = ("_buffer", "_error", "_max_frame_bytes")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes < _CORRELATION_ID:
            raise ConfigError(f"max_frame_bytes must be at least {_CORRELATION_ID}, got {max_frame_bytes}")
        self._max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete frame."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> list[tuple[int, bytes]]:
        """Add received bytes; return the frames they complete, in order (often none, sometimes several)."""
        if self._error is not None:
            raise ProtocolError(f"frame decoder is unusable after an earlier error: {self._error}")
        self._buffer += data
        frames: list[tuple[int, bytes]] = []
        buffer = self._buffer
        start = 0
        available = len(buffer)
        with memoryview(buffer) as view:
            while available - start >= _SIZE:
                size = INT32.unpack_from(view, start)[0]
                if not _CORRELATION_ID <= size <= self._max_frame_bytes:
                    self._error = ProtocolError(
                        f"invalid frame size {size} (allowed {_CORRELATION_ID}..{self._max_frame_bytes}); "
                        "the peer is not speaking Kafka or the stream is corrupt"
                    )
                    break
                end = start + _SIZE + size
                if end > available:
                    break
                correlation_id = INT32.unpack_from(view, start + _SIZE)[0]
                frames.append((correlation_id, view[start + _SIZE + _CORRELATION_ID : end].tobytes()))
                start = end
        if start:
            # bytearray drops a prefix in place without moving the tail when it can (CPython's ob_start).
            del buffer[:start]
        if self._error is not None:
            raise self._error
        return frames
