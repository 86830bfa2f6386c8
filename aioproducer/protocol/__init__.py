"""Sans-I/O Kafka protocol: primitives, message codecs per API version, framing and version negotiation.

Depends on aioproducer.errors only; never imports asyncio, sockets or the clock.
"""

from __future__ import annotations

from aioproducer.protocol.api import SUPPORTED_VERSIONS, ApiKey
from aioproducer.protocol.frames import DEFAULT_MAX_FRAME_BYTES, FrameDecoder
from aioproducer.protocol.versions import (
    api_version_ranges,
    api_versions_error_code,
    api_versions_fallback_version,
    negotiate_versions,
)
from aioproducer.protocol.wire import (
    RequestHeader,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "SUPPORTED_VERSIONS",
    "ApiKey",
    "FrameDecoder",
    "RequestHeader",
    "api_version_ranges",
    "api_versions_error_code",
    "api_versions_fallback_version",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
    "negotiate_versions",
]
