"""Sans-I/O Kafka protocol: primitives, message codecs per API version, framing and version negotiation.

Depends on aioproducer.errors only; never imports asyncio, sockets or the clock.
"""

from __future__ import annotations

from aioproducer.protocol.api import SUPPORTED_VERSIONS, TRANSACTION_V2_VERSIONS, ApiKey
from aioproducer.protocol.codec import MAX_STRING_BYTES
from aioproducer.protocol.coordinators import (
    Coordinator,
    CoordinatorType,
    coordinators_from_response,
    find_coordinator_body,
)
from aioproducer.protocol.features import TRANSACTION_VERSION, FinalizedFeatures, finalized_features
from aioproducer.protocol.frames import DEFAULT_MAX_FRAME_BYTES, FrameDecoder
from aioproducer.protocol.versions import (
    api_version_ranges,
    api_versions_error_code,
    api_versions_fallback_version,
    negotiate_versions,
    transaction_versions,
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
    "MAX_STRING_BYTES",
    "SUPPORTED_VERSIONS",
    "TRANSACTION_V2_VERSIONS",
    "TRANSACTION_VERSION",
    "ApiKey",
    "Coordinator",
    "CoordinatorType",
    "FinalizedFeatures",
    "FrameDecoder",
    "RequestHeader",
    "api_version_ranges",
    "api_versions_error_code",
    "api_versions_fallback_version",
    "coordinators_from_response",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
    "finalized_features",
    "find_coordinator_body",
    "negotiate_versions",
    "transaction_versions",
]
