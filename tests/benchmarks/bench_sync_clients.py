"""The thread-based clients under test — confluent-kafka's `Producer` and kafka-python — and their synchronous drivers.

Each hot loop uses the client's fastest documented idiom: confluent-kafka's `produce()` in a loop with no delivery
callback and `poll(0)` every `POLL_EVERY` records (retrying on a full queue after serving it), or, as its second
idiom, with a callback per record; kafka-python's `send()`. Owns nothing but these adapters; it must not import
aioproducer.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from tests.benchmarks.workloads import RunSpec, batching_of

__all__ = ["POLL_EVERY", "SyncClient", "make_sync_client"]

# How often the no-callback loop serves librdkafka's queue: often enough that delivery reports never pile up to its
# 100 k-message queue bound, rarely enough that the call costs nothing per record.
POLL_EVERY = 1000

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
        self.producer: Any = confluent_kafka.Producer(confluent_config(spec))

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
        for index, (value, key) in enumerate(pairs):
            try:
                produce(topic, value, key)
            except BufferError:  # the local queue is full: serve delivery reports until it takes the record
                while True:
                    poll(0.005)
                    try:
                        produce(topic, value, key)
                        break
                    except BufferError:
                        continue
            if index % POLL_EVERY == 0:
                poll(0)

    def bulk(self, values: Sequence[bytes], chunk: int) -> None:
        for first in range(0, len(values), chunk):
            self._produce_all(values[first : first + chunk], None)
            self.producer.flush()

    def flush(self) -> None:
        self.producer.flush()

    def close(self) -> None:
        self.producer.flush()

    def callback(self, values: Sequence[bytes], keys: Sequence[bytes] | None) -> int:
        """A delivery callback per record that checks its outcome, `poll(0)` after each produce (the documented
        callback idiom: callbacks run inside poll), then flush; returns how many records failed."""
        failed = 0

        def on_delivery(err: Any, msg: Any) -> None:
            nonlocal failed
            if err is not None:
                failed += 1

        produce, poll, topic = self.producer.produce, self.producer.poll, self.topic
        pairs = zip(values, keys, strict=True) if keys is not None else ((value, None) for value in values)
        for value, key in pairs:
            while True:
                try:
                    produce(topic, value, key, on_delivery=on_delivery)
                    break
                except BufferError:
                    poll(0.005)
            poll(0)
        self.producer.flush()
        return failed


def _confluent_done(done: Done, t0: float, err: Any, msg: Any) -> None:
    done(t0, err is None)


class KafkaPythonClient:
    def __init__(self, spec: RunSpec) -> None:
        import kafka  # type: ignore[import-untyped]

        linger_ms, batch_size = batching_of(str(spec.extra.get("batching", "linger")))
        settings: dict[str, Any] = {"linger_ms": linger_ms, "batch_size": batch_size}
        self.topic = spec.topic
        self.producer: Any = kafka.KafkaProducer(
            bootstrap_servers=spec.bootstrap,
            compression_type=None if spec.compression == "none" else spec.compression,
            acks="all" if spec.idempotent else 1,
            enable_idempotence=spec.idempotent,
            **{name: value for name, value in settings.items() if value is not None},
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


def confluent_config(spec: RunSpec) -> dict[str, Any]:
    """librdkafka's settings for a run (shared by the sync Producer and the AIOProducer)."""
    config: dict[str, Any] = {
        "bootstrap.servers": spec.bootstrap,
        "compression.type": spec.compression,
        "acks": "all" if spec.idempotent else 1,
        "enable.idempotence": spec.idempotent,
    }
    linger_ms, batch_size = batching_of(str(spec.extra.get("batching", "linger")))
    if linger_ms is not None:
        config["linger.ms"] = linger_ms
    if batch_size is not None:
        config["batch.size"] = batch_size  # librdkafka's bound on a batch's bytes (default 1 MB)
    return config


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
