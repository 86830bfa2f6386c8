"""Readiness and liveness a Kubernetes probe can gate on (`producer.health()`, `aioproducer.health`'s rules), and
an outage that shows: the FastAPI example's `/ready`, an idle connection closing, a cluster that never answers, a real
Kafka node stopped and started again, and what makes a producer not live."""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

from aioproducer import Producer
from aioproducer.errors import AioProducerError, MetadataTimeoutError, ProducerFencedError
from aioproducer.testing import KafkaCluster, MockCluster, MockProducer

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"readiness_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def refused_address() -> Iterator[str]:
    """A loopback address where nothing listens (connections are refused at once), for the whole test.

    The port stays bound, never listening, until the test ends. (It used to be released at once: a broker that
    another test process started meanwhile could take the same port, and the "unreachable" producer then reached it,
    which once made an outage start twice in the log.)"""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{holder.getsockname()[1]}"


async def wait_until(condition: Callable[[], bool], timeout_s: float = 60, what: str = "condition") -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        assert loop.time() < deadline, f"{what}: not met within {timeout_s} s"
        await asyncio.sleep(0.05)


# -- the FastAPI example -------------------------------------------------------------------------------------------
async def test_fastapi_ready_answers_200_right_after_startup_when_the_cluster_answers(tansu_bootstrap: str) -> None:
    """Bug: the FastAPI example's `/ready` answered 503 until the first event was posted (`health().ready` needed an
    open connection, which only a send opened), so a pod gated on it never got its first request."""
    example = load_example("fastapi_app")
    app = example.create_app(example.Settings(bootstrap=tansu_bootstrap))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            ready = await client.get("/ready")
            live = await client.get("/live")
    assert ready.status_code == 200, ready.json()
    assert ready.json()["ready"] is True and ready.json()["reason"] is None
    assert live.status_code == 200 and live.json()["live"] is True


async def test_fastapi_ready_answers_503_with_the_reason_when_the_cluster_does_not(refused_address: str) -> None:
    example = load_example("fastapi_app")
    app = example.create_app(example.Settings(bootstrap=refused_address, max_block_ms=2000))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            ready = await client.get("/ready")
            live = await client.get("/live")
    assert ready.status_code == 503
    body = ready.json()
    assert body["ready"] is False and "no broker has answered" in body["reason"]
    assert body["last_error"] and "ConnectionFailedError" in body["last_error"]
    # Not ready, but nothing a restart would mend: the liveness probe stays green.
    assert live.status_code == 200 and live.json()["live"] is True


# -- readiness rules -------------------------------------------------------------------------------------------------
async def test_ready_when_start_returns_without_any_send(tansu_bootstrap: str) -> None:
    async with Producer(tansu_bootstrap) as producer:
        health = producer.health()
        assert health.ready and health.live and health.reason is None, health
        assert health.metadata_age_s is not None and 0 <= health.metadata_age_s < 5
        assert "metadata-age" in producer.metrics().producer


async def test_an_idle_connection_closing_does_not_unready_the_producer(tansu_bootstrap: str) -> None:
    """Bug: `health().ready` turned false once the producer's idle connections were closed after
    `connections_max_idle_ms`, though nothing was wrong with the cluster."""
    async with Producer(tansu_bootstrap, connections_max_idle_ms=300, linger_ms=0) as producer:
        await producer.send("readiness-idle", b"v")
        assert producer.health().connected_brokers
        await wait_until(lambda: not producer._cluster.open_connections(), 10, "idle connections closed")
        health = producer.health()
        assert health.connected_brokers == ()
        assert health.ready and health.reason is None, health


async def test_an_unreachable_cluster_shows_in_the_log_health_and_metrics(
    caplog: pytest.LogCaptureFixture, refused_address: str
) -> None:
    """Bug: with no bootstrap server answering, the producer was silent until MetadataTimeoutError: no WARNING was
    logged, `health().last_error` stayed None and `metadata-age` read 0 though no metadata had ever arrived."""
    address = refused_address
    caplog.set_level(logging.INFO, logger="aioproducer")
    async with Producer(address, max_block_ms=1500, reconnect_backoff_ms=20, reconnect_backoff_max_ms=50) as producer:
        # start() waited for the first attempt: the outage is visible at once, not after max_block_ms.
        health = producer.health()
        assert not health.ready and health.live
        assert health.reason is not None and "no broker has answered" in health.reason
        assert health.last_error is not None and address in health.last_error
        assert health.metadata_age_s is None
        assert "metadata-age" not in producer.metrics().producer
        with pytest.raises(MetadataTimeoutError, match="last error"):
            await producer.send("t", b"v")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "no broker answers" in r.getMessage()]
    # Rate-limited: one line for the outage's start, though the producer tried dozens of times.
    assert len(warnings) == 1 and address in warnings[0].getMessage()


async def test_outage_warnings_repeat_at_most_once_per_interval(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, refused_address: str
) -> None:
    from aioproducer.observability import observer

    monkeypatch.setattr(observer, "OUTAGE_LOG_INTERVAL_MS", 300)
    caplog.set_level(logging.WARNING, logger="aioproducer")
    async with Producer(refused_address, reconnect_backoff_ms=10, reconnect_backoff_max_ms=20, retry_backoff_ms=10):
        await asyncio.sleep(1.0)
    lines = [r.getMessage() for r in caplog.records if "no broker answers" in r.getMessage()]
    assert lines[0].startswith("no broker answers")
    assert 2 <= len(lines) <= 5, lines  # about one per 300 ms over one second, not one per attempt
    assert all(line.startswith("still no broker answers after") for line in lines[1:])


