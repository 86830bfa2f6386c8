"""Exactly-once consume-transform-produce: read payments with a confluent-kafka consumer, convert each amount to cents,
and write the result to another topic. Each batch's output and the consumer's positions are committed in one Kafka
transaction, so a crash, a rebalance or an error never loses or doubles a payment for read_committed readers.

python examples/exactly_once.py --bootstrap 127.0.0.1:9092 --source payments --sink payments-cents --group cents

Run several copies with the same --group: partitions are shared between them. Give each copy a transactional id that
survives its restarts (the pod or host name): a restarted copy then fences its own zombie at once (KIP-98); the group
metadata sent with the offsets fences a zombie that lost its partitions in a rebalance (KIP-447).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import socket
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from aioproducer import Producer
from aioproducer.errors import TransactionError

log = logging.getLogger("exactly_once")

Transform = Callable[[bytes], bytes]


def to_cents(value: bytes) -> bytes:
    """{"id": 7, "amount": "12.34"} -> {"id": 7, "cents": 1234}"""
    payment = json.loads(value)
    units, _, fraction = str(payment["amount"]).partition(".")
    cents = int(units) * 100 + int((fraction + "00")[:2])
    return json.dumps({"id": payment["id"], "cents": cents}).encode()


def new_consumer(bootstrap: str, group: str, source: str) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",  # read only committed input: the upstream may be transactional too
            "enable.auto.commit": False,  # offsets are committed by the producer, inside each transaction
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([source])
    return consumer


async def process_batch(
    consumer: Consumer, producer: Producer, sink: str, messages: list[Any], transform: Transform
) -> None:
    """One transaction: the transformed batch, plus the next offset to read in each partition it came from."""
    next_offsets: dict[tuple[str, int], int] = {}
    async with producer.transaction():
        for message in messages:
            await producer.enqueue(sink, transform(message.value()), key=message.key())
            next_offsets[(message.topic(), message.partition())] = message.offset() + 1
        await producer.send_offsets_to_transaction(next_offsets, consumer.consumer_group_metadata())


def rewind(consumer: Consumer) -> None:
    """After an abort, go back to the group's committed positions: the aborted batch is read again."""
    for tp in consumer.committed(consumer.assignment(), timeout=10):
        consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))


async def run(
    consumer: Consumer,
    producer: Producer,
    sink: str,
    stop: asyncio.Event,
    *,
    transform: Transform = to_cents,
    batch_size: int = 500,
) -> int:
    """Process batches until `stop` is set; returns the number of input records committed."""
    committed = 0
    while not stop.is_set():
        # confluent-kafka blocks: poll in a thread, so the producer's sender keeps running meanwhile.
        messages = await asyncio.to_thread(consumer.consume, batch_size, 0.5)
        messages = [m for m in messages if m.error() is None]
        if not messages:
            continue
        try:
            await process_batch(consumer, producer, sink, messages, transform)
        except TransactionError as exc:
            if exc.fatal:  # fenced by a newer copy with our transactional id, or not authorized: stop
                raise
            log.warning("batch aborted, reading it again: %s", exc)
            rewind(consumer)
        except Exception:
            # The transaction was aborted (by `producer.transaction()`); nothing of the batch is visible. Here we
            # retry it; a record that always fails would need a dead-letter topic instead.
            log.exception("batch aborted by an error in the transform; reading it again")
            rewind(consumer)
        else:
            committed += len(messages)
    return committed


async def main_async(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    consumer = new_consumer(args.bootstrap, args.group, args.source)
    try:
        # start() registers the transactional id: an older copy with the same id is fenced here.
        async with Producer(args.bootstrap, transactional_id=args.transactional_id, linger_ms=5) as producer:
            count = await run(consumer, producer, args.sink, stop)
        print(f"committed {count} payments")
    finally:
        consumer.close()  # leaves the group at once, so its partitions move without waiting for a timeout


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--source", default="payments")
    parser.add_argument("--sink", default="payments-cents")
    parser.add_argument("--group", default="payments-cents")
    parser.add_argument("--transactional-id", default=f"payments-cents-{socket.gethostname()}")
    logging.basicConfig(level=logging.INFO)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
