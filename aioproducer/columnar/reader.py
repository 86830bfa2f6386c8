"""Reading a table from any Arrow exporter, batch by batch, as the producer's columns.

`ArrowReader(data, key=..., value=..., ...)` takes anything that speaks the Arrow PyCapsule interface (a pyarrow
Table, RecordBatch or RecordBatchReader, a polars or pandas DataFrame, a DuckDB relation, arro3, nanoarrow, ... or
the capsule itself) without importing its library. It checks the named columns' types against the schema before any
batch is read, then yields one `ColumnBatch` per non-empty batch, each column checked (`layout`) before any of its
rows can be read. A stream is pulled one batch at a time, so a table larger than memory streams through.

Release: every release callback of the exporter's structures is called exactly once. The stream and its schema when
the reader closes (`close()`, the end of a `with` block or of the iteration, any error, or its garbage collection);
each batch when the last of its `ColumnBatch` and column views goes (or at once, when its checks fail). A batch
outlives the reader that read it, as the C stream interface allows.
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Iterator
from types import TracebackType
from typing import Any, NamedTuple

from aioproducer.columnar import arrow, cdata, layout, schema
from aioproducer.errors import InvalidTableError

__all__ = ["ArrowReader", "ColumnBatch"]


class ColumnBatch(NamedTuple):
    """The producer's columns of one batch (None for a column not asked for), all `num_rows` long."""

    num_rows: int
    key: arrow.BytesColumnView | None
    value: arrow.BytesColumnView | None
    topic: arrow.BytesColumnView | None
    partition: arrow.IntColumnView | None
    timestamp: arrow.IntColumnView | None
    headers: arrow.HeadersColumnView | None


class _Batch:
    """Owns one ArrowArray from the exporter: its release callback runs when the last view of it goes."""

    __slots__ = ("__weakref__", "array")

    def __init__(self, array: cdata.ArrowArray) -> None:
        self.array = array

    def release(self, release: Any = cdata.release) -> None:  # bound early: may run at interpreter exit
        release(self.array)

    __del__ = release


class _Source:
    """The exporter's data as a stream: its own ArrowArrayStream, or one (schema, array) pair. Without a stream,
    `schema` is the pair's (an empty, unset one until then); `cdata.release` runs a callback at most once, so the
    schema may be released both by the reader that took it and by `close`."""

    def __init__(self, data: object) -> None:
        self.stream: cdata.ArrowArrayStream | None = None
        self.schema = cdata.ArrowSchema()
        self.array: cdata.ArrowArray | None = None
        try:
            if cdata.is_capsule(data):
                self.stream = cdata.move_from_capsule(data, b"arrow_array_stream", cdata.ArrowArrayStream)
            elif hasattr(data, "__arrow_c_stream__"):
                capsule = data.__arrow_c_stream__()
                self.stream = cdata.move_from_capsule(capsule, b"arrow_array_stream", cdata.ArrowArrayStream)
            elif hasattr(data, "__arrow_c_array__"):
                pair = data.__arrow_c_array__()
                if not isinstance(pair, tuple) or len(pair) != 2:
                    raise cdata.CapsuleError("__arrow_c_array__ must return a (schema, array) pair of capsules")
                self.schema = cdata.move_from_capsule(pair[0], b"arrow_schema", cdata.ArrowSchema)
                self.array = cdata.move_from_capsule(pair[1], b"arrow_array", cdata.ArrowArray)
            else:
                raise InvalidTableError(
                    f"{type(data).__name__} is not Arrow data: it has neither __arrow_c_stream__ nor __arrow_c_array__"
                )
        except InvalidTableError:
            self.close()
            raise
        except Exception as exc:  # the exporter's own failure, or a capsule that is not what it should be
            self.close()
            raise InvalidTableError(f"exporting {type(data).__name__} as Arrow failed: {exc}") from exc

    def take_schema(self) -> cdata.ArrowSchema:
        """The table's schema, for the caller to release: read from the stream, or the pair's."""
        stream = self.stream
        if stream is None:
            return self.schema
        schema = cdata.ArrowSchema()
        _call(stream, stream.get_schema, schema, "reading the Arrow stream's schema")
        if not schema.release:
            raise InvalidTableError("the Arrow stream gave no schema")
        return schema

    def take_array(self) -> cdata.ArrowArray | None:
        stream = self.stream
        if stream is None:
            array, self.array = self.array, None
            return array
        array = cdata.ArrowArray()
        _call(stream, stream.get_next, array, "reading the next batch of the Arrow stream")
        return array if array.release else None  # a released structure marks the end of the stream

    def close(self) -> None:
        for struct in (self.stream, self.schema, self.array):
            if struct is not None:
                cdata.release(struct)
        self.stream = self.array = None


