"""The error tree of aioproducer: every exception the library raises derives from `AioProducerError`.

Families: input and configuration errors (raised at the call), transport errors (a broker connection broke),
protocol errors (bytes that do not decode), timeouts, and `KafkaError` — one subclass per Kafka error code
(`aioproducer.error_codes.ErrorCode`), defined in `aioproducer.kafka_errors` from Kafka's own error table. Nothing
else reaches a caller or a record's result: a failure of aioproducer's own code is an `InternalError`.
"""

from __future__ import annotations

from typing import Any

from aioproducer.error_codes import DEFAULT_MESSAGES, ErrorCode

__all__ = [
    "AioProducerError",
    "AuthenticationError",
    "BufferExhaustedError",
    "ConfigError",
    "ConnectionClosedError",
    "ConnectionFailedError",
    "DeliveryTimeoutError",
    "FeatureNotAvailableError",
    "InternalError",
    "InvalidOffsetsError",
    "InvalidRecordError",
    "InvalidTableError",
    "KafkaError",
    "KafkaTimeoutError",
    "MetadataTimeoutError",
    "PartitionerError",
    "ProducerClosedError",
    "ProducerFencedError",
    "ProtocolError",
    "RecordSourceError",
    "RecordTooLargeError",
    "ResponseTimeoutError",
    "TransactionAbortedError",
    "TransactionError",
    "TransactionFatalError",
    "TransactionRequiresAbortError",
    "TransactionStateError",
    "TransactionTimeoutError",
    "TransportError",
    "UnknownPartitionError",
    "UnsupportedVersionError",
    "WouldBlockError",
]


class AioProducerError(Exception):
    """Base of every error aioproducer raises."""


class ConfigError(AioProducerError, ValueError):
    """A producer setting, or a combination of settings, is invalid."""


class InvalidRecordError(AioProducerError, ValueError):
    """A record cannot be sent as given (wrong type, invalid topic name, ...)."""


class InvalidTableError(InvalidRecordError):
    """A table handed to the columnar path cannot be read as given: not an Arrow exporter, a missing or ambiguous
    column, a column of the wrong type, buffers that break the Arrow format, or a stream that failed mid-read.
    Raised before any row of the offending batch is read; `column` names the column at fault (None when the table
    as a whole is). An `InvalidRecordError` because no record of it can be sent, as one bad record cannot."""

    def __init__(self, message: str, *, column: str | None = None) -> None:
        super().__init__(message)
        self.column = column


class InvalidOffsetsError(AioProducerError, ValueError):
    """Offsets or consumer-group metadata given to `send_offsets_to_transaction` cannot be used as given."""


class RecordSourceError(AioProducerError):
    """Reading the records given to `send_many` or `enqueue_many` raised part of the way: the error it raised is
    `__cause__`. The records read before it were buffered or refused, as any call's (none is buffered when the
    call reads its records whole first); `deliveries`, a `Deliveries`, holds each one's result, to await as
    `enqueue_many`'s."""

    def __init__(self, message: str, deliveries: Any) -> None:
        super().__init__(message)
        self.deliveries = deliveries


class RecordTooLargeError(InvalidRecordError):
    """A record is larger than `max_request_size` or `buffer_memory` allows."""


class UnknownPartitionError(InvalidRecordError):
    """An explicit partition does not exist in the topic."""


class PartitionerError(AioProducerError, ValueError):
    """A custom partitioner raised, or returned something other than a partition of the topic (an `int` in
    `[0, num_partitions)`); the record is not buffered."""


class ProducerClosedError(AioProducerError):
    """The producer was closed (or never started) by its owner: nothing more can be sent."""


class FeatureNotAvailableError(AioProducerError, NotImplementedError):
    """A Kafka feature aioproducer does not implement yet."""


class AuthenticationError(AioProducerError):
    """The broker rejected the client's credentials or TLS handshake."""


class ProtocolError(AioProducerError):
    """Bytes from the network (or given to a decoder) are not a valid Kafka message."""


class UnsupportedVersionError(ProtocolError):
    """The broker and aioproducer share no version of an API the producer needs."""


