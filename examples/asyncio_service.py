"""A plain asyncio service: workers take orders from a queue and publish each one with `await producer.send`.

python examples/asyncio_service.py --bootstrap 127.0.0.1:9092 --orders 100
"""

from __future__ import annotations

import argparse
import asyncio
import json

from aioproducer import Producer, RecordMetadata


async def publish_orders(
    producer: Producer, orders: asyncio.Queue[dict[str, object] | None], topic: str
) -> list[RecordMetadata]:
    """One worker: publish orders keyed by customer (so a customer's orders stay in order) until it gets None."""
    delivered: list[RecordMetadata] = []
    while (order := await orders.get()) is not None:
        key = str(order["customer"]).encode()
        delivered.append(await producer.send(topic, json.dumps(order).encode(), key=key, headers=[("type", b"order")]))
    return delivered


async def run_service(bootstrap: str, topic: str, count: int, workers: int = 4) -> list[RecordMetadata]:
    orders: asyncio.Queue[dict[str, object] | None] = asyncio.Queue()
    for n in range(count):
        orders.put_nowait({"order": n, "customer": n % 7, "amount": n * 3})
    for _ in range(workers):
        orders.put_nowait(None)
    # Leaving the block flushes, waiting at most close_timeout_ms: a stopping service never overruns its grace period.
    async with Producer(bootstrap, acks="all", linger_ms=5, close_timeout_ms=10_000) as producer:
        results = await asyncio.gather(*(publish_orders(producer, orders, topic) for _ in range(workers)))
    return [md for worker in results for md in worker]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--orders", type=int, default=100)
    args = parser.parse_args()
    delivered = asyncio.run(run_service(args.bootstrap, args.topic, args.orders))
    print(f"published {len(delivered)} orders")


if __name__ == "__main__":
    main()
