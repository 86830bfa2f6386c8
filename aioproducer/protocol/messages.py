"""Declarations of every Kafka message aioproducer speaks, transcribed from Kafka's clients/.../common/message/*.json.

Owns the field lists only (tests/test_spec_drift.py holds them to the official JSON); no encoding logic here.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from aioproducer.protocol.api import SUPPORTED_VERSIONS, ApiKey
from aioproducer.protocol.schema import Field, Message, VersionRange, f, versions
from aioproducer.protocol.transaction_messages import TRANSACTION_REQUESTS, TRANSACTION_RESPONSES

__all__ = ["REQUESTS", "REQUEST_HEADER", "RESPONSES", "RESPONSE_HEADER"]


def _request(name: str, key: ApiKey, flexible: str, *fields: Field) -> Message:
    low, high = SUPPORTED_VERSIONS[key]
    return Message(name, int(key), VersionRange(low, high), versions(flexible), fields)


_response = _request

# Header versions are chosen per request (see framing.py); ClientId keeps its int16 length even in v2 (KIP-482).
# Header v0 (ControlledShutdown v0 only) was removed in Kafka 4.0 and is never sent.
REQUEST_HEADER = Message(
    "RequestHeader",
    None,
    versions("1-2"),
    versions("2+"),
    (
        f("request_api_key", "int16"),
        f("request_api_version", "int16"),
        f("correlation_id", "int32"),
        f("client_id", "string", "1+", nullable="1+", flexible="none"),
    ),
)
RESPONSE_HEADER = Message("ResponseHeader", None, versions("0-1"), versions("1+"), (f("correlation_id", "int32"),))

_API_VERSIONS_REQUEST = _request(
    "ApiVersionsRequest",
    ApiKey.API_VERSIONS,
    "3+",
    f("client_software_name", "string", "3+"),
    f("client_software_version", "string", "3+"),
    # KIP-1242: the cluster and node the client means to reach; a broker of another cluster, or another node behind
    # the same address, answers REBOOTSTRAP_REQUIRED instead of its versions.
    f("cluster_id", "string", "5+", nullable="5+", default=None),
    f("node_id", "int32", "5+", default=-1),
)
_API_VERSIONS_RESPONSE = _response(
    "ApiVersionsResponse",
    ApiKey.API_VERSIONS,
    "3+",
    f("error_code", "int16"),
    f(
        "api_keys",
        "[]ApiVersion",
        "0+",
        f("api_key", "int16"),
        f("min_version", "int16"),
        f("max_version", "int16"),
    ),
    f("throttle_time_ms", "int32", "1+"),
    f(
        "supported_features",
        "[]SupportedFeatureKey",
        "3+",
        f("name", "string", "3+"),
        f("min_version", "int16", "3+"),
        f("max_version", "int16", "3+"),
        tag=0,
    ),
    f("finalized_features_epoch", "int64", "3+", tag=1, default=-1),
    f(
        "finalized_features",
        "[]FinalizedFeatureKey",
        "3+",
        f("name", "string", "3+"),
        f("max_version_level", "int16", "3+"),
        f("min_version_level", "int16", "3+"),
        tag=2,
    ),
    f("zk_migration_ready", "bool", "3+", tag=3, default=False),
)

_METADATA_REQUEST = _request(
    "MetadataRequest",
    ApiKey.METADATA,
    "9+",
    f(
        "topics",
        "[]MetadataRequestTopic",
        "0+",
        f("topic_id", "uuid", "10+"),
        f("name", "string", "0+", nullable="10+"),
        nullable="1+",
    ),
    f("allow_auto_topic_creation", "bool", "4+", default=True),
    f("include_cluster_authorized_operations", "bool", "8-10"),
    f("include_topic_authorized_operations", "bool", "8+"),
)
_METADATA_RESPONSE = _response(
    "MetadataResponse",
    ApiKey.METADATA,
    "9+",
    f("throttle_time_ms", "int32", "3+"),
    f(
        "brokers",
        "[]MetadataResponseBroker",
        "0+",
        f("node_id", "int32"),
        f("host", "string"),
        f("port", "int32"),
        f("rack", "string", "1+", nullable="1+", default=None),
    ),
    f("cluster_id", "string", "2+", nullable="2+", default=None),
    f("controller_id", "int32", "1+", default=-1),
    f(
        "topics",
        "[]MetadataResponseTopic",
        "0+",
        f("error_code", "int16"),
        f("name", "string", "0+", nullable="12+"),
        f("topic_id", "uuid", "10+"),
        f("is_internal", "bool", "1+", default=False),
        f(
            "partitions",
            "[]MetadataResponsePartition",
            "0+",
            f("error_code", "int16"),
            f("partition_index", "int32"),
            f("leader_id", "int32"),
            f("leader_epoch", "int32", "7+", default=-1),
            f("replica_nodes", "[]int32"),
            f("isr_nodes", "[]int32"),
            f("offline_replicas", "[]int32", "5+"),
        ),
        f("topic_authorized_operations", "int32", "8+", default=-2147483648),
    ),
    f("cluster_authorized_operations", "int32", "8-10", default=-2147483648),
    # KIP-1102: REBOOTSTRAP_REQUIRED here tells the client its view of the cluster is stale (see cluster.py).
    f("error_code", "int16", "13+"),
)

_PRODUCE_REQUEST = _request(
    "ProduceRequest",
    ApiKey.PRODUCE,
    "9+",
    f("transactional_id", "string", "3+", nullable="3+", default=None),
    f("acks", "int16"),
    f("timeout_ms", "int32"),
    f(
        "topic_data",
        "[]TopicProduceData",
        "0+",
        f("name", "string"),
        f(
            "partition_data",
            "[]PartitionProduceData",
            "0+",
            f("index", "int32"),
            f("records", "records", "0+", nullable="0+"),
        ),
    ),
)
_PRODUCE_RESPONSE = _response(
    "ProduceResponse",
    ApiKey.PRODUCE,
    "9+",
    f(
        "responses",
        "[]TopicProduceResponse",
        "0+",
        f("name", "string"),
        f(
            "partition_responses",
            "[]PartitionProduceResponse",
            "0+",
            f("index", "int32"),
            f("error_code", "int16"),
            f("base_offset", "int64"),
            f("log_append_time_ms", "int64", "2+", default=-1),
            f("log_start_offset", "int64", "5+", default=-1),
            f(
                "record_errors",
                "[]BatchIndexAndErrorMessage",
                "8+",
                f("batch_index", "int32", "8+"),
                f("batch_index_error_message", "string", "8+", nullable="8+", default=None),
            ),
            f("error_message", "string", "8+", nullable="8+", default=None),
            # KIP-951: the new leader rides along with NOT_LEADER_OR_FOLLOWER so the producer can skip a Metadata trip.
            f(
                "current_leader",
                "LeaderIdAndEpoch",
                "10+",
                f("leader_id", "int32", "10+", default=-1),
                f("leader_epoch", "int32", "10+", default=-1),
                tag=0,
            ),
        ),
    ),
    f("throttle_time_ms", "int32", "1+", default=0),
    f(
        "node_endpoints",
        "[]NodeEndpoint",
        "10+",
        f("node_id", "int32", "10+"),
        f("host", "string", "10+"),
        f("port", "int32", "10+"),
        f("rack", "string", "10+", nullable="10+", default=None),
        tag=0,
    ),
)

_INIT_PRODUCER_ID_REQUEST = _request(
    "InitProducerIdRequest",
    ApiKey.INIT_PRODUCER_ID,
    "2+",
    f("transactional_id", "string", "0+", nullable="0+"),
    f("transaction_timeout_ms", "int32"),
    f("producer_id", "int64", "3+", default=-1),
    f("producer_epoch", "int16", "3+", default=-1),
)
_INIT_PRODUCER_ID_RESPONSE = _response(
    "InitProducerIdResponse",
    ApiKey.INIT_PRODUCER_ID,
    "2+",
    f("throttle_time_ms", "int32"),
    f("error_code", "int16"),
    f("producer_id", "int64", default=-1),
    f("producer_epoch", "int16"),
)

_SASL_HANDSHAKE_REQUEST = _request("SaslHandshakeRequest", ApiKey.SASL_HANDSHAKE, "none", f("mechanism", "string"))
_SASL_HANDSHAKE_RESPONSE = _response(
    "SaslHandshakeResponse", ApiKey.SASL_HANDSHAKE, "none", f("error_code", "int16"), f("mechanisms", "[]string")
)

_SASL_AUTHENTICATE_REQUEST = _request(
    "SaslAuthenticateRequest", ApiKey.SASL_AUTHENTICATE, "2+", f("auth_bytes", "bytes")
)
_SASL_AUTHENTICATE_RESPONSE = _response(
    "SaslAuthenticateResponse",
    ApiKey.SASL_AUTHENTICATE,
    "2+",
    f("error_code", "int16"),
    f("error_message", "string", "0+", nullable="0+"),
    f("auth_bytes", "bytes"),
    f("session_lifetime_ms", "int64", "1+", default=0),
)

_CREATE_TOPICS_REQUEST = _request(
    "CreateTopicsRequest",
    ApiKey.CREATE_TOPICS,
    "5+",
    f(
        "topics",
        "[]CreatableTopic",
        "0+",
        f("name", "string"),
        f("num_partitions", "int32"),
        f("replication_factor", "int16"),
        f(
            "assignments",
            "[]CreatableReplicaAssignment",
            "0+",
            f("partition_index", "int32"),
            f("broker_ids", "[]int32"),
        ),
        f(
            "configs",
            "[]CreatableTopicConfig",
            "0+",
            f("name", "string"),
            f("value", "string", "0+", nullable="0+"),
        ),
    ),
    f("timeout_ms", "int32", "0+", default=60000),
    f("validate_only", "bool", "1+", default=False),
)
_CREATE_TOPICS_RESPONSE = _response(
    "CreateTopicsResponse",
    ApiKey.CREATE_TOPICS,
    "5+",
    f("throttle_time_ms", "int32", "2+"),
    f(
        "topics",
        "[]CreatableTopicResult",
        "0+",
        f("name", "string"),
        f("topic_id", "uuid", "7+"),
        f("error_code", "int16"),
        f("error_message", "string", "1+", nullable="0+"),
        f("topic_config_error_code", "int16", "5+", tag=0),
        f("num_partitions", "int32", "5+", default=-1),
        f("replication_factor", "int16", "5+", default=-1),
        f(
            "configs",
            "[]CreatableTopicConfigs",
            "5+",
            f("name", "string", "5+"),
            f("value", "string", "5+", nullable="5+"),
            f("read_only", "bool", "5+"),
            f("config_source", "int8", "5+", default=-1),
            f("is_sensitive", "bool", "5+"),
            nullable="5+",
        ),
    ),
)

REQUESTS: Mapping[ApiKey, Message] = MappingProxyType(
    {
        ApiKey.API_VERSIONS: _API_VERSIONS_REQUEST,
        ApiKey.METADATA: _METADATA_REQUEST,
        ApiKey.PRODUCE: _PRODUCE_REQUEST,
        ApiKey.INIT_PRODUCER_ID: _INIT_PRODUCER_ID_REQUEST,
        ApiKey.SASL_HANDSHAKE: _SASL_HANDSHAKE_REQUEST,
        ApiKey.SASL_AUTHENTICATE: _SASL_AUTHENTICATE_REQUEST,
        ApiKey.CREATE_TOPICS: _CREATE_TOPICS_REQUEST,
        **TRANSACTION_REQUESTS,
    }
)
RESPONSES: Mapping[ApiKey, Message] = MappingProxyType(
    {
        ApiKey.API_VERSIONS: _API_VERSIONS_RESPONSE,
        ApiKey.METADATA: _METADATA_RESPONSE,
        ApiKey.PRODUCE: _PRODUCE_RESPONSE,
        ApiKey.INIT_PRODUCER_ID: _INIT_PRODUCER_ID_RESPONSE,
        ApiKey.SASL_HANDSHAKE: _SASL_HANDSHAKE_RESPONSE,
        ApiKey.SASL_AUTHENTICATE: _SASL_AUTHENTICATE_RESPONSE,
        ApiKey.CREATE_TOPICS: _CREATE_TOPICS_RESPONSE,
        **TRANSACTION_RESPONSES,
    }
)
