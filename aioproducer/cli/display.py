"""What the commands show: results on stdout, progress and diagnostics on stderr, drawn with `rich`.

A live progress bar when stderr is a terminal; otherwise a plain line every few seconds, as Java's perf tool prints,
so logs and pipes stay readable. Owns no Kafka logic.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from aioproducer.cli.stats import RunSummary

if TYPE_CHECKING:
    from aioproducer.cli.check import Step

__all__ = ["Display", "java_closing_line"]

_PLAIN_EVERY_S = 5.0


class Display:
    def __init__(self, *, stdout: Console | None = None, stderr: Console | None = None) -> None:
        self.stdout = stdout or Console(highlight=False, soft_wrap=True)
        self.stderr = stderr or Console(stderr=True, highlight=False, soft_wrap=True)

    def out(self, text: str) -> None:
        """A line of machine-readable output: printed as is."""
        self.stdout.out(text, highlight=False)

    def info(self, text: str) -> None:
        self.stderr.print(escape(text))

    def error(self, text: str) -> None:
        self.stderr.print(f"[bold red]error:[/] {escape(text)}")

    @contextlib.contextmanager
    def progress(self, description: str, total: int) -> Iterator[Any]:
        """A progress display for `total` records; `.update(done, text)` moves it."""
        if self.stderr.is_terminal:
            with Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeElapsedColumn(),
                console=self.stderr,
                refresh_per_second=8,
            ) as bar:
                task = bar.add_task(description, total=total, rate="")
                yield _LiveProgress(bar, task)
        else:
            yield _PlainProgress(self.stderr, description, total)

    def perf_report(self, summary: RunSummary) -> None:
        latency = summary.latency_ms
        table = Table(title="perf-test", show_header=False, title_justify="left")
        table.add_column(style="bold")
        table.add_column(justify="right")
        table.add_row("records delivered", f"{summary.delivered:,} of {summary.records:,}")
        if summary.failed:
            table.add_row("records failed", f"[red]{summary.failed:,}[/] " + escape(str(summary.errors)))
        table.add_row("throughput", f"{summary.records_per_s:,.1f} records/s")
        table.add_row("", f"{summary.mb_per_s:,.2f} MB/s")
        table.add_row("elapsed", f"{summary.seconds:.2f} s")
        for name in ("avg", "p50", "p95", "p99", "p99.9", "max"):
            table.add_row(f"latency {name}", _ms(latency[name]))
        table.add_row("latency samples", f"{summary.latency_samples:,}")
        self.stdout.print(table)
        self.stdout.out(java_closing_line(summary), highlight=False)

    def check_step(self, step: Step) -> None:
        mark = "[green]✓[/]" if step.ok else "[bold red]✗[/]"
        self.stdout.print(f"{mark} [bold]{escape(step.name)}[/]: {escape(step.detail)}")
        if step.hint:
            self.stdout.print(f"  [yellow]→ {escape(step.hint)}[/]")

    def check_verdict(self, ok: bool, failures: int) -> None:
        if ok:
            self.stdout.print("[bold green]OK[/]: every check passed")
        else:
            self.stdout.print(f"[bold red]FAILED[/]: {max(failures, 1)} check(s) failed; see the hints above")


def java_closing_line(summary: RunSummary) -> str:
    """The closing line of Java's ProducerPerformance, format for format, for people and scripts used to it:
    records/sec as Java's `%f`, average and maximum as `%.2f`, percentiles as whole milliseconds (`%d`: Java keeps
    each latency as an int of ms, truncated)."""
    latency = summary.latency_ms
    p50, p95, p99, p999 = (_whole_ms(latency[name]) for name in ("p50", "p95", "p99", "p99.9"))
    return (
        f"{summary.delivered} records sent, {summary.records_per_s:f} records/sec ({summary.mb_per_s:.2f} MB/sec), "
        f"{latency['avg']:.2f} ms avg latency, {latency['max']:.2f} ms max latency, {p50} ms 50th, {p95} ms 95th, "
        f"{p99} ms 99th, {p999} ms 99.9th."
    )


def _whole_ms(value: float) -> int:
    return 0 if math.isnan(value) else int(value)


def _ms(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:,.2f} ms"


class _LiveProgress:
    def __init__(self, bar: Progress, task: Any) -> None:
        self._bar, self._task = bar, task

    def update(self, done: int, text: str) -> None:
        self._bar.update(self._task, completed=done, rate=text)


class _PlainProgress:
    def __init__(self, console: Console, description: str, total: int) -> None:
        self._console, self._description, self._total = console, description, total
        self._last = time.monotonic()

    def update(self, done: int, text: str) -> None:
        now = time.monotonic()
        if now - self._last >= _PLAIN_EVERY_S:
            self._last = now
            self._console.out(f"{self._description}: {done:,}/{self._total:,} acknowledged, {text}", highlight=False)
