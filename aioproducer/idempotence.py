"""Idempotent-producer state: producer id/epoch and the sequence bookkeeping per partition; pure.

Rules kept here (Java's TransactionManager, KIP-98 / KIP-360):
- a new batch takes the partition's next sequence when it is first drained; sequences wrap to 0 after 2^31-1;
- a batch that is retried keeps its sequence and may only go out again as the *first* in-flight batch of its
  partition, so the broker never sees a gap created by us;
- OUT_OF_ORDER_SEQUENCE for a batch that is not the first in flight means an earlier batch failed: retry it;
- when sequences can no longer be trusted (a batch failed for good, UNKNOWN_PRODUCER_ID), the epoch is bumped and
  every partition starts again at sequence 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["NO_PRODUCER_EPOCH", "NO_PRODUCER_ID", "NO_SEQUENCE", "IdempotenceState", "increment_sequence"]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
_MAX_SEQUENCE = 2**31 - 1

TopicPartition = tuple[str, int]


def increment_sequence(sequence: int, increment: int) -> int:
    """Java's DefaultRecordBatch.incrementSequence: sequences wrap to 0 after Integer.MAX_VALUE."""
    if sequence > _MAX_SEQUENCE - increment:
        return increment - (_MAX_SEQUENCE - sequence) - 1
    return sequence + increment


@dataclass
class _PartitionSequences:
    next_sequence: int = 0
    last_acked: int = NO_SEQUENCE
    in_flight: list[int] = field(default_factory=list)  # base sequences in send order


class IdempotenceState:
    """Producer identity and per-partition sequences. `enabled=False` makes every method a cheap no-op."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self._partitions: dict[TopicPartition, _PartitionSequences] = {}
        self.reset_pending = False

    @property
    def has_producer_id(self) -> bool:
        return not self.enabled or self.producer_id != NO_PRODUCER_ID

    def set_producer_id(self, producer_id: int, producer_epoch: int) -> None:
        """A fresh identity (or bumped epoch): every partition starts again at sequence 0."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self._partitions.clear()
        self.reset_pending = False

    def _state(self, tp: TopicPartition) -> _PartitionSequences:
        state = self._partitions.get(tp)
        if state is None:
            state = self._partitions[tp] = _PartitionSequences()
        return state

    def assign(self, tp: TopicPartition, record_count: int) -> int:
        """The base sequence for a batch drained for the first time."""
        state = self._state(tp)
        base = state.next_sequence
        state.next_sequence = increment_sequence(base, record_count)
        state.in_flight.append(base)
        return base

    def may_send_retry(self, tp: TopicPartition, base_sequence: int) -> bool:
        """A retried batch goes out only as the first in-flight batch of its partition."""
        state = self._partitions.get(tp)
        return state is None or not state.in_flight or state.in_flight[0] == base_sequence

    def is_first_in_flight(self, tp: TopicPartition, base_sequence: int) -> bool:
        state = self._partitions.get(tp)
        return state is not None and bool(state.in_flight) and state.in_flight[0] == base_sequence

    def on_success(self, tp: TopicPartition, base_sequence: int, record_count: int) -> None:
        state = self._partitions.get(tp)
        if state is None:
            return
        if base_sequence in state.in_flight:
            state.in_flight.remove(base_sequence)
        state.last_acked = increment_sequence(base_sequence, record_count - 1)

    def on_dropped(self, tp: TopicPartition, base_sequence: int) -> None:
        """A batch with a sequence failed for good: later sequences now have a gap, so the epoch must be bumped."""
        state = self._partitions.get(tp)
        if state is None or base_sequence not in state.in_flight:
            return
        state.in_flight.remove(base_sequence)
        self.reset_pending = True