class TransportError(AioProducerError):
    """A broker connection could not be opened or broke: something outside the producer failed."""

    retriable = True


class ConnectionFailedError(TransportError):
    """Opening a connection to a broker failed."""


class ConnectionClosedError(TransportError):
    """An open broker connection closed or broke while requests were in flight."""


class ResponseTimeoutError(TransportError):
    """A request got no response within `request_timeout_ms`; the connection was closed (as Java's NetworkClient
    does). The broker may still have acted on it. Not Kafka's REQUEST_TIMED_OUT, which is a broker's answer
    (`kafka_errors.RequestTimedOutError`)."""


class KafkaTimeoutError(AioProducerError, TimeoutError):
    """Something did not happen within its configured time bound."""


class MetadataTimeoutError(KafkaTimeoutError):
    """A topic's metadata was not available within `max_block_ms`."""


class BufferExhaustedError(KafkaTimeoutError):
    """No buffer memory became free within `max_block_ms`."""


class WouldBlockError(AioProducerError):
    """`enqueue_nowait` could not buffer the record without waiting (for metadata, for buffer memory, or to let the
    event loop run): the record was not buffered; `await enqueue(...)` it instead (anyio's `WouldBlock`)."""


class DeliveryTimeoutError(KafkaTimeoutError):
    """A record was not acknowledged within `delivery_timeout_ms`."""


class InternalError(AioProducerError):
    """aioproducer's own code failed (a bug, logged with its traceback): `__cause__` is the exception it raised.
    Please report it."""


class KafkaError(AioProducerError):
    """An error code returned by a broker. Subclasses, one per code, live in `aioproducer.kafka_errors`; `code` is
    the code's `ErrorCode` (an int: a code newer than aioproducer keeps its number on an UnknownServerError).

    `retriable`: Java's RetriableException hierarchy. `invalid_metadata`: the error means the client's view of
    the cluster is stale and metadata must be refreshed before a retry.
    """

    code: int = ErrorCode.UNKNOWN_SERVER_ERROR
    retriable: bool = False
    invalid_metadata: bool = False
    default_message: str | None = None

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message if message is not None else (self.default_message or type(self).__name__))


class TransactionError(AioProducerError):
    """An error of the transactional API. `requires_abort`: abort the transaction, then go on (confluent-kafka's
    `txn_requires_abort()`); `fatal`: the producer can no longer use transactions, only `close()` is left."""

    requires_abort: bool = False
    fatal: bool = False


class TransactionStateError(TransactionError):
    """A transactional call made in a state that does not allow it (Java's IllegalStateException): commit without
    begin, a second begin, another call while an earlier one that timed out is still pending, ..."""


class TransactionRequiresAbortError(TransactionError):
    """The transaction failed (a record or an offset commit was refused): abort it, then start a new one.
    `__cause__` is the error that failed it."""

    requires_abort = True


class TransactionFatalError(TransactionError):
    """The transactional producer cannot go on (fenced, not authorized, an unexpected broker answer): close it.
    `__cause__` is the error behind it."""

    fatal = True


class TransactionAbortedError(TransactionError):
    """A record never sent because its transaction was aborted (Java's TransactionAbortedException)."""


class TransactionTimeoutError(KafkaTimeoutError, TransactionError):
    """A transactional call did not finish within its timeout. Its outcome is not known yet: the operation goes on,
    and calling the same method again resumes waiting for it (any other transactional call is a state error)."""


class ProducerFencedError(KafkaError, TransactionFatalError):
    """Another producer with the same transactional id took over (a newer epoch): this one can no longer write.

    Kafka's PRODUCER_FENCED and the fencing the producer finds itself (an older coordinator's INVALID_PRODUCER_EPOCH,
    `MockProducer.fence`) are one class, as Java's ProducerFencedException: `kafka_errors.ProducerFencedError` is
    this class."""

    code = ErrorCode.PRODUCER_FENCED
    default_message = DEFAULT_MESSAGES[ErrorCode.PRODUCER_FENCED]
