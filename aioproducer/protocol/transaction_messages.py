"""Declarations of FindCoordinator and the transaction messages (DescribeTransactions too), from Kafka's JSON.

Owns the field lists only (tests/test_spec_drift.py holds them to the official JSON); messages.py merges them in.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from aioproducer.protocol.api import SUPPORTED_VERSIONS, ApiKey
from aioproducer.protocol.schema import Field, Message, VersionRange, f, versions

__all__ = ["TRANSACTION_REQUESTS", "TRANSACTION_RESPONSES"]


def _request(name: str, key: ApiKey, flexible: str, *fields: Field) -> Message:
    low, high = SUPPORTED_VERSIONS[key]
    return Message(name, int(key), VersionRange(low, high), versions(flexible), fields)


_response = _request

# FindCoordinator v1-3 ask for one key; v4+ ask for several and answer per key (KIP-699). coordinators.py hides the
# difference.
_FIND_COORDINATOR_REQUEST = _request(
    "FindCoordinatorRequest",
    ApiKey.FIND_COORDINATOR,
    "3+",
    f("key", "string", "0-3"),
    f("key_type", "int8", "1+"),
    f("coordinator_keys", "[]string", "4+"),
)
_FIND_COORDINATOR_RESPONSE = _response(
    "FindCoordinatorResponse",
    ApiKey.FIND_COORDINATOR,
    "3+",
    f("throttle_time_ms", "int32", "1+"),
    f("error_code", "int16", "0-3"),
    f("error_message", "string", "1-3", nullable="1-3"),
    f("node_id", "int32", "0-3"),
    f("host", "string", "0-3"),
    f("port", "int32", "0-3"),
    f(
        "coordinators",
        "[]Coordinator",
        "4+",
        f("key", "string", "4+"),
        f("node_id", "int32", "4+"),
        f("host", "string", "4+"),
        f("port", "int32", "4+"),
        f("error_code", "int16", "4+"),
        f("error_message", "string", "4+", nullable="4+"),
    ),
)


def _txn_topics(name: str, present: str) -> Field:
    return f(name, "[]AddPartitionsToTxnTopic", present, f("name", "string"), f("partitions", "[]int32"))


def _txn_topic_results(name: str, present: str) -> Field:
    return f(
        name,
        "[]AddPartitionsToTxnTopicResult",
        present,
        f("name", "string"),
        f(
            "results_by_partition",
            "[]AddPartitionsToTxnPartitionResult",
            "0+",
            f("partition_index", "int32"),
            f("partition_error_code", "int16"),
        ),
    )


# Only the client versions (v0-3) are declared: v4+ batch several transactions for brokers verifying partitions
# (KIP-890 part 1), hence the field names.
_ADD_PARTITIONS_TO_TXN_REQUEST = _request(
    "AddPartitionsToTxnRequest",
    ApiKey.ADD_PARTITIONS_TO_TXN,
    "3+",
    f("v3_and_below_transactional_id", "string", "0-3"),
    f("v3_and_below_producer_id", "int64", "0-3"),
    f("v3_and_below_producer_epoch", "int16", "0-3"),
    _txn_topics("v3_and_below_topics", "0-3"),
)
_ADD_PARTITIONS_TO_TXN_RESPONSE = _response(
    "AddPartitionsToTxnResponse",
    ApiKey.ADD_PARTITIONS_TO_TXN,
    "3+",
    f("throttle_time_ms", "int32"),
    _txn_topic_results("results_by_topic_v3_and_below", "0-3"),
)

_ADD_OFFSETS_TO_TXN_REQUEST = _request(
    "AddOffsetsToTxnRequest",
    ApiKey.ADD_OFFSETS_TO_TXN,
    "3+",
    f("transactional_id", "string"),
    f("producer_id", "int64"),
    f("producer_epoch", "int16"),
    f("group_id", "string"),
)
_ADD_OFFSETS_TO_TXN_RESPONSE = _response(
    "AddOffsetsToTxnResponse", ApiKey.ADD_OFFSETS_TO_TXN, "3+", f("throttle_time_ms", "int32"), f("error_code", "int16")
)

_END_TXN_REQUEST = _request(
    "EndTxnRequest",
    ApiKey.END_TXN,
    "3+",
    f("transactional_id", "string"),
    f("producer_id", "int64"),
    f("producer_epoch", "int16"),
    f("committed", "bool"),
)
# v5 (transaction version 2): the coordinator bumps the epoch with every transaction and says which to use next.
_END_TXN_RESPONSE = _response(
    "EndTxnResponse",
    ApiKey.END_TXN,
    "3+",
    f("throttle_time_ms", "int32"),
    f("error_code", "int16"),
    f("producer_id", "int64", "5+", default=-1),
    f("producer_epoch", "int16", "5+", default=-1),
)

# Only what the producer reads: whether the coordinator still writes the last transaction's markers.
_DESCRIBE_TRANSACTIONS_REQUEST = _request(
    "DescribeTransactionsRequest", ApiKey.DESCRIBE_TRANSACTIONS, "0+", f("transactional_ids", "[]string")
)
_DESCRIBE_TRANSACTIONS_RESPONSE = _response(
    "DescribeTransactionsResponse",
    ApiKey.DESCRIBE_TRANSACTIONS,
    "0+",
    f("throttle_time_ms", "int32"),
    f(
        "transaction_states",
        "[]TransactionState",
        "0+",
        f("error_code", "int16"),
        f("transactional_id", "string"),
        f("transaction_state", "string"),
        f("transaction_timeout_ms", "int32"),
        f("transaction_start_time_ms", "int64"),
        f("producer_id", "int64"),
        f("producer_epoch", "int16"),
        f("topics", "[]TopicData", "0+", f("topic", "string"), f("partitions", "[]int32")),
    ),
)

_TXN_OFFSET_COMMIT_REQUEST = _request(
    "TxnOffsetCommitRequest",
    ApiKey.TXN_OFFSET_COMMIT,
    "3+",
    f("transactional_id", "string"),
    f("group_id", "string"),
    f("producer_id", "int64"),
    f("producer_epoch", "int16"),
    # KIP-447: the consumer group's view of the committing member, so a zombie's commit is fenced.
    f("generation_id", "int32", "3+", default=-1),
    f("member_id", "string", "3+", default=""),
    f("group_instance_id", "string", "3+", nullable="3+", default=None),
    f(
        "topics",
        "[]TxnOffsetCommitRequestTopic",
        "0+",
        f("name", "string", "0-5"),
        f("topic_id", "uuid", "6+"),  # KIP-1319: v6 names topics by id only
        f(
            "partitions",
            "[]TxnOffsetCommitRequestPartition",
            "0+",
            f("partition_index", "int32"),
            f("committed_offset", "int64"),
            f("committed_leader_epoch", "int32", "2+", default=-1),
            f("committed_metadata", "string", "0+", nullable="0+"),
        ),
    ),
)
_TXN_OFFSET_COMMIT_RESPONSE = _response(
    "TxnOffsetCommitResponse",
    ApiKey.TXN_OFFSET_COMMIT,
    "3+",
    f("throttle_time_ms", "int32"),
    f(
        "topics",
        "[]TxnOffsetCommitResponseTopic",
        "0+",
        f("name", "string", "0-5"),
        f("topic_id", "uuid", "6+"),
        f(
            "partitions",
            "[]TxnOffsetCommitResponsePartition",
            "0+",
            f("partition_index", "int32"),
            f("error_code", "int16"),
        ),
    ),
)


TRANSACTION_REQUESTS: Mapping[ApiKey, Message] = MappingProxyType(
    {
        ApiKey.FIND_COORDINATOR: _FIND_COORDINATOR_REQUEST,
        ApiKey.ADD_PARTITIONS_TO_TXN: _ADD_PARTITIONS_TO_TXN_REQUEST,
        ApiKey.ADD_OFFSETS_TO_TXN: _ADD_OFFSETS_TO_TXN_REQUEST,
        ApiKey.END_TXN: _END_TXN_REQUEST,
        ApiKey.TXN_OFFSET_COMMIT: _TXN_OFFSET_COMMIT_REQUEST,
        ApiKey.DESCRIBE_TRANSACTIONS: _DESCRIBE_TRANSACTIONS_REQUEST,
    }
)
TRANSACTION_RESPONSES: Mapping[ApiKey, Message] = MappingProxyType(
    {
        ApiKey.FIND_COORDINATOR: _FIND_COORDINATOR_RESPONSE,
        ApiKey.ADD_PARTITIONS_TO_TXN: _ADD_PARTITIONS_TO_TXN_RESPONSE,
        ApiKey.ADD_OFFSETS_TO_TXN: _ADD_OFFSETS_TO_TXN_RESPONSE,
        ApiKey.END_TXN: _END_TXN_RESPONSE,
        ApiKey.TXN_OFFSET_COMMIT: _TXN_OFFSET_COMMIT_RESPONSE,
        ApiKey.DESCRIBE_TRANSACTIONS: _DESCRIBE_TRANSACTIONS_RESPONSE,
    }
)
