"""`enqueue_nowait`: buffering a record without awaiting anything, or `WouldBlockError` (the record not buffered)
whenever `enqueue` would have to wait — and the idiom built on it delivers every record, in order, with the
sender fed as it goes."""

from __future__ import annotations

import asyncio
from typing import Any
from unittest import mock

import pytest

from aioproducer import Producer, RecordMetadata
from aioproducer.errors import InvalidRecordError, ProducerClosedError, TransactionStateError, WouldBlockError
from aioproducer.testing import MockCluster, MockProducer, read_back
from tests.twins import TWINS, use_twin


@pytest.fixture(autouse=True, params=TWINS)
def twin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    use_twin(monkeypatch, request.param)
    return request.param  # type: ignore[no-any-return]


async def stored_values(bootstrap: str, topic: str) -> list[bytes]:
    return [r.value for r in await asyncio.to_thread(read_back, bootstrap, topic)]


async def test_the_idiom_delivers_every_record_in_order(tansu_bootstrap: str, twin: str) -> None:
    topic = f"nowait-{twin}"
    values = [b"%06d" % i + b"x" * 90 for i in range(20_000)]
    refused = 0
    async with Producer(tansu_bootstrap) as producer:
        deliveries = []
        for value in values:
            try:
                deliveries.append(producer.enqueue_nowait(topic, value, partition=0))
            except WouldBlockError:
                refused += 1
                deliveries.append(await producer.enqueue(topic, value, partition=0))
        results = await producer.wait(deliveries)
    assert all(isinstance(r, RecordMetadata) for r in results)
    assert [r.offset for r in results] == list(range(results[0].offset, results[0].offset + len(values)))
    # The first record waits for the topic's metadata; then a refusal lets the event loop run at most once per 64 KiB
    # (once half a millisecond has passed, or at 256 KiB): ~2 MB makes 8-32.
    assert 2 <= refused < 100, refused
    assert await stored_values(tansu_bootstrap, topic) == values


async def test_it_refuses_what_would_wait_and_buffers_nothing_then(tansu_bootstrap: str, twin: str) -> None:
    topic = f"nowait-unknown-{twin}"
    async with Producer(tansu_bootstrap, buffer_memory=40_000, linger_ms=1000) as producer:
        with pytest.raises(WouldBlockError, match="no metadata yet"):
            producer.enqueue_nowait(topic, b"first")  # the topic's metadata is not known yet
        await producer.enqueue(topic, b"first")
        with pytest.raises(WouldBlockError):
            producer.enqueue_nowait(topic, b"beyond", partition=1000)  # may exist after a refresh
        buffered = 0
        with pytest.raises(WouldBlockError, match="buffer memory"):
            for _ in range(1000):  # lingering: nothing is sent, so memory runs out
                producer.enqueue_nowait(topic, b"y" * 200)
                buffered += 1
        assert 0 < buffered < 200
        used = producer.metrics().producer["buffer-available-bytes"]
        with pytest.raises(WouldBlockError):
            producer.enqueue_nowait(topic, b"y" * 200)
        assert producer.metrics().producer["buffer-available-bytes"] == used  # the refused record took nothing
        await producer.flush()
    assert len(await stored_values(tansu_bootstrap, topic)) == 1 + buffered


async def test_bad_input_and_a_closed_producer_raise_their_own_errors(tansu_bootstrap: str) -> None:
    producer = Producer(tansu_bootstrap)
    with pytest.raises(ProducerClosedError):
        producer.enqueue_nowait("t", b"v")
    async with producer:
        with pytest.raises(InvalidRecordError):
            producer.enqueue_nowait("bad topic!", b"v")
        with pytest.raises(InvalidRecordError):
            producer.enqueue_nowait("t", b"v", headers=[("k", 5)])  # type: ignore[list-item]
    with pytest.raises(ProducerClosedError):
        producer.enqueue_nowait("t", b"v")


