"""The asyncio clients under test — aioproducer, aiokafka, confluent-kafka's AIOProducer — behind one small shape.

Each hot loop calls the client's own API directly (no wrapper per record), so every client pays only its own costs.
Owns nothing but these adapters; timing and measuring are `bench_worker`'s job.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from tests.benchmarks.bench_sync_clients import confluent_config
from tests.benchmarks.workloads import BULK_CHUNK, IDIOM_TASKS, OVERLAP_CALLS, RunSpec, batching_of

__all__ = ["AsyncClient", "make_async_client"]


class AsyncClient(Protocol):
    """What the async drivers need. `loop` and `bulk` end with everything acknowledged."""

    async def start(self) -> None: ...

    async def send_and_wait(self, value: bytes) -> None: ...

    async def produce(self, value: bytes) -> asyncio.Future[Any]: ...

    async def loop(self, values: Sequence[bytes], keys: Sequence[bytes] | None) -> None: ...

    async def bulk(self, values: Sequence[bytes], chunk: int) -> None: ...

    async def flush(self) -> None: ...

    async def close(self) -> None: ...

    async def idiom(self, name: str, values: Sequence[bytes]) -> int:
        """Produce `values` the way idiom `name` waits for each record; returns how many records failed."""
        ...

    async def callback(self, values: Sequence[bytes], keys: Sequence[bytes] | None) -> int:
        """A done-callback per record that checks its outcome, then flush; returns how many records failed."""
        ...


class Settled:
    """Counts the records a done-callback saw settle; `all_done` wakes once `expected` have."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.count = 0
        self.failed = 0
        self.all_done = asyncio.Event()

    def on_done(self, future: Any) -> None:
        if future.cancelled() or future.exception() is not None:
            self.failed += 1
        self.count += 1
        if self.count == self.expected:
            self.all_done.set()


def failures(results: Sequence[Any]) -> int:
    return sum(1 for result in results if isinstance(result, BaseException))


async def in_tasks(send_one: Any, values: Sequence[bytes]) -> int:
    """`send_one(value)` awaited for every value, spread over IDIOM_TASKS concurrent tasks."""

    async def worker(share: Sequence[bytes]) -> None:
        for value in share:
            await send_one(value)

    await asyncio.gather(*(worker(values[i::IDIOM_TASKS]) for i in range(IDIOM_TASKS)))
    return 0


