"""Producer hooks: what each event reports, that a failing hook breaks nothing, that an unused hook costs nothing,
and Java's `interceptor.classes` mapping. Record contents are judged by reading them back from real Kafka."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, ClassVar

import pytest

from aioproducer import Producer, ProducerRecord, RecordMetadata
from aioproducer.error_codes import ErrorCode
from aioproducer.errors import RecordTooLargeError, UnknownPartitionError
from aioproducer.hooks import BatchWritten, HookChain, RequestDone, TransactionEvent
from aioproducer.testing import ConsumedRecord, MockCluster
from tests.fault_helpers import read_back_async

# max_block_ms: a send to a partition that does not exist waits this long for it to appear (Java waits max.block.ms).
FAST = {"linger_ms": 1, "retry_backoff_ms": 10, "reconnect_backoff_ms": 20, "max_block_ms": 5000}
PRODUCE, MESSAGE_TOO_LARGE = 0, ErrorCode.MESSAGE_TOO_LARGE


class Recorder:
    """Implements every hook and keeps what it was told."""

    def __init__(self) -> None:
        self.buffered: list[ProducerRecord] = []
        self.acknowledged: list[tuple[ProducerRecord, RecordMetadata | None, BaseException | None]] = []
        self.batches: list[BatchWritten] = []
        self.requests: list[RequestDone] = []
        self.connects: list[tuple[int, str, int]] = []
        self.disconnects: list[tuple[int, str, int]] = []
        self.many: list[tuple[str, Any]] = []
        self.closed = False

    def on_record_buffered(self, record: ProducerRecord) -> ProducerRecord:
        self.buffered.append(record)
        return record._replace(headers=[*(record.headers or ()), ("hooked", b"yes")])

    def on_record_acknowledged(
        self, record: ProducerRecord, metadata: RecordMetadata | None, error: BaseException | None
    ) -> None:
        self.acknowledged.append((record, metadata, error))

    def on_batch_written(self, event: BatchWritten) -> None:
        self.batches.append(event)

    def on_request(self, event: RequestDone) -> None:
        self.requests.append(event)

    def on_connect(self, node_id: int, host: str, port: int) -> None:
        self.connects.append((node_id, host, port))

    def on_disconnect(self, node_id: int, host: str, port: int) -> None:
        self.disconnects.append((node_id, host, port))

    def on_send_many_start(self, records: list[ProducerRecord]) -> str:
        self.many.append(("start", len(records)))
        return "token"

    def on_send_many_end(self, token: str, results: list[Any]) -> None:
        self.many.append((token, len(results)))

    def close(self) -> None:
        self.closed = True


async def test_every_hook_event_reports_what_happened(
    bootstrap: str,
    topic_factory: Callable[..., str],
    read_back_records: Callable[..., list[ConsumedRecord]],
) -> None:
    topic = topic_factory(partitions=2)
    hook = Recorder()
    async with Producer(bootstrap, hooks=[hook], **FAST) as producer:
        first = await producer.send(topic, b"one", key=b"k")
        results = await producer.send_many([ProducerRecord(topic, b"two"), (topic, b"three", None, None, None, None)])
        with pytest.raises(UnknownPartitionError):
            await producer.send(topic, b"nowhere", partition=99)
    assert hook.closed
    assert [r.value for r in hook.buffered] == [b"one", b"two", b"three", b"nowhere"]
    outcomes = {r.value: (m, e) for r, m, e in hook.acknowledged}
    assert outcomes[b"one"] == (first, None)
    assert outcomes[b"two"][0] == results[0] and outcomes[b"three"][0] == results[1]
    assert isinstance(outcomes[b"nowhere"][1], UnknownPartitionError) and outcomes[b"nowhere"][0] is None
    assert all(dict(r.headers or ())["hooked"] == b"yes" for r, _, _ in hook.acknowledged)
    assert hook.many == [("start", 2), ("token", 2)]
    # Each batch written, with its broker and sizes.
    assert sum(b.records for b in hook.batches) == 3
    assert all(b.topic == topic and b.node_id >= 0 and b.port > 0 for b in hook.batches)
    assert all(b.compressed_bytes > 0 and b.uncompressed_bytes > 0 for b in hook.batches)
    assert hook.requests and all(r.api == "Produce" and r.error is None and r.version >= 3 for r in hook.requests)
    assert 1 <= len(hook.requests) <= len(hook.batches)
    assert any(node >= 0 for node, _, _ in hook.connects)
    assert hook.disconnects  # closing the producer closed its connections
    # The header the hook added is on the records Kafka stored.
    stored = read_back_records(topic)
    assert sorted(r.value for r in stored) == [b"one", b"three", b"two"]
    assert all(("hooked", b"yes") in r.headers for r in stored)


class Exploding:
    def on_record_buffered(self, record: ProducerRecord) -> ProducerRecord:
        raise RuntimeError("buffered hook bug")

    def on_record_acknowledged(self, *args: object) -> None:
        raise RuntimeError("acknowledged hook bug")

    def on_batch_written(self, event: BatchWritten) -> None:
        raise RuntimeError("batch hook bug")

    def on_connect(self, *args: object) -> None:
        raise RuntimeError("connect hook bug")


async def test_a_failing_hook_is_logged_and_counted_and_loses_no_record(
    bootstrap: str,
    topic_factory: Callable[..., str],
    read_back_records: Callable[..., list[ConsumedRecord]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = topic_factory(partitions=1)
    after = Recorder()
    caplog.set_level(logging.ERROR, logger="aioproducer.hooks")
    async with Producer(bootstrap, hooks=[Exploding(), after], **FAST) as producer:
        metadata = await producer.send(topic, b"survives")
        await producer.send_many([ProducerRecord(topic, b"also")])
        errors = producer.metrics().producer["hook-error-total"]
    assert metadata.offset >= 0
    # The hooks after the failing one still ran.
    assert [r.value for r in after.buffered] == [b"survives", b"also"]
    assert len(after.acknowledged) == 2
    # 2 buffered + 2 acknowledged + ≥1 batch + ≥1 connect
    assert errors >= 6
    assert sum("hook" in r.getMessage() and r.exc_info is not None for r in caplog.records) == errors
    assert sorted(r.value for r in read_back_records(topic)) == [b"also", b"survives"]


async def test_without_record_hooks_the_record_path_is_the_producers_own(bootstrap: str) -> None:
    """An unused hook costs nothing: the record path holds record hooks only when some hook wants records (it then
    asks `is not None` once per record), and the producer's methods are its class's, never replaced per instance."""

    class OnlyBatches:
        def on_batch_written(self, event: BatchWritten) -> None:
            pass

    plain = Producer(bootstrap, hooks=[OnlyBatches()])
    assert plain._record_hooks is None
    hooked = Producer(bootstrap, hooks=[Recorder()])
    assert hooked._record_hooks is not None
    for producer in (plain, hooked):
        assert not {"enqueue", "enqueue_nowait", "send_many"} & set(vars(producer))
    chain = HookChain([OnlyBatches()])
    assert not chain.wants_records and len(chain.batch_written_hooks) == 1


async def test_a_record_refused_before_buffering_is_acknowledged_with_its_error(bootstrap: str) -> None:
    hook = Recorder()
    async with Producer(bootstrap, hooks=[hook], max_request_size=2000) as producer:
        with pytest.raises(RecordTooLargeError):
            await producer.enqueue("any-topic", b"x" * 5000)
    ((record, metadata, error),) = hook.acknowledged
    assert record.value == b"x" * 5000 and metadata is None and isinstance(error, RecordTooLargeError)


async def test_cancelling_a_delivery_does_not_acknowledge_the_record_early(
    bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(partitions=1)
    hook = Recorder()
    async with Producer(bootstrap, hooks=[hook], linger_ms=200) as producer:
        delivery = await producer.enqueue(topic, b"v")
        delivery.cancel()
        assert hook.acknowledged == []
        await producer.flush()
    ((_, metadata, error),) = hook.acknowledged
    assert error is None and metadata is not None and metadata.offset >= 0


class JavaStyle:
    """A Java ProducerInterceptor's shape: on_send / on_acknowledgement / close, configured from the settings."""

    instances: ClassVar[list[JavaStyle]] = []

    def __init__(self) -> None:
        self.configs: dict[str, Any] = {}
        self.acks: list[tuple[RecordMetadata | None, BaseException | None]] = []
        JavaStyle.instances.append(self)

    def configure(self, configs: dict[str, Any]) -> None:
        self.configs = configs

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        return record._replace(value=record.value + b"!")

    def on_acknowledgement(self, metadata: RecordMetadata | None, exception: BaseException | None) -> None:
        self.acks.append((metadata, exception))


