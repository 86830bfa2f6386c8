"""The batch pipeline: closing a drained batch for the wire (compress, stamp, CRC-32C), at once in the pure twin and
on a worker thread in C in the compiled one. Both twins' bytes are read back by independent readers (aiokafka's C
reader validates the CRC and decompresses every codec). What only the compiled twin has (its worker, its CRC-32C)
is tested in test_speedups.py."""

from __future__ import annotations

import asyncio
import os
import random
import select
import time
from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AiokafkaBatch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from aioproducer import Producer, RecordMetadata
from aioproducer.buffer import batch as batch_module
from aioproducer.config import _GROWN_BATCH_DEFAULT
from aioproducer.deliveries.delivery import BatchOutcome
from aioproducer.errors import InvalidRecordError, ProducerClosedError
from aioproducer.records import builder as builder_module
from aioproducer.records.compression import CompressionType
from aioproducer.send import pipeline as pipeline_module
from aioproducer.testing import read_back
from tests.twins import TWINS, use_twin

CODECS = list(CompressionType)
TS = 1_700_000_000_000


@pytest.fixture(autouse=True, params=TWINS)
def twin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    use_twin(monkeypatch, request.param)
    return request.param  # type: ignore[no-any-return]


def records_of(rng: random.Random, count: int, compressible: bool = True) -> list[tuple[Any, ...]]:
    rows = []
    for i in range(count):
        key = None if rng.random() < 0.3 else rng.randbytes(rng.randint(0, 20))
        value = (
            None
            if rng.random() < 0.1
            else (b"payload %d " % i * rng.randint(0, 30) if compressible else rng.randbytes(rng.randint(0, 300)))
        )
        headers = [(f"h{j}", None if rng.random() < 0.2 else rng.randbytes(3)) for j in range(rng.randint(0, 2))]
        rows.append((TS + rng.randint(-5, 5), key, value, headers))
    return rows


def filled_batch(codec: CompressionType, rows: list[tuple[Any, ...]]) -> Any:
    builder = builder_module.BatchBuilder(compression=codec, size_limit=1 << 30)
    for row in rows:
        assert builder.try_append(*row) is not None
    return batch_module.ProducerBatch(("t", 0), builder, 0, BatchOutcome("t", 0, None))


def wait_completed(pipeline: Any, expected: int) -> list[tuple[Any, Any]]:
    done: list[tuple[Any, Any]] = []
    deadline = time.monotonic() + 10
    while len(done) < expected:
        assert time.monotonic() < deadline, "the pipeline's worker did not finish"
        select.select([pipeline.fileno()], [], [], 1)
        done += pipeline.completed()
    return done


def close_now_or_later(codec: CompressionType, batch: Any, stamp: tuple[int, int, int, bool]) -> bytes:
    pipeline = pipeline_module.BatchPipeline(codec, None)
    try:
        encoded = pipeline.submit(batch, *stamp)
        if encoded is None:
            assert pipeline.off_loop and pipeline.pending == 1
            ((finished, encoded),) = wait_completed(pipeline, 1)
            assert finished is batch and pipeline.pending == 0
        assert isinstance(encoded, bytes) and batch.closed is not None and batch.builder is None
        return encoded
    finally:
        pipeline.shutdown()


def read(encoded: bytes) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    batch = AiokafkaBatch(encoded)
    assert batch.validate_crc()
    meta = {
        "compression": batch.compression_type,
        "producer": (batch.producer_id, batch.producer_epoch, batch.base_sequence),
        "transactional": batch.is_transactional,
    }
    return meta, [(r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in batch]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32), codec=st.sampled_from(CODECS), transactional=st.booleans())
