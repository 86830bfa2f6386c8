"""One Kafka JVM as a child process in its own process group, and the watchdog that kills them all if we die.

Owns the processes and their log files only; which node runs with which configuration is `kafka_cluster`'s job.
POSIX only (process groups and job-control signals).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from aioproducer.testing.kafka_jars import KafkaSetupError, require_tool

__all__ = ["JvmProcess", "Watchdog", "jvm_command"]

_STOP_GRACE_S = 15.0
_KILL_WAIT_S = 10.0

# The watchdog reads "+PGID" / "-PGID" lines (and "+/path" / "-/path" for scratch directories) on stdin; end of file
# means its parent died (a pipe's write end closes with the last process holding it, however that process ends:
# SIGKILL included). It then kills every process group still registered and removes the directories. It ignores
# SIGINT so that Ctrl-C, which reaches the whole foreground group, leaves the orderly shutdown to its parent.
_WATCHDOG = """
import os, shutil, signal, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)
watched = set()
for line in sys.stdin:
    line = line.strip()
    if line[:1] == "+":
        watched.add(line[1:])
    elif line[:1] == "-":
        watched.discard(line[1:])
for item in watched:
    if not item.startswith("/"):
        try:
            os.killpg(int(item), signal.SIGKILL)
        except OSError:
            pass
for item in watched:
    if item.startswith("/"):
        shutil.rmtree(item, ignore_errors=True)
