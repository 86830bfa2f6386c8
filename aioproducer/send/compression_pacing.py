"""Where a batch is compressed, on the event loop or in a worker thread, from how long it is expected to take.

Handing a batch to a thread costs more than its compression in place unless the compression is long: the thread
wakes, and the GIL changes hands twice while the loop keeps appending records. Measured with 1 KB records on two
cores, compressing every batch of 64 KiB or more in a thread cost 20-35 % more CPU per record than compressing it on
the loop, with lz4, snappy and zstd alike, and was no faster. So batches grow under load (see the accumulator)
only as far as their compression fits `budget_ns` on the loop; a batch goes to a thread only when even that is
too long (a large `batch_size`, a slow level); and a pass of the sender that has used its budget leaves the next
ready batches to its next pass. The speed is learnt from this producer's own batches (its codec, its level, its
data, this machine), as an exponentially weighted mean of nanoseconds per input byte.
"""

from __future__ import annotations

from aioproducer.records.compression import CompressionType

__all__ = ["CompressionPacer"]

# What compression may hold the event loop for in one pass of the sender (which may find several partitions'
# batches ready at once; the others wait for the next pass). A timer due during one pass may wait for that pass and
# the next, so this is under half the loop-lag goal: a p99 below 5 ms while compressing flat out.
ON_LOOP_BUDGET_NS = 1_000_000
# Starting points before this producer has measured its own (default levels, 1 KB records of text, one core).
_TYPICAL_NS_PER_BYTE = {
    CompressionType.NONE: 0.0,
    CompressionType.GZIP: 25.0,
    CompressionType.SNAPPY: 2.5,
    CompressionType.LZ4: 2.0,
    CompressionType.ZSTD: 7.0,
}
_WEIGHT = 0.25  # of the newest measurement in the mean: a changed workload shows within a few batches


class CompressionPacer:
    """Learns this producer's compression speed and says which batches to compress off the event loop."""

    __slots__ = ("budget_ns", "ns_per_byte")

    def __init__(self, codec: CompressionType, level: int | None, budget_ns: int = ON_LOOP_BUDGET_NS) -> None:
        self.budget_ns = budget_ns
        self.ns_per_byte = _TYPICAL_NS_PER_BYTE[codec]
        if level is not None and codec is not CompressionType.NONE:
            # A chosen level may be far slower than the default (zstd 19, lz4hc): start cautious, learn the rest.
            self.ns_per_byte *= 10

    def off_loop(self, size_bytes: int) -> bool:
        """Whether a batch of `size_bytes` (uncompressed) is too slow to compress on the loop at all: over twice
        the budget (batches the pacer let grow take about the budget, give or take the speed's noise)."""
        return size_bytes * self.ns_per_byte > 2 * self.budget_ns

    def fits(self, size_bytes: int, spent_ns: int) -> bool:
        """Whether a pass of the sender that compressed on the loop for `spent_ns` may also compress this batch
        (the first batch of a pass always may)."""
        return spent_ns == 0 or spent_ns + size_bytes * self.ns_per_byte <= self.budget_ns

    def largest_on_loop(self) -> int:
        """The most bytes a batch may hold for its compression to fit the budget (batches stop growing there)."""
        return int(self.budget_ns / self.ns_per_byte) if self.ns_per_byte > 0 else 1 << 62

    def measured(self, size_bytes: int, elapsed_ns: int) -> None:
        """A batch of `size_bytes` took `elapsed_ns` to compress."""
        if size_bytes > 0:
            self.ns_per_byte += _WEIGHT * (elapsed_ns / size_bytes - self.ns_per_byte)
