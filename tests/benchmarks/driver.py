"""Running one client's process under the orchestrator's eye: start it, let the caller take its readings when the
process is ready to time and when the timed part is over (the READY/RESULT handshake of `bench_worker` and
`ProducerBench`), and collect the result line and what the process cost as a whole (CPU of every thread, from wait4).

Owns the child process and its pipes; what to read at each moment is the caller's (`run.py`).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["READY_MARK", "RESULT_MARK", "Finished", "drive"]

READY_MARK = "BENCH-READY"
RESULT_MARK = "BENCH-RESULT "


@dataclass
class Finished:
    """What one process left: its last result line (or an error), its whole stdout, and its cost."""

    result: dict[str, Any]
    stdout: str
    returncode: int
    cpu_s: float  # user + system CPU of the whole process over its life, every thread (wait4's rusage)
    wall_s: float  # from start to exit
    lines: list[str] = field(default_factory=list)


def drive(
    command: Sequence[str],
    *,
    cwd: Path,
    timeout_s: float,
    on_ready: Callable[[], None] | None = None,
    on_result: Callable[[], None] | None = None,
    expects_result: bool = True,
) -> Finished:
    """Run `command`; when it prints READY_MARK call `on_ready` and answer "go"; when it prints its first result
    line call `on_result`. A process that prints no READY_MARK is never answered, and one that does not
    `expects_result` (perf-test) is judged by its exit code alone: its output is the caller's to read. On timeout
    the process is killed and the result is an error."""
    started = time.monotonic()
    deadline = started + timeout_s
    with tempfile.TemporaryFile(mode="w+") as stderr:
        process = subprocess.Popen(
            list(command), cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=False
        )
        assert process.stdout is not None and process.stdin is not None
        lines: list[str] = []
        pending = b""
        reported = False
        timed_out = False
        fd = process.stdout.fileno()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                os.kill(process.pid, signal.SIGKILL)
                break
            readable, _, _ = select.select([fd], [], [], min(left, 1.0))
            if not readable:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for raw in complete:
                line = raw.decode("utf-8", "replace")
                lines.append(line)
                if line == READY_MARK:
                    if on_ready is not None:
                        on_ready()
                    process.stdin.write(b"go\n")
                    process.stdin.flush()
                elif line.startswith(RESULT_MARK) and not reported:
                    reported = True
                    if on_result is not None:
                        on_result()
        if pending:
            lines.append(pending.decode("utf-8", "replace"))
        # wait4 rather than Popen.wait: it gives the child's own CPU, every thread, up to its exit.
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        process.stdin.close()
        process.stdout.close()
        stderr.seek(0)
        errors = stderr.read()
    wall_s = time.monotonic() - started
    result = _last_result(lines)
    if timed_out:
        result = {"error": f"timed out after {timeout_s:.0f} s"}
    elif result is None and (expects_result or process.returncode != 0):
        result = {"error": f"exited {process.returncode} without a result; stderr:\n{errors[-3000:]}"}
    elif result is None:
        result = {}
    elif "error" not in result and process.returncode != 0:
        result = {"error": f"exited {process.returncode} after its result; stderr:\n{errors[-3000:]}"}
    return Finished(
        result=result,
        stdout="\n".join(lines),
        returncode=process.returncode,
        cpu_s=usage.ru_utime + usage.ru_stime,
        wall_s=wall_s,
        lines=lines,
    )


def _last_result(lines: list[str]) -> dict[str, Any] | None:
    for line in reversed(lines):
        if line.startswith(RESULT_MARK):
            result: dict[str, Any] = json.loads(line[len(RESULT_MARK) :])
            return result
    return None