def _call(stream: cdata.ArrowArrayStream, callback: Any, out: cdata.ArrowSchema | cdata.ArrowArray, what: str) -> None:
    """One of `stream`'s callbacks filling `out`; a non-zero code is an InvalidTableError with the stream's message."""
    code = callback(ctypes.byref(stream), ctypes.byref(out))
    if code:
        if out.release:  # a producer should leave `out` untouched on failure; if not, it is still ours to free
            cdata.release(out)
        address = stream.get_last_error(ctypes.byref(stream)) if stream.get_last_error else None
        detail = ctypes.string_at(address).decode("utf-8", "replace") if address else "no message"
        name = errno.errorcode.get(code, str(code))
        raise InvalidTableError(f"{what} failed: {detail} ({name}: {os.strerror(code)})")


class ArrowReader:
    """The producer's columns of a table, batch by batch. Name the columns to read by role; types are checked now
    (`InvalidTableError` naming the column), each batch's buffers when it is read: a stream's later batch can still
    be refused after earlier ones were handed out (no stream can be checked whole without being read whole). Any
    error closes the reader.

    key, value: binary or string columns (any Arrow layout, dictionary-encoded or not). topic: a string column.
    partition: an integer column. timestamp: int64 epoch milliseconds, an Arrow timestamp or date64. headers: a
    list of struct<key: string, value: binary or string>, or a map of string to binary or string. Null semantics
    are in `aioproducer.columnar.layout`. `implementation` picks a twin (tests compare them); by default the
    compiled one when it was built.
    """

    def __init__(
        self,
        data: object,
        *,
        key: str | None = None,
        value: str | None = None,
        topic: str | None = None,
        partition: str | None = None,
        timestamp: str | None = None,
        headers: str | None = None,
        implementation: arrow.Implementation | None = None,
    ) -> None:
        self._twin = implementation or arrow.IMPLEMENTATION
        self._data: object = data  # some exporters' streams depend on the exporting object staying alive
        self._source: _Source | None = None
        self._source = _Source(data)
        roles = {
            "key": key,
            "value": value,
            "topic": topic,
            "partition": partition,
            "timestamp": timestamp,
            "headers": headers,
        }
        try:
            exported = self._source.take_schema()
            try:
                self._plan = schema.plan_table(exported, roles)
            finally:
                cdata.release(exported)
        except BaseException:
            self.close()
            raise

    @property
    def names(self) -> tuple[str, ...]:
        """The table's column names, in order."""
        return self._plan.names

    def __iter__(self) -> Iterator[ColumnBatch]:
        return self

    def __next__(self) -> ColumnBatch:
        while self._source is not None:
            try:
                array = self._source.take_array()
                if array is None:
                    raise StopIteration
                batch = self._read(_Batch(array))
            except BaseException:
                self.close()
                raise
            if batch.num_rows:
                return batch
        raise StopIteration

    def _read(self, owner: _Batch) -> ColumnBatch:
        try:
            _, length = layout.check_batch(owner.array, self._plan)
            views: dict[str, Any] = dict.fromkeys(schema.ROLES)
            twin = self._twin
            for column in self._plan.columns:
                described = layout.bind_column(owner.array, column, twin.kernels)
                if isinstance(described, cdata.BytesColumn):
                    views[column.role] = twin.BytesColumnView(column.name, described, owner)
                elif isinstance(described, cdata.IntColumn):
                    views[column.role] = twin.IntColumnView(column.name, described, owner)
                else:
                    views[column.role] = twin.HeadersColumnView(column.name, described, owner)
        except BaseException:
            owner.release()  # now, not whenever the traceback lets the views go
            raise
        return ColumnBatch(length, **views)

    def close(self) -> None:
        """Release the stream (batches already read stay readable). Idempotent."""
        source, self._source = self._source, None
        if source is not None:
            source.close()
        self._data = None

    def __enter__(self) -> ArrowReader:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_source", None) is not None:
            self.close()