async def test_interceptor_classes_load_java_style_interceptors_by_name(
    bootstrap: str,
    topic_factory: Callable[..., str],
    read_back_records: Callable[..., list[ConsumedRecord]],
) -> None:
    topic = topic_factory(partitions=1)
    JavaStyle.instances.clear()
    settings = {"bootstrap.servers": bootstrap, "interceptor.classes": "test_hooks.JavaStyle", "linger.ms": 1}
    async with Producer(config=settings) as producer:
        metadata = await producer.send(topic, b"hello")
    (interceptor,) = JavaStyle.instances
    assert interceptor.configs["interceptor.classes"] == "test_hooks.JavaStyle"
    assert interceptor.acks == [(metadata, None)]
    assert [r.value for r in read_back_records(topic)] == [b"hello!"]


def test_hook_chain_calls_each_event_and_counts_failures() -> None:
    failures: list[int] = []
    seen: list[tuple[str, object]] = []

    class Some:
        def on_throttle(self, node_id: int, ms: int) -> None:
            seen.append(("throttle", (node_id, ms)))

        def on_transaction(self, event: str, detail: object) -> None:
            seen.append((event, detail))

        def on_request(self, event: RequestDone) -> None:
            raise ValueError("bad")

    chain = HookChain([Some()], lambda: failures.append(1))
    chain.throttle(3, 120)
    committed = TransactionEvent("txn-1", 7, 0, 12.5)
    chain.transaction("commit", committed)
    chain.request(RequestDone(1, "Produce", 9, 10, 1.0, None))
    chain.connect(1, "h", 1)  # nobody listens: nothing happens
    assert seen == [("throttle", (3, 120)), ("commit", committed)]
    assert failures == [1]