# Seed 20647 under gzip gives rows gzip cannot shrink: the test once demanded the codec regardless.
@example(seed=20647, codec=CompressionType.GZIP, transactional=False)
def test_a_closed_batch_reads_back_exactly_with_its_stamp(
    seed: int, codec: CompressionType, transactional: bool
) -> None:
    rng = random.Random(seed)
    rows = records_of(rng, rng.randint(1, 200))
    stamp = (rng.randint(0, 2**40), rng.randint(0, 32767), rng.randint(0, 2**31 - 1), transactional)
    encoded = close_now_or_later(codec, filled_batch(codec, rows), stamp)
    meta, read_rows = read(encoded)
    assert read_rows == [(t, k, v, [tuple(h) for h in hs]) for t, k, v, hs in rows]
    assert meta["producer"] == stamp[:3] and meta["transactional"] is transactional
    if meta["compression"] != codec:
        # Regression: a codec that does not shrink the records (one short random row) is dropped for none, as
        # BatchBuilder.close says librdkafka does; this test expected the codec whatever, and failed on every run
        # under CI=true, where hypothesis draws the same examples each time. The batch is then the uncompressed one.
        assert meta["compression"] == CompressionType.NONE
        assert encoded == close_now_or_later(CompressionType.NONE, filled_batch(CompressionType.NONE, rows), stamp)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_the_twins_write_the_same_batch(codec: CompressionType) -> None:
    """The same records and stamp give the same header, the same records and the same codec through both twins; for
    none and gzip (the same zlib on both paths) the same bytes."""
    rows = records_of(random.Random(7), 150)
    stamp = (11, 2, 40, False)
    with pytest.MonkeyPatch.context() as monkeypatch:
        use_twin(monkeypatch, "pure")
        pure = close_now_or_later(codec, filled_batch(codec, rows), stamp)
    twin = close_now_or_later(codec, filled_batch(codec, rows), stamp)
    assert read(pure) == read(twin)
    if codec in (CompressionType.NONE, CompressionType.GZIP):
        assert pure == twin


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4], ids=["none", "lz4"])
def test_a_batch_of_the_other_twin_is_closed_as_the_pure_twin_does(codec: CompressionType) -> None:
    """The compiled pipeline read any batch as its own twin's: a pure ProducerBatch around a compiled builder raised
    TypeError rather than being closed. Such a batch now goes the pure way, and reads back with its stamp."""
    rows = records_of(random.Random(3), 40)
    builder = builder_module.BatchBuilder(compression=codec, size_limit=1 << 30)
    for row in rows:
        assert builder.try_append(*row) is not None
    batch = batch_module.PureProducerBatch(("t", 0), builder, 0, BatchOutcome("t", 0, None))
    meta, read_rows = read(close_now_or_later(codec, batch, (5, 1, 9, True)))
    assert read_rows == [(t, k, v, [tuple(h) for h in hs]) for t, k, v, hs in rows]
    assert meta["producer"] == (5, 1, 9) and meta["transactional"] is True


@pytest.mark.parametrize("codec", [CompressionType.LZ4, CompressionType.ZSTD, CompressionType.SNAPPY])
def test_records_compression_cannot_shrink_go_out_uncompressed(codec: CompressionType) -> None:
    rows = [(TS, None, os.urandom(50), [])]
    encoded = close_now_or_later(codec, filled_batch(codec, rows), (1, 0, 0, False))
    meta, read_rows = read(encoded)
    assert meta["compression"] == CompressionType.NONE and read_rows == [(TS, None, rows[0][2], [])]


def test_a_retry_is_stamped_again_from_its_closed_records() -> None:
    """A batch sent before keeps its compressed records: a retry with a new epoch re-stamps the header only."""
    batch = filled_batch(CompressionType.LZ4, records_of(random.Random(3), 50))
    first = close_now_or_later(CompressionType.LZ4, batch, (5, 1, 10, False))
    again = close_now_or_later(CompressionType.LZ4, batch, (5, 2, 0, False))
    assert read(first)[1] == read(again)[1]
    assert read(again)[0]["producer"] == (5, 2, 0)
    assert first[61:] == again[61:]  # the same compressed section


