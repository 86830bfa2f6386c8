"""Every column kind the producer reads, from every exporter users hand us (pyarrow, polars, pandas, DuckDB), through
both twins, against what pyarrow's own importer reads from the same exporter."""

from __future__ import annotations

import datetime as dt
from typing import Any

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

from aioproducer.columnar import ArrowReader, arrow
from tests.columnar.tables import judge, read_all

ALL = {"key": "k", "value": "v", "topic": "t", "partition": "p", "timestamp": "ts", "headers": "h"}
HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])

BYTES_TYPES = [
    pa.binary(),
    pa.large_binary(),
    pa.binary_view(),
    pa.string(),
    pa.large_string(),
    pa.string_view(),
    pa.binary(3),
    pa.dictionary(pa.int8(), pa.string()),
    pa.dictionary(pa.uint8(), pa.binary()),
    pa.dictionary(pa.int16(), pa.large_binary()),
    pa.dictionary(pa.uint16(), pa.string_view()),
    pa.dictionary(pa.int32(), pa.large_string()),
    pa.dictionary(pa.uint32(), pa.binary_view()),
    pa.dictionary(pa.int64(), pa.string()),
    pa.dictionary(pa.uint64(), pa.binary(3)),
]
TEXT_TYPES = [pa.string(), pa.large_string(), pa.string_view(), pa.dictionary(pa.int32(), pa.string())]


def bytes_values(kind: pa.DataType, rows: int) -> list[Any]:
    """Rows for a bytes column: nulls, empty values, inline (<= 12 bytes) and long ones, repeats for dictionaries."""
    plain = kind.value_type if pa.types.is_dictionary(kind) else kind
    width = plain.byte_width if pa.types.is_fixed_size_binary(plain) else -1
    text = "string" in str(plain)
    values: list[Any] = []
    for row in range(rows):
        if row % 7 == 3:
            values.append(None)
            continue
        raw = (f"row{row % 5}-" + "é" * (row % 11) * (row % 3)).encode()
        if width > 0:
            raw = raw[:width].ljust(width, b"_")
        elif row % 13 == 0:
            raw = b""
        values.append(raw.decode() if text else raw)
    return values


def array(values: list[Any], kind: pa.DataType) -> pa.Array:
    if pa.types.is_dictionary(kind):
        return pa.array(values, kind.value_type).dictionary_encode().cast(kind)
    return pa.array(values, kind)


def producer_table(rows: int, key: pa.DataType | None = None, topic: pa.DataType | None = None) -> pa.Table:
    key, topic = key or pa.binary(), topic or pa.string()
    headers = [
        None if row % 5 == 1 else [{"key": f"h{i}", "value": None if i == 1 else b"v" * i} for i in range(row % 4)]
        for row in range(rows)
    ]
    return pa.table(
        {
            "k": array(bytes_values(key, rows), key),
            "v": array(bytes_values(pa.large_binary(), rows), pa.large_binary()),
            "t": array([None if row % 9 == 4 else f"topic-{row % 3}" for row in range(rows)], topic),
            "p": pa.array([None if row % 4 == 0 else row % 6 for row in range(rows)], pa.int32()),
            "ts": pa.array([None if row % 6 == 5 else 1_700_000_000_000 + row for row in range(rows)], pa.int64()),
            "h": pa.array(headers, pa.list_(HEADER)),
        }
    )


def check(data: object, expected: pa.Table, twin: arrow.Implementation, **roles: str) -> dict[str, list[Any]]:
    roles = roles or ALL
    got = read_all(data, twin, **roles)
    assert got == judge(expected, **roles)
    return got


# -- pyarrow ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", BYTES_TYPES, ids=str)
def test_pyarrow_bytes_kinds_as_key_and_value(twin: arrow.Implementation, kind: pa.DataType) -> None:
    table = pa.table({"k": array(bytes_values(kind, 40), kind), "v": array(bytes_values(kind, 40)[::-1], kind)})
    assert table.column("k").null_count > 0
    check(table, table, twin, key="k", value="v")
    for start, length in [(1, 5), (3, 30), (39, 1), (7, 0)]:
        part = table.slice(start, length)
        check(part, part, twin, key="k", value="v")


