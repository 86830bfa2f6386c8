"""Waiting for the coordinator to finish writing the last transaction's markers before the next transaction's first
batch leaves.

Why: the coordinator answers EndTxn once PrepareCommit (or PrepareAbort) is in its log, and writes the markers to
every partition of the transaction after that. Until it has, it refuses to add a partition to the next transaction
with CONCURRENT_TRANSACTIONS: under transaction version 2 the partition leader adding it for a Produce (KIP-890)
retries after its `add.partitions.to.txn.retry.backoff.ms`, 20 ms by default (KAFKA-18654); under TV1 the producer's
AddPartitionsToTxn retries after 20 ms (Java's AddPartitionsToTxnHandler, KAFKA-5482). Markers on a healthy cluster
take a few milliseconds, so back-to-back small transactions would spend most of their time in that 20 ms wait.
DescribeTransactions (KIP-664) says when the coordinator has left the Prepare state: the first batches of the next
transaction wait for that instead: asked 1 ms after EndTxn's answer, then with a backoff from 1 ms up to the same
20 ms, and at once when a commit or `send_offsets_to_transaction` waits for it.

Owns the watch and its poll. Safe because it only delays when the next transaction's first batches leave: no batch
is written, reordered or given a sequence by it (the sequence rules in `idempotence.sequences` never see it), the
wait is bounded by `request_timeout_ms` (after which batches go as they would have without it, whatever request is
still out), and any answer it cannot read ends the wait at once: a moved coordinator or a broken connection ends
this wait only; a broker without DescribeTransactions or a denied DESCRIBE ends them for good.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

from aioproducer.error_codes import ErrorCode
from aioproducer.errors import AioProducerError, UnsupportedVersionError
from aioproducer.protocol import ApiKey
from aioproducer.transactions.coordinator import CONCURRENT_TRANSACTIONS_BACKOFF_MS

__all__ = ["PREPARING_STATES", "MarkerWatch", "still_preparing"]

log = logging.getLogger("aioproducer.transactions")

# The states DescribeTransactions reports (Java's TransactionState names) while the coordinator refuses to add
# partitions because the last transaction's markers are not all written; after them come CompleteCommit /
# CompleteAbort (or Empty, Ongoing).
PREPARING_STATES = frozenset({"PrepareCommit", "PrepareAbort"})
# Right after EndTxn's answer the markers are almost never written yet: the first question waits this long.
_FIRST_POLL_DELAY_MS = 1
_FIRST_POLL_BACKOFF_MS = 1


def still_preparing(response: Mapping[str, Any], transactional_id: str) -> bool | None:
    """Whether a DescribeTransactions answer says the coordinator still writes `transactional_id`'s markers: True,
    False, or None when the answer cannot say (an error, another id, no entry) and the watch must stop."""
    for entry in response.get("transaction_states", ()):
        if entry.get("transactional_id") != transactional_id:
            continue
        if entry.get("error_code", ErrorCode.NONE) != ErrorCode.NONE:
            return None
        return entry.get("transaction_state") in PREPARING_STATES
    return None


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class MarkerWatch:
    """After each EndTxn, whether the coordinator is still writing that transaction's markers (`pending`).

    `ask(api, body)` sends one request to the transaction coordinator and returns its answer; it returns None when
    it could not this time (no coordinator known, no connection) and raises UnsupportedVersionError when the broker
    does not offer the API: a single attempt, never a retry. `wake()` tells the sender to look again when the wait
    ends. `spawn` runs the watch as one of the transaction engine's tasks (cancelled on close).
    """

    def __init__(
        self,
        transactional_id: str,
        ask: Callable[[ApiKey, Mapping[str, Any]], Awaitable[Mapping[str, Any] | None]],
        wake: Callable[[], None],
        spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[None]],
        bound_ms: int,
    ) -> None:
        self._transactional_id = transactional_id
        self._ask = ask
        self._wake = wake
        self._spawn = spawn
        self._bound_ms = bound_ms
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._deadline = 0.0  # the loop's time at which the wait ends whatever the coordinator says
        self._pause: asyncio.Future[None] | None = None  # the backoff under way, resolved early by hurry()
        self._hurried = False
        self._unavailable = False  # the coordinator cannot answer DescribeTransactions to us: never ask again
        self.polls = 0  # DescribeTransactions sent (tests read it)

    @property
    def pending(self) -> bool:
        """Whether the next transaction's first batches should still wait."""
        task, loop = self._task, self._loop
        return task is not None and loop is not None and not task.done() and loop.time() < self._deadline

    def start(self) -> None:
        """EndTxn was just answered: watch the coordinator until it has written the markers."""
        if self._unavailable:
            return
        if self._task is not None and not self._task.done():
            self._task.cancel()  # past its deadline (else EndTxn could not have been sent): its answer is stale
        loop = self._loop = asyncio.get_running_loop()
        self._hurried = False
        self._deadline = loop.time() + self._bound_ms / 1000
        self._task = self._spawn(self._watch(loop.call_at(self._deadline, self._wake)))

    def hurry(self) -> None:
        """Someone waits for the watch now (a commit flushing the next transaction, offsets to add): ask again at
        once instead of after the backoff. While an `enqueue` loop runs, the event loop reads answers late (it
        yields only about every half millisecond, `Appender.yield_due`), so by the time a commit flushes the backoff
        has often outlived the markers."""
        if not self.pending:
            return
        self._hurried = True
        if self._pause is not None:
            _resolve(self._pause)

    async def wait(self) -> None:
        """Until the wait ends (at once when there is none; never past its deadline): for requests that would meet
        the same refusal (AddOffsetsToTxn, TxnOffsetCommit under TV2, InitProducerId bumping the epoch)."""
        task, loop = self._task, self._loop
        if task is not None and loop is not None and self.pending:
            self.hurry()
            await asyncio.wait({task}, timeout=max(0.0, self._deadline - loop.time()))

    async def _watch(self, release: asyncio.TimerHandle) -> None:
        """Ask until the markers are written; `release` wakes the sender at the deadline if this is still asking."""
        try:
            await self._backoff(_FIRST_POLL_DELAY_MS)
            backoff_ms = _FIRST_POLL_BACKOFF_MS
            while True:
                if not await self._preparing():
                    return
                if self._loop is None or self._loop.time() >= self._deadline:
                    log.warning(
                        "the coordinator still writes the last transaction's markers after %d ms: the next "
                        "transaction's first batches go now",
                        self._bound_ms,
                    )
                    return
                if await self._backoff(backoff_ms):
                    backoff_ms = _FIRST_POLL_BACKOFF_MS  # someone waits: from now on the shortest backoff
                else:
                    backoff_ms = min(backoff_ms * 2, CONCURRENT_TRANSACTIONS_BACKOFF_MS)
        finally:
            release.cancel()
            self._wake()

    async def _preparing(self) -> bool:
        """One question to the coordinator: whether it is still writing the markers (False ends the wait)."""
        self.polls += 1
        try:
            response = await self._ask(ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [self._transactional_id]})
        except UnsupportedVersionError:
            log.debug("the coordinator does not offer DescribeTransactions: transactions are not paced")
            self._unavailable = True
            return False
        except AioProducerError as exc:  # an answer that could not be read: this wait ends, the next one asks
            log.debug("DescribeTransactions failed: %r", exc)
            return False
        if response is None:
            return False  # no coordinator known or no connection now: this wait ends, the next one asks
        preparing = still_preparing(response, self._transactional_id)
        if preparing is None:
            self._stop_for_good_if_denied(response)
            return False
        return preparing

    async def _backoff(self, ms: float) -> bool:
        """Wait `ms` (never past the deadline), or less when hurried: whether it was hurried. A future and a timer,
        not asyncio.wait_for, which before Python 3.12 can swallow the cancellation close() sends."""
        if self._hurried:
            self._hurried = False
            return True
        loop = self._loop
        if loop is None:
            return False
        pause = self._pause = loop.create_future()
        timer = loop.call_at(min(loop.time() + ms / 1000, self._deadline), _resolve, pause)
        try:
            await pause
        finally:
            timer.cancel()
            if self._pause is pause:
                self._pause = None
        hurried, self._hurried = self._hurried, False
        return hurried

    def _stop_for_good_if_denied(self, response: Mapping[str, Any]) -> None:
        """An answer with an error: a denied DESCRIBE never changes; anything else (a moved coordinator, a load in
        progress) only ends this wait."""
        codes = {entry.get("error_code") for entry in response.get("transaction_states", ())}
        if ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED in codes:
            log.debug("DescribeTransactions is not allowed for %r: transactions are not paced", self._transactional_id)
            self._unavailable = True
