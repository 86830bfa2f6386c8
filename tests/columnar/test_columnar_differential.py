"""The two twins against each other, and against pyarrow: random schemas, nulls, slices, chunkings and dictionaries
read the same through both and as pyarrow reads them; random buffers (lying offsets, views, indices, validity) get
the same verdict from both, and whatever they accept, pyarrow's own full validation accepts too, with the same rows.
"""

from __future__ import annotations

import ctypes
import itertools
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aioproducer.columnar import arrow
from aioproducer.errors import InvalidTableError
from tests.columnar.handmade import HandStream, Ledger, Node, build_array, build_schema, i8, i32, i64, table
from tests.columnar.tables import TWINS, judge, read_all

PLAIN_BYTES = [pa.binary(), pa.large_binary(), pa.binary_view(), pa.string(), pa.large_string(), pa.string_view()]
PLAIN_TEXT = [pa.string(), pa.large_string(), pa.string_view()]
INDICES = [pa.int8(), pa.uint8(), pa.int16(), pa.uint16(), pa.int32(), pa.uint32(), pa.int64(), pa.uint64()]
PARTITIONS = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32()]
TIMESTAMPS = [pa.int64(), pa.date64()] + [pa.timestamp(u, tz) for u in ("s", "ms", "us", "ns") for tz in (None, "UTC")]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(data_factory: Any, twin: arrow.Implementation, **roles: str) -> Any:
    try:
        return read_all(data_factory(), twin, **roles)
    except InvalidTableError as error:
        return ("refused", str(error), error.column)


@st.composite
def bytes_types(draw: st.DrawFn, text: bool = False) -> pa.DataType:
    plain = draw(st.sampled_from(PLAIN_TEXT if text else [*PLAIN_BYTES, pa.binary(2)]))
    if draw(st.booleans()):
        return pa.dictionary(draw(st.sampled_from(INDICES)), plain)
    return plain


def bytes_values(draw: st.DrawFn, kind: pa.DataType, rows: int, nulls: bool = True) -> list[Any]:
    plain = kind.value_type if pa.types.is_dictionary(kind) else kind
    if pa.types.is_fixed_size_binary(plain):
        element: st.SearchStrategy[Any] = st.binary(min_size=2, max_size=2)
    elif "string" in str(plain):
        element = st.text(max_size=20)
    else:
        element = st.binary(max_size=20)
    if pa.types.is_dictionary(kind):  # few distinct values, so the dictionary is shared
        element = st.sampled_from(draw(st.lists(element, min_size=1, max_size=4)))
    return draw(st.lists((st.none() | element) if nulls else element, min_size=rows, max_size=rows))


def make_array(values: list[Any], kind: pa.DataType) -> pa.Array:
    if pa.types.is_dictionary(kind):
        return pa.array(values, kind.value_type).dictionary_encode().cast(kind)
    return pa.array(values, kind)


@st.composite
def producer_tables(draw: st.DrawFn) -> pa.Table:
    rows = draw(st.integers(0, 30))
    key, value, topic = draw(bytes_types()), draw(bytes_types()), draw(bytes_types(text=True))
    partition, timestamp = draw(st.sampled_from(PARTITIONS)), draw(st.sampled_from(TIMESTAMPS))
    header_key, header_value = draw(bytes_types(text=True)), draw(bytes_types())
    bound = 2 ** (partition.bit_width - (1 if pa.types.is_signed_integer(partition) else 0)) - 1
    counts = draw(st.lists(st.none() | st.integers(0, 3), min_size=rows, max_size=rows))
    offsets = [0]
    for count in counts:
        offsets.append(offsets[-1] + (count or 0))
    entries = pa.StructArray.from_arrays(
        [
            make_array(bytes_values(draw, header_key, offsets[-1], nulls=False), header_key),
            make_array(bytes_values(draw, header_value, offsets[-1]), header_value),
        ],
        names=["key", "value"],
    )
    lists = draw(st.sampled_from([pa.ListArray, pa.LargeListArray]))
    headers = lists.from_arrays(offsets, entries, mask=pa.array([count is None for count in counts], pa.bool_()))
    columns = {
        "k": make_array(bytes_values(draw, key, rows), key),
        "v": make_array(bytes_values(draw, value, rows), value),
        "t": make_array(bytes_values(draw, topic, rows), topic),
        "p": pa.array(draw(st.lists(st.none() | st.integers(0, bound), min_size=rows, max_size=rows)), partition),
        "ts": pa.array(
            draw(st.lists(st.none() | st.integers(-(2**40), 2**40), min_size=rows, max_size=rows)), pa.int64()
        ).cast(timestamp),
        "h": headers,
    }
    data = pa.table(columns)
    # Chunk each column at its own random boundaries, then maybe slice: the stream re-aligns them with offsets.
    chunked = {}
    for name in data.column_names:
        flat = data.column(name).combine_chunks()
        cuts = sorted(set(draw(st.lists(st.integers(0, rows), max_size=4))) | {0, rows})
        chunked[name] = pa.chunked_array([flat.slice(a, b - a) for a, b in itertools.pairwise(cuts)], flat.type)
    data = pa.table(chunked)
    start = draw(st.integers(0, rows))
    return data.slice(start, draw(st.integers(0, rows - start)))


ROLES = {"key": "k", "value": "v", "topic": "t", "partition": "p", "timestamp": "ts", "headers": "h"}


