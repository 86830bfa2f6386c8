"""examples/exactly_once.py against real Kafka: a consumer group, a transform that fails once mid-batch, and every
payment in the output exactly once for read_committed readers, with the group's offsets at the end of the input."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import time
import uuid
from pathlib import Path
from types import ModuleType

import pytest

from aioproducer import Producer, ProducerRecord
from aioproducer.testing import KafkaCluster, read_back

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.timeout(180)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "exactly_once.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("exactly_once_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_to_cents() -> None:
    example = load_example()
    for amount, cents in [("12.34", 1234), ("0.5", 50), ("7", 700), ("3.999", 399)]:
        assert json.loads(example.to_cents(json.dumps({"id": 1, "amount": amount}).encode())) == {
            "id": 1,
            "cents": cents,
        }


async def test_every_payment_once_despite_an_aborted_batch(kafka_cluster: KafkaCluster) -> None:
    example = load_example()
    bootstrap = kafka_cluster.bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    source = kafka_cluster.create_topic(f"payments-{suffix}", 2)
    sink = kafka_cluster.create_topic(f"cents-{suffix}", 2)
    payments = [{"id": n, "amount": f"{n}.{n % 100:02d}"} for n in range(200)]
    async with Producer(bootstrap) as plain:
        records = [ProducerRecord(source, json.dumps(p).encode(), key=str(p["id"]).encode()) for p in payments]
        assert all(not isinstance(r, BaseException) for r in await plain.send_many(records))

    failures = iter([True])  # the 50th payment seen fails once: its whole batch is aborted and read again
    seen = 0

    def flaky_to_cents(value: bytes) -> bytes:
        nonlocal seen
        seen += 1
        if seen == 50 and next(failures, False):
            raise RuntimeError("transform failed")
        out: bytes = example.to_cents(value)
        return out

    consumer = example.new_consumer(bootstrap, f"cents-{suffix}", source)
    stop = asyncio.Event()

    async def stop_when_all_committed() -> None:
        deadline = time.monotonic() + 120
        while len(read_back(bootstrap, sink, isolation_level="read_committed", timeout_s=10)) < len(payments):
            assert time.monotonic() < deadline, "the pipeline did not commit every payment"
            await asyncio.sleep(0.5)
        stop.set()

    try:
        async with Producer(bootstrap, transactional_id=f"cents-{suffix}", linger_ms=5) as producer:
            committed, _ = await asyncio.gather(
                example.run(consumer, producer, sink, stop, transform=flaky_to_cents, batch_size=40),
                stop_when_all_committed(),
            )
        positions = consumer.committed([confluent_kafka.TopicPartition(source, p) for p in range(2)], timeout=10)
    finally:
        consumer.close()
    assert committed == len(payments)
    assert sum(tp.offset for tp in positions) == len(payments)
    output = [json.loads(r.value or b"") for r in read_back(bootstrap, sink, isolation_level="read_committed")]
    assert sorted(o["id"] for o in output) == list(range(200))
    assert all(o["cents"] == int(p["amount"].replace(".", "")) for o in output for p in [payments[o["id"]]])
    assert seen > len(payments), "the aborted batch was processed twice, yet committed once"
