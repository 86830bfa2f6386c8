"""What the producer tells the outside about itself: one object that turns the sender's and cluster's events into
metrics, hook calls and log lines (the record hooks are `record_hooks`'s).

Owns the event → metric/hook/log mapping, the last error (for `health()`), and the rule that observing never
changes an outcome. The core calls it once per batch, request or connection change, never per record: the
compiled and pure-Python record paths therefore count the same. It must not decide anything about sending.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from aioproducer.errors import BufferExhaustedError
from aioproducer.hooks import BatchWritten, HookChain, RequestDone, TransactionEvent, load_interceptor
from aioproducer.observability.metrics import Gauges, MetricsSnapshot, ProducerMetrics
from aioproducer.observability.metrics_fold import PENDING_BOUND, AnswerFacts, SentFacts, fold_answers, fold_sent
from aioproducer.protocol import ApiKey
from aioproducer.records.layout import BATCH_HEADER_SIZE

if TYPE_CHECKING:
    from aioproducer.buffer.accumulator import ProducerBatch

__all__ = ["Observer", "new_observer"]

log = logging.getLogger("aioproducer.observer")
T = TypeVar("T")

# While no broker answers, a WARNING at once, then at most one per interval saying how long it has lasted (a producer
# retries every few hundred ms: one line per attempt, as Java's NetworkClient logs, would bury everything else).
OUTAGE_LOG_INTERVAL_MS = 30_000


def new_observer(
    config: Any,
    hooks: Iterable[Any],
    java_configs: Mapping[str, Any],
    clock_ms: Callable[[], int],
    record_overhead: int,
) -> Observer:
    """The observer of a producer with these settings: its metrics, and its hooks (`hooks`, then
    `interceptor_classes`, which are loaded and configured here, once)."""
    metrics = ProducerMetrics(config.buffer_memory)
    loaded = [load_interceptor(spec, dict(java_configs)) for spec in config.interceptor_classes]

    def count_error() -> None:
        metrics.hook_error_total += 1

    return Observer(metrics, HookChain([*hooks, *loaded], count_error), clock_ms, record_overhead)


class Observer:
    """Metrics, hooks and logs of one producer, fed by the sender and the cluster."""

    def __init__(
        self, metrics: ProducerMetrics, hooks: HookChain, clock_ms: Callable[[], int], record_overhead: int = 0
    ) -> None:
        self.metrics = metrics
        self.hooks = hooks
        self._batch_hooks = bool(hooks.batch_written_hooks)  # resolved once, as the chain itself
        self._request_hooks = bool(hooks.request_hooks)
        self.clock_ms = clock_ms
        self._record_overhead = record_overhead  # what buffer accounting adds per record beyond its bytes
        self.last_error: BaseException | None = None
        self.last_error_ms = 0
        self.metadata_refreshed_ms: int | None = None  # when a broker last answered a Metadata request
        self.unreachable_since_ms: int | None = None  # set while no broker answers (the first failed attempt)
        self._outage_attempts = 0
        self._outage_logged_ms = 0
        self._producer_id = self._epoch = -1  # the producer state the last batch sent was stamped with
        # Raw facts of the requests written and answered since the last `fold` (their layout: metrics_fold).
        self._sent = SentFacts()
        self._answers: list[AnswerFacts] = []
        self._failing_nodes: set[int] = set()  # reported once per run of failures, not per reconnect attempt

    def note_error(self, error: BaseException) -> None:
        self.last_error = error
        self.last_error_ms = self.clock_ms()

    # -- sender events ------------------------------------------------------------------------------------------
    def produce_sent(
        self, conn: Any, batches: Sequence[ProducerBatch], future: asyncio.Future[Any] | None
    ) -> Callable[[asyncio.Future[Any], int], None] | None:
        """A Produce request carrying `batches` was written to `conn` (a BrokerConnection). With a `future` (an
        answer is expected), returns what the sender calls with it and the time (ms) the answer came, once it has
        handled the answer."""
        # When the request was written: the connection has just stamped it (event-loop time, as `clock_ms`), so the
        # observer reads no clock of its own (the clock is the dearest part of observing a request).
        now = int(conn.last_active * 1000)
        # The raw facts only, appended to their lists (read now: a retry changes `attempts`, the release zeroes
        # `reserved_bytes`); the metrics are folded from them later, many requests at a time (`fold`). Per request
        # this is a few attribute reads: the folding, run warm in one loop, costs less than doing it here.
        # (A loop, not a comprehension: no function object made per request.)
        sent = self._sent
        count = 0
        for b in batches:
            c = b.closed
            if c is not None:
                sent.topics.append(b.topic)
                sent.record_counts.append(c.record_count)
                sent.section_bytes.append(len(c.records_section))
                sent.compressions.append(c.compression)
                sent.reserved_bytes.append(b.reserved_bytes)
                sent.attempts.append(b.attempts)
                sent.created_ms.append(b.created_ms)
                count += 1
        sent.node_ids.append(conn.node_id)
        sent.sent_ms.append(now)
        sent.batch_counts.append(count)
        if len(sent.node_ids) >= PENDING_BOUND:
            self.fold()
        if self._batch_hooks:
            self._batches_written(conn, batches)
        if batches:
            first = batches[0]
            if first.producer_epoch != self._epoch or first.producer_id != self._producer_id:
                self._note_epoch(first)
        if future is None:
            return None
        # Called by the sender's own callback once it has settled the batches: no second callback per request.
        request_bytes = _request_bytes(batches) if self._request_hooks else 0
        return partial(self._produce_done, conn, request_bytes, now, batches)

    def _batches_written(self, conn: Any, batches: Sequence[ProducerBatch]) -> None:
        """The batch hooks' events for a request just written (read now, as the facts are)."""
        overhead = self._record_overhead
        for batch in batches:
            closed = batch.closed
            if closed is None:
                continue
            count = closed.record_count
            wire = BATCH_HEADER_SIZE + len(closed.records_section)
            uncompressed = max(batch.reserved_bytes - count * overhead, wire) if closed.compression else wire
            self.hooks.batch_written(
                BatchWritten(
                    conn.node_id,
                    conn.host,
                    conn.port,
                    batch.topic,
                    batch.partition,
                    count,
                    uncompressed,
                    wire,
                    batch.attempts,
                )
            )

    def _note_epoch(self, batch: Any) -> None:
        """Count epoch bumps (KIP-360) from the producer state batches are stamped with: same id, newer epoch. Not
        logged here: `aioproducer.idempotence`, where every identity change happens, logs each once."""
        producer_id, epoch = getattr(batch, "producer_id", -1), getattr(batch, "producer_epoch", -1)
        if (producer_id, epoch) != (self._producer_id, self._epoch) and producer_id >= 0:
            if producer_id == self._producer_id and epoch > self._epoch:
                self.metrics.epoch_bump_total += 1
            self._producer_id, self._epoch = producer_id, epoch

    def _produce_done(
        self,
        conn: Any,
        request_bytes: int,
        sent_ms: int,
        batches: Sequence[ProducerBatch],
        future: asyncio.Future[Any],
        now: int,
    ) -> None:
        latency = now - sent_ms
        node_id = conn.node_id
        error = asyncio.CancelledError() if future.cancelled() else future.exception()
        if error is None:
            # The sender's callback ran first (it was added first): batches delivered by this answer are settled.
            throttle = int(future.result().get("throttle_time_ms", 0) or 0)
            delivered: list[int] = []
            for batch in batches:
                outcome = batch.outcome
                if outcome.done and outcome.error is None:
                    delivered.append(now - batch.created_ms)
            self._answers.append((node_id, latency, throttle, delivered))
            if throttle > 0:
                log.debug("broker %d throttled this producer for %d ms", node_id, throttle)
                self.hooks.throttle(node_id, throttle)
        if self._request_hooks:  # the event object is built only for someone to read
            version = conn.versions.get(ApiKey.PRODUCE, -1)
            self.hooks.request(RequestDone(node_id, "Produce", version, request_bytes, latency, error))

    def fold(self) -> None:
        """Fold the requests' raw facts noted since the last fold into the metrics: before every snapshot, and
        whenever `PENDING_BOUND` requests are waiting (so their memory stays bounded)."""
        sent, answers = self._sent, self._answers
        self._sent, self._answers = SentFacts(), []
        if sent.node_ids:
            fold_sent(self.metrics, sent, self._record_overhead)
        if answers:
            fold_answers(self.metrics, answers)

    def batch_retried(self, batch: ProducerBatch, error: BaseException | None) -> None:
        self.metrics.batch_retried(batch.topic, batch.record_count)
        if error is not None:
            self.note_error(error)
        log.debug(
            "retrying %d record(s) for %s-%d (attempt %d): %s",
            batch.record_count,
            batch.topic,
            batch.partition,
            batch.attempts + 1,
            error,
        )

    def batch_split(self, batch: ProducerBatch) -> None:
        self.metrics.batch_split_total += 1

    def batch_failed(self, batch: ProducerBatch, error: BaseException) -> None:
        self.metrics.batch_failed(batch.topic, batch.record_count)
        self.note_error(error)

    def transaction_event(self, event: str, detail: TransactionEvent) -> None:
        """A transactional step done (transactions.TransactionManager's events): to the hooks; fencing is an error."""
        if event == "fenced" and detail.error is not None:
            self.note_error(detail.error)
            log.warning("transactional id %r was fenced: %s", detail.transactional_id, detail.error)
        self.hooks.transaction(event, detail)

    def producer_id_set(self, producer_id: int, epoch: int, bumped: bool) -> None:
        """InitProducerId answered. Counted, not logged: `aioproducer.idempotence` logs the new identity (for the
        transactional path too, which does not pass here), and one event gets one log line."""
        if bumped:
            self.metrics.epoch_bump_total += 1

    # -- cluster events -----------------------------------------------------------------------------------------
    def connected(self, conn: Any) -> None:
        self.metrics.connection_creation_total += 1
        self._failing_nodes.discard(conn.node_id)
        if conn.node_id < 0:
            log.info("connected to bootstrap server %s:%d", conn.host, conn.port)
        else:
            log.info("connected to broker %d at %s:%d", conn.node_id, conn.host, conn.port)
        self.hooks.connect(conn.node_id, conn.host, conn.port)

    def disconnected(self, conn: Any, closing: bool) -> None:
        self.metrics.connection_closed(conn.node_id, conn.bytes_sent, conn.bytes_received)
        if closing:
            log.debug("connection to broker %d at %s:%d closed", conn.node_id, conn.host, conn.port)
        else:
            log.info("connection to broker %d at %s:%d lost", conn.node_id, conn.host, conn.port)
        self.hooks.disconnect(conn.node_id, conn.host, conn.port)

    def connect_failed(self, node_id: int, error: BaseException) -> None:
        self.note_error(error)
        if node_id in self._failing_nodes:
            log.debug("connecting to broker %d failed again: %s", node_id, error)
        else:
            self._failing_nodes.add(node_id)
            log.info("connecting to broker %d failed: %s (retrying with backoff)", node_id, error)

    def metadata_refreshed(self) -> None:
        """A broker answered a Metadata request: the cluster is reachable (again)."""
        now = self.metadata_refreshed_ms = self.clock_ms()
        since = self.unreachable_since_ms
        if since is not None:
            self.unreachable_since_ms = None
            log.info(
                "the cluster answers again, after %.1f s and %d failed attempt(s)",
                (now - since) / 1000,
                self._outage_attempts,
            )

    def cluster_unreachable(self, error: BaseException, bootstrap: str) -> None:
        """A Metadata attempt found no broker to answer it (none connects, or the request was lost): a WARNING when
        the outage starts, then at most one per `OUTAGE_LOG_INTERVAL_MS` while it lasts."""
        self.note_error(error)
        now = self.last_error_ms
        if self.unreachable_since_ms is None:
            self.unreachable_since_ms = self._outage_logged_ms = now
            self._outage_attempts = 1
            log.warning("no broker answers (bootstrap servers: %s), retrying: %s", bootstrap, error)
            return
        self._outage_attempts += 1
        if now - self._outage_logged_ms >= OUTAGE_LOG_INTERVAL_MS:
            self._outage_logged_ms = now
            log.warning(
                "still no broker answers after %.0f s and %d attempts (bootstrap servers: %s): %s",
                (now - self.unreachable_since_ms) / 1000,
                self._outage_attempts,
                bootstrap,
                error,
            )

    # -- producer events ----------------------------------------------------------------------------------------
    async def timed_memory_wait(self, wait: Awaitable[T]) -> T:
        """Await a wait for buffer memory, counting its time and whether it ran out (Java's bufferpool metrics)."""
        started = time.perf_counter_ns()
        exhausted = False
        try:
            return await wait
        except BufferExhaustedError:
            exhausted = True
            raise
        finally:
            self.metrics.buffer_waited(time.perf_counter_ns() - started, exhausted)

    def snapshot(self, accumulator: Any, connections: Iterable[Any], idempotence: Any, waiters: int) -> MetricsSnapshot:
        """The metrics now, with the gauges read from the producer's live parts."""
        self.fold()
        live = list(connections)
        now = self.clock_ms()
        refreshed = self.metadata_refreshed_ms
        return self.metrics.snapshot(
            Gauges(
                buffer_available_bytes=accumulator.buffer_memory - accumulator.used_bytes,
                requests_in_flight=sum(conn.in_flight for conn in live),
                connection_count=len(live),
                metadata_age_s=(now - refreshed) / 1000 if refreshed is not None else None,
                producer_id=idempotence.producer_id if idempotence is not None else -1,
                producer_epoch=idempotence.producer_epoch if idempotence is not None else -1,
                buffer_waiters=waiters,
                outgoing_bytes=_per_node(live, "bytes_sent"),
                incoming_bytes=_per_node(live, "bytes_received"),
            )
        )


def _per_node(connections: Iterable[Any], attribute: str) -> dict[int, int]:
    counts: dict[int, int] = {}
    for conn in connections:
        counts[conn.node_id] = counts.get(conn.node_id, 0) + getattr(conn, attribute, 0)
    return counts


def _request_bytes(batches: Sequence[ProducerBatch]) -> int:
    """A Produce request's bytes as the request hooks report them: its batches' (the envelope is not counted)."""
    return sum(BATCH_HEADER_SIZE + len(b.closed.records_section) for b in batches if b.closed is not None)
