"""Where batches are compressed when the compiled pipeline cannot take them (the pure-Python twin, or a codec built
without its native library): on the event loop while that is short, in a worker thread when it would be long; and
how far batches may grow for their compression to stay short. The producer tests below run on the pure twins."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from aioproducer import Producer, RecordMetadata
from aioproducer.records.compression import CompressionType
from aioproducer.send.compression_pacing import ON_LOOP_BUDGET_NS, CompressionPacer
from aioproducer.testing import read_back
from tests.twins import use_twin


def test_batches_grow_further_with_faster_codecs() -> None:
    limits = {codec: CompressionPacer(codec, None).largest_on_loop() for codec in CompressionType}
    assert limits[CompressionType.NONE] > limits[CompressionType.LZ4] > limits[CompressionType.ZSTD]
    assert limits[CompressionType.ZSTD] > limits[CompressionType.GZIP] > 16 * 1024 * 2
    for codec in CompressionType:
        assert not CompressionPacer(codec, None).off_loop(limits[codec])


def test_a_pass_compresses_its_first_batch_and_leaves_the_rest_for_the_next_once_its_budget_is_used() -> None:
    pacer = CompressionPacer(CompressionType.ZSTD, None)
    batch = pacer.largest_on_loop() // 2
    assert pacer.fits(batch, 0) and pacer.fits(batch, ON_LOOP_BUDGET_NS // 3)
    assert not pacer.fits(batch, ON_LOOP_BUDGET_NS * 2 // 3)
    assert pacer.fits(pacer.largest_on_loop() * 2, 0)  # the first one always


def test_a_chosen_level_starts_cautious_until_measured() -> None:
    pacer = CompressionPacer(CompressionType.ZSTD, 19)
    assert pacer.off_loop(256 * 1024)
    for _ in range(20):
        pacer.measured(256 * 1024, 500_000)  # it turned out fast
    assert not pacer.off_loop(256 * 1024) and pacer.largest_on_loop() > 256 * 1024


def test_the_learnt_speed_follows_what_was_measured() -> None:
    pacer = CompressionPacer(CompressionType.LZ4, None)
    size = 100_000
    for _ in range(30):
        pacer.measured(size, 3 * ON_LOOP_BUDGET_NS)  # this machine is slow: three times the budget per batch
    assert pacer.off_loop(size) and not pacer.off_loop(size // 4)
    assert size // 4 < pacer.largest_on_loop() < size // 2
    pacer.measured(0, 10**9)  # an empty batch teaches nothing
    assert pacer.off_loop(size)


async def test_a_batch_too_slow_for_the_loop_is_compressed_in_a_worker_thread(
    tansu_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_twin(monkeypatch, "pure")
    # gzip at level 9 over 1 MiB batches of random bytes takes tens of ms each: far past the budget, so off the loop.
    records = [b"%05d-" % i + os.urandom(1000) for i in range(3000)]
    before = set(threading.enumerate())
    async with Producer(
        tansu_bootstrap,
        compression_type="gzip",
        compression_level=9,
        batch_size=1 << 20,
        linger_ms=50,
        max_in_flight_requests_per_connection=1,
    ) as producer:
        results = await producer.send_many([("pacing", value, None, None, 0, None) for value in records])
        workers = [thread for thread in set(threading.enumerate()) - before if thread.name.startswith("asyncio_")]
    assert all(isinstance(r, RecordMetadata) for r in results), results[:3]
    assert workers, "no batch was compressed in a worker thread"
    stored = await asyncio.to_thread(read_back, tansu_bootstrap, "pacing")
    assert [r.value for r in stored] == records


async def test_grown_batches_stay_within_what_the_codec_compresses_in_the_budget(
    tansu_bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_twin(monkeypatch, "pure")
    records = [b"%05d-" % i + os.urandom(1000) for i in range(3000)]
    async with Producer(tansu_bootstrap, compression_type="gzip", max_in_flight_requests_per_connection=1) as producer:
        results = await producer.send_many([("pacing-gzip", value, None, None, 0, None) for value in records])
        largest = producer.metrics().producer["batch-size-max"]
    assert all(isinstance(r, RecordMetadata) for r in results), results[:3]
    # gzip's typical ~25 ns per byte: about 40 KB fit the budget, against the 1 MiB compressed batches may grow to.
    assert 16 * 1024 < largest < 128 * 1024, largest
