"""The compiled twin's C-level API, as a Cython caller outside the package uses it (the producer's encoder will):
a module cimporting _arrow.pxd compiles, and its nogil accessors give what the Python-level accessors give; the C
structs it reads have the layout of the ctypes mirrors the rules fill.

Needs the compiled extension and a C compiler, as the compiled session has."""

from __future__ import annotations

import ctypes
import importlib
import os
import subprocess
import sys
from types import ModuleType
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer.columnar import ArrowReader, arrow, cdata, schema
from tests.columnar.cython_build import build_walker

compiled: Any = importlib.import_module("aioproducer.columnar._arrow")


@pytest.fixture(scope="module")
def walker(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return build_walker(tmp_path_factory.mktemp("walker"))


def test_the_c_structs_have_the_layout_of_their_ctypes_mirrors() -> None:
    layouts = compiled.struct_layouts()
    assert set(layouts) == {"BytesArray", "BytesColumn", "IntColumn", "HeadersColumn"}
    for name, (size, fields) in layouts.items():
        mirror = getattr(cdata, name)
        assert ctypes.sizeof(mirror) == size, name
        assert {field: getattr(mirror, field).offset for field, _ in mirror._fields_} == fields, name
    assert {name: getattr(schema, name) for name in compiled.LAYOUTS} == compiled.LAYOUTS
    assert compiled.ROW_CODES == {"ROW_INVALID": -1, "ROW_NULL": 0, "ROW_VALUE": 1}


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=12) | st.text(max_size=6).map(lambda text: text.encode("utf-8", "surrogatepass")))
def test_the_compiled_utf8_check_is_pythons_strict_decoder(data: bytes) -> None:
    try:
        data.decode("utf-8")
        valid = True
    except UnicodeDecodeError:
        valid = False
    assert compiled.is_utf8(data) is valid


def test_a_cython_caller_reads_what_the_python_accessors_read(walker: ModuleType) -> None:
    rows = 60
    data = pa.table(
        {
            "k": pa.array([None if r % 7 == 0 else b"k%d" % r * (r % 4) for r in range(rows)], pa.binary_view()),
            "v": pa.array(["v" * (r % 30) if r % 5 else None for r in range(rows)]).dictionary_encode(),
            "t": pa.array([b"ok", b"\xff", None, "é".encode()] * (rows // 4), pa.binary()).view(pa.string()),
            "ts": pa.array([None if r % 3 == 0 else -1500 * r for r in range(rows)], pa.timestamp("us")),
            "h": pa.array(
                [
                    None if r % 4 == 0 else [{"key": "a", "value": None}, {"key": "b", "value": b"x" * r}]
                    for r in range(rows)
                ]
            ),
        }
    ).slice(5, 50)
    roles = {"key": "k", "value": "v", "topic": "t", "timestamp": "ts", "headers": "h"}
    twin = arrow.load_compiled()
    assert twin is not None
    batch = next(ArrowReader(data, implementation=twin, **roles))
    assert batch.key is not None and batch.value is not None and batch.topic is not None
    assert batch.timestamp is not None and batch.headers is not None
    keys = batch.key.to_pylist()
    assert walker.bytes_rows(batch.key) == [(True, -1) if k is None else k for k in keys]
    expected_topics = []
    for row in range(batch.num_rows):
        try:
            text = batch.topic.text_at(row)
            expected_topics.append((0, None) if text is None else (1, text.encode()))
        except ValueError:
            expected_topics.append((-1, batch.topic.bytes_at(row)))
    assert walker.text_rows(batch.topic) == expected_topics
    stamps = batch.timestamp.to_pylist()
    assert walker.int_rows(batch.timestamp) == [(0, None) if s is None else (1, s) for s in stamps]
    assert walker.header_rows(batch.headers) == [
        [(key.encode(), value) for key, value in batch.headers.headers_at(row)] for row in range(batch.num_rows)
    ]
    values = batch.value.to_pylist()
    present = [v for v in [*keys, *values] if v is not None]
    mix = sum(v[0] + v[-1] for v in present if v)
    assert walker.checksum(batch.key, batch.value) == (50, sum(map(len, present)), 100 - len(present), mix)


def test_a_cython_caller_builds_an_int64_array(walker: ModuleType) -> None:
    offsets = walker.offsets_with_gaps(10, 4)
    assert pa.array(offsets).to_pylist() == [None, 10, 20, 30, None, 50, 60, 70, None, 90]
    assert offsets.null_count == 3 and offsets.name == "offset"
    assert pa.array(walker.offsets_with_gaps(3, 0)).to_pylist() == [0, 10, 20]


def test_the_compiled_twin_is_chosen_unless_the_environment_says_otherwise() -> None:
    code = "from aioproducer.columnar import arrow; print(arrow.IMPLEMENTATION.name, arrow.BytesColumnView.__module__)"
    chosen = {}
    for setting in ("", "1"):
        environment = {**os.environ, "AIOPRODUCER_NO_EXTENSIONS": setting}
        done = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True)
        chosen[setting] = done.stdout.split()
    assert chosen == {"": ["compiled", "aioproducer.columnar._arrow"], "1": ["pure", "aioproducer.columnar.arrow"]}
