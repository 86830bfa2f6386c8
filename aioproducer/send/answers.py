"""What the sender does with each Produce answer, mixed into `Sender`: every batch in it done, retried, split or
failed as the sequence rules decide (`idempotence.sequences`), each settled once; an acks=0 request counted
delivered once written; a request with no answer retried or failed; failed batches logged without flooding the log.

Owns the retry backoff (with jitter) and the logging of failures; the decisions are `IdempotenceState`'s, the
sending side (draining, closing batches, writing requests) is `sender`'s. Both work on the same in-flight
bookkeeping (`_in_flight`, `_on_wire`); it and the rest `Answers` uses of `Sender` (`wake` included) are declared
below and set up by `Sender`.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from typing import Any, Protocol

from aioproducer.buffer.accumulator import ProducerBatch, RecordAccumulator
from aioproducer.config import ProducerConfig
from aioproducer.error_codes import ErrorCode
from aioproducer.errors import InternalError, TransactionRequiresAbortError, TransportError
from aioproducer.idempotence.sequences import Action, Decision, IdempotenceState
from aioproducer.kafka_errors import kafka_error
from aioproducer.network.cluster import Cluster, monotonic_ms
from aioproducer.network.connection import BrokerConnection
from aioproducer.observability.observer import Observer

__all__ = ["Answers", "FailureLog", "TransactionGate"]

log = logging.getLogger("aioproducer.sender")

# Failed batches are logged at WARNING at most this often; the next line counts the ones left out.
_FAILURE_LOG_INTERVAL_S = 5.0


# The answer for a partition of an acks=0 request: nothing is known but that it went out.
_ACKS_ZERO: dict[str, Any] = {"error_code": ErrorCode.NONE, "base_offset": -1, "log_append_time_ms": -1}
# Read for every answered batch: an enum member read through its class costs a lookup (about 70 ns) each time.
_NO_ERROR = ErrorCode.NONE
_DONE = Action.DONE


class TransactionGate(Protocol):
    """What a transactional producer's sender asks its transaction manager (`transactions.TransactionManager`)."""

    transactional_id: str

    def may_send(self, tp: tuple[str, int]) -> bool: ...

    def produce_version(self, conn: BrokerConnection) -> int: ...

    def on_batch_failed(self, error: BaseException) -> None: ...