class AioproducerClient:
    def __init__(self, spec: RunSpec) -> None:
        from aioproducer import Producer

        settings: dict[str, Any] = {
            "compression_type": spec.compression,
            "acks": "all" if spec.idempotent else 1,
            "enable_idempotence": spec.idempotent,
        }
        linger_ms, batch_size = batching_of(str(spec.extra.get("batching", "linger")))
        if linger_ms is not None:
            settings["linger_ms"] = linger_ms
        if batch_size is not None:  # Java's fixed batches: no growing past batch_size while a batch waits
            settings.update(batch_size=batch_size, batch_max_size=batch_size)
        if spec.buffer_memory:
            settings["buffer_memory"] = spec.buffer_memory
        self.topic = spec.topic
        self.producer = Producer(spec.bootstrap, hooks=_observing(spec.extra.get("observe", "")), **settings)

    async def start(self) -> None:
        await self.producer.start()

    async def send_and_wait(self, value: bytes) -> None:
        await self.producer.send(self.topic, value)

    async def produce(self, value: bytes) -> asyncio.Future[Any]:
        return await self.producer.enqueue(self.topic, value)

    async def loop(self, values: Sequence[bytes], keys: Sequence[bytes] | None) -> None:
        enqueue, topic = self.producer.enqueue, self.topic
        if keys is None:
            for value in values:
                await enqueue(topic, value)
        else:
            for value, key in zip(values, keys, strict=True):
                await enqueue(topic, value, key=key)
        await self.producer.flush()

    async def loop_nowait(self, values: Sequence[bytes], keys: Sequence[bytes] | None) -> None:
        """The `enqueue_nowait` idiom: buffer without awaiting; await `enqueue` only when told it would block."""
        from aioproducer.errors import WouldBlockError

        nowait, enqueue, topic = self.producer.enqueue_nowait, self.producer.enqueue, self.topic  # type: ignore[attr-defined]
        if keys is None:
            for value in values:
                try:
                    nowait(topic, value)
                except WouldBlockError:
                    await enqueue(topic, value)
        else:
            for value, key in zip(values, keys, strict=True):
                try:
                    nowait(topic, value, key=key)
                except WouldBlockError:
                    await enqueue(topic, value, key=key)
        await self.producer.flush()

    async def bulk(self, values: Sequence[bytes], chunk: int) -> None:
        send_many, topic = self.producer.send_many, self.topic
        failed = 0
        for first in range(0, len(values), chunk):
            # Plain 6-tuples in ProducerRecord's field order, as send_many takes them: the caller's fastest list
            # (about 0.05 µs a record to build against 0.12 for ProducerRecords, time the broker would otherwise idle).
            records = [(topic, value, None, None, None, None) for value in values[first : first + chunk]]
            failed += failures(await send_many(records))
        if failed:
            raise RuntimeError(f"{failed} record(s) failed")

    async def bulk_stream(self, values: Sequence[bytes], chunk: int) -> None:
        """`send_many` over a generator of each chunk's 6-tuples: read as the call goes (up to 256 at a time),
        so the tuples are never all alive at once and never set off the cyclic collector."""
        send_many, topic = self.producer.send_many, self.topic
        failed = 0
        for first in range(0, len(values), chunk):
            failed += failures(
                await send_many((topic, value, None, None, None, None) for value in values[first : first + chunk])
            )
        if failed:
            raise RuntimeError(f"{failed} record(s) failed")

    async def bulk_overlap(self, values: Sequence[bytes], chunk: int, stream: bool = False) -> None:
        """The `enqueue_many` idiom: buffer chunk after chunk, awaiting a chunk's results once OVERLAP_CALLS later
        calls are outstanding, so the broker works on one chunk while the caller builds and buffers the next; with
        `stream`, each chunk is a generator of 6-tuples rather than a list of them."""
        enqueue_many, topic = self.producer.enqueue_many, self.topic  # type: ignore[attr-defined]
        outstanding: collections.deque[Any] = collections.deque()
        failed = 0
        for first in range(0, len(values), chunk):
            records: Iterable[tuple[Any, ...]] = (
                ((topic, value, None, None, None, None) for value in values[first : first + chunk])
                if stream
                else [(topic, value, None, None, None, None) for value in values[first : first + chunk]]
            )
            outstanding.append(await enqueue_many(records))
            if len(outstanding) > OVERLAP_CALLS:
                failed += failures(await outstanding.popleft())
        await self.producer.flush()
        while outstanding:
            failed += failures(await outstanding.popleft())
        if failed:
            raise RuntimeError(f"{failed} record(s) failed")

    async def table(self, table: Any) -> None:
        """Publish a whole table (anything with the Arrow PyCapsule interface) with `send_table`, its `value`
        column as the records' values, no key."""
        report = await self.producer.send_table(table, topic=self.topic, value="value")  # type: ignore[attr-defined]
        failed = getattr(report, "failed", 0)  # the report counts failed rows (a TableReport)
        if failed:
            raise RuntimeError(f"{failed} row(s) failed: {getattr(report, 'failures', ())!r}"[:2000])

    async def callback(self, values: Sequence[bytes], keys: Sequence[bytes] | None) -> int:
        settled = Settled(len(values))
        on_done, enqueue, topic = settled.on_done, self.producer.enqueue, self.topic
        if keys is None:
            for value in values:
                (await enqueue(topic, value)).add_done_callback(on_done)
        else:
            for value, key in zip(values, keys, strict=True):
                (await enqueue(topic, value, key=key)).add_done_callback(on_done)
        await self.producer.flush()
        await settled.all_done.wait()
        return settled.failed

    async def callback_nowait(self, values: Sequence[bytes], keys: Sequence[bytes] | None) -> int:
        """The done-callback idiom on `enqueue_nowait` (`await enqueue` when told it would block), then flush;
        returns how many records failed."""
        from aioproducer.errors import WouldBlockError

        settled = Settled(len(values))
        on_done, topic = settled.on_done, self.topic
        nowait, enqueue = self.producer.enqueue_nowait, self.producer.enqueue  # type: ignore[attr-defined]
        for position, value in enumerate(values):
            key = None if keys is None else keys[position]
            try:
                delivery = nowait(topic, value, key=key)
            except WouldBlockError:
                delivery = await enqueue(topic, value, key=key)
            delivery.add_done_callback(on_done)
        await self.producer.flush()
        await settled.all_done.wait()
        return settled.failed

    async def flush(self) -> None:
        await self.producer.flush()

    async def close(self) -> None:
        await self.producer.close()

    async def idiom(self, name: str, values: Sequence[bytes]) -> int:
        producer, enqueue, topic = self.producer, self.producer.enqueue, self.topic
        if name == "gather":
            deliveries = [await enqueue(topic, value) for value in values]
            return failures(await asyncio.gather(*deliveries, return_exceptions=True))
        if name == "wait":
            deliveries = [await enqueue(topic, value) for value in values]
            return failures(await producer.wait(deliveries))
        if name == "tasks":
            send = producer.send
            return await in_tasks(lambda value: send(topic, value), values)
        if name == "send_many":
            failed = 0
            for first in range(0, len(values), BULK_CHUNK):
                chunk = [(topic, value, None, None, None, None) for value in values[first : first + BULK_CHUNK]]
                failed += failures(await producer.send_many(chunk))
            return failed
        raise ValueError(f"aioproducer has no idiom {name!r}")