async def test_readiness_returns_when_the_cluster_comes_back(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("back", 1)
    async with Producer(
        mock_cluster.bootstrap_servers, reconnect_backoff_ms=20, reconnect_backoff_max_ms=100, retry_backoff_ms=20
    ) as producer:
        assert producer.health().ready
        for broker in (1, 2, 3):
            mock_cluster.set_broker_down(broker)
        await wait_until(lambda: not producer.health().ready, 30, "not ready while every broker is down")
        assert producer.health().live
        for broker in (1, 2, 3):
            mock_cluster.set_broker_up(broker)
        await wait_until(lambda: producer.health().ready, 30, "ready again")
        await producer.send("back", b"v")


# -- liveness --------------------------------------------------------------------------------------------------------
async def test_not_live_once_closed_or_after_the_sender_crashed(tansu_bootstrap: str) -> None:
    producer = Producer(tansu_bootstrap)
    assert producer.health().live and not producer.health().ready  # not started yet: nothing to restart
    async with producer:
        assert producer.health().live

        def crash(now: int) -> Any:
            raise RuntimeError("injected sender failure")

        producer._sender._send_ready = crash  # type: ignore[method-assign]
        producer._sender.wake()
        await wait_until(lambda: not producer.health().live, 10, "not live after the crash")
        health = producer.health()
        assert not health.ready and health.reason is not None
    assert not producer.health().live and producer.health().state == "closed"


async def test_a_fenced_transactional_mock_is_not_live() -> None:
    async with MockProducer(transactional_id="t-1") as mock:
        assert mock.health().live and mock.health().ready
        mock.fence()
        with pytest.raises(ProducerFencedError):
            await mock.begin_transaction()
        health = mock.health()
        assert not health.live and not health.ready
        assert health.reason is not None and "Fenced" in health.reason


# -- real Kafka ------------------------------------------------------------------------------------------------------
async def test_readiness_follows_a_real_kafka_node_stopped_and_started_again(
    kafka_cluster: KafkaCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="aioproducer")
    settings: dict[str, Any] = {"reconnect_backoff_max_ms": 200, "request_timeout_ms": 3000, "max_block_ms": 5000}
    async with Producer(kafka_cluster.bootstrap_servers, **settings) as producer:
        assert producer.health().ready, producer.health()
        kafka_cluster.stop(1)
        await wait_until(lambda: not producer.health().ready, 60, "not ready once the node stopped")
        health = producer.health()
        assert health.live and health.reason is not None and "no broker has answered" in health.reason
        with pytest.raises(AioProducerError):
            await producer.send("readiness-kafka", b"while down")
        await asyncio.to_thread(kafka_cluster.start_node, 1)
        await wait_until(lambda: producer.health().ready, 60, "ready once the node is back")
        metadata = await producer.send("readiness-kafka", b"after")
        assert metadata.offset >= 0
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("no broker answers") for m in messages)
    assert any(m.startswith("the cluster answers again") for m in messages)


async def test_readiness_notices_a_paused_real_kafka_node(kafka_cluster: KafkaCluster) -> None:
    # A paused (SIGSTOP) broker keeps its sockets open: only a refresh that goes unanswered shows it.
    settings: dict[str, Any] = {
        "metadata_max_age_ms": 1000,
        "request_timeout_ms": 1500,
        "socket_connection_setup_timeout_ms": 1000,
        "socket_connection_setup_timeout_max_ms": 1000,
    }
    async with Producer(kafka_cluster.bootstrap_servers, **settings) as producer:
        assert producer.health().ready
        kafka_cluster.pause(1)
        try:
            await wait_until(lambda: not producer.health().ready, 30, "not ready while the node is paused")
        finally:
            kafka_cluster.resume(1)
        await wait_until(lambda: producer.health().ready, 30, "ready once the node is resumed")


async def test_fastapi_ready_follows_a_real_kafka_node_stopped_and_started_again(kafka_cluster: KafkaCluster) -> None:
    example = load_example("fastapi_app")
    app = example.create_app(example.Settings(bootstrap=kafka_cluster.bootstrap_servers))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:

            async def ready_status() -> int:
                return (await client.get("/ready")).status_code

            assert await ready_status() == 200  # right after startup, before any event
            kafka_cluster.stop(1)
            deadline = asyncio.get_running_loop().time() + 60
            while await ready_status() != 503:
                assert asyncio.get_running_loop().time() < deadline, "still ready with the node stopped"
                await asyncio.sleep(0.1)
            down = (await client.get("/ready")).json()
            assert "no broker has answered" in down["reason"]
            assert (await client.get("/live")).status_code == 200
            await asyncio.to_thread(kafka_cluster.start_node, 1)
            deadline = asyncio.get_running_loop().time() + 60
            while await ready_status() != 200:
                assert asyncio.get_running_loop().time() < deadline, "not ready again with the node back"
                await asyncio.sleep(0.1)
            published = await client.post("/events/clicks", json={"user": "ada"})
            assert published.status_code == 200, published.text