async def test_records_of_a_split_batch_are_each_acknowledged_once(mock_cluster: MockCluster) -> None:
    """A batch split after MESSAGE_TOO_LARGE forwards its records to two halves: each record is acknowledged once,
    with the offset of the half that carried it, and the split is counted."""
    mock_cluster.create_topic("split", 1)
    hook = Recorder()
    async with Producer(mock_cluster.bootstrap_servers, hooks=[hook], linger_ms=50, retry_backoff_ms=10) as producer:
        await producer.partitions_for("split")
        mock_cluster.push_request_errors(PRODUCE, MESSAGE_TOO_LARGE)
        deliveries = [await producer.enqueue("split", b"%d" % i, partition=0) for i in range(6)]
        results = [await d for d in deliveries]
        await asyncio.sleep(0)
        splits = producer.metrics().producer["batch-split-total"]
    assert splits == 1
    acknowledged = {r.value: m for r, m, e in hook.acknowledged if e is None}
    assert len(hook.acknowledged) == 6
    assert [acknowledged[b"%d" % i] for i in range(6)] == results
    assert sorted(m.offset for m in results) == list(range(results[0].offset, results[0].offset + 6))


async def test_every_hook_sees_headers_as_pairs_whoever_made_them_a_dict(mock_cluster: MockCluster) -> None:
    """Headers reached a hook as a dict when an earlier hook returned them so (`_replace`), or when a send_many item
    carried them (a plain 6-tuple, or `on_send_many_start`'s view of the call): a hook that read or extended them as
    pairs failed, or unpacked a two-letter key into two names and had the record refused."""
    seen: list[object] = []

    class MakesADict:
        def on_record_buffered(self, record: ProducerRecord) -> ProducerRecord:
            return record._replace(headers={"ab": b"7"})  # type: ignore[arg-type]

    class ReadsPairs:
        def on_send_many_start(self, records: list[ProducerRecord]) -> None:
            seen.extend(type(record.headers) for record in records)

        def on_record_buffered(self, record: ProducerRecord) -> ProducerRecord:
            seen.append(type(record.headers))
            return record._replace(headers=[*(record.headers or []), ("seen", b"1")])

        def on_record_acknowledged(self, record: ProducerRecord, metadata: Any, error: Any) -> None:
            assert error is None, error
            seen.append(dict(record.headers or []))

    mock_cluster.create_topic("t", 1)
    async with Producer(mock_cluster.bootstrap_servers, hooks=[MakesADict(), ReadsPairs()], linger_ms=1) as producer:
        await producer.send("t", b"one")
        await producer.send_many([("t", b"two", None, {"cd": b"8"}, None, None)])  # type: ignore[list-item]
        assert producer.metrics().producer["hook-error-total"] == 0
    assert seen == [list, {"ab": b"7", "seen": b"1"}, list, list, {"ab": b"7", "seen": b"1"}]
    stored = await read_back_async(mock_cluster.bootstrap_servers, "t")
    assert [r.headers for r in stored] == [(("ab", b"7"), ("seen", b"1"))] * 2