@SETTINGS
@given(producer_tables(), st.data())
def test_twins_read_random_tables_as_pyarrow_does(data: pa.Table, draw: st.DataObject) -> None:
    results = [outcome(lambda: data, twin, **ROLES) for twin in TWINS]
    assert all(result == results[0] for result in results)
    assert results[0] == judge(data, **ROLES)
    # Any role given a column of the wrong type: both twins refuse it with the same words, or both read it.
    roles = draw.draw(st.dictionaries(st.sampled_from(list(ROLES)), st.sampled_from(list(ROLES.values())), min_size=1))
    results = [outcome(lambda: data, twin, **roles) for twin in TWINS]
    assert all(result == results[0] for result in results)


# -- random buffers -------------------------------------------------------------------------------------------------
@st.composite
def binary_nodes(draw: st.DrawFn) -> tuple[Node, Node]:
    """A binary-like column whose buffers are random (within the memory the node really has): (schema, batch)."""
    fmt = draw(st.sampled_from(["z", "Z", "u", "vz", "vu", "c", "I"]))
    rows = draw(st.integers(0, 6))
    offset = draw(st.integers(0, 3))
    total = rows + offset
    validity = draw(st.none() | st.binary(min_size=(total + 7) // 8 or 1, max_size=(total + 7) // 8 or 1))
    nulls = sum(not validity[i >> 3] >> (i & 7) & 1 for i in range(offset, total)) if validity else 0
    null_count = draw(st.sampled_from([-1, nulls])) if validity is not None else 0
    if fmt in ("z", "Z", "u"):
        offsets = draw(st.lists(st.integers(-3, 40), min_size=total + 1, max_size=total + 1))
        if draw(st.booleans()):
            offsets.sort()  # often valid, so that pyarrow has rows to compare
        pack = i64 if fmt == "Z" else i32
        node = Node(fmt, rows, [validity, pack(*offsets), draw(st.binary(min_size=40, max_size=40))])
        schema = Node(fmt, 0)
    elif fmt in ("vz", "vu"):
        sizes = draw(st.lists(st.integers(0, 40), max_size=2))
        buffers = [draw(st.binary(min_size=40, max_size=40)) for _ in sizes]
        view = st.tuples(st.integers(-2, 45), st.integers(-1, 2), st.integers(-2, 40))
        views = b"".join(_view(buffers, *draw(view)) for _ in range(total))
        node = Node(fmt, rows, [validity, views, *buffers, i64(*sizes)])
        schema = Node(fmt, 0)
    else:
        dictionary = draw(st.lists(st.binary(max_size=6), max_size=3))
        words = Node("z", len(dictionary), [None, i32(*_offsets(dictionary)), b"".join(dictionary)])
        width = 1 if fmt == "c" else 4
        indices = draw(st.lists(st.integers(-2, 4), min_size=total, max_size=total))
        node = Node(fmt, rows, [validity, i8(*indices) if width == 1 else i32(*indices)], dictionary=words)
        schema = Node(fmt, 0, dictionary=Node("z", 0))
    node.offset, node.null_count = offset, null_count
    return schema, node


def _view(buffers: list[bytes], length: int, buffer: int, offset: int) -> bytes:
    """A view as the format has it (zero padding, a prefix copied from the data) when it can be one."""
    if 0 <= length <= 12:
        return length.to_bytes(4, "little", signed=True) + b"ABCDEFGHIJKL"[:length].ljust(12, b"\0")
    prefix = buffers[buffer][offset : offset + 4] if 0 <= buffer < len(buffers) and offset >= 0 else b""
    four = [x.to_bytes(4, "little", signed=True) for x in (length, 0, buffer, offset)]
    return four[0] + prefix.ljust(4, b"?") + four[2] + four[3]


def _offsets(values: list[bytes]) -> list[int]:
    out = [0]
    for value in values:
        out.append(out[-1] + len(value))
    return out


def pyarrow_reading(schema: Node, node: Node) -> list[Any]:
    """pyarrow's import of the same column, fully validated: its rows, or the exception it raises. Strings are
    imported as binary: a key or value is bytes to us, valid UTF-8 or not (pyarrow would check)."""
    ledger = Ledger()
    as_binary = {"u": "z", "U": "Z", "vu": "vz"}.get(node.format, node.format)
    built_schema = build_schema(ledger, Node(as_binary, 0, dictionary=schema.dictionary))
    built = build_array(ledger, node)
    imported = pa.Array._import_from_c(ctypes.addressof(built), ctypes.addressof(built_schema))
    imported.validate(full=True)
    return [value.encode() if isinstance(value, str) else value for value in imported.to_pylist()]


@SETTINGS
@given(binary_nodes())
def test_twins_give_random_buffers_the_same_verdict_and_pyarrow_agrees(nodes: tuple[Node, Node]) -> None:
    schema, node = nodes

    def stream() -> HandStream:
        return HandStream(table({"c": schema}, 0), [table({"c": node}, node.length)])

    results = [outcome(stream, twin, key="c") for twin in TWINS]
    assert all(result == results[0] for result in results), results
    if isinstance(results[0], dict) and node.length:  # (pyarrow sizes an empty array's buffers at 0 bytes)
        assert results[0]["key"] == pyarrow_reading(schema, node)
