"""What reading a table's columns costs per row, with no Kafka at all: the floor under columnar publishing.

Walks the rows of two bytes columns (a 16-byte key, a 100-byte value) through the compiled accessors from Cython (the
`cdef ... nogil` functions of aioproducer/columnar/_arrow.pxd, as the producer's encoder calls them: no Python object
per row), for the layouts exporters hand us (pyarrow binary / large_binary, polars' views, a dictionary of keys);
then what checking a Spark-sized batch costs before its rows can be read (ArrowReader's schema plan, the buffer
checks, the views: both twins), and, for scale, a Python-level accessor per row (both twins) and pyarrow's own
`to_pylist`. CPU time (`time.process_time`), median and range of alternating rounds in one process.

    python -m tests.benchmarks.columnar_walk [--rows N] [--rounds N]

Needs the compiled extension, a C compiler and Cython (it compiles tests/columnar/walk_rows.pyx, a caller of the
.pxd); writes results/columnar_walk.md.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from aioproducer.columnar import ArrowReader, arrow
from tests.columnar.cython_build import build_walker

RESULTS = Path(__file__).resolve().parent / "results"


def tables(rows: int) -> dict[str, Any]:
    keys = [b"key-%011d" % (i * 7919 % rows) for i in range(rows)]  # 16 bytes
    values = [bytes([i % 251]) * 100 for i in range(rows)]
    binary = pa.table({"k": pa.array(keys, pa.binary()), "v": pa.array(values, pa.large_binary())})
    return {
        "pyarrow binary + large_binary": binary,
        "polars binary_view (from the frame)": pl.DataFrame({"k": keys, "v": values}),
        "pyarrow dictionary<int32, utf8> keys": pa.table(
            {"k": pa.array([k.decode() for k in keys]).dictionary_encode(), "v": binary.column("v")}
        ),
    }


def spark_batch(rows: int) -> pa.RecordBatch:
    """A batch as Spark hands it to Python (10 k rows by default), with every producer column."""
    return pa.record_batch(
        {
            "k": pa.array([b"key-%011d" % i for i in range(rows)]),
            "v": pa.array([b"v" * 100] * rows),
            "t": pa.array(["orders"] * rows),
            "p": pa.array([i % 6 for i in range(rows)], pa.int32()),
            "ts": pa.array([1_700_000_000_000 + i for i in range(rows)], pa.timestamp("ms")),
            "h": pa.array([[{"key": "trace", "value": b"abc"}]] * rows),
        }
    )


def timed(action: Callable[[], object]) -> float:
    started = time.process_time()
    action()
    return time.process_time() - started


def measure(cases: dict[str, Callable[[], object]], rounds: int) -> dict[str, list[float]]:
    """Each case once per round, in an order rotated every round; the seconds of each run."""
    seconds: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            seconds[name].append(timed(cases[name]))
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch-rows", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    options = parser.parse_args()
    compiled = arrow.load_compiled()
    assert compiled is not None, "the compiled extension is not built"
    twins = {"compiled": compiled, "pure": arrow.PURE}
    with tempfile.TemporaryDirectory() as workdir:
        walker = build_walker(Path(workdir))
    rows, batch_rows = options.rows, options.batch_rows

    walks: dict[str, Callable[[], object]] = {}
    for name, data in tables(rows).items():
        batch = next(ArrowReader(data, key="k", value="v", implementation=compiled))
        assert batch.num_rows == rows, f"{name}: one batch expected"
        assert walker.checksum(batch.key, batch.value)[0] == rows
        walks[name] = lambda batch=batch: walker.checksum(batch.key, batch.value)

    spark = spark_batch(batch_rows)
    roles = {"key": "k", "value": "v", "topic": "t", "partition": "p", "timestamp": "ts", "headers": "h"}

    def open_and_check(twin: arrow.Implementation) -> Callable[[], object]:
        return lambda: next(ArrowReader(spark, implementation=twin, **roles))

    checks = {f"check a {batch_rows}-row batch, 6 columns ({twin})": open_and_check(t) for twin, t in twins.items()}

    sample = min(rows, 100_000)
    python_level: dict[str, Callable[[], object]] = {}
    first = tables(sample)["pyarrow binary + large_binary"]
    for twin_name, twin in twins.items():
        batch = next(ArrowReader(first, key="k", value="v", implementation=twin))

        def per_row(batch: Any = batch) -> None:
            key_at, value_at = batch.key.bytes_at, batch.value.bytes_at
            for row in range(sample):
                key_at(row)
                value_at(row)

        python_level[f"bytes_at from Python, 2 columns ({twin_name})"] = per_row
    keys, values = first.column("k"), first.column("v")
    python_level["pyarrow to_pylist(), 2 columns"] = lambda: (keys.to_pylist(), values.to_pylist())

    results = {
        **{name: (s, rows) for name, s in measure(walks, options.rounds).items()},
        **{name: (s, batch_rows) for name, s in measure(checks, options.rounds).items()},
        **{name: (s, sample) for name, s in measure(python_level, max(3, options.rounds // 2)).items()},
    }
    lines = [
        "# Columnar input: the cost per row of reading a table's columns (no Kafka)",
        "",
        f"Run {time.strftime('%Y-%m-%d %H:%M:%S')} on {platform.machine()}, Python {platform.python_version()}, "
        f"pyarrow {pa.__version__}, polars {pl.__version__}; {options.rounds} alternating rounds, CPU time "
        "(process_time), median (min-max). `python -m tests.benchmarks.columnar_walk`.",
        "",
        "| what | rows per run | ns per row, median | min-max |",
        "|---|---|---|---|",
    ]
    for name, (seconds, count) in results.items():
        per_row = [s * 1e9 / count for s in seconds]
        median, low, high = statistics.median(per_row), min(per_row), max(per_row)
        lines.append(f"| {name} | {count:,} | {median:.2f} | {low:.2f}-{high:.2f} |")
    lines += [
        "",
        "The first three rows walk both columns through `bytes_at` from Cython without the GIL (the producer's "
        "encoder's loop, minus the encoding): pointer and size per row, a byte read at each end so the loop is not "
        'optimised away. "check a batch" is everything before a row can be read: opening the reader (schema plan), '
        "the buffer checks (offsets, views, dictionary indices: compiled kernels, or pure-Python ones), and the "
        "column views, per row of a Spark-sized batch.",
    ]
    report = "\n".join(lines) + "\n"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "columnar_walk.md").write_text(report)
    print(report)


if __name__ == "__main__":
    main()
