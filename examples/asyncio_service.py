"""An asyncio service that publishes orders, written as it should be copied.

- Intake and publishing are decoupled by a bounded queue: when Kafka is slower than the intake, `submit` waits
  (backpressure) instead of memory growing without limit.
- One publisher task takes orders off the queue in batches and `enqueue`s them in queue order. That is what keeps
  a customer's orders in order: the producer keeps the order of appends per partition (idempotence keeps it through
  retries), and a key always maps to one partition. Several workers each awaiting `send` would race each other and
  reorder a customer's orders.
- Acknowledgements are awaited per batch in the background (`confirm`), at most `max_batches_in_flight` batches at
  once, so publishing never waits a broker round trip per record.
- SIGTERM (and Ctrl-C) stop the intake; what is queued is still published, then the producer flushes within a bounded
  time and the process exits 0 — what was never taken off the queue is counted as not published.

    python examples/asyncio_service.py --bootstrap 127.0.0.1:9092 --orders 100000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
from collections.abc import Sequence
from dataclasses import dataclass

from aioproducer import Delivery, Producer
from aioproducer.errors import AioProducerError

log = logging.getLogger("orders")


@dataclass(frozen=True)
class Order:
    customer: int
    sequence: int  # the customer's n-th order: consumers must see 0, 1, 2, ... per customer
    amount: int


@dataclass
class Counts:
    published: int = 0
    failed: int = 0


class OrderPublisher:
    """Publishes submitted orders to `topic`, keyed by customer, in submission order per customer."""

    def __init__(
        self,
        producer: Producer,
        topic: str,
        *,
        queue_size: int = 10_000,
        batch_size: int = 1_000,
        max_batches_in_flight: int = 4,
    ) -> None:
        self.producer = producer
        self.topic = topic
        self.queue: asyncio.Queue[Order | None] = asyncio.Queue(maxsize=queue_size)
        self.batch_size = batch_size
        self.counts = Counts()
        self._in_flight = asyncio.Semaphore(max_batches_in_flight)
        self._confirmations: set[asyncio.Task[None]] = set()

    async def submit(self, order: Order) -> None:
        """Queue an order; waits while the queue is full (backpressure on the intake)."""
        await self.queue.put(order)

    async def run(self) -> Counts:
        """Publish until `stop()` was called and the queue is drained; returns the counts."""
        while True:
            batch, stopping = await self._next_batch()
            if batch:
                await self._in_flight.acquire()  # bounded: at most this many batches await acknowledgements
                enqueued = [await self._enqueue(order) for order in batch]
                deliveries = [delivery for delivery in enqueued if delivery is not None]
                task = asyncio.get_running_loop().create_task(self._confirm(deliveries))
                self._confirmations.add(task)
                task.add_done_callback(self._confirmations.discard)
            if stopping:
                break
        await asyncio.gather(*self._confirmations)
        return self.counts

    async def stop(self) -> None:
        """No more orders: `run` publishes what is queued, then returns."""
        await self.queue.put(None)

    async def _next_batch(self) -> tuple[list[Order], bool]:
        first = await self.queue.get()
        if first is None:
            return [], True
        batch = [first]
        while len(batch) < self.batch_size and not self.queue.empty():
            order = self.queue.get_nowait()
            if order is None:
                return batch, True
            batch.append(order)
        return batch, False

    async def _enqueue(self, order: Order) -> Delivery | None:
        value = json.dumps({"customer": order.customer, "sequence": order.sequence, "amount": order.amount})
        try:
            return await self.producer.enqueue(self.topic, value.encode(), key=str(order.customer).encode())
        except AioProducerError as exc:  # refused at the call: buffer full for max_block_ms, producer closed
            self.counts.failed += 1
            log.error("order not published: %r", exc)
            return None

    async def _confirm(self, deliveries: Sequence[Delivery]) -> None:
        try:
            for outcome in await asyncio.gather(*deliveries, return_exceptions=True):
                if isinstance(outcome, BaseException):
                    self.counts.failed += 1
                    log.error("order not published: %r", outcome)
                else:
                    self.counts.published += 1
        finally:
            self._in_flight.release()


async def intake(publisher: OrderPublisher, count: int, customers: int, stop: asyncio.Event) -> int:
    """Stand-in for the service's source of orders (an HTTP API, a queue...): `count` orders over `customers`."""
    sequences = [0] * customers
    submitted = 0
    for n in range(count):
        if stop.is_set():
            break
        customer = n % customers
        await publisher.submit(Order(customer, sequences[customer], amount=n))
        sequences[customer] += 1
        submitted += 1
        if n % 100 == 0:
            await asyncio.sleep(0)  # let the service breathe, as a real source would
    return submitted


async def run_service(
    bootstrap: str, topic: str, count: int, *, customers: int = 7, shutdown_timeout_s: float = 20.0
) -> Counts:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    producer = Producer(bootstrap, acks="all", linger_ms=5)
    await producer.start()
    log.info("publishing to %s", topic)
    try:
        publisher = OrderPublisher(producer, topic)
        publishing = loop.create_task(publisher.run())
        submitted = await intake(publisher, count, customers, stop)
        await publisher.stop()
        # Bounded shutdown: the queue's orders get this long to be acknowledged ...
        await asyncio.wait({publishing}, timeout=shutdown_timeout_s)
    finally:
        # ... then whatever is still undelivered fails now (and is counted), and the producer stops.
        await producer.close(timeout=0)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    counts = await publishing
    log.info("submitted %d orders, published %d, failed %d", submitted, counts.published, counts.failed)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--orders", type=int, default=100)
    parser.add_argument("--customers", type=int, default=7)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    counts = asyncio.run(run_service(args.bootstrap, args.topic, args.orders, customers=args.customers))
    print(f"published {counts.published} orders, {counts.failed} failed", flush=True)
    raise SystemExit(0 if counts.failed == 0 else 1)


if __name__ == "__main__":
    main()
