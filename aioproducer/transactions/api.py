"""The producer's transactional methods (Java's KafkaProducer names, asyncio-shaped), mixed into `Producer`.

Owns their signatures, defaults and documented cancellation; the work is `transactions.TransactionManager`'s.
What the methods need of the producer they are mixed into is `TransactionalHost`; what they call on its engine is
`TransactionEngine`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any, Protocol

from aioproducer.config import ProducerConfig
from aioproducer.errors import TransactionError
from aioproducer.observability.metrics import ProducerMetrics

__all__ = ["TransactionEngine", "TransactionalHost", "TransactionalMethods"]

log = logging.getLogger("aioproducer.transactions")


class TransactionEngine(Protocol):
    """The calls the transactional methods make: `transactions.TransactionManager`'s (against the coordinators), or
    a stand-in's with the same names and rules (the testing package's in-memory `MockTransactions`)."""

    async def init(self, timeout: float | None) -> None: ...

    def begin(self) -> None: ...

    async def send_offsets(self, offsets: Any, group: Any, timeout: float | None) -> None: ...

    async def commit(self, timeout: float | None) -> None: ...

    async def abort(self, timeout: float | None) -> None: ...


class TransactionalHost(Protocol):
    """What the transactional methods need of the producer they are mixed into: its config (for `max_block_ms`), its
    metrics (for the call times), its engine (refusing the call when there is none, or the producer is not running);
    and the calls of this mixin that `transaction()` makes."""

    @property
    def config(self) -> ProducerConfig: ...

    @property
    def _metrics(self) -> ProducerMetrics: ...

    def _transaction_manager(self) -> TransactionEngine: ...

    async def begin_transaction(self, timeout: float | None = None) -> None: ...

    async def commit_transaction(self, timeout: float | None = None) -> None: ...

    async def abort_transaction(self, timeout: float | None = None) -> None: ...


class TransactionalMethods:
    """Exactly-once producing for a producer made with `transactional_id` (KIP-98).

    Every method takes `timeout` in seconds (default `max_block_ms`). A timeout raises TransactionTimeoutError and
    says nothing about the outcome: the operation goes on, and calling the same method again waits for it (any other
    transactional call raises TransactionStateError meanwhile). Cancelling a call cancels only the caller's wait,
    with the same effect as a timeout: the coordinator is never left half-way through a request.
    Errors say what to do next: `requires_abort` (abort, then start a new transaction) or `fatal` (close).
    The time each call took is added to the `txn-*-time-ns-total` metrics when it returns normally (Java's
    KafkaProducerMetrics: a call that raised, timed out or was cancelled adds nothing).
    """

    async def init_transactions(self: TransactionalHost, timeout: float | None = None) -> None:
        """Register the transactional id with its coordinator: a previous producer with the same id is fenced, and
        its open transaction is completed or aborted. `start()` calls this; call it only to resume after `start()`
        timed out. On a producer already initialised it returns at once."""
        started = time.perf_counter_ns()
        await self._transaction_manager().init(_timeout(self.config, timeout))
        self._metrics.txn_init_time_ns_total += time.perf_counter_ns() - started

    async def begin_transaction(self: TransactionalHost, timeout: float | None = None) -> None:
        """Start a transaction: records sent from now on are committed or aborted together. No I/O."""
        started = time.perf_counter_ns()
        self._transaction_manager().begin()
        self._metrics.txn_begin_time_ns_total += time.perf_counter_ns() - started

    async def send_offsets_to_transaction(
        self: TransactionalHost, offsets: Any, group_metadata: Any, timeout: float | None = None
    ) -> None:
        """Commit a consumer's positions with the transaction (consume-transform-produce).

        `offsets`: {(topic, partition): next offset to read} (an int, or an object with `.offset` and optional
        `.metadata`), or confluent-kafka's `consumer.position(consumer.assignment())`. `group_metadata`: the
        consumer's `consumer_group_metadata()` (confluent-kafka), an aiokafka consumer, a `ConsumerGroupMetadata`,
        or a group id (then without KIP-447 fencing of zombie consumers).
        """
        started = time.perf_counter_ns()
        await self._transaction_manager().send_offsets(offsets, group_metadata, _timeout(self.config, timeout))
        self._metrics.txn_send_offsets_time_ns_total += time.perf_counter_ns() - started

    async def commit_transaction(self: TransactionalHost, timeout: float | None = None) -> None:
        """Flush every record of the transaction, then commit it. If a record failed, raises an error with
        `requires_abort`: call `abort_transaction()`."""
        started = time.perf_counter_ns()
        await self._transaction_manager().commit(_timeout(self.config, timeout))
        self._metrics.txn_commit_time_ns_total += time.perf_counter_ns() - started

    async def abort_transaction(self: TransactionalHost, timeout: float | None = None) -> None:
        """Abort the transaction: records not on the wire (never sent, or waiting for a retry) fail with
        TransactionAbortedError; requests under way finish first. read_committed consumers see none of it."""
        started = time.perf_counter_ns()
        await self._transaction_manager().abort(_timeout(self.config, timeout))
        self._metrics.txn_abort_time_ns_total += time.perf_counter_ns() - started

    @contextlib.asynccontextmanager
    async def transaction(self: TransactionalHost, timeout: float | None = None) -> AsyncIterator[None]:
        """`async with producer.transaction():` begins, commits on a clean exit, and aborts on an exception or a
        cancellation (shielded: the abort completes even if the caller is cancelled again), then re-raises. After a
        fatal error it re-raises without trying to abort."""
        await self.begin_transaction(timeout)
        try:
            yield
        except BaseException as exc:
            if not _fatal(exc):
                await _abort_shielded(self, timeout, exc)
            raise
        try:
            await self.commit_transaction(timeout)
        except TransactionError as exc:
            if exc.requires_abort:
                await _abort_shielded(self, timeout, exc)
            raise


def _timeout(config: ProducerConfig, timeout: float | None) -> float:
    return config.max_block_ms / 1000 if timeout is None else timeout


async def _abort_shielded(producer: TransactionalHost, timeout: float | None, cause: BaseException) -> None:
    abort = asyncio.ensure_future(producer.abort_transaction(timeout))
    try:
        await asyncio.shield(abort)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the caller's error matters more; the abort's is logged
        log.warning("aborting the transaction after %r failed: %r", cause, exc)


def _fatal(exc: BaseException) -> bool:
    return isinstance(exc, TransactionError) and exc.fatal
