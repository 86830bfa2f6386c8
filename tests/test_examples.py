"""The examples do what they claim, run for real: against the test broker, under SIGTERM, and with MockProducer."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from aioproducer.errors import BufferExhaustedError
from aioproducer.kafka_errors import NotEnoughReplicasError
from aioproducer.testing import DEFAULT_KAFKA_VERSION, ConsumedRecord, MockProducer

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def orders_by_customer(records: list[ConsumedRecord]) -> dict[bytes | None, list[int]]:
    """Each customer's order sequence numbers in the order a consumer reads them (offset order)."""
    seen: dict[bytes | None, list[int]] = {}
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        seen.setdefault(record.key, []).append(json.loads(record.value or b"")["sequence"])
    return seen


async def test_asyncio_service_keeps_each_customers_orders_in_order(
    bootstrap: str, topic_factory: Callable[..., str], read_back_records: Callable[..., list[ConsumedRecord]]
) -> None:
    topic = topic_factory(3)
    counts = await load("asyncio_service").run_service(bootstrap, topic, 3000, customers=11)
    assert (counts.published, counts.failed) == (3000, 0)
    records = read_back_records(topic)
    assert len(records) == 3000
    by_customer = orders_by_customer(records)
    assert len(by_customer) == 11
    for key, sequences in by_customer.items():
        assert sequences == list(range(len(sequences))), f"customer {key!r} out of order"
        assert len({r.partition for r in records if r.key == key}) == 1


