"""The requests a transaction sends its coordinators, and how each answer is judged (Java's TransactionManager
handlers: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn).

Owns each request's body, built at every attempt for the connection it goes to and with the producer id and epoch
of that moment, and its judge: the judge returns what the answer carries, raises `Retry` to send it again (first
finding the coordinator again, or after a shorter backoff) or `CoordinatorRefused` with the verdict the transaction
acts on. Sends nothing: `manager` sends them through `coordinator.Coordinators`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aioproducer.error_codes import ErrorCode
from aioproducer.errors import UnsupportedVersionError
from aioproducer.idempotence.sequences import IdempotenceState
from aioproducer.kafka_errors import TopicAuthorizationFailedError, kafka_error
from aioproducer.network.connection import BrokerConnection
from aioproducer.protocol import TRANSACTION_V2_VERSIONS, ApiKey
from aioproducer.transactions.coordinator import CONCURRENT_TRANSACTIONS_BACKOFF_MS, CoordinatorRefused, Retry
from aioproducer.transactions.group import CommittedOffset, ConsumerGroupMetadata
from aioproducer.transactions.verdicts import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    INIT_PRODUCER_ID,
    TXN_OFFSET_COMMIT,
    Verdict,
    verdict,
)

__all__ = ["CoordinatorRequest", "TransactionRequests"]

TopicPartition = tuple[str, int]
_TXN_OFFSET_COMMIT_BY_ID = 6  # the first TxnOffsetCommit version naming topics by id (KIP-1319)
_NO_TOPIC_ID = uuid.UUID(int=0)


@dataclass(frozen=True)
class CoordinatorRequest:
    """One request for `Coordinators.call`: its API, its body per connection, its judge and its version."""

    api: ApiKey
    body: Callable[[BrokerConnection], Mapping[str, Any]]
    judge: Callable[[BrokerConnection, dict[str, Any]], Any]
    version: Callable[[BrokerConnection], int] | None = None


class TransactionRequests:
    """The requests of one transactional id. `tv2()` says whether the transaction runs as transaction version 2
    (KIP-890): TxnOffsetCommit and EndTxn then go out at their TV2 versions, otherwise below them."""

    def __init__(
        self,
        transactional_id: str,
        idempotence: IdempotenceState,
        tv2: Callable[[], bool],
        topic_id: Callable[[str], uuid.UUID | None] = lambda topic: None,
    ) -> None:
        self.transactional_id = transactional_id
        self._idem = idempotence
        self._tv2 = tv2
        self._topic_id = topic_id  # a topic's id in the producer's metadata, None when unknown

    def init_producer_id(self, transaction_timeout_ms: int, producer_id: int, epoch: int) -> CoordinatorRequest:
        """InitProducerId; (-1, -1) for a new producer id, the current ones to bump the epoch (KIP-360). The judge
        returns (the coordinator's connection, producer id, epoch)."""
        body = {
            "transactional_id": self.transactional_id,
            "transaction_timeout_ms": transaction_timeout_ms,
            "producer_id": producer_id,
            "producer_epoch": epoch,
        }

        def judge(conn: BrokerConnection, response: dict[str, Any]) -> tuple[BrokerConnection, int, int]:
            code = response["error_code"]
            self._raise_unless_done(verdict(INIT_PRODUCER_ID, code), code, "InitProducerId")
            return conn, response["producer_id"], response["producer_epoch"]

        return CoordinatorRequest(ApiKey.INIT_PRODUCER_ID, lambda conn: body, judge)

    def add_partitions(self, partitions: list[TopicPartition], *, first_of_transaction: bool) -> CoordinatorRequest:
        """AddPartitionsToTxn (TV1) for `partitions`, all in one request."""
        topics: dict[str, list[int]] = {}
        for topic, partition in partitions:
            topics.setdefault(topic, []).append(partition)

        def body(conn: BrokerConnection) -> dict[str, Any]:
            return {
                "v3_and_below_transactional_id": self.transactional_id,
                "v3_and_below_producer_id": self._idem.producer_id,
                "v3_and_below_producer_epoch": self._idem.producer_epoch,
                "v3_and_below_topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
            }

        def judge(conn: BrokerConnection, response: dict[str, Any]) -> None:
            unauthorized: list[str] = []
            failed: dict[TopicPartition, int] = {}
            for topic in response["results_by_topic_v3_and_below"]:
                for part in topic["results_by_partition"]:
                    code = part["partition_error_code"]
                    if code == ErrorCode.NONE:
                        continue
                    decision = verdict(ADD_PARTITIONS_TO_TXN, code, unexpected=Verdict.ABORTABLE)
                    if code == ErrorCode.CONCURRENT_TRANSACTIONS:
                        # The previous transaction is still completing (Java's maybeOverrideRetryBackoffMs).
                        raise Retry(
                            "CONCURRENT_TRANSACTIONS",
                            backoff_ms=CONCURRENT_TRANSACTIONS_BACKOFF_MS if first_of_transaction else None,
                        )
                    if decision in (Verdict.RETRY, Verdict.FIND_COORDINATOR):
                        raise Retry(f"AddPartitionsToTxn: error {code}", find=decision is Verdict.FIND_COORDINATOR)
                    if code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
                        unauthorized.append(topic["name"])
                    elif decision is Verdict.ABORTABLE:
                        failed[(topic["name"], part["partition_index"])] = code
                    else:
                        raise CoordinatorRefused(decision, kafka_error(code, f"AddPartitionsToTxn {topic['name']}"))
            if unauthorized:
                raise CoordinatorRefused(
                    Verdict.ABORTABLE,
                    TopicAuthorizationFailedError(f"not authorized to write to {sorted(unauthorized)}"),
                )
            if failed:
                raise CoordinatorRefused(
                    Verdict.ABORTABLE,
                    kafka_error(next(iter(failed.values())), f"could not add partitions to the transaction: {failed}"),
                )

        return CoordinatorRequest(ApiKey.ADD_PARTITIONS_TO_TXN, body, judge, _version(ApiKey.ADD_PARTITIONS_TO_TXN))

    def add_offsets(self, group_id: str) -> CoordinatorRequest:
        """AddOffsetsToTxn (TV1): the group's offsets partition joins the transaction."""

        def body(conn: BrokerConnection) -> dict[str, Any]:
            return {
                "transactional_id": self.transactional_id,
                "producer_id": self._idem.producer_id,
                "producer_epoch": self._idem.producer_epoch,
                "group_id": group_id,
            }

        def judge(conn: BrokerConnection, response: dict[str, Any]) -> None:
            self._accept(ADD_OFFSETS_TO_TXN, response["error_code"], "AddOffsetsToTxn")

        return CoordinatorRequest(ApiKey.ADD_OFFSETS_TO_TXN, body, judge, _version(ApiKey.ADD_OFFSETS_TO_TXN))

    def commit_offsets(self, committed: list[CommittedOffset], metadata: ConsumerGroupMetadata) -> CoordinatorRequest:
        """TxnOffsetCommit to the group's coordinator. A partition the coordinator accepted is not sent again when
        another one asks for a retry."""
        pending = {(offset.topic, offset.partition): offset for offset in committed}
        names_by_id: dict[uuid.UUID, str] = {}

        def version(conn: BrokerConnection) -> int:
            # v6 names topics by id only (KIP-1319): as Java's TransactionManager, only when the producer's metadata
            # knows the id of every topic in the request; otherwise by name, at v5 at most.
            chosen = self._tv_version(ApiKey.TXN_OFFSET_COMMIT)(conn)
            if chosen < _TXN_OFFSET_COMMIT_BY_ID:
                return chosen
            if any(self._topic_id(topic) is None for topic, _ in pending):
                return _TXN_OFFSET_COMMIT_BY_ID - 1
            return chosen

        def body(conn: BrokerConnection) -> dict[str, Any]:
            topics: dict[str, list[dict[str, Any]]] = {}
            ids: dict[str, uuid.UUID] = {}
            for offset in pending.values():
                topic_id = self._topic_id(offset.topic)
                if topic_id is not None:
                    ids[offset.topic] = topic_id
                    names_by_id[topic_id] = offset.topic  # v6 answers by id
                topics.setdefault(offset.topic, []).append(
                    {
                        "partition_index": offset.partition,
                        "committed_offset": offset.offset,
                        "committed_leader_epoch": offset.leader_epoch,
                        "committed_metadata": offset.metadata,
                    }
                )
            return {
                "transactional_id": self.transactional_id,
                "group_id": metadata.group_id,
                "producer_id": self._idem.producer_id,
                "producer_epoch": self._idem.producer_epoch,
                "generation_id": metadata.generation_id,
                "member_id": metadata.member_id,
                "group_instance_id": metadata.group_instance_id,
                # Only v6 sends the id; one unknown here (metadata changed since the version was chosen) goes as
                # the zero id, which the coordinator answers with UNKNOWN_TOPIC_ID, retriable.
                "topics": [
                    {"name": name, "topic_id": ids.get(name, _NO_TOPIC_ID), "partitions": parts}
                    for name, parts in topics.items()
                ],
            }

        def judge(conn: BrokerConnection, response: dict[str, Any]) -> None:
            find = False
            for topic in response["topics"]:
                name = topic["name"] or names_by_id.get(topic["topic_id"], "")  # v6 answers with ids
                for part in topic["partitions"]:
                    code = part["error_code"]
                    tp = (name, part["partition_index"])
                    decision = verdict(TXN_OFFSET_COMMIT, code)
                    if decision is Verdict.DONE:
                        pending.pop(tp, None)
                    elif decision is Verdict.FIND_COORDINATOR:
                        find = True
                    elif decision is not Verdict.RETRY:
                        raise CoordinatorRefused(
                            decision, kafka_error(code, f"TxnOffsetCommit {tp} for group {metadata.group_id!r}")
                        )
            if pending:
                raise Retry(f"TxnOffsetCommit: {sorted(pending)} not committed yet", find=find)

        return CoordinatorRequest(ApiKey.TXN_OFFSET_COMMIT, body, judge, version)

    def end_transaction(self, *, committed: bool) -> CoordinatorRequest:
        """EndTxn; the judge returns the answer (v5 names the next producer id and epoch)."""

        def body(conn: BrokerConnection) -> dict[str, Any]:
            return {
                "transactional_id": self.transactional_id,
                "producer_id": self._idem.producer_id,
                "producer_epoch": self._idem.producer_epoch,
                "committed": committed,
            }

        def judge(conn: BrokerConnection, response: dict[str, Any]) -> dict[str, Any]:
            self._accept(END_TXN, response["error_code"], "EndTxn")
            return response

        return CoordinatorRequest(ApiKey.END_TXN, body, judge, self._tv_version(ApiKey.END_TXN))

    def _accept(self, table: Mapping[int, Verdict], code: int, api: str) -> None:
        """Raise Retry or CoordinatorRefused unless `code` is success."""
        self._raise_unless_done(verdict(table, code), code, api)

    def _raise_unless_done(self, decision: Verdict, code: int, api: str) -> None:
        if decision is Verdict.DONE:
            return
        if decision in (Verdict.RETRY, Verdict.FIND_COORDINATOR):
            raise Retry(f"{api}: error {code}", find=decision is Verdict.FIND_COORDINATOR)
        raise CoordinatorRefused(decision, kafka_error(code, f"{api} for {self.transactional_id!r}"))

    def _tv_version(self, api: ApiKey) -> Callable[[BrokerConnection], int]:
        """The version of a TV2-sensitive API: below its first TV2 version unless the transaction runs as TV2."""

        def pick(conn: BrokerConnection) -> int:
            version = _version(api)(conn)
            return version if self._tv2() else min(version, TRANSACTION_V2_VERSIONS[api] - 1)

        return pick


def _version(api: ApiKey) -> Callable[[BrokerConnection], int]:
    """The newest version of `api` the broker offers; a broker without it refuses the transaction for good."""

    def pick(conn: BrokerConnection) -> int:
        version = conn.versions.get(api)
        if version is None:
            raise CoordinatorRefused(
                Verdict.FATAL, UnsupportedVersionError(f"broker {conn.node_id} does not offer {api.name}")
            )
        return version

    return pick
