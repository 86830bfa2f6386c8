"""Waiting for the coordinator to finish writing the last transaction's markers before the next transaction's first
batch leaves.

Why: the coordinator answers EndTxn once PrepareCommit (or PrepareAbort) is in its log, and writes the markers to
every partition of the transaction after that. Until it has, it refuses to add a partition to the next transaction
with CONCURRENT_TRANSACTIONS: under transaction version 2 the partition leader adding it for a Produce (KIP-890)
retries after its `add.partitions.to.txn.retry.backoff.ms`, 20 ms by default (KAFKA-18654); under TV1 the producer's
AddPartitionsToTxn retries after 20 ms (Java's AddPartitionsToTxnHandler, KAFKA-5482). Markers on a healthy cluster
take a few milliseconds, so back-to-back small transactions would spend most of their time in that 20 ms wait.
DescribeTransactions (KIP-664) says when the coordinator has left the Prepare state: the first batches of the next
transaction wait for that instead, polled from 1 ms up to the same 20 ms.

Owns the watch and its poll. Safe because it only delays when the next transaction's first batches leave: no batch
is written, reordered or given a sequence by it (the sequence rules in `idempotence.sequences` never see it), the
wait is bounded by `request_timeout_ms` (after which batches go as they would have without it), and any answer it
cannot read (an old broker, a denied DESCRIBE, a moved coordinator, a broken connection) ends the wait at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any

from aioproducer.error_codes import ErrorCode
from aioproducer.protocol import ApiKey
from aioproducer.transactions.coordinator import CONCURRENT_TRANSACTIONS_BACKOFF_MS

__all__ = ["PREPARING_STATES", "MarkerWatch", "still_preparing"]

log = logging.getLogger("aioproducer.transactions")

# The coordinator's states (Java's TransactionState names) in which it refuses to add partitions because the last
# transaction's markers are not all written; after them come CompleteCommit / CompleteAbort (or Empty, Ongoing).
PREPARING_STATES = frozenset({"PrepareCommit", "PrepareAbort", "PrepareEpochFence"})
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


class MarkerWatch:
    """After each EndTxn, whether the coordinator is still writing that transaction's markers (`pending`).

    `ask(api, body)` sends one request to the transaction coordinator and returns its answer, or None when it could
    not (no connection, the API not offered): a single attempt, never a retry. `wake()` tells the sender to look
    again when the watch ends. `spawn` runs the poll as one of the transaction engine's tasks (cancelled on close).
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
        self._hurry = asyncio.Event()  # set: ask again now rather than after the backoff
        self._unavailable = False  # the coordinator cannot answer DescribeTransactions to us: never ask again
        self.polls = 0  # DescribeTransactions sent, for tests and metrics

    @property
    def pending(self) -> bool:
        """Whether the next transaction's first batches should still wait."""
        return self._task is not None and not self._task.done()

    async def wait(self) -> None:
        """Until the watch ends (at once when there is none): for requests that would meet the same refusal
        (AddOffsetsToTxn, TxnOffsetCommit adding the group's partition under TV2)."""
        if self._task is not None and not self._task.done():
            await asyncio.wait({self._task})

    def hurry(self) -> None:
        """Someone waits for the watch now (a commit flushing the next transaction): ask again at once instead of
        after the backoff. While an `enqueue` loop runs, the event loop reads the answers late (it yields every 64
        KiB), so by the time a commit flushes, the backoff has often outlived the markers."""
        if self.pending:
            self._hurry.set()

    def start(self) -> None:
        """EndTxn was just answered: watch the coordinator until it has written the markers."""
        if self._unavailable or self.pending:
            return
        self._hurry.clear()
        self._task = self._spawn(self._watch())

    async def _watch(self) -> None:
        deadline = time.monotonic() + self._bound_ms / 1000
        backoff_ms = _FIRST_POLL_BACKOFF_MS
        try:
            while True:
                self.polls += 1
                response = await self._ask(
                    ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [self._transactional_id]}
                )
                if response is None:
                    self._unavailable = True
                    return
                preparing = still_preparing(response, self._transactional_id)
                if preparing is None:
                    self._stop_for_good(response)
                    return
                if not preparing:
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    log.debug("the last transaction's markers are still being written after %d ms", self._bound_ms)
                    return
                if self._hurry.is_set():
                    backoff_ms = _FIRST_POLL_BACKOFF_MS  # someone waits: from now on, the shortest backoff
                else:
                    try:
                        await asyncio.wait_for(self._hurry.wait(), min(backoff_ms / 1000, left))
                    except asyncio.TimeoutError:
                        backoff_ms = min(backoff_ms * 2, CONCURRENT_TRANSACTIONS_BACKOFF_MS)
                self._hurry.clear()
        finally:
            self._wake()

    def _stop_for_good(self, response: Mapping[str, Any]) -> None:
        """An answer with an error: a denied DESCRIBE never changes; anything else (a moved coordinator, a load in
        progress) only ends this watch."""
        codes = {entry.get("error_code") for entry in response.get("transaction_states", ())}
        if ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED in codes:
            log.debug("DescribeTransactions is not allowed for %r: transactions are not paced", self._transactional_id)
            self._unavailable = True
