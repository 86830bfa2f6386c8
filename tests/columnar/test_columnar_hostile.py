"""Hostile Arrow data, built by hand: every structural lie the C data interface lets us detect is refused with an
InvalidTableError naming the column, with the same message from both twins, before a row is read; every release
callback still runs exactly once. What the format allows (a NULL buffer that would hold no byte, garbage under a
null, offsets outside the slice) reads fine. Row-level faults (an invalid topic, a bad header key, a timestamp out of
range) fail that row only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from aioproducer.columnar import ArrowReader
from aioproducer.errors import InvalidRecordError, InvalidTableError
from tests.columnar.handmade import (
    HandArray,
    HandStream,
    Node,
    binary_buffers,
    bits,
    buffer_view,
    i8,
    i32,
    i64,
    inline_view,
    table,
    u64,
)
from tests.columnar.tables import TWINS, read_all


def binary(values: list[bytes | None], fmt: str = "z") -> Node:
    nulls = values.count(None)
    return Node(fmt, len(values), binary_buffers(values, 8 if fmt in ("Z", "U") else 4), null_count=nulls)


def words() -> Node:
    return binary([b"calm", b"busy"], "u")


def headers(entries: Node, offsets: bytes, length: int, fmt: str = "+l", **options: Any) -> Node:
    return Node(fmt, length, [None, offsets], [entries], **options)


def entries(keys: Node, values: Node, length: int, **options: Any) -> Node:
    keys.name, values.name = "key", "value"
    return Node("+s", length, [None], [keys, values], **options)


def one_column(column: Node, length: int | None = None, *, batch: Node | None = None) -> Callable[[], HandStream]:
    """A stream of one batch with column "c" (its schema from the same node unless `batch` differs)."""
    rows = column.length if length is None else length

    def make() -> HandStream:
        schema = table({"c": column}, rows)
        return HandStream(schema, [table({"c": batch or column}, rows)])

    return make


def refusal(make: Callable[[], Any], **roles: str) -> InvalidTableError:
    """The error reading the data gives: the same from each twin, and every structure released exactly once."""
    seen = []
    for twin in TWINS:
        data = make()
        with pytest.raises(InvalidTableError) as caught:
            read_all(data, twin, **roles)
        seen.append((str(caught.value), caught.value.column))
        if hasattr(data, "ledger"):
            data.ledger.assert_clean()
    assert len(set(seen)) == 1, seen
    return caught.value


def reads(make: Callable[[], Any], **roles: str) -> dict[str, list[Any]]:
    """What reading the data gives: the same from each twin, and every structure released exactly once."""
    results = []
    for twin in TWINS:
        data = make()
        results.append(read_all(data, twin, **roles))
        if hasattr(data, "ledger"):
            data.ledger.assert_clean()
    assert all(result == results[0] for result in results)
    return results[0]


BAD_COLUMNS = {
    "negative first offset": (binary([b"a"]), Node("z", 2, [None, i32(-4, 0, 1), b"a"]), "row 0 starts at a negative"),
    "decreasing offsets": (binary([b"a"]), Node("z", 2, [None, i32(0, 3, 1), b"abc"]), "from 3 to 1 at row 1"),
    "decreasing large offsets": (binary([], "Z"), Node("Z", 2, [None, i64(0, 5, 2), b"hello"]), "from 5 to 2 at row 1"),
    "offsets past int32 (negative)": (
        binary([]),
        Node("u", 1, [None, i32(0, -(2**31)), b"a"]),
        "from 0 to -2147483648",
    ),
    "NULL offsets": (binary([]), Node("z", 2, [None, None, b"ab"]), "the offsets buffer is NULL"),
    "NULL data under bytes": (binary([]), Node("z", 1, [None, i32(0, 2), None]), "data buffer is NULL but its rows"),
    "nulls without a bitmap": (binary([]), Node("z", 1, [None, i32(0, 1), b"a"], null_count=1), "1 nulls but no"),
    "two buffers for binary": (binary([]), Node("z", 1, [None, i32(0, 1)]), "2 buffers where its layout has 3"),
    "a child for binary": (binary([]), Node("z", 1, [None, i32(0, 1), b"a"], [binary([b"x"])]), "1 children where"),
    "negative length": (binary([]), Node("z", -1, [None, i32(0), b""]), "negative length (-1)"),
    "negative offset": (binary([]), Node("z", 1, [None, i32(0, 1), b"a"], offset=-2), "or offset (-2)"),
    "offset beyond any memory": (binary([]), Node("z", 1, [None, i32(0, 1), b"a"], offset=2**60), "beyond any memory"),
    "view into a missing buffer": (
        binary([], "vz"),
        Node("vz", 1, [None, buffer_view(20, 1, 0), b"x" * 20, i64(20)]),
        "points into data buffer 1, but the array has 1",
    ),
    "view past its buffer's size": (
        binary([], "vz"),
        Node("vz", 2, [None, inline_view(b"ok") + buffer_view(20, 0, 5), b"x" * 40, i64(24)]),
        "row 1 points at bytes 5..25 of data buffer 0, which holds 24",
    ),
    "view of negative length": (
        binary([], "vz"),
        Node("vz", 1, [None, buffer_view(-5, 0, 0), b"x" * 20, i64(20)]),
        "negative length (-5)",
    ),
    "view at a negative offset": (
        binary([], "vu"),
        Node("vu", 1, [None, buffer_view(13, 0, -1), b"x" * 20, i64(20)]),
        "points at bytes -1..12",
    ),
    "view without buffers": (
        binary([], "vz"),
        Node("vz", 1, [None, buffer_view(13, 0, 0), i64()]),
        "but the array has 0",
    ),
    "NULL views": (binary([], "vz"), Node("vz", 1, [None, None, i64()]), "the views buffer is NULL"),
    "a billion data buffers": (
        binary([], "vz"),
        Node("vz", 1, [None, inline_view(b"a"), i64()], n_buffers=10**9),
        "1000000000 buffers where its layout has at least 3",
    ),
    "NULL buffer sizes": (binary([], "vz"), Node("vz", 1, [None, inline_view(b"a"), b"x", None]), "sizes of its 1"),
    "NULL variadic buffer": (
        binary([], "vz"),
        Node("vz", 1, [None, inline_view(b"a"), None, i64(8)]),
        "buffer 0 is NULL",
    ),
    "negative buffer size": (binary([], "vz"), Node("vz", 1, [None, inline_view(b"a"), b"x", i64(-1)]), "of size -1"),
    "index past the dictionary": (
        Node("c", 0, dictionary=words()),
        Node("c", 2, [None, i8(0, 5)], dictionary=words()),
        "row 1 has dictionary index 5, outside the dictionary's 2 values",
    ),
    "negative index": (
        Node("c", 0, dictionary=words()),
        Node("c", 1, [None, i8(-1)], dictionary=words()),
        "dictionary index -1",
    ),
    "uint64 index past int64": (
        Node("L", 0, dictionary=words()),
        Node("L", 1, [None, u64(2**64 - 1)], dictionary=words()),
        "dictionary index 18446744073709551615",
    ),
    "NULL indices": (
        Node("c", 0, dictionary=words()),
        Node("c", 1, [None, None], dictionary=words()),
        "indices buffer",
    ),
    "dictionary missing from the array": (
        Node("c", 0, dictionary=words()),
        Node("c", 1, [None, i8(0)]),
        "a dictionary-encoded array without its dictionary",
    ),
    "broken dictionary": (
        Node("c", 0, dictionary=words()),
        Node("c", 1, [None, i8(0)], dictionary=Node("u", 2, [None, i32(0, 4, 2), b"calm"])),
        "the dictionary of the key column 'c': offsets go from 4 to 2",
    ),
}


@pytest.mark.parametrize("case", BAD_COLUMNS, ids=str)
def test_a_broken_bytes_column_is_refused_naming_it(case: str) -> None:
    schema, batch, message = BAD_COLUMNS[case]
    error = refusal(one_column(schema, abs(batch.length), batch=batch), key="c")
    assert error.column == "c" and "the key column 'c'" in str(error)
    assert message in str(error)


def test_a_column_shorter_than_its_table_is_refused() -> None:
    error = refusal(lambda: HandStream(table({"c": binary([b"a"])}, 2), [table({"c": binary([b"a"])}, 2)]), value="c")
    assert error.column == "c" and "1 rows, shorter than its parent's 2" in str(error)
    # A table with an offset reads its columns from that row: they must reach offset + length.
    shifted = table({"c": binary([b"a", b"b", b"c"])}, 3, offset=1)
    error = refusal(lambda: HandStream(shifted, [shifted]), value="c")
    assert "3 rows, shorter than its parent's 4 (3 from row 1)" in str(error)


def test_the_batch_itself_must_match_its_schema() -> None:
    two = table({"a": binary([b"x"]), "b": binary([b"y"])}, 1)
    error = refusal(lambda: HandStream(two, [table({"a": binary([b"x"])}, 1)]), key="a")
    assert "the Arrow batch has 1 columns, its schema 2" in str(error) and error.column is None
    nulls = table({"a": binary([b"x"])}, 1, null_count=1)
    assert "rows of the Arrow batch are null as a whole" in str(refusal(lambda: HandStream(nulls, [nulls]), key="a"))
    hole = table({"a": None}, 1)
    error = refusal(lambda: HandStream(table({"a": binary([b"x"])}, 1), [hole]), key="a")
    assert "the Arrow array is NULL" in str(error) and error.column == "a"


def test_what_the_format_allows_reads_fine() -> None:
    cases = {
        "NULL data when no row holds a byte": Node("z", 2, [None, i32(3, 3, 3), None]),
        "garbage offsets outside the slice": Node("z", 2, [None, i32(99, 0, 1, 2, -7), b"ab"], offset=1),
        "a bitmap whatever null_count says": Node("z", 2, [bits(0, 1), i32(0, 1, 2), b"ab"]),
        "null_count unknown (-1)": Node("z", 2, [bits(0, 1), i32(0, 1, 2), b"ab"], null_count=-1),
        "a bogus view under a null": Node(
            "vz", 2, [bits(1, 0), inline_view(b"x") + buffer_view(99, 7, -3), i64()], null_count=1
        ),
        "an index past the dictionary under a null": Node(
            "c", 2, [bits(1, 0), i8(1, 77)], null_count=1, dictionary=words()
        ),
        "an empty column of NULL buffers": Node("z", 0, [None, None, None]),
    }
    results = {name: reads(one_column(node), key="c")["key"] for name, node in cases.items()}
    assert results == {
        "NULL data when no row holds a byte": [b"", b""],
        "garbage offsets outside the slice": [b"a", b"b"],
        "a bitmap whatever null_count says": [None, b"b"],  # as pyarrow reads it
        "null_count unknown (-1)": [None, b"b"],
        "a bogus view under a null": [b"x", None],
        "an index past the dictionary under a null": [b"busy", None],
        "an empty column of NULL buffers": [],
    }


def test_views_reach_their_variadic_buffers_by_index_and_offset() -> None:
    views = buffer_view(13, 1, 2) + inline_view(b"") + buffer_view(16, 0, 0)
    node = Node("vz", 3, [None, views, b"0123456789abcdef", b"xx" + b"thirteen-bytes" + b"yy", i64(16, 18)])
    assert reads(one_column(node), key="c")["key"] == [b"thirteen-byte", b"", b"0123456789abcdef"]


HEADER_CASES = {
    "offsets past the entries": (
        headers(entries(binary([b"k"], "u"), binary([b"v"]), 1), i32(0, 5), 1),
        "reach entry 5",
    ),
    "decreasing offsets": (
        headers(entries(binary([b"k"], "u"), binary([b"v"]), 1), i32(1, 0), 1),
        "from 1 to 0 at row 0",
    ),
    "keys shorter than their entries": (
        headers(entries(binary([b"k"], "u"), binary([b"v", b"w"]), 2), i32(0, 2), 1),
        "the header keys of the headers column 'h': 1 rows, shorter than its parent's 2",
    ),
    "entries with a missing child": (
        Node("+l", 1, [None, i32(0, 1)], [Node("+s", 1, [None], [binary([b"k"], "u")])]),
        "the entries of the headers column 'h': 1 children where its layout has 2",
    ),
    "a map with no entries child": (Node("+m", 1, [None, i32(0, 0)], [], n_children=0), "0 children where"),
}


@pytest.mark.parametrize("case", HEADER_CASES, ids=str)
def test_a_broken_headers_column_is_refused_naming_it(case: str) -> None:
    batch, message = HEADER_CASES[case]
    schema = headers(entries(binary([], "u"), binary([]), 0), i32(0), 0, fmt=batch.format)

    def make() -> HandStream:
        return HandStream(table({"h": schema}, 1), [table({"h": batch}, 1)])

    error = refusal(make, headers="h")
    assert error.column == "h" and message in str(error)


def test_header_rows_with_bad_keys_fail_alone() -> None:
    keys = Node("u", 4, binary_buffers([b"ok", b"\xff\xfe", None, b"fine"]), null_count=1)
    values = binary([b"1", b"2", b"3", None])
    column = headers(entries(keys, values, 4), i32(0, 1, 2, 3, 4, 4), 5)
    column.children[0].buffers = [bits(1, 1, 1, 0)]  # entry 3: a null struct
    column.children[0].null_count = 1
    for twin in TWINS:
        data = one_column(column)()
        with ArrowReader(data, headers="c", implementation=twin) as reader:
            batch = next(reader)
            assert batch.headers is not None
            assert batch.headers.headers_at(0) == [("ok", b"1")]
            for row in (1, 2, 3):  # not UTF-8; a null key; a null entry
                with pytest.raises(InvalidRecordError, match=f"column 'c' row {row}: header 0 has no valid key"):
                    batch.headers.header_at(row, 0)
            assert batch.headers.headers_at(4) == []
            with pytest.raises(IndexError):
                batch.headers.header_at(4, 0)
        del batch
        data.ledger.assert_clean()


def test_topics_that_are_null_or_not_utf8_fail_their_row_alone() -> None:
    rows = [b"orders", b"\xc3\x28", None, b"\xed\xa0\x80", "café".encode(), b"\xf4\x90\x80\x80", b""]
    for twin in TWINS:
        data = one_column(binary(rows, "u"))()
        with ArrowReader(data, topic="c", implementation=twin) as reader:
            topic = next(reader).topic
            assert topic is not None
            assert topic.text_at(0) == "orders" and topic.text_at(2) is None and topic.text_at(4) == "café"
            assert topic.text_at(6) == ""
            for row in (1, 3, 5):  # an invalid sequence, a surrogate, a code point above U+10FFFF
                with pytest.raises(InvalidRecordError, match=f"column 'c' row {row}: not valid UTF-8"):
                    topic.text_at(row)
        del topic
        data.ledger.assert_clean()


def test_a_timestamp_in_seconds_beyond_int64_milliseconds_fails_its_row_alone() -> None:
    limit = (2**63 - 1) // 1000
    column = Node("tss:UTC", 4, [None, i64(limit, limit + 1, -limit, -limit - 1)])
    for twin in TWINS:
        data = one_column(column)()
        with ArrowReader(data, timestamp="c", implementation=twin) as reader:
            stamps = next(reader).timestamp
            assert stamps is not None
            assert stamps.int_at(0) == limit * 1000 and stamps.int_at(2) == -limit * 1000
            for row in (1, 3):
                with pytest.raises(InvalidRecordError, match=f"column 'c' row {row}: the timestamp does not fit"):
                    stamps.int_at(row)
        del stamps


def test_int_columns_without_data_are_refused() -> None:
    error = refusal(one_column(Node("i", 0, [None, None]), 2, batch=Node("i", 2, [None, None])), partition="c")
    assert "the partition column 'c': the data buffer is NULL" in str(error)


def test_empty_batches_are_skipped_and_zero_column_tables_read() -> None:
    column = binary([b"a", None])
    empty = table({"c": Node("z", 0, [None, None, None])}, 0)
    data = lambda: HandStream(table({"c": column}, 2), [empty, table({"c": column}, 2), empty])  # noqa: E731
    assert reads(data, key="c") == {"key": [b"a", None]}
    nothing = table({}, 3)
    for twin in TWINS:
        stream = HandStream(nothing, [nothing])
        with ArrowReader(stream, implementation=twin) as reader:
            assert reader.names == ()
            assert [batch.num_rows for batch in reader] == [3]
        stream.ledger.assert_clean()


def test_a_failing_stream_surfaces_its_own_message() -> None:
    column = binary([b"a"])
    for twin in TWINS:
        stream = HandStream(table({"c": column}, 1), [table({"c": column}, 1)] * 3, fail_at=1, message=b"disk gone")
        batches = []
        with pytest.raises(InvalidTableError) as caught, ArrowReader(stream, key="c", implementation=twin) as reader:
            batches.extend(reader)
        assert len(batches) == 1
        expected = "reading the next batch of the Arrow stream failed: disk gone (EIO: Input/output error)"
        assert str(caught.value) == expected
        del batches
        stream.ledger.assert_clean()
    error = refusal(lambda: HandStream(table({"c": column}, 1), [], fail_schema=True, code=12), key="c")
    assert str(error) == "reading the Arrow stream's schema failed: the exporter broke (ENOMEM: Cannot allocate memory)"


def test_an_array_exporter_is_read_and_released() -> None:
    column = binary([b"a", None, b"c"], "U")
    assert reads(lambda: HandArray(table({"c": column}, 3), table({"c": column}, 3)), key="c") == {
        "key": [b"a", None, b"c"]
    }
    error = refusal(lambda: HandArray(table({"c": column}, 3), table({"c": column}, 3)), key="nope")
    assert error.column == "nope" and "the table has no column 'nope' (its columns: ['c'])" in str(error)


class Exporter:
    def __init__(self, stream: Callable[[], object]) -> None:
        self.stream = stream

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self.stream()


def test_what_is_not_an_arrow_exporter_is_refused() -> None:
    assert "int is not Arrow data" in str(refusal(lambda: 42, key="k"))
    schema_capsule = pa.schema([("k", pa.binary())]).__arrow_c_schema__()
    error = refusal(lambda: Exporter(lambda: schema_capsule), key="k")
    assert "expected a PyCapsule named 'arrow_array_stream'" in str(error)

    def explode() -> object:
        raise ValueError("cannot convert column 3")

    error = refusal(lambda: Exporter(explode), key="k")
    assert str(error) == "exporting Exporter as Arrow failed: cannot convert column 3"
    assert isinstance(error.__cause__, ValueError)
    capsule = pa.table({"k": [b"x"]}).__arrow_c_stream__()
    read_all(capsule, TWINS[0], key="k")
    assert "was already consumed" in str(refusal(lambda: capsule, key="k"))
    error = refusal(lambda: pa.chunked_array([[b"x"]]), key="k")
    assert str(error) == "the data is an Arrow binary, not a table (a struct of columns)"


TYPE_ERRORS = [
    ({"key": "c"}, pa.array([1]), "the key column 'c' is int64; it must be binary or string"),
    ({"value": "c"}, pa.array([1.5]), "the value column 'c' is float64"),
    ({"topic": "c"}, pa.array([b"x"]), "the topic column 'c' is binary; it must be a string (utf8, large_utf8 or"),
    ({"topic": "c"}, pa.array([b"x"]).dictionary_encode(), "is dictionary<int32 indices, binary values>"),
    ({"partition": "c"}, pa.array([1], pa.uint64()), "the partition column 'c' is uint64; it must be an integer"),
    ({"partition": "c"}, pa.array(["1"]), "the partition column 'c' is utf8"),
    ({"timestamp": "c"}, pa.array([1], pa.int32()), "the timestamp column 'c' is int32; it must be int64 millisec"),
    ({"timestamp": "c"}, pa.array([1], pa.date32()), "is date32"),
    ({"headers": "c"}, pa.array([[b"x"]]), "the headers column 'c' holds binary entries; it must be a list of struct"),
    ({"headers": "c"}, pa.array([[{"k": "a", "v": b"b"}]]), "holds structs with fields ['k', 'v']; header structs"),
    ({"headers": "c"}, pa.array([[{"key": b"a", "value": b"b"}]]), "header keys of the headers column 'c' are binary"),
    ({"headers": "c"}, pa.array([[{"key": "a", "value": 1}]]), "the header values of the headers column 'c' are int64"),
    ({"headers": "c"}, pa.array([{"key": "a", "value": b"b"}]), "the headers column 'c' is struct; it must be a list"),
    ({"key": "c"}, pa.array([[b"x"]]), "the key column 'c' is list;"),
]


@pytest.mark.parametrize(("roles", "column", "message"), TYPE_ERRORS, ids=[m for _, _, m in TYPE_ERRORS])
def test_a_column_of_the_wrong_type_is_refused_before_any_batch(
    roles: dict[str, str], column: pa.Array, message: str
) -> None:
    data = pa.table({"c": column, "other": pa.array([b"fine"] * len(column))})
    error = refusal(lambda: data, **roles)
    assert error.column == "c" and message in str(error)


def test_a_missing_or_ambiguous_column_is_refused() -> None:
    data = pa.Table.from_arrays([pa.array([b"a"]), pa.array([b"b"])], names=["k", "k"])
    error = refusal(lambda: data, key="k")
    assert error.column == "k" and str(error) == "the table has 2 columns named 'k'"