class AiokafkaClient:
    def __init__(self, spec: RunSpec) -> None:
        import aiokafka  # type: ignore[import-untyped]

        linger_ms, batch_size = batching_of(str(spec.extra.get("batching", "linger")))
        settings = {"linger_ms": linger_ms, "max_batch_size": batch_size}
        self.topic = spec.topic
        self.producer: Any = aiokafka.AIOKafkaProducer(
            bootstrap_servers=spec.bootstrap,
            compression_type=None if spec.compression == "none" else spec.compression,
            acks="all" if spec.idempotent else 1,
            enable_idempotence=spec.idempotent,
            **{name: value for name, value in settings.items() if value is not None},
        )

    async def start(self) -> None:
        await self.producer.start()

    async def send_and_wait(self, value: bytes) -> None:
        await self.producer.send_and_wait(self.topic, value)

    async def produce(self, value: bytes) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = await self.producer.send(self.topic, value)
        return future

    async def loop(self, values: Sequence[bytes], keys: Sequence[bytes] | None) -> None:
        send, topic = self.producer.send, self.topic
        if keys is None:
            for value in values:
                await send(topic, value)
        else:
            for value, key in zip(values, keys, strict=True):
                await send(topic, value, key)
        await self.producer.flush()

    async def bulk(self, values: Sequence[bytes], chunk: int) -> None:
        send, topic = self.producer.send, self.topic
        for first in range(0, len(values), chunk):
            futures = [await send(topic, value) for value in values[first : first + chunk]]
            await asyncio.gather(*futures)

    async def flush(self) -> None:
        await self.producer.flush()

    async def close(self) -> None:
        await self.producer.stop()

    async def callback(self, values: Sequence[bytes], keys: Sequence[bytes] | None) -> int:
        settled = Settled(len(values))
        on_done, send, topic = settled.on_done, self.producer.send, self.topic
        pairs = zip(values, keys, strict=True) if keys is not None else ((value, None) for value in values)
        for value, key in pairs:
            (await send(topic, value, key)).add_done_callback(on_done)
        await self.producer.flush()
        await settled.all_done.wait()
        return settled.failed

    async def idiom(self, name: str, values: Sequence[bytes]) -> int:
        producer, send, topic = self.producer, self.producer.send, self.topic
        if name == "gather":
            futures = [await send(topic, value) for value in values]
            return failures(await asyncio.gather(*futures, return_exceptions=True))
        if name == "tasks":
            send_and_wait = producer.send_and_wait
            return await in_tasks(lambda value: send_and_wait(topic, value), values)
        if name == "send_many":  # its bulk idiom: send each record of a chunk, then gather the chunk's futures
            failed = 0
            for first in range(0, len(values), BULK_CHUNK):
                futures = [await send(topic, value) for value in values[first : first + BULK_CHUNK]]
                failed += failures(await asyncio.gather(*futures, return_exceptions=True))
            return failed
        raise ValueError(f"aiokafka has no idiom {name!r}")