"""


class Watchdog:
    """A tiny Python process that SIGKILLs the registered process groups once this process is gone, then removes
    the registered directories.

    `atexit` and finalizers cover a normal exit and exceptions; this covers the rest — the test runner killed by
    SIGKILL, a CI timeout, an interpreter crash. Unlike `prctl(PR_SET_PDEATHSIG)`, it does not depend on which
    thread started the JVM, and needs no code run between fork and exec in a process that has threads.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process = subprocess.Popen(
            [sys.executable, "-I", "-c", _WATCHDOG],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            text=True,
        )

    def _send(self, line: str) -> None:
        with self._lock:
            stdin = self._process.stdin
            if stdin is None or stdin.closed:
                return
            try:
                stdin.write(line + "\n")
                stdin.flush()
            except (BrokenPipeError, ValueError):
                pass

    def watch(self, pgid: int) -> None:
        self._send(f"+{pgid}")

    def forget(self, pgid: int) -> None:
        self._send(f"-{pgid}")

    def watch_directory(self, path: Path) -> None:
        """Remove `path` (absolute) too, after the process groups are dead."""
        self._send(f"+{path.resolve()}")

    def forget_directory(self, path: Path) -> None:
        self._send(f"-{path.resolve()}")

    def close(self) -> None:
        """End the watchdog: anything still registered is killed (by then it should be nothing)."""
        with self._lock:
            if self._process.stdin is not None and not self._process.stdin.closed:
                self._process.stdin.close()
        try:
            self._process.wait(_KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


def jvm_command(
    main_class: str,
    libs: Path,
    arguments: Sequence[str],
    *,
    heap_mb: int = 384,
    system_properties: Sequence[str] = (),
    fast_start: bool = True,
) -> list[str]:
    """`java` with Kafka's own GC flags (kafka-run-class.sh), a small heap and a fast-starting JIT.

    `-XX:TieredStopAtLevel=1` trades peak speed for start-up: right for functional tests, wrong for benchmarks,
    which pass `fast_start=False` for the full JIT.
    """
    return [
        require_tool("java"),
        f"-Xmx{heap_mb}m",
        "-Xss512k",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-XX:InitiatingHeapOccupancyPercent=35",
        "-XX:+ExplicitGCInvokesConcurrent",
        *(("-XX:TieredStopAtLevel=1",) if fast_start else ()),
        "-Djava.awt.headless=true",
        *system_properties,
        "-cp",
        f"{libs}/*",
        main_class,
        *arguments,
    ]


class JvmProcess:
    """A JVM started in a new session (its own process group), output appended to `log_path`.

    Signals go to the whole group, so nothing the JVM forks survives it. `start` may be called again after the
    process ended (a restart); every other method is safe to call on a process that is not running.
    """

    def __init__(self, command: Sequence[str], log_path: Path, watchdog: Watchdog, *, cwd: Path) -> None:
        self.command = list(command)
        self.log_path = log_path
        self.cwd = cwd
        self._watchdog = watchdog
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def returncode(self) -> int | None:
        return self._process.poll() if self._process is not None else None

    def start(self) -> None:
        if self.running:
            raise KafkaSetupError(f"{self.command[-1]} is already running (pid {self.pid})")
        self._reap()
        # A file, not a pipe: nobody drains the JVM's output while it runs. Appending keeps a restart's history.
        log = self.log_path.open("ab")
        try:
            process = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                start_new_session=True,
            )
        except OSError as exc:
            log.close()
            raise KafkaSetupError(f"could not start {self.command[0]}: {exc}") from exc
        except BaseException:
            log.close()
            raise
        self._process, self._log = process, log
        self._watchdog.watch(process.pid)

    def _signal(self, signum: int) -> bool:
        process = self._process
        if process is None or process.poll() is not None:
            return False
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            return False
        return True

    def pause(self) -> None:
        """SIGSTOP: the JVM freezes with its sockets open, as a long GC pause or a hung host would look.

        Returns once every thread of the JVM is stopped: signal delivery is asynchronous, and on a busy machine a
        thread still running for a few milliseconds after kill() could answer a request the caller thinks unanswerable.
        """
        process = self._process
        if not self._signal(signal.SIGSTOP) or process is None:
            return
        deadline = time.monotonic() + _PAUSE_WAIT_S
        while not _all_threads_stopped(process.pid):
            if time.monotonic() > deadline:  # a dead but unreaped JVM, or a thread stuck in the kernel
                raise KafkaSetupError(f"{self.command[-1]} (pid {process.pid}) did not stop within {_PAUSE_WAIT_S} s")
            time.sleep(0.005)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL and wait: a crash, with no controlled shutdown."""
        if self._signal(signal.SIGKILL):
            self._wait(_KILL_WAIT_S)
        self._reap()

    def stop(self, grace_s: float = _STOP_GRACE_S) -> None:
        """SIGTERM (Kafka's controlled shutdown: leaders move away first), SIGKILL if still alive after `grace_s`.

        A controlled shutdown can wait minutes when the quorum is gone, hence the bound.
        """
        # A paused JVM cannot act on SIGTERM: wake it first.
        self._signal(signal.SIGCONT)
        if self._signal(signal.SIGTERM) and not self._wait(grace_s):
            self._signal(signal.SIGKILL)
            self._wait(_KILL_WAIT_S)
        self._reap()

    def _wait(self, timeout_s: float) -> bool:
        process = self._process
        if process is None:
            return True
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    def _reap(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                # Only reached when a kill did not finish in time; never leave a process behind silently.
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            self._watchdog.forget(process.pid)
        log, self._log = self._log, None
        if log is not None:
            log.close()

    def log_tail(self, max_bytes: int = 4000) -> str:
        """The last `max_bytes` of the JVM's output (all of its starts), decoded leniently."""
        try:
            with self.log_path.open("rb") as log:
                size = log.seek(0, os.SEEK_END)
                log.seek(max(0, size - max_bytes))
                return log.read().decode(errors="replace")
        except FileNotFoundError:
            return ""


_PAUSE_WAIT_S = 5.0


def _all_threads_stopped(pid: int) -> bool:
    """Whether every thread of `pid` is in the stopped state ('T' in /proc/<pid>/task/<tid>/stat).

    Where /proc is missing (not Linux), the signal is trusted as sent.
    """
    tasks = Path(f"/proc/{pid}/task")
    try:
        stats = [(task / "stat").read_text() for task in tasks.iterdir()]
    except OSError:
        return not tasks.exists()
    # The state is the field after the parenthesised command name, which may itself hold spaces or parentheses.
    return all(stat[stat.rindex(")") + 2] in "Tt" for stat in stats)
