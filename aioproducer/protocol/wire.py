"""Whole requests and responses: size prefix, the right header version, and the body, in both directions.

Owns header-version rules (KIP-482, KIP-511) and error translation at the codec boundary; never touches sockets.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aioproducer.errors import ProtocolError, UnsupportedVersionError
from aioproducer.protocol.api import ApiKey
from aioproducer.protocol.codec import Codec, Writer, codec_for
from aioproducer.protocol.messages import REQUEST_HEADER, REQUESTS, RESPONSE_HEADER, RESPONSES
from aioproducer.protocol.primitives import INT32, Reader
from aioproducer.protocol.produce_answers import read_produce_response
from aioproducer.protocol.produce_requests import frame_produce_request
from aioproducer.protocol.schema import Message

__all__ = [
    "RequestHeader",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
]

# Wrong Python types or out-of-range numbers in a body surface as these while encoding.
_ENCODE_FAILURES = (struct.error, TypeError, AttributeError, ValueError, OverflowError)
# Defensive: the Reader checks bounds itself, but no decoding failure may leak as anything but ProtocolError.
_DECODE_FAILURES = (struct.error, IndexError, ValueError, OverflowError)


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """A decoded request header (v1 or v2). `api_key` is an ApiKey when aioproducer knows the API."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def _message(table: Mapping[ApiKey, Message], api_key: int, api_version: int) -> Codec:
    try:
        message = table[ApiKey(api_key)]
    except (ValueError, KeyError):
        raise UnsupportedVersionError(f"API key {api_key} is not one aioproducer speaks") from None
    return codec_for(message, api_version)


def _response_header_version(api_key: int, codec: Codec) -> int:
    # KIP-511: ApiVersions responses always use header v0, so a client can read the error of a version it sent
    # too high before knowing the broker's range.
    return 1 if codec.flexible and api_key != ApiKey.API_VERSIONS else 0


def _encode(codec: Codec, w: Writer, body: Mapping[str, Any]) -> None:
    try:
        codec.encode(w, body)
    except _ENCODE_FAILURES as exc:
        raise ProtocolError(f"cannot encode {codec.message.name} v{codec.version}: {exc}") from exc


def _frame(w: Writer) -> bytes:
    chunks = w.chunks()
    size = sum(len(chunk) if not isinstance(chunk, memoryview) else chunk.nbytes for chunk in chunks)
    return b"".join([INT32.pack(size), *chunks])


def encode_request(
    api_key: ApiKey, api_version: int, correlation_id: int, client_id: str | None, body: Mapping[str, Any]
) -> bytes:
    """Encode a whole request frame: int32 size, request header v1 (v2 for flexible versions), then the body.

    Keys the version lacks are ignored and missing keys take the field's default. Large `records` blobs are
    copied once, into the returned frame. Raises UnsupportedVersionError for an API/version outside
    SUPPORTED_VERSIONS, ProtocolError for a body that cannot be encoded (wrong type, out of range, null where
    the version forbids it).
    """
    if api_key == ApiKey.PRODUCE:
        # Every record batch goes out in one: its usual shape has a framer of its own (see produce_requests).
        frame = frame_produce_request(api_version, correlation_id, client_id, body)
        if frame is not None:
            return frame
    codec = _message(REQUESTS, api_key, api_version)
    header = codec_for(REQUEST_HEADER, 2 if codec.flexible else 1)
    w = Writer()
    fields = {
        "request_api_key": int(api_key),
        "request_api_version": api_version,
        "correlation_id": correlation_id,
        "client_id": client_id,
    }
    _encode(header, w, fields)
    _encode(codec, w, body)
    return _frame(w)


def encode_response(api_key: ApiKey, api_version: int, correlation_id: int, body: Mapping[str, Any]) -> bytes:
    """Encode a whole response frame (size, header v0/v1 per KIP-482/KIP-511, body): for test brokers and proxies."""
    codec = _message(RESPONSES, api_key, api_version)
    header = codec_for(RESPONSE_HEADER, _response_header_version(api_key, codec))
    w = Writer()
    _encode(header, w, {"correlation_id": correlation_id})
    _encode(codec, w, body)
    return _frame(w)


def _decode(codec: Codec, reader: Reader, *, strict: bool) -> dict[str, Any]:
    try:
        body: dict[str, Any] = codec.decode(reader)
    except _DECODE_FAILURES as exc:
        raise ProtocolError(f"malformed {codec.message.name} v{codec.version}: {exc}") from exc
    if strict and reader.remaining:
        raise ProtocolError(f"{reader.remaining} unexpected bytes after {codec.message.name} v{codec.version}")
    return body


def decode_response(
    api_key: ApiKey, api_version: int, payload: bytes | memoryview, *, strict: bool = False
) -> dict[str, Any]:
    """Decode a response body from the payload FrameDecoder yields (everything after the correlation id).

    For flexible versions the response header v1's tagged-field section is skipped first (never for
    ApiVersions, whose responses keep header v0). Every field of the message is present in the result, with
    its default when this version lacks it. Malformed or truncated bytes raise ProtocolError; bytes after a
    complete body are ignored, as Java's AbstractResponse.parseResponse does (librdkafka's mock cluster
    appends a stray byte to flexible Metadata responses), unless `strict`.
    """
    if api_key == ApiKey.PRODUCE and not strict:
        # The answer to every Produce request: its usual shape has a reader of its own (see produce_answers).
        answer = read_produce_response(api_version, payload)
        if answer is not None:
            return answer
    codec = _message(RESPONSES, api_key, api_version)
    reader = Reader(payload)
    if _response_header_version(api_key, codec) == 1:
        # The header has no known tagged fields; any there are from a newer broker and skipped.
        for _ in range(reader.uvarint()):
            reader.uvarint()
            reader.skip(reader.uvarint())
    return _decode(codec, reader, strict=strict)


def decode_request_header(frame: bytes | memoryview) -> tuple[RequestHeader, int]:
    """Decode the request header at the start of `frame` (no size prefix); return it and the body's offset.

    Lets a proxy route or forward requests whose body it does not decode. Header v2 is assumed exactly when
    the API version is flexible, so the API must be one aioproducer speaks.
    """
    reader = Reader(frame)
    api_key = reader.int16()
    api_version = reader.int16()
    codec = _message(REQUESTS, api_key, api_version)
    header_codec = codec_for(REQUEST_HEADER, 2 if codec.flexible else 1)
    reader.pos = 0
    try:
        fields = header_codec.decode(reader)
    except _DECODE_FAILURES as exc:
        raise ProtocolError(f"malformed request header: {exc}") from exc
    header = RequestHeader(ApiKey(api_key), api_version, fields["correlation_id"], fields["client_id"])
    return header, reader.pos


def decode_request(frame_without_size_prefix: bytes | memoryview) -> tuple[RequestHeader, dict[str, Any]]:
    """Decode a whole request (header and body) as received by a broker, without its 4-byte size prefix.

    Strict: bytes after the body raise ProtocolError, so test brokers catch a client writing the wrong version.
    """
    header, offset = decode_request_header(frame_without_size_prefix)
    codec = _message(REQUESTS, header.api_key, header.api_version)
    return header, _decode(codec, Reader(frame_without_size_prefix, offset), strict=True)