def test_asyncio_service_stops_on_sigterm_and_loses_nothing_it_took(
    bootstrap: str, topic_factory: Callable[..., str], read_back_records: Callable[..., list[ConsumedRecord]]
) -> None:
    topic = topic_factory(3)
    command = [sys.executable, str(EXAMPLES / "asyncio_service.py"), "--bootstrap", bootstrap, "--topic", topic]
    process = subprocess.Popen(
        [*command, "--orders", "100000000", "--customers", "50"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        # It runs (start() logs its connection first, at INFO): let it publish for a while.
        lines = iter(process.stderr.readline, "")
        assert any("publishing" in line for line in lines)
        time.sleep(2)
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, stderr
    published = int(stdout.split()[1])
    assert published > 0 and stdout.strip() == f"published {published} orders, 0 failed"
    records = read_back_records(topic)
    assert len(records) == published
    for key, sequences in orders_by_customer(records).items():
        assert sequences == list(range(len(sequences))), f"customer {key!r}: a gap or a reorder"


async def test_asyncio_service_queue_is_bounded(mock_producer: MockProducer) -> None:
    service = load("asyncio_service")
    publisher = service.OrderPublisher(mock_producer, "orders", queue_size=5)
    for n in range(5):
        await publisher.submit(service.Order(0, n, n))
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(publisher.submit(service.Order(0, 5, 5)), 0.2)  # full: the intake waits
    running = asyncio.ensure_future(publisher.run())
    await publisher.stop()
    counts = await running
    assert (counts.published, counts.failed) == (5, 0)
    assert [json.loads(r.value or b"")["sequence"] for r in mock_producer.records("orders")] == [0, 1, 2, 3, 4]


@pytest.mark.mock_producer(value_serializer="json", key_serializer="str")  # as the app's own producer
async def test_fastapi_app_with_the_mock_producer_fixture(
    mock_producer: MockProducer, caplog: pytest.LogCaptureFixture
) -> None:
    example = load("fastapi_app")
    app = example.create_app()
    app.dependency_overrides[example.get_producer] = lambda: mock_producer
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        ok = await client.post("/events/clicks", json={"user": "ada", "page": "/"})
        not_allowed = await client.post("/events/payments", json={"user": "ada"})
        accepted = await client.post("/events/orders/async", json={"user": "bob", "total": 3})
        mock_producer.inject_error(NotEnoughReplicasError("only one replica in sync"))
        with caplog.at_level(logging.ERROR, logger="events"):
            failed_later = await client.post("/events/orders/async", json={"user": "eve"})
            await asyncio.sleep(0)  # the done-callback runs on the loop
        mock_producer.send_error = BufferExhaustedError("buffer full")
        busy = await client.post("/events/clicks", json={"user": "ada"})
    assert ok.status_code == 200 and ok.json() == {"topic": "web.clicks", "partition": 0, "offset": 0}
    assert not_allowed.status_code == 422  # not on the allow-list: never becomes a topic name
    assert accepted.status_code == 202 and failed_later.status_code == 202
    assert "event not delivered" in caplog.text and "only one replica in sync" in caplog.text
    assert busy.status_code == 503 and busy.headers["retry-after"] == "5"
    assert [(r.key, json.loads(r.value or b"")) for r in mock_producer.records("web.clicks")] == [
        (b"ada", {"user": "ada", "page": "/"})
    ]
    assert [r.key for r in mock_producer.records("shop.orders")] == [b"bob"]
    assert {r.topic for r in mock_producer.history()} == {"web.clicks", "shop.orders"}


async def test_fastapi_shutdown_is_bounded_and_logs_what_it_could_not_deliver(caplog: pytest.LogCaptureFixture) -> None:
    example = load("fastapi_app")
    settings = example.Settings(shutdown_grace_s=0.5)

    def slow_broker(_: object) -> MockProducer:  # acknowledgements that would take a minute
        return MockProducer(latency_ms=60_000, value_serializer="json", key_serializer="str")

    app = example.create_app(settings, producer_factory=slow_broker)
    loop = asyncio.get_running_loop()
    with caplog.at_level(logging.ERROR, logger="events"):
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
                answers = [await client.post("/events/clicks/async", json={"user": f"u{i}"}) for i in range(3)]
            stopping = loop.time()
        took = loop.time() - stopping
        await asyncio.sleep(0)
    assert [a.status_code for a in answers] == [202] * 3
    assert 0.45 <= took < 5
    assert caplog.text.count("event not delivered: ProducerClosedError") == 3


async def test_fastapi_app_publishes_to_kafka(
    bootstrap: str, topic_factory: Callable[..., str], read_back_records: Callable[..., list[ConsumedRecord]]
) -> None:
    example = load("fastapi_app")
    topic = topic_factory(2)
    app = example.create_app(example.Settings(bootstrap=bootstrap, topics={example.EventKind.clicks: topic}))
    # The app's own lifespan opens and closes the producer, as a server would run it.
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            answers = [await client.post("/events/clicks", json={"user": f"u{i}", "n": i}) for i in range(5)]
            later = await client.post("/events/clicks/async", json={"user": "u5", "n": 5})
            ready = await client.get("/ready")
            scraped = await client.get("/metrics")
    assert [a.status_code for a in answers] == [200] * 5 and later.status_code == 202
    assert ready.status_code == 200 and ready.json()["ready"] is True and ready.json()["brokers"]
    sent = [line for line in scraped.text.splitlines() if line.startswith("aioproducer_topic_record_send_total{")]
    assert len(sent) == 1 and f'topic="{topic}"' in sent[0] and float(sent[0].split()[-1]) >= 5
    records = read_back_records(topic)
    assert sorted(json.loads(r.value or b"")["n"] for r in records) == list(range(6))
    assert {r.key for r in records} == {f"u{i}".encode() for i in range(6)}
    assert {(r.partition, r.offset) for r in records} >= {(a.json()["partition"], a.json()["offset"]) for a in answers}


def test_demo_produces_reads_back_and_reports(bootstrap: str, capsys: pytest.CaptureFixture[str]) -> None:
    demo = load("demo")
    assert demo.main(["--bootstrap", bootstrap, "--records", "3000", "--compression", "zstd", "--partitions", "3"]) == 0
    out = capsys.readouterr().out
    assert "delivered 3,000 records, failed 0" in out
    assert "read back 3,000 records" in out and "OK: every record" in out


def test_demo_starts_real_kafka_with_broker_kafka(capsys: pytest.CaptureFixture[str]) -> None:
    """`nox -s demo -- --broker kafka`: the demo starts a real Apache Kafka node of its own, and stops it."""
    demo = load("demo")
    assert demo.main(["--broker", "kafka", "--records", "3000", "--compression", "lz4", "--partitions", "2"]) == 0
    out = capsys.readouterr().out
    assert f"started Apache Kafka {DEFAULT_KAFKA_VERSION} at 127.0.0.1:" in out
    assert "delivered 3,000 records, failed 0" in out
    assert "read back 3,000 records" in out and "OK: every record" in out


def test_demo_refuses_a_broker_kind_beside_bootstrap(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        load("demo").main(["--bootstrap", "127.0.0.1:9", "--broker", "kafka"])
    assert exited.value.code == 2
    assert "leave it out with --bootstrap" in capsys.readouterr().err