class ConfluentAioClient:
    """confluent-kafka's AIOProducer with its defaults: it buffers 1000 messages (or 1 s) before handing a batch to
    librdkafka on a thread pool, which is why its single-send latency is about a second."""

    def __init__(self, spec: RunSpec) -> None:
        self.topic = spec.topic
        self.conf: dict[str, Any] = confluent_config(spec)
        self.producer: Any = None

    async def start(self) -> None:
        from confluent_kafka.aio import AIOProducer

        # Its constructor needs the running loop.
        self.producer = AIOProducer(self.conf)

    async def send_and_wait(self, value: bytes) -> None:
        await (await self.producer.produce(self.topic, value))

    async def produce(self, value: bytes) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = await self.producer.produce(self.topic, value)
        return future

    async def loop(self, values: Sequence[bytes], keys: Sequence[bytes] | None) -> None:
        produce, topic = self.producer.produce, self.topic
        if keys is None:
            for value in values:
                await produce(topic, value)
        else:
            for value, key in zip(values, keys, strict=True):
                await produce(topic, value, key)
        await self.producer.flush()

    async def bulk(self, values: Sequence[bytes], chunk: int) -> None:
        produce, topic = self.producer.produce, self.topic
        for first in range(0, len(values), chunk):
            futures = [await produce(topic, value) for value in values[first : first + chunk]]
            # flush() first: its futures otherwise wait for the 1 s buffer timeout to hand the tail to librdkafka.
            await self.producer.flush()
            await asyncio.gather(*futures)

    async def flush(self) -> None:
        await self.producer.flush()

    async def close(self) -> None:
        await self.producer.close()

    async def callback(self, values: Sequence[bytes], keys: Sequence[bytes] | None) -> int:
        settled = Settled(len(values))
        on_done, produce, topic = settled.on_done, self.producer.produce, self.topic
        pairs = zip(values, keys, strict=True) if keys is not None else ((value, None) for value in values)
        for value, key in pairs:
            (await produce(topic, value, key)).add_done_callback(on_done)
        await self.producer.flush()
        await settled.all_done.wait()
        return settled.failed

    async def idiom(self, name: str, values: Sequence[bytes]) -> int:
        producer, produce, topic = self.producer, self.producer.produce, self.topic
        if name == "gather":
            futures = [await produce(topic, value) for value in values]
            await producer.flush()  # else the last futures wait for its 1 s buffer timeout
            return failures(await asyncio.gather(*futures, return_exceptions=True))
        if name == "tasks":

            async def send_and_wait(value: bytes) -> None:
                await (await produce(topic, value))

            return await in_tasks(send_and_wait, values)
        raise ValueError(f"confluent-kafka AIOProducer has no idiom {name!r}")


def _observing(mode: str) -> list[Any]:
    """The hooks of an observability-overhead run; "off" silences the observer's per-batch work in this worker
    process (a measurement-only baseline: the producer has no such switch)."""
    if mode == "off":
        from aioproducer.observability.observer import Observer

        for name in ("produce_sent", "batch_failed", "batch_retried"):
            setattr(Observer, name, lambda self, *args: None)
    if mode == "otel":
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.trace import TracerProvider

        from aioproducer.contrib.opentelemetry import OpenTelemetryHook

        return [OpenTelemetryHook(tracer_provider=TracerProvider(), meter_provider=MeterProvider())]
    return []


_ADAPTERS: dict[str, type[AioproducerClient | AiokafkaClient | ConfluentAioClient]] = {
    "aioproducer": AioproducerClient,
    "aiokafka": AiokafkaClient,
    "confluent_aio": ConfluentAioClient,
}


def make_async_client(spec: RunSpec) -> AsyncClient:
    return _ADAPTERS[spec.client](spec)