class Answers:
    """The sender's answer handling; the parts it uses are `Sender`'s."""

    _config: ProducerConfig
    _acc: RecordAccumulator
    _cluster: Cluster
    _idem: IdempotenceState
    _acks: int
    _observer: Observer
    _rng: random.Random
    _in_flight: set[asyncio.Future[Any]]
    _on_wire: dict[ProducerBatch, None]
    _failure_log: FailureLog
    on_batch_done: Callable[[], None]
    transaction: TransactionGate | None
    wake: Callable[[], None]  # `Sender.wake`: pokes the sending task

    def _on_produce_done(
        self,
        future: asyncio.Future[dict[str, Any]],
        batches: list[ProducerBatch],
        observed: Callable[[asyncio.Future[Any], int], None] | None = None,
    ) -> None:
        self._in_flight.discard(future)
        now = monotonic_ms()
        try:
            if future.cancelled():
                self._on_no_response(batches, TransportError("request cancelled"), now)
            elif future.exception() is not None:
                self._on_no_response(batches, future.exception() or TransportError("no response"), now)
            else:
                results: dict[tuple[str, int], dict[str, Any]] = {}
                for topic in future.result()["responses"]:
                    for part in topic["partition_responses"]:
                        results[(topic["name"], part["index"])] = part
                self._on_answer(batches, results, now)
        except Exception as exc:  # a bug here must not leave records unresolved forever
            log.exception("handling a Produce answer failed")
            failure = InternalError(f"handling the broker's answer for these records failed: {exc!r}")
            failure.__cause__ = exc
            for batch in batches:  # those not handled yet: not settled, not split, not back in their queue
                self._on_wire.pop(batch, None)
                handled = batch.outcome.done or not self._acc.is_incomplete(batch)
                if not handled and not self._acc.is_queued(batch):
                    self._idem.on_abandoned([batch], failure)  # best effort: its sequence bookkeeping is suspect
                    self._settle_failure(batch, failure)
        finally:
            self.wake()
        if observed is not None:  # the observer reads the batches as this answer settled them
            observed(future, now)

    def _on_written(self, written: asyncio.Future[None], batches: list[ProducerBatch]) -> None:
        """An acks=0 request is wholly in the socket (delivered, as far as anyone will know), or its connection
        ended before (then it may have been written in part: retried within `retries`, as Java's NETWORK_EXCEPTION)."""
        self._in_flight.discard(written)
        now = monotonic_ms()
        try:
            error: BaseException | None = (
                TransportError("request cancelled") if written.cancelled() else written.exception()
            )
            if error is not None:
                self._on_no_response(batches, error, now)
            else:
                self._on_answer(batches, {}, now)
        finally:
            self.wake()

    def _on_no_response(self, batches: list[ProducerBatch], error: BaseException, now: int) -> None:
        for batch in batches:
            self._off_wire(batch)
            if batch.outcome.done:  # failed while on the wire (delivery timeout)
                self._idem.on_late_response(batch, None, now_ms=now)
                continue
            batch.last_error = error
            self._apply(batch, self._idem.on_no_response(batch, error, now), now)
        self._cluster.request_update()

    def _on_answer(
        self, batches: list[ProducerBatch], results: dict[tuple[str, int], dict[str, Any]], now: int
    ) -> None:
        for batch in batches:
            self._off_wire(batch)
            part = results.get(batch.tp, _ACKS_ZERO if self._acks == 0 else None)
            if batch.outcome.done:  # failed while on the wire (delivery timeout)
                code, offset = (part["error_code"], part["base_offset"]) if part else (None, -1)
                self._idem.on_late_response(batch, code, offset, now)
                continue
            if part is None:
                error = TransportError(f"no answer for partition {batch.topic}-{batch.partition}")
                batch.last_error = error
                self._apply(batch, self._idem.on_no_response(batch, error, now), now)
                continue
            code = part["error_code"]
            if code != _NO_ERROR:
                self._on_partition_error(batch, code, part)
            named_records = part.get("record_errors")
            decision = self._idem.on_response(
                batch,
                code,
                now,
                base_offset=part["base_offset"],
                log_start_offset=part.get("log_start_offset", -1),
                message=part.get("error_message") or None,
                # Nearly every answer names no record: no list is built for it.
                record_errors=[
                    (named["batch_index"], named.get("batch_index_error_message")) for named in named_records
                ]
                if named_records
                else (),
            )
            self._apply(batch, decision, now, part)

    def _off_wire(self, batch: ProducerBatch) -> None:
        self._on_wire.pop(batch, None)
        self._acc.unmute(batch.tp)  # with one request in flight, the partition may go on (Java: unmute)

    def _on_partition_error(self, batch: ProducerBatch, code: int, part: dict[str, Any]) -> None:
        """Metadata consequences of an error answer: the KIP-951 leader hint, a refresh for stale metadata."""
        leader = part.get("current_leader")
        if leader and leader.get("leader_id", -1) >= 0:
            # KIP-951: the broker tells us the new leader, so the batch can follow it without a metadata round trip.
            self._cluster.state.cluster = self._cluster.metadata.with_leader(
                batch.topic, batch.partition, leader["leader_id"], leader["leader_epoch"]
            )
        if kafka_error(code).invalid_metadata:
            self._cluster.request_update()

    def _apply(self, batch: ProducerBatch, decision: Decision, now: int, part: dict[str, Any] | None = None) -> None:
        action = decision.action
        if action is _DONE:
            offset, append_time = (part["base_offset"], part.get("log_append_time_ms", -1)) if part else (-1, -1)
            if part is not None and part["error_code"] != _NO_ERROR:
                offset = append_time = -1  # DUPLICATE_SEQUENCE_NUMBER: written before, offset unknown
            self._settle_success(batch, offset, append_time)
        elif action is Action.RETRY:
            if part is not None and part["error_code"] != ErrorCode.NONE:
                batch.last_error = kafka_error(part["error_code"], part.get("error_message") or None)
            self._observer.batch_retried(batch, batch.last_error)
            self._acc.reenqueue(batch, now + self._retry_backoff_ms(batch.attempts))
        elif action is Action.SPLIT:
            log.info(
                "%d record(s) for %s-%d too large for the broker: splitting the batch", batch.record_count, *batch.tp
            )
            self._observer.batch_split(batch)
            self._acc.split(batch, self._idem)
        elif action is Action.REJECT_RECORDS:
            self._reject_records(batch, decision)
        else:
            self._settle_failure(batch, decision.error or TransportError("failed"))

    def _reject_records(self, batch: ProducerBatch, decision: Decision) -> None:
        """KIP-467: the broker refused the batch for the records it named. Each of them fails with its own error;
        the others were not written either, through no fault of theirs, and go again at once, in their place (Java
        fails them too, with a generic error); in a transaction, which the refusal dooms, they fail as well,
        telling the caller to abort. The named parts are surely not written: their sequences are a hole that
        restarts the stream (idempotence.R6, R8, R9)."""
        named = decision.record_errors or {}
        cuts = {index for index in named} | {index + 1 for index in named}
        log.info(
            "%d of %d record(s) for %s-%d refused by the broker: %s",
            len(named),
            batch.record_count,
            *batch.tp,
            decision.error,
        )
        parts = self._acc.split(batch, self._idem, at=sorted(cuts))
        innocent: BaseException | None = None
        if self.transaction is not None:
            innocent = TransactionRequiresAbortError(
                f"not written: other records of its batch to {batch.topic}-{batch.partition} were refused "
                f"({decision.error}); abort the transaction"
            )
            innocent.__cause__ = decision.error
        first = 0
        failed: list[tuple[ProducerBatch, BaseException]] = []
        for part in parts:
            error = named.get(first) if part.record_count == 1 else None
            first += part.record_count
            if error is not None:
                failed.append((part, error))
        if innocent is not None:
            failed += [(part, innocent) for part in parts if all(part is not bad for bad, _ in failed)]
        for part, error in failed:  # the named records first: they make a transaction abortable
            self._acc.unqueue(part)
            self._idem.on_abandoned([part], error)
            self._settle_failure(part, error)

    def _retry_backoff_ms(self, attempts: int) -> int:
        """Exponential backoff with ±20% jitter, `retry_backoff_ms` → `retry_backoff_max_ms` (KIP-580)."""
        base = min(self._config.retry_backoff_max_ms, self._config.retry_backoff_ms * (2**attempts))
        return int(base * self._rng.uniform(0.8, 1.2))

    def _settle_success(self, batch: ProducerBatch, base_offset: int, log_append_time_ms: int) -> None:
        batch.outcome.succeed(base_offset, log_append_time_ms)
        self._acc.release(batch)
        self.on_batch_done()

    def _settle_failure(self, batch: ProducerBatch, error: BaseException) -> None:
        self._failure_log.failed(batch, error)
        self._observer.batch_failed(batch, error)
        batch.outcome.fail(error)
        self._acc.release(batch)
        if self.transaction is not None:
            self.transaction.on_batch_failed(error)
        self.on_batch_done()


class FailureLog:
    """Logs a failed batch once, at WARNING, with its topic-partition, record count and error; at most one line per
    `_FAILURE_LOG_INTERVAL_S`, the next line counting those left out (a storm of failures is not a storm of logs)."""

    def __init__(self, logger: logging.Logger) -> None:
        self._log = logger
        self._last_s = float("-inf")
        self._suppressed = 0

    def failed(self, batch: ProducerBatch, error: BaseException) -> None:
        now = asyncio.get_running_loop().time()
        if now - self._last_s < _FAILURE_LOG_INTERVAL_S:
            self._suppressed += 1
            return
        more = f" ({self._suppressed} more failed batch(es) not logged since)" if self._suppressed else ""
        self._log.warning(
            "failed to deliver %d record(s) to %s-%d: %s: %s%s",
            batch.record_count,
            batch.topic,
            batch.partition,
            type(error).__name__,
            error,
            more,
        )
        self._last_s = now
        self._suppressed = 0