async def test_an_async_serializer_always_sends_the_caller_to_enqueue(tansu_bootstrap: str, twin: str) -> None:
    async def serialize(value: Any) -> bytes:
        await asyncio.sleep(0)
        return str(value).encode()

    async with Producer(tansu_bootstrap, value_serializer=serialize) as producer:
        with pytest.raises(WouldBlockError, match="async serializer"):
            producer.enqueue_nowait(f"nowait-async-{twin}", 7)
        assert (await producer.send(f"nowait-async-{twin}", 7)).offset >= 0


async def test_record_hooks_acknowledge_every_record_they_saw_a_would_block_one_with_its_error(
    tansu_bootstrap: str, twin: str
) -> None:
    """Bug: a record shown to the hooks and then refused with WouldBlockError was never acknowledged to them (the
    OpenTelemetry hook kept its span open until the producer closed). A refusal that does not depend on the record
    (the event loop must run, an async serializer) now comes before the hooks; one that does (metadata, memory) is
    acknowledged with the WouldBlockError, as Java's onSendError acknowledges a send that could not buffer."""
    seen: list[tuple[str, Any]] = []

    class Hook:
        def on_record_buffered(self, record: Any) -> None:
            seen.append(("buffered", record.value))

        def on_record_acknowledged(self, record: Any, metadata: Any, error: Any) -> None:
            seen.append(("acknowledged", type(error).__name__ if error else record.value))

    async with Producer(tansu_bootstrap, hooks=[Hook()]) as producer:
        with pytest.raises(WouldBlockError):
            producer.enqueue_nowait(f"nowait-hooks-{twin}", b"early")
        await producer.send(f"nowait-hooks-{twin}", b"first")
        await producer.enqueue_nowait(f"nowait-hooks-{twin}", b"second")
        with pytest.raises(InvalidRecordError):
            producer.enqueue_nowait("bad topic!", b"bad")
    assert ("acknowledged", "second") in [(k, v if isinstance(v, str) else v.decode()) for k, v in seen]
    assert ("acknowledged", "InvalidRecordError") in seen
    assert seen[:2] == [("buffered", b"early"), ("acknowledged", "WouldBlockError")]  # no metadata yet: refused
    assert [k for k, _ in seen].count("buffered") == [k for k, _ in seen].count("acknowledged") == 4


async def test_the_idiom_leaves_no_span_open_and_yields_without_showing_the_record_to_the_hooks(
    tansu_bootstrap: str, twin: str
) -> None:
    """Bug: every WouldBlockError of the idiom (one each time a yield was due) had shown its record to the OpenTelemetry
    hook, which opened a span and kept it until the producer closed: the spans piled up in a long-lived producer
    and ended at close as sends of records that had been sent under another span."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from aioproducer.contrib.opentelemetry import OpenTelemetryHook

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    hook = OpenTelemetryHook(tracer_provider=provider, meter_provider=MeterProvider())
    topic = f"nowait-otel-{twin}"
    refused = 0
    async with Producer(tansu_bootstrap, hooks=[hook]) as producer:
        await producer.send(topic, b"metadata first")  # from here on, only the event loop's turn refuses
        deliveries = []
        for _ in range(5000):
            try:
                deliveries.append(producer.enqueue_nowait(topic, b"x" * 100))
            except WouldBlockError:
                refused += 1
                deliveries.append(await producer.enqueue(topic, b"x" * 100))
        assert all(isinstance(r, RecordMetadata) for r in await producer.wait(deliveries))
        await asyncio.sleep(0)  # the last batch's acknowledgements
        finished_before_close = len(exporter.get_finished_spans())
    assert refused >= 5
    assert finished_before_close == len(exporter.get_finished_spans()) == 5001  # one span per record sent
    assert all(span.status.is_ok for span in exporter.get_finished_spans())


async def test_the_mock_producer_takes_it_too() -> None:
    async with MockProducer(topics={"orders": 2}) as mock:
        delivery = mock.enqueue_nowait("orders", b"v", key=b"k")
        assert (await delivery).topic == "orders"
        assert [r.value for r in mock.history()] == [b"v"]


async def test_a_transactional_producer_never_takes_the_plain_path(mock_cluster: MockCluster) -> None:
    """The fast path for plain producers (no serializer, no record hooks, not transactional) must not skip the
    transaction's check: outside a transaction a record is refused, inside one it is buffered and committed."""
    mock_cluster.create_topic("t", 1)
    async with Producer(mock_cluster.bootstrap_servers, transactional_id="tx", linger_ms=1) as producer:
        with pytest.raises(TransactionStateError):
            producer.enqueue_nowait("t", b"outside")
        await producer.begin_transaction()
        await producer.enqueue("t", b"first")  # the topic's metadata
        delivery = producer.enqueue_nowait("t", b"second")
        await producer.commit_transaction()
        assert (await delivery).offset == 1


