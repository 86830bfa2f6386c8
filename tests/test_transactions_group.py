"""Consumer-group metadata and offsets for send_offsets_to_transaction: every form a caller may have at hand, and
verdicts on transactional error codes against Java's handlers."""

from __future__ import annotations

import ctypes
import glob
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aioproducer.error_codes import ErrorCode
from aioproducer.errors import InvalidOffsetsError
from aioproducer.transactions.group import CommittedOffset, ConsumerGroupMetadata, group_metadata, offsets_to_commit
from aioproducer.transactions.verdicts import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    TXN_OFFSET_COMMIT,
    Verdict,
    produce_failure_is_fatal,
    verdict,
)

confluent_kafka = pytest.importorskip("confluent_kafka")


def _librdkafka() -> ctypes.CDLL:
    libs = os.path.join(os.path.dirname(confluent_kafka.__file__), os.pardir, "confluent_kafka.libs")
    lib = ctypes.CDLL(glob.glob(os.path.join(libs, "librdkafka*"))[0])
    lib.rd_kafka_consumer_group_metadata_new_with_genid.restype = ctypes.c_void_p
    lib.rd_kafka_consumer_group_metadata_new_with_genid.argtypes = [
        ctypes.c_char_p,
        ctypes.c_int32,
        ctypes.c_char_p,
        ctypes.c_char_p,
    ]
    lib.rd_kafka_consumer_group_metadata_write.restype = ctypes.c_void_p
    lib.rd_kafka_consumer_group_metadata_write.argtypes = [
        ctypes.c_void_p,
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.POINTER(ctypes.c_size_t),
    ]
    lib.rd_kafka_consumer_group_metadata_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mem_free.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    return lib


LIBRDKAFKA = _librdkafka()


def librdkafka_blob(group: str, generation: int, member: str, instance: str | None) -> bytes:
    """What confluent-kafka's consumer_group_metadata() returns, written by librdkafka itself."""
    handle = LIBRDKAFKA.rd_kafka_consumer_group_metadata_new_with_genid(
        group.encode(), generation, member.encode(), None if instance is None else instance.encode()
    )
    buffer, size = ctypes.c_void_p(), ctypes.c_size_t()
    try:
        assert (
            LIBRDKAFKA.rd_kafka_consumer_group_metadata_write(handle, ctypes.byref(buffer), ctypes.byref(size)) is None
        )
        return ctypes.string_at(buffer, size.value)
    finally:
        LIBRDKAFKA.rd_kafka_mem_free(None, buffer)
        LIBRDKAFKA.rd_kafka_consumer_group_metadata_destroy(handle)


names = st.text(st.characters(min_codepoint=1, max_codepoint=0x2FFF, exclude_categories=("Cs",)), max_size=20)


@given(
    group=names.filter(bool),
    generation=st.integers(-(2**31), 2**31 - 1),
    member=names,
    instance=st.none() | names,
)
def test_librdkafka_metadata_is_read_back(group: str, generation: int, member: str, instance: str | None) -> None:
    blob = librdkafka_blob(group, generation, member, instance)
    assert group_metadata(blob) == ConsumerGroupMetadata(group, generation, member, instance)


def test_confluent_consumer_metadata_before_joining() -> None:
    consumer = confluent_kafka.Consumer({"group.id": "g-1", "bootstrap.servers": "127.0.0.1:9", "log_level": 0})
    try:
        assert group_metadata(consumer.consumer_group_metadata()) == ConsumerGroupMetadata("g-1", -1, "", None)
    finally:
        consumer.close()


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        b"CGMDv1:\x00\x00\x00\x00g\x00\x00\x01",
        b"CGMDv2:\x01\x00",
        b"CGMDv2:\x01\x00\x00\x00g\x00m",
        b"CGMDv2:\x01",
    ],
)
def test_corrupt_librdkafka_metadata_is_a_typed_error(blob: bytes) -> None:
    with pytest.raises(InvalidOffsetsError):
        group_metadata(blob)


def test_trailing_bytes_are_refused() -> None:
    with pytest.raises(InvalidOffsetsError, match="trailing"):
        group_metadata(librdkafka_blob("g", 1, "m", None) + b"x")


async def test_aiokafka_consumer_membership() -> None:
    aiokafka = pytest.importorskip("aiokafka")
    consumer = aiokafka.AIOKafkaConsumer(group_id="grp", bootstrap_servers="127.0.0.1:9", group_instance_id="i-1")
    try:
        assert group_metadata(consumer) == ConsumerGroupMetadata("grp", -1, "", "i-1")

        class Coordinator:  # what aiokafka's group coordinator holds once the consumer joined
            generation = 12
            member_id = "member-7"

        consumer._coordinator = Coordinator()
        assert group_metadata(consumer) == ConsumerGroupMetadata("grp", 12, "member-7", "i-1")
    finally:
        consumer._coordinator = None
        await consumer.stop()


def test_plain_group_id_and_bad_values() -> None:
    assert group_metadata("orders") == ConsumerGroupMetadata("orders")
    for bad in ["", 5, None, object()]:
        with pytest.raises(InvalidOffsetsError):
            group_metadata(bad)
    with pytest.raises(InvalidOffsetsError):
        ConsumerGroupMetadata("g", generation_id=True)  # type: ignore[arg-type]


