"""The broker's side of `MockProducer`, in memory: the records waiting to complete, how each completes (at once, after
`latency_ms`, or when the test says; injected errors first), and the log of each topic-partition it is written to.

A record gets its offset when it completes successfully, as a broker assigns it on append; `_write` is the one place
records enter a partition's log. With a transaction (`mock_transactions`) a completed record takes its offset but is
held by the transaction until commit, and each partition of an ended transaction takes one more offset for its
control record. Owns nothing of the Producer's API (what is accepted, and when calls are allowed, is `MockProducer`'s).
"""

from __future__ import annotations

import asyncio
from collections import deque

from aioproducer.errors import ConfigError, ProducerClosedError
from aioproducer.models import ProducerRecord
from aioproducer.testing.mock_observe import MockObserver
from aioproducer.testing.mock_parts import InjectedError, PendingRecord, SentRecord
from aioproducer.testing.mock_transactions import MockTransactions

__all__ = ["MockLog"]


class MockLog:
    """One mock's records: `pending` (oldest first), the log per topic-partition, and the history of records
    accepted as given. `transaction` is set on a transactional mock."""

    def __init__(self, observe: MockObserver, auto_complete: bool, latency_ms: float) -> None:
        self.auto_complete = auto_complete
        self.latency_ms = latency_ms
        self.transaction: MockTransactions | None = None
        self.pending: deque[PendingRecord] = deque()
        self._observe = observe
        self._history: list[ProducerRecord] = []
        self._logs: dict[tuple[str, int], list[SentRecord]] = {}
        self._next_offsets: dict[tuple[str, int], int] = {}
        self._injected: list[InjectedError] = []
        self._timers: set[asyncio.TimerHandle] = set()

    # -- records in -----------------------------------------------------------------------------------------------
    def given(self, record: ProducerRecord) -> None:
        """An accepted record as given: in the history, or held with its transaction."""
        if self.transaction is not None:
            self.transaction.held_given.append(record)
        else:
            self._history.append(record)

    def accept(self, record: PendingRecord) -> None:
        """A record the appender placed: complete it now, later, or when the test says."""
        if not self.auto_complete:
            self.pending.append(record)
        elif self.latency_ms:
            self.pending.append(record)
            loop = record.outcome.loop
            timer: asyncio.TimerHandle

            def complete_later() -> None:
                self._timers.discard(timer)
                self._complete_pending(record, None)

            timer = loop.call_later(self.latency_ms / 1000, complete_later)
            self._timers.add(timer)
        else:
            self._complete(record, None)

    # -- completing -----------------------------------------------------------------------------------------------
    def complete_next(self) -> bool:
        if not self.pending:
            return False
        self._complete(self.pending.popleft(), None)
        return True

    def fail_next(self, error: BaseException) -> bool:
        if not self.pending:
            return False
        self._complete(self.pending.popleft(), error)
        return True

    def complete_all(self) -> int:
        count = 0
        while self.complete_next():
            count += 1
        return count

    def inject_error(self, error: BaseException, count: int | None, topic: str | None) -> None:
        if count is not None and count < 1:
            raise ConfigError(f"count must be a positive int or None, got {count!r}")
        self._injected.append(InjectedError(error, count, topic))

    def fail_pending(self, error: BaseException) -> None:
        """Every pending record fails with `error` (an abort, a fenced or failed transaction)."""
        pending, self.pending = self.pending, deque()
        for record in pending:
            self._observe.failed(record, error)
            record.outcome.fail(error)

    def close(self) -> None:
        """The mock closed at once: what is still pending fails, as the Producer fails what it could not send."""
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        pending, self.pending = self.pending, deque()
        for record in pending:
            if record.outcome.loop.is_closed():
                record.outcome.waiters.clear()  # nothing can wait on a closed loop; its callbacks could not run
            error = ProducerClosedError("the producer was closed before this record was sent")
            self._observe.failed(record, error)
            record.outcome.fail(error)

    def _complete_pending(self, record: PendingRecord, error: BaseException | None) -> None:
        try:
            self.pending.remove(record)
        except ValueError:  # completed by the test meanwhile
            return
        self._complete(record, error)

    def _complete(self, record: PendingRecord, error: BaseException | None) -> None:
        if error is None:
            error = self._injected_error(record.topic)
        self._observe.completed(record, error)
        if error is not None:
            record.outcome.fail(error)
            if self.transaction is not None:
                self.transaction.on_record_failed(error)
            return
        offset = self._write(record)
        record.outcome.succeed(offset, -1)

    def _injected_error(self, topic: str) -> BaseException | None:
        for injected in self._injected:
            if injected.topic is None or injected.topic == topic:
                if injected.remaining is not None:
                    injected.remaining -= 1
                    if injected.remaining == 0:
                        self._injected.remove(injected)
                return injected.error
        return None

    def _write(self, record: PendingRecord) -> int:
        """Append to the partition's log (or to the open transaction, until commit); returns the record's offset."""
        tp = (record.topic, record.partition)
        offset = self._next_offsets.get(tp, 0)
        self._next_offsets[tp] = offset + 1
        sent = SentRecord(
            record.topic, record.partition, offset, record.timestamp_ms, record.key, record.value, record.headers
        )
        if self.transaction is not None:
            self.transaction.held.append(sent)
        else:
            self._logs.setdefault(tp, []).append(sent)
        return offset

    # -- a transaction's end --------------------------------------------------------------------------------------
    def publish(self, records: list[SentRecord], given: list[ProducerRecord]) -> None:
        """A committed transaction's records enter their logs and the history."""
        for record in records:
            self._logs.setdefault((record.topic, record.partition), []).append(record)
        self._history.extend(given)

    def skip_offsets(self, partitions: set[tuple[str, int]]) -> None:
        """Each partition of an ended transaction takes one offset for its control record."""
        for tp in partitions:
            self._next_offsets[tp] = self._next_offsets.get(tp, 0) + 1

    # -- reading --------------------------------------------------------------------------------------------------
    def history(self) -> list[ProducerRecord]:
        return list(self._history)

    def records(self, topic: str | None, partition: int | None) -> list[SentRecord]:
        return [
            record
            for (log_topic, log_partition), log in sorted(self._logs.items())
            if (topic is None or log_topic == topic) and (partition is None or log_partition == partition)
            for record in log
        ]

    def clear(self) -> None:
        """Forget the history, the logs and injected errors; pending records stay pending."""
        self._history.clear()
        self._logs.clear()
        self._next_offsets.clear()
        self._injected.clear()