async def test_enqueue_nowait_held_from_the_running_state_refuses_records_once_the_producer_closes(
    mock_cluster: MockCluster,
) -> None:
    """A plain producer hands out its appender's method as enqueue_nowait; a caller that kept that bound method (as
    tight loops do) and calls it while or after the producer closes must get ProducerClosedError, not a record
    buffered where no sender will ever send it and a Delivery that never settles."""
    mock_cluster.create_topic("t", 1)
    producer = Producer(mock_cluster.bootstrap_servers, linger_ms=1)
    async with producer:
        nowait = producer.enqueue_nowait
        await producer.send("t", b"first")
        assert (await nowait("t", b"second")).offset == 1
        closing = asyncio.ensure_future(producer.close())
        await asyncio.sleep(0)  # close() has begun: the producer is closing
        with pytest.raises(ProducerClosedError, match=r"closing|closed"):
            nowait("t", b"while closing")
        await closing
    with pytest.raises(ProducerClosedError):
        nowait("t", b"after close")
    with pytest.raises(ProducerClosedError):
        producer.enqueue_nowait("t", b"after close")
    assert producer.metrics().producer["record-send-total"] == 2


async def test_a_subclass_that_overrides_enqueue_nowait_keeps_its_override(mock_cluster: MockCluster) -> None:
    """The plain producer's own enqueue_nowait is an instance attribute: it must not shadow a subclass's method."""
    mock_cluster.create_topic("t", 1)
    calls: list[bytes] = []

    class Counting(Producer):
        def enqueue_nowait(self, topic: str, value: Any = None, **kwargs: Any) -> Any:
            calls.append(value)
            return super().enqueue_nowait(topic, value, **kwargs)

    async with Counting(mock_cluster.bootstrap_servers, linger_ms=1) as producer:
        await producer.send("t", b"metadata")
        delivery = producer.enqueue_nowait("t", b"counted")
        assert (await delivery).offset == 1
    assert calls == [b"counted"]


async def test_enqueue_nowait_patched_on_the_class_before_start_or_on_the_producer_is_what_a_plain_producer_calls(
    mock_cluster: MockCluster,
) -> None:
    """A plain running producer holds its appender's method as an instance attribute named enqueue_nowait: a mock
    put on Producer.enqueue_nowait before start (a test's mock.patch.object, instrumentation) was bypassed, the
    check comparing the patched class attribute with itself. A patch of the class before start, or of the producer
    itself at any time, must be what the producer calls (docs/testing.md)."""
    mock_cluster.create_topic("t", 1)
    general = Producer.enqueue_nowait
    with mock.patch.object(Producer, "enqueue_nowait", autospec=True, side_effect=general) as on_the_class:
        async with Producer(mock_cluster.bootstrap_servers, linger_ms=1) as producer:
            await producer.send("t", b"metadata")
            await producer.enqueue_nowait("t", b"watched")
    assert on_the_class.call_count == 1
    async with Producer(mock_cluster.bootstrap_servers, linger_ms=1) as producer:
        await producer.send("t", b"metadata")
        with mock.patch.object(producer, "enqueue_nowait", wraps=producer.enqueue_nowait) as on_the_producer:
            await producer.enqueue_nowait("t", b"watched")
        assert on_the_producer.call_count == 1
        assert (await producer.enqueue_nowait("t", b"after the patch")).offset == 4
