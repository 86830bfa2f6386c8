"""What a broker's error code means to a transactional request: retry, find the coordinator, abort, or stop; pure.

One table per API, transcribed from the response handlers of Java's TransactionManager (Kafka 4.x) and the
producer's Sender (for Produce). A code not in an API's table is retried when Kafka marks it retriable and is fatal
otherwise ("unexpected error"), as in Java. The async side (`transactions`) acts on the verdict; nothing here does I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType

from aioproducer.error_codes import ErrorCode
from aioproducer.kafka_errors import ERROR_CLASSES

__all__ = [
    "ADD_OFFSETS_TO_TXN",
    "ADD_PARTITIONS_TO_TXN",
    "END_TXN",
    "FIND_COORDINATOR",
    "INIT_PRODUCER_ID",
    "TXN_OFFSET_COMMIT",
    "Verdict",
    "produce_failure_is_fatal",
    "verdict",
]


class Verdict(enum.Enum):
    DONE = "done"
    RETRY = "retry"  # retriable: the same request again after a backoff
    FIND_COORDINATOR = "find coordinator"  # the coordinator moved: look it up again, then retry
    ABORTABLE = "abortable"  # the transaction must be aborted; the producer goes on
    ABORTABLE_IF_POSSIBLE = "abortable if the epoch can be bumped"  # else fatal (KIP-360 / KIP-890)
    FENCED = "fenced"  # fatal: a newer producer with this transactional id exists
    FATAL = "fatal"  # the producer can only be closed


_V = Verdict
_COORDINATOR_MOVED: dict[int, Verdict] = {
    ErrorCode.NOT_COORDINATOR: _V.FIND_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: _V.FIND_COORDINATOR,
}
# Older coordinators answer INVALID_PRODUCER_EPOCH where newer ones say PRODUCER_FENCED: Java treats both as fenced.
_FENCED: dict[int, Verdict] = {ErrorCode.INVALID_PRODUCER_EPOCH: _V.FENCED, ErrorCode.PRODUCER_FENCED: _V.FENCED}

INIT_PRODUCER_ID: Mapping[int, Verdict] = MappingProxyType(
    {
        **_COORDINATOR_MOVED,
        **_FENCED,
        # Java 4.x makes these abortable; the transactional layer turns them fatal when there is no producer id yet,
        # since there is no transaction to abort then.
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: _V.ABORTABLE,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED: _V.ABORTABLE,
        ErrorCode.TRANSACTION_ABORTABLE: _V.ABORTABLE,
    }
)
ADD_PARTITIONS_TO_TXN: Mapping[int, Verdict] = MappingProxyType(
    {
        **_COORDINATOR_MOVED,
        **_FENCED,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: _V.FATAL,
        ErrorCode.INVALID_TXN_STATE: _V.FATAL,
        ErrorCode.INVALID_PRODUCER_ID_MAPPING: _V.FATAL,
        ErrorCode.TOPIC_AUTHORIZATION_FAILED: _V.ABORTABLE,
        ErrorCode.OPERATION_NOT_ATTEMPTED: _V.ABORTABLE,
        ErrorCode.UNKNOWN_PRODUCER_ID: _V.ABORTABLE_IF_POSSIBLE,
        ErrorCode.TRANSACTION_ABORTABLE: _V.ABORTABLE,
    }
)
ADD_OFFSETS_TO_TXN: Mapping[int, Verdict] = MappingProxyType(
    {
        **_COORDINATOR_MOVED,
        **_FENCED,
        ErrorCode.UNKNOWN_PRODUCER_ID: _V.ABORTABLE_IF_POSSIBLE,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: _V.FATAL,
        ErrorCode.INVALID_TXN_STATE: _V.FATAL,
        ErrorCode.INVALID_PRODUCER_ID_MAPPING: _V.FATAL,
        ErrorCode.GROUP_AUTHORIZATION_FAILED: _V.ABORTABLE,
        ErrorCode.TRANSACTION_ABORTABLE: _V.ABORTABLE,
    }
)
END_TXN: Mapping[int, Verdict] = MappingProxyType(
    {
        **_COORDINATOR_MOVED,
        **_FENCED,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: _V.FATAL,
        ErrorCode.INVALID_TXN_STATE: _V.FATAL,
        ErrorCode.INVALID_PRODUCER_ID_MAPPING: _V.FATAL,
        ErrorCode.UNKNOWN_PRODUCER_ID: _V.ABORTABLE_IF_POSSIBLE,
        ErrorCode.TRANSACTION_ABORTABLE: _V.ABORTABLE,
    }
)
TXN_OFFSET_COMMIT: Mapping[int, Verdict] = MappingProxyType(
    {
        **_COORDINATOR_MOVED,
        **_FENCED,
        # The group coordinator may have moved while the request waited (Java looks it up again on a timeout too).
        ErrorCode.REQUEST_TIMED_OUT: _V.FIND_COORDINATOR,
        ErrorCode.GROUP_AUTHORIZATION_FAILED: _V.ABORTABLE,
        ErrorCode.FENCED_INSTANCE_ID: _V.ABORTABLE,  # KIP-447: a newer member with this static id took over
        ErrorCode.TRANSACTION_ABORTABLE: _V.ABORTABLE,
        # Java raises CommitFailedException: the consumer's group generation moved on (a rebalance fenced it).
        ErrorCode.UNKNOWN_MEMBER_ID: _V.ABORTABLE,
        ErrorCode.ILLEGAL_GENERATION: _V.ABORTABLE,
        # v6 (KIP-1319) adds the consumer protocol's (KIP-848) answers: Java raises CommitFailedException for both.
        ErrorCode.GROUP_ID_NOT_FOUND: _V.ABORTABLE,
        ErrorCode.STALE_MEMBER_EPOCH: _V.ABORTABLE,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: _V.FATAL,
        ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT: _V.FATAL,
    }
)
FIND_COORDINATOR: Mapping[int, Verdict] = MappingProxyType(
    {
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: _V.FATAL,
        ErrorCode.GROUP_AUTHORIZATION_FAILED: _V.ABORTABLE,
        ErrorCode.TRANSACTION_ABORTABLE: _V.ABORTABLE,
    }
)

# Produce errors that end a transactional producer (Java's maybeTransitionToErrorState); every other error that
# fails a batch only makes the transaction abortable (KIP-588: INVALID_PRODUCER_EPOCH on Produce included).
_FATAL_ON_PRODUCE = frozenset(
    {
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.UNSUPPORTED_VERSION,
        ErrorCode.INVALID_PRODUCER_ID_MAPPING,
    }
)


def verdict(table: Mapping[int, Verdict], code: int, *, unexpected: Verdict = Verdict.FATAL) -> Verdict:
    """The verdict of `table` (one API's) for an error code; 0 is DONE. A code the table does not name is retried
    when retriable, else `unexpected` (fatal, except for AddPartitionsToTxn, where Java makes it abortable)."""
    if code == ErrorCode.NONE:
        return Verdict.DONE
    found = table.get(code)
    if found is not None:
        return found
    cls = ERROR_CLASSES.get(code)
    return Verdict.RETRY if cls is not None and cls.retriable else unexpected


def produce_failure_is_fatal(code: int | None) -> bool:
    """Whether a batch failing with this Kafka error code ends the transactional producer (None: not a broker
    error, e.g. a delivery timeout: abortable)."""
    return code in _FATAL_ON_PRODUCE
