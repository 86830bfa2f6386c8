"""Closing drained batches for the wire: compress the records, stamp the header, checksum it; pure.

Owns the byte work between a batch leaving the accumulator and its bytes going into a Produce request. Every
decision was taken before, on the event loop: which batches go, with which producer id, epoch and base sequence.
This twin does the work at once, on the caller's thread (the sender then paces compression on the loop, see
`compression_pacing`). Its compiled twin (`_pipeline.pyx`) hands compressed batches to one worker thread that
compresses and checksums them in C without the GIL, while the loop goes on appending: `submit` then returns None
and the finished batch comes back from `completed()` once `fileno()` is readable, in the order submitted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aioproducer.accelerated import compiled_twin
from aioproducer.records.compression import CompressionType

__all__ = ["BatchPipeline", "PureBatchPipeline", "effective_level"]

# The level each codec runs at when none is set (compression.compress's defaults; lz4's 0 is its fast mode).
_DEFAULT_LEVELS = {CompressionType.GZIP: -1, CompressionType.LZ4: 0, CompressionType.ZSTD: 3}


def effective_level(compression: CompressionType, level: int | None) -> int:
    """The level a codec runs at: `level`, or the codec's default."""
    return _DEFAULT_LEVELS.get(compression, 0) if level is None else level


class BatchPipeline:
    """Closes and encodes batches. This twin works at once: `submit` returns the batch's bytes."""

    __slots__ = ("_compression",)

    # Whether `submit` may return before the work is done (the compiled twin, for a codec it runs natively).
    off_loop = False

    def __init__(self, compression: CompressionType, compression_level: int | None) -> None:
        self._compression = compression

    def fileno(self) -> int:
        """A file descriptor readable when `completed()` has batches to give (-1: never, all work is done at once)."""
        return -1

    @property
    def pending(self) -> int:
        """Batches submitted and not given back by `completed()` yet."""
        return 0

    def submit(
        self, batch: Any, producer_id: int, producer_epoch: int, base_sequence: int, transactional: bool
    ) -> bytes | None:
        """The batch's bytes on the wire, stamped as given (closing it first when it is not closed yet), or None
        when the work goes on beside the loop (see `completed`)."""
        closed = batch.close()
        return closed.encode(  # type: ignore[no-any-return]
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            transactional=transactional,
        )

    def completed(self) -> list[tuple[Any, bytes | BaseException]]:
        """Batches whose work beside the loop is done, in the order submitted: each with its bytes, or with the
        error its codec failed with."""
        return []

    def shutdown(self) -> None:
        """Finish the batches submitted (they still come out of `completed()`) and stop any worker."""


# The compiled twin, when built with native codecs (see aioproducer.accelerated).
PureBatchPipeline = BatchPipeline
_twin = compiled_twin("aioproducer.send._pipeline")
if not TYPE_CHECKING and _twin is not None:
    BatchPipeline = _twin.BatchPipeline