@pytest.mark.parametrize("kind", TEXT_TYPES, ids=str)
def test_pyarrow_topic_kinds(twin: arrow.Implementation, kind: pa.DataType) -> None:
    table = producer_table(50, topic=kind)
    check(table, table, twin)
    check(table.slice(11, 20), table.slice(11, 20), twin)


@pytest.mark.parametrize("kind", [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32()])
def test_pyarrow_partition_integer_kinds(twin: arrow.Implementation, kind: pa.DataType) -> None:
    top = 127 if kind.bit_width == 8 and pa.types.is_signed_integer(kind) else 200
    values = [None, 0, 1, top, None, 5] + ([-3] if pa.types.is_signed_integer(kind) else [])
    table = pa.table({"p": pa.array(values, kind)})
    assert check(table, table, twin, partition="p") == {"partition": values}


@pytest.mark.parametrize(
    "kind",
    [pa.int64(), pa.date64(), *(pa.timestamp(unit, tz) for unit in ("s", "ms", "us", "ns") for tz in (None, "UTC"))],
    ids=str,
)
def test_pyarrow_timestamp_kinds_become_epoch_milliseconds(twin: arrow.Implementation, kind: pa.DataType) -> None:
    raw = [None, 0, 1, -1, 999, -999, 1_700_000_000_123, -1_700_000_000_123, None]
    table = pa.table({"ts": pa.array(raw, pa.int64()).cast(kind)})
    got = check(table, table, twin, timestamp="ts")["timestamp"]
    unit = getattr(kind, "unit", "ms")
    # Python's floor division is the reference: -1 µs is the millisecond before the epoch, as in Java's Instant.
    scale = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 10**6)}[unit]
    assert got == [None if v is None else v * scale[0] // scale[1] for v in raw]


def test_pyarrow_timestamp_with_a_time_zone_means_the_same_instant(twin: arrow.Implementation) -> None:
    moment = dt.datetime(2024, 3, 1, 12, 30, 15, 250_000, tzinfo=dt.timezone.utc)
    table = pa.table({"ts": pa.array([moment], pa.timestamp("us", "Asia/Tokyo"))})
    assert read_all(table, twin, timestamp="ts")["timestamp"] == [int(moment.timestamp() * 1000)]


@pytest.mark.parametrize(
    "kind",
    [
        pa.list_(HEADER),
        pa.large_list(HEADER),
        pa.list_(pa.struct([("value", pa.string()), ("key", pa.large_string())])),  # fields in the other order
        pa.list_(pa.struct([("key", pa.dictionary(pa.int8(), pa.string())), ("value", pa.binary_view())])),
        pa.map_(pa.string(), pa.binary()),
        pa.map_(pa.string_view(), pa.large_string()),
    ],
    ids=str,
)
def test_pyarrow_headers_kinds(twin: arrow.Implementation, kind: pa.DataType) -> None:
    rows = [None, [], [("a", b"1")], [("b", None), ("c", b"")], [("long-key-" * 3, b"x" * 40)] * 3]
    if pa.types.is_map(kind):
        values: list[Any] = rows
    else:
        values = [None if r is None else [{"key": k, "value": v} for k, v in r] for r in rows]
    headers = pa.array(values, pa.list_(HEADER) if not pa.types.is_map(kind) else kind).cast(kind)
    table = pa.table({"h": headers})
    expected = [r if r is None else [(k, v) for k, v in r] for r in rows]
    assert check(table, table, twin, headers="h") == {"headers": expected}
    assert check(table.slice(2, 2), table.slice(2, 2), twin, headers="h") == {"headers": expected[2:4]}


def test_pyarrow_table_of_many_unaligned_chunks(twin: arrow.Implementation) -> None:
    """Each column chunked at other boundaries: pyarrow's stream re-slices them into aligned batches (with offsets)."""
    whole = producer_table(300, key=pa.string_view(), topic=pa.dictionary(pa.int16(), pa.string()))

    def chunked(column: pa.ChunkedArray, size: int) -> pa.ChunkedArray:
        flat = column.combine_chunks()
        return pa.chunked_array([flat.slice(i, size) for i in range(0, len(flat), size)], flat.type)

    sizes = dict(zip(ALL.values(), [7, 13, 29, 1, 50, 3], strict=True))
    table = pa.table({name: chunked(whole.column(name), size) for name, size in sizes.items()})
    assert table.column("p").num_chunks == 300
    check(table, whole, twin)


def test_pyarrow_record_batch_reader_and_batches(twin: arrow.Implementation) -> None:
    table = producer_table(120)
    batches = table.to_batches(max_chunksize=17)
    check(pa.RecordBatchReader.from_batches(table.schema, batches), table, twin)
    check(batches[2], pa.Table.from_batches([batches[2]]), twin)
    check(batches[2].slice(3, 9), pa.Table.from_batches([batches[2].slice(3, 9)]), twin)


def test_pyarrow_extension_types_read_as_their_storage(twin: arrow.Implementation) -> None:
    ids = pa.array([bytes(range(16)), None, b"\xff" * 16], pa.binary(16))
    documents = pa.array(['{"a": 1}', None, "[]"])
    table = pa.table(
        {
            "k": pa.ExtensionArray.from_storage(pa.uuid(), ids),
            "v": pa.ExtensionArray.from_storage(pa.json_(), documents),
        }
    )
    assert read_all(table, twin, key="k", value="v") == {
        "key": [bytes(range(16)), None, b"\xff" * 16],
        "value": [b'{"a": 1}', None, b"[]"],
    }


class OnlyArray:
    """An exporter with `__arrow_c_array__` alone (a record batch or a struct array)."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def __arrow_c_array__(self, requested_schema: object | None = None) -> tuple[object, object]:
        result: tuple[object, object] = self.data.__arrow_c_array__(requested_schema)
        return result


def test_pyarrow_struct_array_sliced_through_arrow_c_array(twin: arrow.Implementation) -> None:
    """A sliced StructArray exports its offset at the top level, over unsliced children."""
    table = producer_table(30)
    structs = pa.StructArray.from_arrays([c.combine_chunks() for c in table.columns], names=table.column_names)
    part = structs.slice(4, 19)
    got = read_all(OnlyArray(part), twin, **ALL)
    assert got == judge(table.slice(4, 19), **ALL)
    check(OnlyArray(table.to_batches()[0].slice(2, 5)), table.slice(2, 5), twin)


# -- polars ----------------------------------------------------------------------------------------------------------
def polars_frame(rows: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "k": [None if r % 6 == 0 else f"key-{r}" + "x" * (r % 20) for r in range(rows)],
            "v": [None if r % 5 == 0 else bytes([r % 256]) * (r % 17) for r in range(rows)],
            "t": pl.Series([f"topic-{r % 3}" if r % 8 else None for r in range(rows)], dtype=pl.Categorical),
            "e": pl.Series([["a", "b"][r % 2] for r in range(rows)], dtype=pl.Enum(["a", "b"])),
            "p": pl.Series([None if r % 4 == 0 else r % 6 for r in range(rows)], dtype=pl.UInt16),
            "ts": pl.Series([1_700_000_000_000_123 + r for r in range(rows)], dtype=pl.Int64).cast(pl.Datetime("us")),
            "tz": pl.Series([1_700_000_000_000 + r for r in range(rows)]).cast(pl.Datetime("ms", "Europe/Paris")),
            "ns": pl.Series([-(10**9) - r for r in range(rows)]).cast(pl.Datetime("ns")),
            "h": [
                None if r % 7 == 0 else [{"key": f"h{i}", "value": b"v" * i} for i in range(r % 3)] for r in range(rows)
            ],
        }
    )


def test_polars_dataframe(twin: arrow.Implementation) -> None:
    frame = pl.concat([polars_frame(50), polars_frame(33), polars_frame(1)], rechunk=False)
    assert frame.n_chunks() == 3
    expected = pa.RecordBatchReader.from_stream(frame).read_all()
    schema = {field.name: str(field.type) for field in expected.schema}
    assert schema["k"] == "string_view" and schema["v"] == "binary_view" and schema["h"].startswith("large_list")
    assert schema["t"].startswith("dictionary<values=string_view")
    check(frame, expected, twin)
    for roles in ({"topic": "e", "timestamp": "tz"}, {"timestamp": "ns", "value": "k"}):
        check(frame, expected, twin, **roles)
    sliced = frame.slice(40, 20)
    check(sliced, pa.RecordBatchReader.from_stream(sliced).read_all(), twin)


# -- pandas ----------------------------------------------------------------------------------------------------------
def test_pandas_dataframe(twin: arrow.Implementation) -> None:
    rows = 40
    frame = pd.DataFrame(
        {
            "k": [None if r % 6 == 0 else f"key-{r}" for r in range(rows)],
            "v": [None if r % 5 == 0 else b"\x00\xff" * (r % 4) for r in range(rows)],
            "t": pd.Categorical([f"topic-{r % 3}" for r in range(rows)]),
            "p": pd.array([None if r % 4 == 0 else r % 6 for r in range(rows)], dtype="Int8"),
            "ts": pd.to_datetime([1_700_000_000_123_456_789 + r for r in range(rows)], unit="ns"),
            "tz": pd.to_datetime([1_700_000_000_123 + r for r in range(rows)], unit="ms", utc=True),
            "s": pd.array([None if r % 3 == 0 else f"s{r}" for r in range(rows)], dtype="string[pyarrow]"),
            "h": pd.Series(
                [None if r % 3 == 0 else [("x", b"1"), ("y", None)] for r in range(rows)],
                dtype=pd.ArrowDtype(pa.map_(pa.string(), pa.binary())),
            ),
        }
    )
    expected = pa.RecordBatchReader.from_stream(frame).read_all()
    check(frame, expected, twin)
    check(frame, expected, twin, key="s", value="t", timestamp="tz")


# -- DuckDB ----------------------------------------------------------------------------------------------------------
DUCKDB_QUERY = """
    create type mood as enum ('calm', 'busy');
    create table source as select
        case when i % 6 = 0 then null else 'key-' || i end as k,
        case when i % 5 = 0 then null else repeat('v', (i % 30)::int)::blob end as v,
        case when i % 9 = 4 then null else (case when i % 2 = 0 then 'calm' else 'busy' end)::mood end as t,
        case when i % 4 = 0 then null else (i % 6)::utinyint end as p,
        timestamp '2024-01-01 00:00:00' + to_microseconds(i) as ts,
        make_timestamp_ns(1700000000123456789 + i) as ns,
        to_timestamp(1700000000 + i) as tz,
        case when i % 7 = 0 then null else map(['a', 'b'], [('x' || i)::blob, null]) end as h,
        case when i % 3 = 0 then [] else [{'key': 'h' || i, 'value': 'w'::blob}] end as hl
    from range(2500) t(i);
"""


@pytest.mark.parametrize(
    ("settings", "string_types"),
    [
        ([], ("string", "binary")),
        (["set arrow_large_buffer_size = true"], ("large_string", "large_binary")),
        (["set produce_arrow_string_view = true", "set arrow_output_version = '1.4'"], ("string_view", "binary_view")),
    ],
    ids=["utf8", "large_utf8", "utf8_view"],
)
def test_duckdb_relation(twin: arrow.Implementation, settings: list[str], string_types: tuple[str, str]) -> None:
    connection = duckdb.connect()
    connection.execute(DUCKDB_QUERY)
    for setting in settings:
        connection.execute(setting)
    query = "select * from source order by ts"
    expected = pa.RecordBatchReader.from_stream(connection.sql(query)).read_all()
    assert (str(expected.schema.field("k").type), str(expected.schema.field("v").type)) == string_types
    check(connection.sql(query), expected, twin)
    check(connection.sql(query), expected, twin, topic="k", timestamp="ns", headers="hl")
    check(connection.sql(query), expected, twin, timestamp="tz")


def test_duckdb_result_in_several_batches(twin: arrow.Implementation) -> None:
    connection = duckdb.connect()
    # DuckDB's batches: 128 Ki rows from 2.0 on, 1 Mi rows in the 1.x releases (all that Python 3.10 gets).
    query = "select 'key-' || i as k, (i % 5)::integer as p from range(1100000) t(i)"
    reader = ArrowReader(connection.sql(query), key="k", partition="p", implementation=twin)
    rows, batches, first_keys = 0, 0, []
    for batch in reader:
        batches += 1
        rows += batch.num_rows
        assert batch.key is not None and batch.partition is not None
        first_keys.append(batch.key.bytes_at(0))
        assert batch.partition.int_at(batch.num_rows - 1) == int(batch.key.text_at(batch.num_rows - 1)[4:]) % 5
    assert rows == 1_100_000 and batches > 1