def test_an_uncompressed_retry_is_stamped_again_from_its_first_bytes() -> None:
    """Uncompressed, the compiled twin closes a batch at once with its section a view into the bytes it sent: a retry
    re-stamps the same section, as the pure twin's would."""
    rows = records_of(random.Random(5), 80)
    batch = filled_batch(CompressionType.NONE, rows)
    first = close_now_or_later(CompressionType.NONE, batch, (5, 1, 10, False))
    again = close_now_or_later(CompressionType.NONE, batch, (5, 2, 0, True))
    with pytest.MonkeyPatch.context() as monkeypatch:
        use_twin(monkeypatch, "pure")
        pure = close_now_or_later(CompressionType.NONE, filled_batch(CompressionType.NONE, rows), (5, 2, 0, True))
    assert first[61:] == again[61:] and again == pure
    assert read(again)[0]["producer"] == (5, 2, 0) and read(again)[0]["transactional"]


@pytest.mark.parametrize("twin", TWINS)
def test_a_stamp_out_of_range_is_refused_alike(twin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    use_twin(monkeypatch, twin)
    batch = filled_batch(CompressionType.NONE, records_of(random.Random(1), 3))
    with pytest.raises(InvalidRecordError):
        close_now_or_later(CompressionType.NONE, batch, (1, 1 << 15, 0, False))


@pytest.mark.parametrize("codec", ["lz4", "zstd", "snappy", "gzip"])
async def test_compressed_batches_grow_and_read_back_exactly(tansu_bootstrap: str, codec: str, twin: str) -> None:
    """With the compiled pipeline a compressed batch is closed beside the loop, so batches may grow to 1 MiB (the
    pure twin still bounds them by what compresses in its budget on the loop); either way every record arrives."""
    topic = f"pipeline-{codec}-{twin}"
    records = [b"%06d " % i + b"json-like payload " * 50 for i in range(4000)]
    async with Producer(tansu_bootstrap, compression_type=codec, linger_ms=20) as producer:
        off_loop = producer._sender._pipeline.off_loop
        results = await producer.send_many([(topic, value, None, None, 0, None) for value in records])
        per_request = producer.metrics().producer["records-per-request-avg"]
    assert all(isinstance(r, RecordMetadata) for r in results), results[:3]
    assert off_loop is (twin == "compiled")
    if off_loop:
        # One partition, one batch per request: a batch that held more records than fit in the pure twin's bound
        # (256 KiB uncompressed) grew beside the loop. (The threshold was 400 once; under load, requests went out
        # with exactly 400 records each, grown well past the bound, and the test failed on a number it never meant.)
        records_within_the_bound = _GROWN_BATCH_DEFAULT // len(records[0])
        assert per_request > records_within_the_bound, per_request
    stored = await read_back_async(tansu_bootstrap, topic)
    assert stored == records


async def read_back_async(bootstrap: str, topic: str) -> list[bytes]:
    return [r.value for r in await asyncio.to_thread(read_back, bootstrap, topic)]


@pytest.mark.parametrize("close_timeout", [0.0, None], ids=["close(0)", "close()"])
async def test_closing_while_batches_are_on_the_worker_resolves_every_record(
    tansu_bootstrap: str, twin: str, close_timeout: float | None
) -> None:
    """A producer closed while its slow codec still has batches on the pipeline's worker: every record resolves
    (delivered, or ProducerClosedError), none is lost or left pending, and what was delivered reads back once."""
    topic = f"pipeline-close-{twin}-{close_timeout}"
    values = [b"%06d " % i + b"slow to compress " * 60 for i in range(3000)]
    producer = Producer(tansu_bootstrap, compression_type="zstd", compression_level=19, linger_ms=0)
    await producer.start()
    deliveries = [await producer.enqueue(topic, value, partition=0) for value in values]
    await asyncio.sleep(0.01)
    await asyncio.wait_for(producer.close(close_timeout), 60)
    results = await asyncio.wait_for(producer.wait(deliveries), 10)
    delivered = [values[n] for n, r in enumerate(results) if isinstance(r, RecordMetadata)]
    assert all(isinstance(r, RecordMetadata | ProducerClosedError) for r in results), {type(r) for r in results}
    if close_timeout is None:
        assert len(delivered) == len(values)
    stored = await read_back_async(tansu_bootstrap, topic)
    assert stored[: len(delivered)] == delivered and set(stored) <= set(values)
