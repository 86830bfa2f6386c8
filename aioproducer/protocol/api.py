"""The Kafka APIs aioproducer speaks and the version range of each; the single source both sides of the codec read.

Owns constants only; version negotiation against a broker lives in versions.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from types import MappingProxyType

__all__ = ["SUPPORTED_VERSIONS", "TRANSACTION_V2_VERSIONS", "ApiKey"]


class ApiKey(IntEnum):
    """Kafka API keys (the `apiKey` of each message JSON) for the APIs a producer needs."""

    PRODUCE = 0
    METADATA = 3
    FIND_COORDINATOR = 10
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    INIT_PRODUCER_ID = 22
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    SASL_AUTHENTICATE = 36
    DESCRIBE_TRANSACTIONS = 65


# Checked against the message JSON inside the kafka-clients jar of every Kafka release the suite runs (4.4.0 and
# 3.9.2 by default) by tests/test_spec_drift.py, which also lists every newer version we leave out on purpose.
# Floors follow KIP-896 (Kafka 4.0 removed pre-2.1 client versions):
# - Produce v3 is the first with record batches v2 and a transactional id; v0-2 are gone from 4.x brokers, which
#   still *advertise* v0 (KAFKA-18659, for librdkafka) but reject it, so our floor must never follow theirs.
#   v12 is v11 on the wire; it tells a transaction version 2 coordinator that the producer lets Produce add
#   partitions to the transaction implicitly (KIP-890 part 2). v13 (Kafka 4.1+) names topics by id instead of name
#   (KIP-516) and changes nothing else. Not spoken: Java's Sender uses it only when it knows every topic's id, and
#   on UNKNOWN_TOPIC_ID refreshes metadata and sends the batch again to whichever topic then has the name, which is
#   what v12 does at once; every 4.x broker serves v12 (not deprecated in 4.4), so v13 would add an id lookup to
#   every request and one more error path for no change in what is written.
# - Metadata v13 adds a top-level error code, REBOOTSTRAP_REQUIRED (KIP-1102).
# - FindCoordinator v1 is the first with a key type (group or transaction); v4+ batch several keys (KIP-699).
# - ApiVersions v5 (Kafka 4.4, KIP-1242) carries the cluster id and node id the client means to reach, so a broker
#   behind a reused address answers REBOOTSTRAP_REQUIRED rather than serving the wrong cluster.
# - CreateTopics v0-1 were removed in 4.0.
# - InitProducerId v6 (KIP-939 two-phase commit) is marked unstable up to 4.4 and not advertised by default.
# - AddPartitionsToTxn v4+ are broker-to-broker (partition verification, KIP-890 part 1): clients use v3 at most.
# - TxnOffsetCommit v3 is the first carrying the consumer group's generation, member id and instance id
#   (KIP-447 fencing); every broker since 2.5 has it. v5 is v4 on the wire, for transaction version 2. v6 (Kafka
#   4.4, KIP-1319) names topics by id: used, as Java does, only when the producer knows every topic's id.
# - EndTxn v5 answers with the producer id and epoch to use next: TV2 bumps the epoch on every transaction.
# - DescribeTransactions (KIP-664, Kafka 3.0+) tells when the coordinator has written the previous transaction's
#   markers, so the next transaction's first Produce is not refused with CONCURRENT_TRANSACTIONS (transactions/
#   completion.py).
SUPPORTED_VERSIONS: Mapping[ApiKey, tuple[int, int]] = MappingProxyType(
    {
        ApiKey.PRODUCE: (3, 12),
        ApiKey.METADATA: (1, 13),
        ApiKey.FIND_COORDINATOR: (1, 6),
        ApiKey.SASL_HANDSHAKE: (0, 1),
        ApiKey.API_VERSIONS: (0, 5),
        ApiKey.CREATE_TOPICS: (2, 7),
        ApiKey.INIT_PRODUCER_ID: (0, 5),
        ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
        ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
        ApiKey.END_TXN: (0, 5),
        ApiKey.TXN_OFFSET_COMMIT: (3, 6),
        ApiKey.SASL_AUTHENTICATE: (0, 2),
        ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    }
)

# The first version of each API that means transaction version 2 (KIP-890 part 2) to the coordinator. A producer
# whose transactions run as TV1 must stay below these (Java's LAST_STABLE_VERSION_BEFORE_TRANSACTION_V2 constants in
# ProduceRequest, TxnOffsetCommitRequest and EndTxnRequest): a TV2-capable broker would otherwise add partitions
# and offsets to the transaction implicitly and bump the epoch on EndTxn, behind a TV1 client's back.
TRANSACTION_V2_VERSIONS: Mapping[ApiKey, int] = MappingProxyType(
    {ApiKey.PRODUCE: 12, ApiKey.TXN_OFFSET_COMMIT: 5, ApiKey.END_TXN: 5}
)
