"""Per-partition queues of record batches, buffer-memory accounting, and readiness; pure.

Owns *which* batches exist, how large they grow, and *when* they may be sent (Java's RecordAccumulator): a
partition's head batch is ready when it holds `batch_size` bytes (it may grow to `batch_max_size` while it waits),
when `linger_ms` has passed, when a retry's backoff has passed (or its leader changed), or while flushing/closing or
while senders wait for memory. Whether a ready batch may go out with idempotence, and where a retry goes back in its
queue, is `idempotence`'s rule. Time arrives as `now_ms` (or a clock, read only when a batch is created); each batch
carries the `BatchOutcome` its records' delivery handles read, settled by the sender.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from aioproducer.buffer.batch import ProducerBatch, TopicPartition, queued_bytes
from aioproducer.buffer.pool import BufferPool
from aioproducer.idempotence.sequences import NO_SEQUENCE, IdempotenceState
from aioproducer.records import BatchBuilder, read_batches
from aioproducer.records.compression import CompressionType

__all__ = ["ProducerBatch", "ReadyCheck", "RecordAccumulator"]

# What a Produce request costs besides its batches: header, topic and partition framing (a generous bound).
REQUEST_OVERHEAD_BYTES = 256
PER_BATCH_OVERHEAD_BYTES = 64
# Java's CompressionRatioEstimator.COMPRESSION_RATIO_IMPROVING_STEP and _DETERIORATE_STEP.
_RATIO_IMPROVE_STEP = 0.005
_RATIO_DETERIORATE_STEP = 0.05


class ReadyCheck:
    """The result of `RecordAccumulator.ready`: partitions to drain per leader, and when to look again."""

    __slots__ = ("next_check_ms", "ready", "unknown_leader_topics")

    def __init__(self) -> None:
        self.ready: dict[int, list[TopicPartition]] = {}
        self.next_check_ms: int | None = None
        self.unknown_leader_topics: set[str] = set()


class RecordAccumulator:
    """Batches per partition, bounded by `buffer_memory` (counted in record bytes, released on completion).

    Its state changes only through its methods. Others may read `batch_size`, `compression`, `pool` (to charge and
    wait for memory through it) and `queues` (read-only: tests and the producer's metrics look at them).
    """

    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: int,
        buffer_memory: int,
        compression: CompressionType,
        compression_level: int | None,
        new_outcome: Callable[[TopicPartition], Any],
        guarantee_order: bool = False,
        batch_max_size: int | None = None,
        load_sink: Callable[[str, list[int], list[int], int], None] | None = None,
    ) -> None:
        # A batch is ready to go once it holds batch_size bytes (Java's rule), and takes more records while it
        # waits to be drained, up to batch_max_size (KIP-782's batch.max.size): under backlog, batches grow instead
        # of queueing, and each costs its codec call, its request share and the broker's work once.
        self.batch_size = batch_size
        self.batch_max_size = batch_size if batch_max_size is None else max(batch_max_size, batch_size)
        # How far a batch may grow for its compression to stay short on the event loop (`limit_growth`, from the
        # codec's measured speed when batches are compressed on the loop); never below batch_size.
        self._growth_limit = self.batch_max_size
        # Topics where a grown batch was refused as too large (MESSAGE_TOO_LARGE, then split): their batches stay
        # at batch_size from then on, so a topic with a small max.message.bytes does not split batch after batch.
        self.fixed_size_topics: set[str] = set()
        # Batches on the wire per partition. A partition's full batch waits while one is out, up to linger_ms from
        # its creation, growing meanwhile (see `ready`).
        self._in_flight_batches: dict[TopicPartition, int] = {}
        # With one request in flight per connection, a partition is muted while its batch is out, so a retry can
        # never be overtaken by a later batch sent to another broker after a leader move (Java's
        # guaranteeMessageOrder). With more in flight, ordering is the idempotent producer's sequences' job.
        self.guarantee_order = guarantee_order
        self._muted: set[TopicPartition] = set()
        self.linger_ms = linger_ms
        self.compression = compression
        self.compression_level = compression_level
        # Buffer memory: charged per record by `append` (or by the appender, inline), given back by `release`.
        self.pool = BufferPool(buffer_memory)
        self.queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._incomplete: set[ProducerBatch] = set()  # every batch not released yet, queued or on the wire
        self._new_outcome = new_outcome  # the outcome each new batch's records are settled through
        self._flushing = 0  # callers waiting for everything buffered (flush, send_many's end, commit)
        self._closing = False
        self._drain_start = 0
        # Java's CompressionRatioEstimator: a batch is closed (compressed) only once drained, so the wire size a
        # request is packed by is estimated from the ratio this producer's batches reached so far.
        self._compression_ratio = 1.0
        # Adaptive partitioning (KIP-794): told by `ready`, per topic, the queue sizes of the partitions that may
        # take keyless records, their ids, and how many queues the topic has (the partitioner's update_load_stats).
        self._load_sink = load_sink
        # What `ready` last told the sink per topic: the partitioner's stats are a function of these alone, and on
        # most passes they have not changed (queue sizes count whole batch_size units), so they are not told again.
        self._load_told: dict[str, tuple[list[int], list[int], int]] = {}

    @property
    def buffer_memory(self) -> int:
        return self.pool.total_bytes

    @property
    def used_bytes(self) -> int:
        return self.pool.used_bytes

    def has_room(self, record_bytes: int) -> bool:
        return self.pool.has_room(record_bytes)

    # -- what others may change, through methods -------------------------------------------------------------------
    def begin_flush(self) -> None:
        """A caller waits for everything buffered: every batch is ready at once until `end_flush` (Java's
        beginFlush). Calls nest."""
        self._flushing += 1

    def end_flush(self) -> None:
        self._flushing -= 1

    def expedite(self) -> None:
        """A caller is done buffering and now waits for its records (send_many, send_table): each partition's newest
        batch, which holds its last records there, is ready at once rather than after linger_ms. Unlike a flush, it
        leaves alone the batches begun later (another caller's, buffering meanwhile): they fill and linger as usual.
        Java has no such call; its users flush, which would make every batch ready while it waits."""
        for queue in self.queues.values():
            if queue:
                queue[-1].expedited = True

    def close(self) -> None:
        """The producer is closing: every batch is ready at once, from now on (Java's RecordAccumulator.close)."""
        self._closing = True

    def limit_growth(self, size_bytes: int) -> None:
        """Batches grow no larger than `size_bytes` (nor below `batch_size`) while they wait: their compression on
        the event loop must stay short (`compression_pacing`)."""
        self._growth_limit = size_bytes

    def unmute(self, tp: TopicPartition) -> None:
        """The partition's batch came back from the wire: with one request in flight, the partition may go on."""
        self._muted.discard(tp)

    # -- what others may read ---------------------------------------------------------------------------------------
    def _size_limit_for(self, topic: str) -> int:
        """How large a new batch of `topic` may grow while it waits."""
        if topic in self.fixed_size_topics:
            return self.batch_size
        return max(self.batch_size, min(self.batch_max_size, self._growth_limit))

    def missing_bytes(self, topic: str, partition: int) -> int:
        """How many bytes the partition's newest batch lacks to hold batch_size: 0 when it does, when it is sealed,
        or when the partition has none (Java's RecordAccumulator.allBatchesFull, which the sticky partitioner waits
        for before it moves on: `DefaultPartitioner.follow_batches`). Also 0 where batches cannot grow past
        batch_size (acks=0, batch_max_size=batch_size, a topic whose batches were split): there a batch is sealed
        before it quite holds batch_size, the next one is the newest, and waiting for that one to fill would hold
        the partition for twice batch_size bytes and leave a batch part-filled all the same (as Java does)."""
        queue = self.queues.get((topic, partition))
        if not queue or self._size_limit_for(topic) <= self.batch_size:
            return 0
        newest = queue[-1]
        builder = newest.builder
        if newest.full or newest.sealed or builder is None:
            return 0
        return max(self.batch_size - builder.estimated_size, 0)

    def has_incomplete(self) -> bool:
        """Whether any batch is not done yet (queued, being retried, or on the wire)."""
        return bool(self._incomplete)

    def incomplete_batches(self) -> list[ProducerBatch]:
        """Every batch not done yet, for a caller to wait for (flush, close)."""
        return list(self._incomplete)

    def is_incomplete(self, batch: ProducerBatch) -> bool:
        return batch in self._incomplete

    def is_queued(self, batch: ProducerBatch) -> bool:
        """Whether `batch` sits in its partition's queue (not on the wire, not done)."""
        return batch in self.queues.get(batch.tp, ())

    def topics_with_batches(self) -> set[str]:
        """Topics with batches waiting to be sent or retried (a batch on the wire comes back if its request fails)."""
        return {topic for (topic, _partition), queue in self.queues.items() if queue}

    def in_flight_count(self, tp: TopicPartition) -> int:
        """Batches of the partition on the wire."""
        return self._in_flight_batches.get(tp, 0)

    def estimated_wire_size(self, batch: ProducerBatch) -> int:
        """The batch's bytes on the wire: exact once closed, else its uncompressed size times the ratio its codec
        reached on this producer's batches (Java's estimatedSizeInBytes)."""
        if batch.closed is not None or self.compression is CompressionType.NONE:
            return batch.size_in_bytes
        return int(batch.size_in_bytes * self._compression_ratio) + 1

    def observe_compression(self, uncompressed_bytes: int, wire_bytes: int) -> None:
        """A batch of `uncompressed_bytes` was closed to `wire_bytes`: the estimate moves towards that ratio, slowly
        when it improves and at once when it worsens (Java's CompressionRatioEstimator steps)."""
        if uncompressed_bytes <= 0:
            return
        observed = wire_bytes / uncompressed_bytes
        if observed > self._compression_ratio:
            self._compression_ratio = max(self._compression_ratio + _RATIO_DETERIORATE_STEP, observed)
        elif observed < self._compression_ratio:
            self._compression_ratio = max(observed, self._compression_ratio - _RATIO_IMPROVE_STEP)

    def drainable_heads(
        self, partitions: Sequence[TopicPartition], may_drain: Callable[[ProducerBatch], bool]
    ) -> list[ProducerBatch]:
        """The head batches `drain` would consider for these partitions now, in order: not being compressed, not
        muted, and allowed by `may_drain` (idempotence's rule)."""
        heads: list[ProducerBatch] = []
        for tp in partitions:
            queue = self.queues.get(tp)
            if not queue or tp in self._muted:
                continue
            head = queue[0]
            if not head.compressing and may_drain(head):
                heads.append(head)
        return heads

    def append(
        self,
        tp: TopicPartition,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]],
        record_bytes: int,
        clock_ms: Callable[[], int],
    ) -> tuple[ProducerBatch, int, bool]:
        """Append one record: its batch, its index in the batch, and whether the sender should wake (a batch was
        created or filled). `clock_ms` is read only when a new batch starts."""
        queue = self.queues.get(tp)
        if queue is None:
            queue = self.queues[tp] = deque()
        wake = False
        last = queue[-1] if queue else None
        index = None
        if last is not None and not last.sealed and last.builder is not None:
            index = last.builder.try_append(timestamp_ms, key, value, headers)
        if last is not None and index is not None:
            batch = last
            builder = last.builder
        else:
            builder = BatchBuilder(
                compression=self.compression,
                compression_level=self.compression_level,
                size_limit=self._size_limit_for(tp[0]),
            )
            index = builder.try_append(timestamp_ms, key, value, headers)
            if last is not None:
                last.seal()
            batch = ProducerBatch(tp, builder, clock_ms(), self._new_outcome(tp))
            queue.append(batch)
            self._incomplete.add(batch)
            wake = True
        batch.reserved_bytes += record_bytes
        self.pool.reserve(record_bytes)
        if not batch.full and builder.estimated_size >= self.batch_size:  # type: ignore[union-attr]
            batch.full = True
            wake = True
        return batch, index, wake  # type: ignore[return-value]  # an empty builder always takes the record

    def ready(
        self,
        now_ms: int,
        leader_of: Callable[[TopicPartition], int],
        leader_epoch_of: Callable[[TopicPartition], int] | None = None,
        unavailable: Collection[int] = (),
    ) -> ReadyCheck:
        """Which partitions' head batches can be sent now, grouped by leader. With adaptive partitioning, also each
        topic's load for the partitioner (Java's RecordAccumulator.partitionReady): what is queued per partition
        whose leader is known, in batch_size units (Java counts its batches, which stay at batch.size; ours grow
        while they wait), leaving out those with batches waiting for a node in `unavailable` (one that took none
        for partitioner_availability_timeout_ms)."""
        check = ReadyCheck()
        force = self._flushing > 0 or self._closing or self.pool.waiters > 0
        next_check: int | None = None
        load: dict[str, tuple[list[int], list[int], list[int]]] | None = None if self._load_sink is None else {}
        batch_size = self.batch_size
        ready = check.ready
        for tp, queue in self.queues.items():
            leader = leader_of(tp)  # once per partition and pass: the sender's metadata cannot change during it
            if load is not None:
                sizes, ids, queues = load.get(tp[0]) or load.setdefault(tp[0], ([], [], [0]))
                queues[0] += 1
                if leader >= 0 and not (queue and leader in unavailable):
                    sizes.append(-(-queued_bytes(queue) // batch_size))
                    ids.append(tp[1])
            if not queue:
                continue
            head = queue[0]
            if leader < 0:
                check.unknown_leader_topics.add(tp[0])
                continue
            if (
                head.attempts > 0
                and head.retry_at_ms > now_ms
                and not _leader_changed(head, leader, leader_epoch_of(tp) if leader_epoch_of else -1)
            ):
                wait = head.retry_at_ms - now_ms
            elif (
                force
                or head.attempts > 0
                or len(queue) > 1
                or head.expedited
                or (head.full and not self._in_flight_batches.get(tp))
            ):
                wait = 0
            else:
                wait = head.created_ms + self.linger_ms - now_ms
            if wait <= 0:
                node_ready = ready.get(leader)
                if node_ready is None:
                    ready[leader] = [tp]
                else:  # no new list made and thrown away by setdefault, per ready partition and pass
                    node_ready.append(tp)
            elif next_check is None or wait < next_check:
                next_check = wait
        check.next_check_ms = next_check
        if load is not None and self._load_sink is not None:
            told = self._load_told
            for topic, (sizes, ids, queues) in load.items():
                view = (sizes, ids, queues[0])
                if told.get(topic) != view:
                    self._load_sink(topic, sizes, ids, queues[0])
                    told[topic] = view  # once taken: a view the sink refused is told again at the next pass
        return check

    def drain(
        self,
        partitions: Sequence[TopicPartition],
        max_request_size: int,
        idempotence: IdempotenceState,
        now_ms: int = 0,
    ) -> list[ProducerBatch]:
        """Take at most one batch per partition for one Produce request, within `max_request_size`, each as
        `idempotence` allows (idempotence.R4, R5); it stamps what it lets go."""
        drained: list[ProducerBatch] = []
        size = REQUEST_OVERHEAD_BYTES
        count = len(partitions)
        start = self._drain_start % count if count else 0
        self._drain_start += 1
        for i in range(count):
            tp = partitions[(start + i) % count]
            queue = self.queues.get(tp)
            if not queue:
                continue
            head = queue[0]
            if head.compressing or tp in self._muted:
                continue
            if not idempotence.may_drain(head):
                continue
            head.seal()  # drained: the next record for the partition starts a new batch
            batch_size = self.estimated_wire_size(head) + PER_BATCH_OVERHEAD_BYTES
            if drained and size + batch_size > max_request_size:
                break
            queue.popleft()
            size += batch_size
            idempotence.on_drain(head, now_ms)
            head.in_flight = True
            self._in_flight_batches[tp] = self._in_flight_batches.get(tp, 0) + 1
            if self.guarantee_order:
                self._muted.add(tp)
            drained.append(head)
        return drained

    def reenqueue(self, batch: ProducerBatch, retry_at_ms: int) -> None:
        """Put a batch back for a retry, ahead of newer batches and in sequence order (Java's insertInSequenceOrder;
        a partition's stamped batches all belong to one sequence stream, idempotence.R3); without a sequence, behind
        the older retries (see _insert_in_sequence_order)."""
        self._landed(batch)
        self._muted.discard(batch.tp)
        batch.attempts += 1
        batch.retry_at_ms = retry_at_ms
        self._insert_in_sequence_order(batch)

    def _insert_in_sequence_order(self, batch: ProducerBatch) -> None:
        queue = self.queues.setdefault(batch.tp, deque())
        position = 0
        if batch.base_sequence != NO_SEQUENCE:
            while (
                position < len(queue)
                and queue[position].base_sequence != NO_SEQUENCE
                and queue[position].base_sequence < batch.base_sequence
            ):
                position += 1
        else:
            # Without a sequence (idempotence off), among the retries at the front, oldest first. Java's reenqueue
            # puts each at the very front, so batches failing in the order they were sent come back younger first:
            # their retries go out reversed, and expiry, which reads queue heads (as Java's expiredBatches does, and
            # the sender's next expiry time), would hold the older batch until the younger one's delivery timeout.
            # Strictly older only: a split batch's parts share its creation time and go in one by one, last first.
            while (
                position < len(queue) and queue[position].attempts > 0 and queue[position].created_ms < batch.created_ms
            ):
                position += 1
        queue.insert(position, batch)

    def split(
        self, batch: ProducerBatch, idempotence: IdempotenceState, at: Sequence[int] | None = None
    ) -> list[ProducerBatch]:
        """Replace a batch the broker refused by its parts, queued in its place (Java's splitAndReenqueue):
        `at` gives the index of each part's first record after the first; by default two halves, for a batch too
        large for the broker (its topic's batches stay at batch_size from then on). `idempotence` gives the parts
        consecutive slices of its sequence range (idempotence.R6).

        The records are read back from the encoded batch (this path is rare; the hot path keeps no copies), and
        the batch's outcome forwards each record's handle to its part (a chain of two-way forwards for more than
        two). Whoever waits for the batch (flush, close) is told once every part is done. The parts go out at once:
        a split is not a retry.
        """
        encoded = batch.close().encode()
        records = [r for b in read_batches(encoded) for r in b.records]
        if at is None:
            self.fixed_size_topics.add(batch.topic)
            at = [len(records) // 2]
        bounds = [0, *sorted({i for i in at if 0 < i < len(records)}), len(records)]
        parts: list[ProducerBatch] = []
        for start, end in itertools.pairwise(bounds):
            builder = BatchBuilder(
                compression=self.compression, compression_level=self.compression_level, size_limit=1 << 62
            )
            for record in records[start:end]:
                builder.try_append(record.timestamp, record.key, record.value, record.headers)
            part = ProducerBatch(batch.tp, builder, batch.created_ms, self._new_outcome(batch.tp))
            part.reserved_bytes = batch.reserved_bytes * (end - start) // max(len(records), 1)
            part.attempts = batch.attempts
            part.sealed = part.full = True
            parts.append(part)
        parts[-1].reserved_bytes += batch.reserved_bytes - sum(part.reserved_bytes for part in parts)
        batch.reserved_bytes = 0
        self._landed(batch)
        self._incomplete.discard(batch)
        self._muted.discard(batch.tp)
        idempotence.on_split(batch, parts)
        for part in reversed(parts):
            self._insert_in_sequence_order(part)
        self._incomplete.update(parts)
        callbacks, batch.done_callbacks = batch.done_callbacks, []
        if callbacks:
            _call_when_all_done(parts, callbacks)
        # Right to left, so that each forward already leads to the parts it covers.
        rest = parts[-1].outcome
        for index in range(len(parts) - 2, 0, -1):
            chained = self._new_outcome(batch.tp)
            chained.forward(bounds[index + 1] - bounds[index], parts[index].outcome, rest)
            rest = chained
        if len(parts) > 1:
            batch.outcome.forward(bounds[1], parts[0].outcome, rest)
        else:
            batch.outcome.forward(len(records), parts[0].outcome, parts[0].outcome)
        return parts

    def unqueue(self, batch: ProducerBatch) -> None:
        """Take a queued batch out of its queue (a part of a split that fails at once, idempotence.R6)."""
        queue = self.queues.get(batch.tp)
        if queue is not None and batch in queue:
            queue.remove(batch)
        batch.seal()

    def release(self, batch: ProducerBatch) -> None:
        """A batch is done (delivered or failed): give its memory back and run its completion callbacks."""
        if batch not in self._incomplete:
            return
        self._landed(batch)
        self._incomplete.discard(batch)
        self.pool.release(batch.reserved_bytes)
        batch.reserved_bytes = 0
        callbacks = batch.done_callbacks
        if callbacks:  # most batches have none: no new empty list per batch
            batch.done_callbacks = []
            for callback in callbacks:
                callback()

    def _landed(self, batch: ProducerBatch) -> None:
        """The batch's attempt is over (answered, abandoned, split or settled): it is no longer on the wire."""
        if batch.in_flight:
            batch.in_flight = False
            count = self._in_flight_batches[batch.tp] - 1
            if count:
                self._in_flight_batches[batch.tp] = count
            else:
                del self._in_flight_batches[batch.tp]

    def expired(self, now_ms: int, delivery_timeout_ms: int) -> list[ProducerBatch]:
        """Queued (not in-flight) batches whose delivery timeout has passed, removed from their queues."""
        expired: list[ProducerBatch] = []
        for queue in self.queues.values():
            while queue and now_ms - queue[0].created_ms >= delivery_timeout_ms:
                batch = queue.popleft()
                batch.seal()  # a batch out of its queue takes no more records
                expired.append(batch)
        return expired

    def next_expiry_ms(self, delivery_timeout_ms: int) -> int | None:
        """When the oldest queued head batch reaches its delivery timeout (None: nothing queued)."""
        heads = [queue[0].created_ms for queue in self.queues.values() if queue]
        return min(heads) + delivery_timeout_ms if heads else None

    def take_all_queued(self) -> list[ProducerBatch]:
        """Every batch not in flight, removed from the queues (for close after its timeout)."""
        batches = [batch for queue in self.queues.values() for batch in queue]
        self.queues.clear()
        for batch in batches:
            batch.seal()  # a batch out of its queue takes no more records
        return batches

    def take_unsent(self) -> list[ProducerBatch]:
        """Every queued batch never sent (never stamped with a sequence), removed from its queue; retries stay."""
        unsent: list[ProducerBatch] = []
        for queue in self.queues.values():
            if any(batch.base_sequence == NO_SEQUENCE for batch in queue):
                keep = [batch for batch in queue if batch.base_sequence != NO_SEQUENCE]
                unsent.extend(batch for batch in queue if batch.base_sequence == NO_SEQUENCE)
                queue.clear()
                queue.extend(keep)
        for batch in unsent:
            batch.seal()  # a batch out of its queue takes no more records
        return unsent

    def queued_batches(self) -> Iterable[ProducerBatch]:
        for queue in self.queues.values():
            yield from queue

    def has_queued(self) -> bool:
        return any(self.queues.values())


def _leader_changed(batch: ProducerBatch, leader: int, leader_epoch: int) -> bool:
    """Whether the partition's leader moved since the batch's last attempt: its retry then skips the backoff (Java's
    ProducerBatch.hasLeaderChangedForTheOngoingRetry, by leader epoch; by leader id when no epoch is known)."""
    if leader_epoch >= 0 and batch.leader_epoch >= 0:
        return leader_epoch > batch.leader_epoch
    return batch.leader_id >= 0 and leader != batch.leader_id


def _call_when_all_done(batches: Sequence[ProducerBatch], callbacks: list[Callable[[], None]]) -> None:
    """Run `callbacks` once every one of `batches` is released (a split batch is done when its halves are)."""
    remaining = len(batches)

    def one_done() -> None:
        nonlocal remaining
        remaining -= 1
        if remaining == 0:
            for callback in callbacks:
                callback()

    for batch in batches:
        batch.done_callbacks.append(one_done)