def test_offsets_in_every_form() -> None:
    aiokafka_structs = pytest.importorskip("aiokafka.structs")
    expected = [CommittedOffset("t", 0, 5), CommittedOffset("t", 1, 7, "meta")]
    assert offsets_to_commit({("t", 0): 5, ("t", 1): (7, "meta")}) == expected
    assert offsets_to_commit(
        {
            aiokafka_structs.TopicPartition("t", 0): aiokafka_structs.OffsetAndMetadata(5, ""),
            aiokafka_structs.TopicPartition("t", 1): aiokafka_structs.OffsetAndMetadata(7, "meta"),
        }
    ) == [CommittedOffset("t", 0, 5, ""), CommittedOffset("t", 1, 7, "meta")]
    positions = [
        confluent_kafka.TopicPartition("t", 0, 5),
        confluent_kafka.TopicPartition("t", 1, 7, "meta", leader_epoch=3),
    ]
    assert offsets_to_commit(positions) == [CommittedOffset("t", 0, 5), CommittedOffset("t", 1, 7, "meta", 3)]


@pytest.mark.parametrize(
    "offsets",
    [
        {("t", 0): -1},  # no position yet
        [confluent_kafka.TopicPartition("t", 0)],  # OFFSET_INVALID (-1001)
        {("t", -1): 3},
        {("", 0): 3},
        {("t", 0): True},
        {("t", 0): "3"},
        {("t", 0): (3, 4)},
        {"t": 3},
        [confluent_kafka.TopicPartition("t", 0, 1), confluent_kafka.TopicPartition("t", 0, 2)],
        "t",
        42,
    ],
)
def test_bad_offsets_are_typed_errors(offsets: object) -> None:
    with pytest.raises(InvalidOffsetsError):
        offsets_to_commit(offsets)


# -- verdicts --------------------------------------------------------------------------------------------------

E = ErrorCode
V = Verdict


@pytest.mark.parametrize(
    ("table", "code", "expected"),
    [
        # every API: success, the coordinator moved, the coordinator loads, a concurrent transaction ends
        *[(t, E.NONE, V.DONE) for t in (INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN)],
        *[
            (t, E.NOT_COORDINATOR, V.FIND_COORDINATOR)
            for t in (INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT)
        ],
        *[
            (t, E.COORDINATOR_NOT_AVAILABLE, V.FIND_COORDINATOR)
            for t in (INIT_PRODUCER_ID, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT)
        ],
        *[
            (t, E.COORDINATOR_LOAD_IN_PROGRESS, V.RETRY)
            for t in (INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT)
        ],
        *[
            (t, E.CONCURRENT_TRANSACTIONS, V.RETRY)
            for t in (INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN)
        ],
        *[
            (t, E.PRODUCER_FENCED, V.FENCED)
            for t in (INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT)
        ],
        *[
            (t, E.INVALID_PRODUCER_EPOCH, V.FENCED)
            for t in (INIT_PRODUCER_ID, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT)
        ],
        (END_TXN, E.INVALID_TXN_STATE, V.FATAL),
        (ADD_PARTITIONS_TO_TXN, E.INVALID_TXN_STATE, V.FATAL),
        (END_TXN, E.INVALID_PRODUCER_ID_MAPPING, V.FATAL),
        (END_TXN, E.UNKNOWN_PRODUCER_ID, V.ABORTABLE_IF_POSSIBLE),
        (ADD_PARTITIONS_TO_TXN, E.UNKNOWN_PRODUCER_ID, V.ABORTABLE_IF_POSSIBLE),
        (ADD_PARTITIONS_TO_TXN, E.TOPIC_AUTHORIZATION_FAILED, V.ABORTABLE),
        (ADD_PARTITIONS_TO_TXN, E.OPERATION_NOT_ATTEMPTED, V.ABORTABLE),
        (ADD_OFFSETS_TO_TXN, E.GROUP_AUTHORIZATION_FAILED, V.ABORTABLE),
        (TXN_OFFSET_COMMIT, E.UNKNOWN_MEMBER_ID, V.ABORTABLE),
        (TXN_OFFSET_COMMIT, E.ILLEGAL_GENERATION, V.ABORTABLE),
        (TXN_OFFSET_COMMIT, E.FENCED_INSTANCE_ID, V.ABORTABLE),
        (TXN_OFFSET_COMMIT, E.REQUEST_TIMED_OUT, V.FIND_COORDINATOR),
        (TXN_OFFSET_COMMIT, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, V.FATAL),
        (END_TXN, E.TRANSACTION_ABORTABLE, V.ABORTABLE),
        (END_TXN, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, V.FATAL),
        (FIND_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, V.RETRY),
        (FIND_COORDINATOR, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, V.FATAL),
        (FIND_COORDINATOR, E.GROUP_AUTHORIZATION_FAILED, V.ABORTABLE),
        (END_TXN, E.INVALID_REQUEST, V.FATAL),  # INVALID_REQUEST: unexpected, so fatal
        (END_TXN, 9999, V.FATAL),  # a code from a newer broker
    ],
)
def test_verdicts_follow_javas_handlers(table: object, code: int, expected: Verdict) -> None:
    assert verdict(table, code) is expected  # type: ignore[arg-type]


def test_produce_failures_that_end_the_producer() -> None:
    assert [code for code in ErrorCode if produce_failure_is_fatal(code)] == [
        E.CLUSTER_AUTHORIZATION_FAILED,
        E.UNSUPPORTED_VERSION,
        E.INVALID_PRODUCER_ID_MAPPING,
        E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        E.PRODUCER_FENCED,
    ]
    assert not produce_failure_is_fatal(None)
    assert not produce_failure_is_fatal(E.INVALID_PRODUCER_EPOCH), "KIP-588: abortable on Produce"
