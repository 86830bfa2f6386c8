"""`aioproducer broker`: a development broker as a user runs it, in its own process: it prints the bootstrap address
once it serves, a producer and an independent consumer use it, Ctrl-C stops it and leaves nothing listening."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from aioproducer import Producer
from aioproducer.testing import read_back

_STARTUP_S = 240.0  # real Kafka's first start on a loaded machine, jars already cached


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@contextmanager
def broker_command(*options: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`python -m aioproducer broker OPTIONS` until its first line of output (the bootstrap address)."""
    command = [sys.executable, "-m", "aioproducer", "broker", *options]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        address = process.stdout.readline().strip()  # blocks until the broker serves, or the command exits
        if not address:
            process.wait(_STARTUP_S)
            pytest.fail(
                f"no address printed; exit {process.returncode}: {process.stderr.read() if process.stderr else ''}"
            )
        yield process, address
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def interrupt(process: subprocess.Popen[str]) -> tuple[int, str]:
    """Ctrl-C, as a terminal sends it; the command must stop its broker and exit on its own."""
    process.send_signal(signal.SIGINT)
    _, errors = process.communicate(timeout=60)
    return process.returncode, errors


async def produce(bootstrap: str, topic: str) -> None:
    async with Producer(bootstrap, acks="all") as producer:
        await producer.send(topic, b"through the development broker", key=b"k")


def test_tansu_serves_until_ctrl_c_and_leaves_nothing_listening() -> None:
    port = free_port()
    topic = f"dev-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    with broker_command("--port", str(port)) as (process, address):
        assert address == f"127.0.0.1:{port}"
        assert time.monotonic() - started < 30  # Tansu starts at once (the imports are most of it)
        asyncio.run(produce(address, topic))
        assert [r.value for r in read_back(address, topic)] == [b"through the development broker"]
        status, errors = interrupt(process)
    assert status == 0, errors
    assert "stopping" in errors and not listening(port)


@pytest.mark.kafka
@pytest.mark.timeout(400)
def test_real_kafka_serves_until_ctrl_c_and_its_jvm_goes_with_it() -> None:
    port = free_port()
    topic = f"dev-{uuid.uuid4().hex[:8]}"
    with broker_command("--kafka", "--port", str(port)) as (process, address):
        assert address == f"127.0.0.1:{port}"
        asyncio.run(produce(address, topic))
        assert [r.value for r in read_back(address, topic)] == [b"through the development broker"]
        status, errors = interrupt(process)
    assert status == 0, errors
    assert "Apache Kafka" in errors and not listening(port)


def test_a_port_in_use_is_refused_with_the_reason() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "aioproducer", "broker", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 1 and done.stdout == ""
    assert f"127.0.0.1:{port} is already in use" in done.stderr


@pytest.mark.parametrize(
    ("options", "message"),
    [(["--port", "0"], "--port must be in 1..65535"), (["--kafka-version", "4.4.0"], "--kafka-version needs --kafka")],
)
def test_bad_options_exit_2_before_starting_anything(options: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "aioproducer", "broker", *options],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 2 and message in done.stderr
