"""TxnOffsetCommit's request and judge without a broker: v6 (Kafka 4.4, KIP-1319) names topics by id, so it is used only
when the producer knows every topic's id and the transaction runs as TV2 (Java's TransactionManager picks
`forTopicIdsOrNames` or `forTopicNames` so), and its answer, which names topics by id too, settles the right
partitions."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest

from aioproducer.idempotence.sequences import IdempotenceState
from aioproducer.protocol import ApiKey, decode_request, encode_request
from aioproducer.transactions.coordinator import CoordinatorRefused, Retry
from aioproducer.transactions.group import CommittedOffset, ConsumerGroupMetadata
from aioproducer.transactions.requests import TransactionRequests
from aioproducer.transactions.verdicts import Verdict

ORDERS, PAYMENTS = uuid.UUID(int=0xA1), uuid.UUID(int=0xB2)
OFFSETS = [CommittedOffset("orders", 0, 10), CommittedOffset("orders", 1, 11), CommittedOffset("payments", 0, 5)]
GROUP = ConsumerGroupMetadata("g", 3, "member-1")


def requests(known: dict[str, uuid.UUID], *, tv2: bool = True) -> TransactionRequests:
    idempotence = IdempotenceState(True, transactional_id="tx")
    return TransactionRequests("tx", idempotence, lambda: tv2, known.get)


def coordinator(offers: int) -> Any:
    return SimpleNamespace(node_id=1, versions={ApiKey.TXN_OFFSET_COMMIT: offers})


@pytest.mark.parametrize(
    ("known", "offers", "tv2", "expected"),
    [
        ({"orders": ORDERS, "payments": PAYMENTS}, 6, True, 6),
        ({"orders": ORDERS}, 6, True, 5),  # one topic's id unknown: every topic goes by name
        ({}, 6, True, 5),
        ({"orders": ORDERS, "payments": PAYMENTS}, 5, True, 5),  # a 4.1 coordinator
        ({"orders": ORDERS, "payments": PAYMENTS}, 6, False, 4),  # TV1 stays below TV2's first version
        ({"orders": ORDERS, "payments": PAYMENTS}, 4, True, 4),  # a 3.9 coordinator
    ],
)
def test_the_version_follows_what_the_producer_knows_and_the_coordinator_offers(
    known: dict[str, uuid.UUID], offers: int, tv2: bool, expected: int
) -> None:
    request = requests(known, tv2=tv2).commit_offsets(OFFSETS, GROUP)
    assert request.version is not None and request.version(coordinator(offers)) == expected


def test_v6_carries_ids_and_no_names_and_its_answer_by_id_settles_each_partition() -> None:
    request = requests({"orders": ORDERS, "payments": PAYMENTS}).commit_offsets(OFFSETS, GROUP)
    conn = coordinator(6)
    assert request.version is not None and request.version(conn) == 6
    body = request.body(conn)
    _, decoded = decode_request(encode_request(ApiKey.TXN_OFFSET_COMMIT, 6, 1, "c", body)[4:])
    assert {(t["topic_id"], t["name"]) for t in decoded["topics"]} == {(ORDERS, ""), (PAYMENTS, "")}
    # The coordinator accepts orders-0 and payments-0 but asks again for orders-1: only orders-1 is sent again.
    answer = {
        "topics": [
            {"name": "", "topic_id": ORDERS, "partitions": [_part(0, 0), _part(1, 14)]},  # 14: load in progress
            {"name": "", "topic_id": PAYMENTS, "partitions": [_part(0, 0)]},
        ]
    }
    with pytest.raises(Retry):
        request.judge(conn, answer)
    again = request.body(conn)["topics"]
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in again] == [("orders", [1])]
    request.judge(conn, {"topics": [{"name": "", "topic_id": ORDERS, "partitions": [_part(1, 0)]}]})


@pytest.mark.parametrize("code", [69, 113], ids=["GROUP_ID_NOT_FOUND", "STALE_MEMBER_EPOCH"])
def test_the_consumer_protocols_refusals_make_the_transaction_abortable(code: int) -> None:
    """v6's new answers for a group member that moved on (KIP-848): Java raises CommitFailedException, abortable."""
    request = requests({"orders": ORDERS, "payments": PAYMENTS}).commit_offsets(OFFSETS[:1], GROUP)
    answer = {"topics": [{"name": "", "topic_id": ORDERS, "partitions": [_part(0, code)]}]}
    with pytest.raises(CoordinatorRefused) as refused:
        request.judge(coordinator(6), answer)
    assert refused.value.verdict is Verdict.ABORTABLE


def _part(partition: int, error_code: int) -> dict[str, int]:
    return {"partition_index": partition, "error_code": error_code}
