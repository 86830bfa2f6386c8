"""Batches we build, read back by independent readers with CRC validation: kafka-python's and aiokafka's (its C
extension and its pure-Python reader), for every codec, plus hypothesis round trips of arbitrary records."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AiokafkaBatch
from aiokafka.record.default_records import _DefaultRecordBatchPy as AiokafkaPyBatch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aioproducer.records import BatchBuilder, read_batches
from aioproducer.records.compression import CompressionType

with warnings.catch_warnings():  # kafka-python's package import trips importlib.resources deprecations
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
Row = tuple[int, int, "bytes | None", "bytes | None", list[tuple[str, "bytes | None"]]]
Reader = Callable[[bytes], tuple[dict[str, Any], list[Row]]]


def _read_foreign(batch: Any) -> tuple[dict[str, Any], list[Row]]:
    assert batch.validate_crc()  # must precede iteration, which decompresses
    meta = {
        "compression": batch.compression_type,
        "producer_id": batch.producer_id,
        "producer_epoch": batch.producer_epoch,
        "base_sequence": batch.base_sequence,
        "transactional": batch.is_transactional,
        "last_offset_delta": batch.last_offset_delta,
    }
    rows = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in batch]
    return meta, rows


READERS: dict[str, Reader] = {
    "kafka-python": lambda data: _read_foreign(KafkaPythonBatch(data)),
    "aiokafka-c": lambda data: _read_foreign(AiokafkaBatch(data)),
    "aiokafka-py": lambda data: _read_foreign(AiokafkaPyBatch(data)),
}


def _readers_for(codec: CompressionType) -> list[str]:
    # kafka-python decodes snappy only through python-snappy, which is not installed; aiokafka uses cramjam.
    return [name for name in READERS if not (codec is CompressionType.SNAPPY and name == "kafka-python")]


CASES = [(codec, reader) for codec in CompressionType for reader in _readers_for(codec)]

TS = 1_700_000_000_000
COMPRESSIBLE = [
    (TS + i % 7 - 3, None if i % 3 == 0 else b"key-%d" % (i % 10), b"payload %d " % i * 20, [("seq", b"%d" % i)])
    for i in range(300)
]
MIXED: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
    (TS, b"k", b"v", []),
    (TS - 1000, None, None, [("null-value", None), ("empty", b"")]),
    (TS + 10**9, b"", b"x" * 70_000, [("ünïcødé ключ 键", b"\x00\x01")]),
    *COMPRESSIBLE,
]


def _build(records: list, codec: CompressionType) -> BatchBuilder:
    builder = BatchBuilder(compression=codec, size_limit=1 << 24)
    for offset_delta, (ts, key, value, headers) in enumerate(records):
        assert builder.try_append(ts, key, value, headers) == offset_delta
    return builder


@pytest.mark.parametrize(("codec", "reader"), CASES)
def test_independent_readers_decode_our_batches(codec: CompressionType, reader: str) -> None:
    closed = _build(MIXED, codec).close()
    assert closed.compression is codec  # the data compresses, so the codec is kept
    data = closed.encode(producer_id=77, producer_epoch=2, base_sequence=1000)
    meta, rows = READERS[reader](data)
    assert meta == {
        "compression": int(codec),
        "producer_id": 77,
        "producer_epoch": 2,
        "base_sequence": 1000,
        "transactional": False,
        "last_offset_delta": len(MIXED) - 1,
    }
    assert rows == [(i, ts, key, value, headers) for i, (ts, key, value, headers) in enumerate(MIXED)]


@pytest.mark.parametrize("reader", list(READERS))
def test_independent_readers_see_the_transactional_flag(reader: str) -> None:
    data = (
        _build(MIXED[:2], CompressionType.NONE)
        .close()
        .encode(producer_id=1, producer_epoch=0, base_sequence=0, transactional=True)
    )
    meta, _ = READERS[reader](data)
    assert meta["transactional"] is True


# Timestamps: an int64 base, then deltas of any sign and size that keep every timestamp inside int64.
_records = st.lists(
    st.tuples(
        st.integers(-(2**40), 2**40) | st.sampled_from([0, 1, -1, 2**31, -(2**31)]),
        st.none() | st.binary(max_size=40) | st.binary(min_size=4000, max_size=9000),
        st.none() | st.binary(max_size=300),
        st.lists(st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=20)), max_size=3),
    ),
    min_size=1,
    max_size=25,
)
_base = st.integers(INT64_MIN, INT64_MAX) | st.sampled_from([0, TS, INT64_MIN, INT64_MAX])


def _timestamps(base: int, records: list) -> list:
    return [(min(max(base + delta, INT64_MIN), INT64_MAX), k, v, h) for delta, k, v, h in records]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=_base, records=_records, codec=st.sampled_from(list(CompressionType)))
def test_hypothesis_round_trip_through_our_reader_and_aiokafkas(
    base: int, records: list, codec: CompressionType
) -> None:
    records = _timestamps(base, records)
    builder = BatchBuilder(compression=codec, size_limit=1 << 24)
    accepted = []
    for ts, key, value, headers in records:
        offset_delta = builder.try_append(ts, key, value, headers)
        if offset_delta is None:  # only a timestamp delta that overflows int64 may be refused here
            assert not INT64_MIN <= ts - accepted[0][0] <= INT64_MAX
            continue
        assert offset_delta == len(accepted)
        accepted.append((ts, key, value, headers))
    closed = builder.close()
    data = closed.encode(producer_id=5, producer_epoch=1, base_sequence=2**31 - 1 - len(accepted))
    expected = [(i, ts, key, value, list(headers)) for i, (ts, key, value, headers) in enumerate(accepted)]

    (batch,) = read_batches(data)
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch.records] == expected
    assert (batch.base_timestamp, batch.max_timestamp) == (accepted[0][0], max(r[0] for r in accepted))
    assert batch.compression is closed.compression
    if closed.compression is not CompressionType.SNAPPY:
        assert READERS["kafka-python"](data)[1] == expected
    assert READERS["aiokafka-c"](data)[1] == expected
