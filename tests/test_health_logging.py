"""`producer.health()` and the producer's logging, against real Kafka (a node that dies) and librdkafka's mock
(injected retriable errors): what a readiness probe and an operator reading the logs see."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable

import pytest

from aioproducer import Producer
from aioproducer.error_codes import ErrorCode
from aioproducer.errors import AioProducerError
from aioproducer.testing import KafkaCluster, MockCluster

PRODUCE, NOT_ENOUGH_REPLICAS = 0, ErrorCode.NOT_ENOUGH_REPLICAS


async def wait_until(condition: Callable[[], bool], timeout_s: float = 60) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_health_follows_the_broker_from_ready_to_lost(
    kafka_cluster: KafkaCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="aioproducer")
    producer = Producer(kafka_cluster.bootstrap_servers, linger_ms=1, delivery_timeout_ms=3000, request_timeout_ms=1000)
    assert not producer.health().ready and producer.health().state == "new"
    topic = "health-topic"
    async with producer:
        await producer.send(topic, b"v")
        health = producer.health()
        assert health.ready, health
        assert health.connected_brokers == (1,)
        assert health.leaders[topic] and all(leader == 1 for leader in health.leaders[topic].values())
        assert health.buffer_used_bytes == 0 and health.buffer_total_bytes == producer.config.buffer_memory
        # (Real Kafka may already have answered NOT_LEADER_OR_FOLLOWER once for the freshly auto-created topic: a
        # retried error is a last error too.)
        assert (health.last_error is None) == (health.last_error_age_s is None)
        kafka_cluster.kill(1)
        with pytest.raises(AioProducerError):
            await producer.send(topic, b"lost")
        await wait_until(lambda: not producer.health().ready)
        health = producer.health()
        assert health.connected_brokers == ()
        assert health.last_error is not None and health.last_error_age_s is not None
        assert 0 <= health.last_error_age_s < 30
        assert "NotLeaderOrFollower" not in health.last_error  # the error of the outage, not the one before it
    assert producer.health().state == "closed" and not producer.health().ready
    messages = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any(m.startswith("connected to broker 1 at ") for m in messages)
    assert any(m.startswith("connection to broker 1 at ") and m.endswith(" lost") for m in messages)


async def test_retries_are_logged_at_debug(mock_cluster: MockCluster, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="aioproducer")
    mock_cluster.create_topic("retry-log", 1)
    async with Producer(mock_cluster.bootstrap_servers, linger_ms=1, retry_backoff_ms=10) as producer:
        await producer.partitions_for("retry-log")
        mock_cluster.push_request_errors(PRODUCE, NOT_ENOUGH_REPLICAS)
        await producer.send("retry-log", b"v")
    retries = [r for r in caplog.records if r.getMessage().startswith("retrying 1 record(s) for retry-log-0")]
    assert len(retries) == 1 and retries[0].levelno == logging.DEBUG
    assert "NotEnoughReplicas" in retries[0].getMessage() or "replicas" in retries[0].getMessage().lower()


async def test_the_producer_id_is_logged_once_by_the_idempotence_logger(
    mock_cluster: MockCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: each new producer id and epoch was logged at INFO twice, by `aioproducer.idempotence` (which sets
    it, on every path) and by `aioproducer.observer` (on the idempotent producer's InitProducerId only)."""
    caplog.set_level(logging.INFO, logger="aioproducer")
    mock_cluster.create_topic("id-log", 1)
    async with Producer(mock_cluster.bootstrap_servers, enable_idempotence=True) as producer:
        await producer.send("id-log", b"v")
    lines = [r for r in caplog.records if r.getMessage().startswith("producer id ")]
    assert [(r.name, r.levelno) for r in lines] == [("aioproducer.idempotence", logging.INFO)], lines


async def test_no_log_line_ever_shows_a_password(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    secret = "pa55-w0rd-never-logged"
    producer = Producer(
        f"127.0.0.1:{port}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password=secret,
        max_block_ms=500,
        reconnect_backoff_ms=20,
    )
    async with producer:
        with pytest.raises(AioProducerError):
            await producer.send("t", b"v")
        assert producer.health().last_error is None or secret not in producer.health().last_error
    logged = caplog.text + "".join(repr(r.args) for r in caplog.records)
    assert caplog.records and secret not in logged
    assert secret not in repr(producer) and secret not in repr(producer.config)
