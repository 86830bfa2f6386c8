"""The thread-based clients under test — confluent-kafka's `Producer` and kafka-python — and their synchronous drivers.

Each hot loop uses the client's documented idiom (confluent: `produce` + `poll(0)`, retrying on a full queue).
Owns nothing but these adapters; it must not import aioproducer.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from tests.benchmarks.workloads import LINGER_MS, RunSpec

__all__ = ["SyncClient", "make_sync_client"]

# Called once per acknowledged (ok=True) or failed record, from whichever thread the client delivers on.
Done = Callable[[float, bool], None]


class SyncClient(Protocol):
    def send_and_wait(self, value: bytes) -> None: ...

    def produce(self, value: bytes, t0: float, done: Done) -> None: ...

    def serve(self) -> None: ...

    def loop(self, values: Sequence[bytes], keys: Sequence[bytes] | None) -> None: ...

    def bulk(self, values: Sequence[bytes], chunk: int) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class ConfluentSyncClient:
    def __init__(self, spec: RunSpec) -> None:
        import confluent_kafka

        self.topic = spec.topic
        self.producer: Any = confluent_kafka.Producer(
            {
                "bootstrap.servers": spec.bootstrap,
                "linger.ms": LINGER_MS,
                "compression.type": spec.compression,
                "acks": "all" if spec.idempotent else 1,
                "enable.idempotence": spec.idempotent,
            }
        )

    def send_and_wait(self, value: bytes) -> None:
        delivered = threading.Event()
        self.producer.produce(self.topic, value, on_delivery=lambda err, msg: delivered.set())
        # poll(), not flush(): flush() would send at once and skip linger.ms, unlike every other client here.
        while not delivered.is_set():
            self.producer.poll(0.1)

    def produce(self, value: bytes, t0: float, done: Done) -> None:
        self.producer.produce(self.topic, value, on_delivery=functools.partial(_confluent_done, done, t0))
        self.producer.poll(0)

    def serve(self) -> None:
        self.producer.poll(0)

    def loop(self, values: Sequence[bytes], keys: Sequence[bytes] | None) -> None:
        self._produce_all(values, keys)
        self.producer.flush()

    def _produce_all(self, values: Sequence[bytes], keys: Sequence[bytes] | None) -> None:
        produce, poll, topic = self.producer.produce, self.producer.poll, self.topic
        pairs = zip(values, keys, strict=True) if keys is not None else ((value, None) for value in values)
        for value, key in pairs:
            while True:
                try:
                    produce(topic, value, key)
                    break
                except BufferError:  # the local queue is full: serve delivery reports, then retry
                    poll(0.005)
            poll(0)

    def bulk(self, values: Sequence[bytes], chunk: int) -> None:
        for first in range(0, len(values), chunk):
            self._produce_all(values[first : first + chunk], None)
            self.producer.flush()

    def flush(self) -> None:
        self.producer.flush()

    def close(self) -> None:
        self.producer.flush()

    def idiom(self, name: str, values: Sequence[bytes]) -> int:
        """Produce `values` the way idiom `name` waits for each record; returns how many records failed."""
        if name == "callback":  # produce with a delivery callback per record, poll(0) after each, then flush
            failed = 0

            def on_delivery(err: Any, msg: Any) -> None:
                nonlocal failed
                if err is not None:
                    failed += 1

            produce, poll, topic = self.producer.produce, self.producer.poll, self.topic
            for value in values:
                while True:
                    try:
                        produce(topic, value, on_delivery=on_delivery)
                        break
                    except BufferError:
                        poll(0.005)
                poll(0)
            self.producer.flush()
            return failed
        if name == "enqueue_flush":
            self.loop(values, None)
            return 0
        if name == "send_many":
            self.bulk(values, 10_000)
            return 0
        raise ValueError(f"confluent-kafka Producer has no idiom {name!r}")


def _confluent_done(done: Done, t0: float, err: Any, msg: Any) -> None:
    done(t0, err is None)


class KafkaPythonClient:
    def __init__(self, spec: RunSpec) -> None:
        import kafka  # type: ignore[import-untyped]

        self.topic = spec.topic
        self.producer: Any = kafka.KafkaProducer(
            bootstrap_servers=spec.bootstrap,
            linger_ms=LINGER_MS,
            compression_type=None if spec.compression == "none" else spec.compression,
            acks="all" if spec.idempotent else 1,
            enable_idempotence=spec.idempotent,
        )

    def send_and_wait(self, value: bytes) -> None:
        self.producer.send(self.topic, value).get(timeout=30)

    def produce(self, value: bytes, t0: float, done: Done) -> None:
        future = self.producer.send(self.topic, value)
        future.add_callback(lambda _: done(t0, True))
        future.add_errback(lambda _: done(t0, False))

    def serve(self) -> None:
        """kafka-python delivers on its own I/O thread: nothing to serve."""

    def loop(self, values: Sequence[bytes], keys: Sequence[bytes] | None) -> None:
        send, topic = self.producer.send, self.topic
        if keys is None:
            for value in values:
                send(topic, value)
        else:
            for value, key in zip(values, keys, strict=True):
                send(topic, value, key)
        self.producer.flush()

    def bulk(self, values: Sequence[bytes], chunk: int) -> None:
        send, topic = self.producer.send, self.topic
        for first in range(0, len(values), chunk):
            for value in values[first : first + chunk]:
                send(topic, value)
            self.producer.flush()

    def flush(self) -> None:
        self.producer.flush()

    def close(self) -> None:
        self.producer.close()


def make_sync_client(spec: RunSpec) -> SyncClient:
    if spec.client == "confluent_sync":
        return ConfluentSyncClient(spec)
    return KafkaPythonClient(spec)


def pace(count: int, rate: int, send_one: Callable[[int], None], idle: Callable[[], None]) -> float:
    """Call `send_one(i)` for i < count at `rate` per second (in ~0.5 ms bursts); returns the seconds it took."""
    started = time.perf_counter()
    sent = 0
    while sent < count:
        due = min(count, int((time.perf_counter() - started) * rate) + 1)
        while sent < due:
            send_one(sent)
            sent += 1
        idle()
        time.sleep(0.0005)
    return time.perf_counter() - started
