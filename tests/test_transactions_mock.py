"""Coordinator errors injected with librdkafka's mock cluster (transaction version 1: the mock speaks ApiVersions v2):
what is retried, what aborts, what ends the producer, and what a timed-out or cancelled call leaves behind."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from aioproducer import Producer, ProducerRecord
from aioproducer.error_codes import ErrorCode
from aioproducer.errors import (
    ProducerFencedError,
    TransactionAbortedError,
    TransactionFatalError,
    TransactionRequiresAbortError,
    TransactionStateError,
    TransactionTimeoutError,
)
from aioproducer.kafka_errors import TopicAuthorizationFailedError
from aioproducer.protocol import ApiKey
from aioproducer.testing import MockCluster

pytestmark = pytest.mark.timeout(60)

FIND = int(ApiKey.FIND_COORDINATOR)
INIT = int(ApiKey.INIT_PRODUCER_ID)
ADD = int(ApiKey.ADD_PARTITIONS_TO_TXN)
END = int(ApiKey.END_TXN)
ADD_OFFSETS = int(ApiKey.ADD_OFFSETS_TO_TXN)
TXN_OFFSETS = int(ApiKey.TXN_OFFSET_COMMIT)
PRODUCE = int(ApiKey.PRODUCE)

COORDINATOR_LOAD_IN_PROGRESS = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
COORDINATOR_NOT_AVAILABLE = ErrorCode.COORDINATOR_NOT_AVAILABLE
NOT_COORDINATOR = ErrorCode.NOT_COORDINATOR
TOPIC_AUTHORIZATION_FAILED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
CONCURRENT_TRANSACTIONS = ErrorCode.CONCURRENT_TRANSACTIONS
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
PRODUCER_FENCED = ErrorCode.PRODUCER_FENCED
DISCONNECT = -195  # librdkafka's _TRANSPORT: the mock broker closes the connection instead of answering


@pytest.fixture
def cluster(mock_cluster: MockCluster) -> MockCluster:
    mock_cluster.create_topic("t", 2)
    mock_cluster.start_request_tracking()
    return mock_cluster


def producer(cluster: MockCluster, **settings: object) -> Producer:
    defaults: dict[str, object] = {"linger_ms": 1, "retry_backoff_ms": 10, "retry_backoff_max_ms": 50}
    return Producer(cluster.bootstrap_servers, transactional_id="tx", **{**defaults, **settings})


def counts(cluster: MockCluster) -> Counter[int]:
    return Counter(request.api_key for request in cluster.requests())


async def one_transaction(p: Producer) -> None:
    async with p.transaction():
        await p.send("t", b"v", partition=0)
        await p.send("t", b"w", partition=1)


@pytest.mark.parametrize("code", [COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS])
async def test_find_coordinator_errors_are_retried(cluster: MockCluster, code: int) -> None:
    cluster.push_request_errors(FIND, code, code)
    async with producer(cluster) as p:
        await one_transaction(p)
    assert counts(cluster)[FIND] >= 3


@pytest.mark.parametrize("code", [NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS])
async def test_init_producer_id_retries_coordinator_errors(cluster: MockCluster, code: int) -> None:
    cluster.push_request_errors(INIT, code, code)
    async with producer(cluster) as p:
        await one_transaction(p)
    seen = counts(cluster)
    assert seen[INIT] == 3
    # NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE look the coordinator up again; loading only waits.
    assert seen[FIND] == (1 if code == COORDINATOR_LOAD_IN_PROGRESS else 3)


async def test_concurrent_transactions_on_add_partitions_is_retried(cluster: MockCluster) -> None:
    cluster.push_request_errors(ADD, CONCURRENT_TRANSACTIONS, CONCURRENT_TRANSACTIONS, CONCURRENT_TRANSACTIONS)
    async with producer(cluster) as p:
        await one_transaction(p)
        await one_transaction(p)
    seen = counts(cluster)
    assert seen[ADD] >= 5  # three refusals, then one add per transaction (both partitions in one request)
    assert seen[END] == 2


@pytest.mark.parametrize("code", [NOT_COORDINATOR, CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS])
async def test_end_txn_retries(cluster: MockCluster, code: int) -> None:
    async with producer(cluster) as p:
        await p.begin_transaction()
        await p.send("t", b"v", partition=0)
        finds = counts(cluster)[FIND]
        cluster.push_request_errors(END, code, code)
        await p.commit_transaction()
        await one_transaction(p)
    seen = counts(cluster)
    assert seen[END] == 4
    assert seen[FIND] == finds + (2 if code == NOT_COORDINATOR else 0)


async def test_disconnect_during_end_txn_is_retried_at_the_coordinator_found_again(cluster: MockCluster) -> None:
    async with producer(cluster) as p:
        await p.begin_transaction()
        await p.send("t", b"v", partition=0)
        cluster.push_request_errors(END, DISCONNECT)
        await p.commit_transaction()
        await one_transaction(p)
    assert counts(cluster)[END] == 3


async def test_transactional_id_not_authorized_is_fatal_at_start(cluster: MockCluster) -> None:
    cluster.push_request_errors(INIT, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    p = producer(cluster)
    with pytest.raises(TransactionFatalError) as raised:
        async with p:
            pass
    assert raised.value.__cause__ is not None and raised.value.__cause__.code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED


async def test_fenced_on_end_txn_fails_everything_after(cluster: MockCluster) -> None:
    async with producer(cluster) as p:
        await p.begin_transaction()
        await p.send("t", b"sent", partition=0)
        cluster.push_request_errors(END, PRODUCER_FENCED)
        with pytest.raises(ProducerFencedError):
            await p.commit_transaction()
        for call in (p.begin_transaction(), p.abort_transaction(), p.commit_transaction()):
            with pytest.raises(ProducerFencedError):
                await call
        with pytest.raises(ProducerFencedError):
            await p.send("t", b"after", partition=0)


async def test_topic_not_authorized_on_add_partitions_only_aborts(cluster: MockCluster) -> None:
    cluster.push_request_errors(ADD, TOPIC_AUTHORIZATION_FAILED)
    async with producer(cluster) as p:
        await p.begin_transaction()
        with pytest.raises(TopicAuthorizationFailedError):
            await p.send("t", b"refused", partition=0)
        with pytest.raises(TransactionRequiresAbortError) as raised:
            await p.commit_transaction()
        assert isinstance(raised.value.__cause__, TopicAuthorizationFailedError)
        await p.abort_transaction()
        await one_transaction(p)
    assert counts(cluster)[END] == 1, "nothing was added to the failed transaction: no EndTxn for it"


async def test_commit_timeout_resumes_and_blocks_other_calls(cluster: MockCluster) -> None:
    async with producer(cluster) as p:
        await p.begin_transaction()
        await p.send("t", b"v", partition=0)
        coordinator = next(r.broker_id for r in cluster.requests() if r.api_key == ADD)
        cluster.push_broker_request_errors(coordinator, END, [(0, 1500)])  # answer EndTxn after 1.5 s
        with pytest.raises(TransactionTimeoutError):
            await p.commit_transaction(timeout=0.1)
        with pytest.raises(TransactionStateError, match="commit_transaction"):
            await p.begin_transaction()
        with pytest.raises(TransactionStateError, match="commit_transaction"):
            await p.abort_transaction()
        await p.commit_transaction(timeout=10)  # the same call resumes the pending commit
        await one_transaction(p)
    assert counts(cluster)[END] == 2, "the resumed commit sent no second EndTxn"


async def test_cancelled_commit_goes_on_and_is_resumed(cluster: MockCluster) -> None:
    async with producer(cluster) as p:
        await p.begin_transaction()
        await p.send("t", b"v", partition=0)
        coordinator = next(r.broker_id for r in cluster.requests() if r.api_key == ADD)
        cluster.push_broker_request_errors(coordinator, END, [(0, 500)])
        commit = asyncio.ensure_future(p.commit_transaction())
        await asyncio.sleep(0.1)
        commit.cancel()
        with pytest.raises(asyncio.CancelledError):
            await commit
        await p.commit_transaction()
    assert counts(cluster)[END] == 1


async def test_abort_fails_buffered_records(cluster: MockCluster) -> None:
    async with producer(cluster, linger_ms=60000) as p:
        await p.begin_transaction()
        buffered = [await p.enqueue("t", b"b%d" % i, partition=i % 2) for i in range(4)]
        await p.abort_transaction()
        for delivery in buffered:
            with pytest.raises(TransactionAbortedError):
                await delivery
    seen = counts(cluster)
    assert seen[PRODUCE] == 0 and seen[ADD] == 0 and seen[END] == 0, "nothing reached a broker"


async def test_close_aborts_an_open_transaction(cluster: MockCluster) -> None:
    p = producer(cluster)
    await p.start()
    await p.begin_transaction()
    await p.send("t", b"v", partition=0)
    await p.close()
    assert counts(cluster)[END] == 1
    with pytest.raises(Exception, match="closed"):
        await p.begin_transaction()


async def test_context_manager_aborts_on_error_and_commits_otherwise(cluster: MockCluster) -> None:
    async with producer(cluster) as p:
        with pytest.raises(ZeroDivisionError):
            async with p.transaction():
                await p.send("t", b"v", partition=0)
                1 / 0  # noqa: B018
        assert p._txn is not None and p._txn.state.state.value == "ready"
        await one_transaction(p)
    assert counts(cluster)[END] == 2


async def test_context_manager_aborts_when_cancelled(cluster: MockCluster) -> None:
    async with producer(cluster) as p:
        started = asyncio.Event()

        async def work() -> None:
            async with p.transaction():
                await p.send("t", b"v", partition=0)
                started.set()
                await asyncio.sleep(30)

        task = asyncio.ensure_future(work())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await one_transaction(p)  # the abort completed: a new transaction begins
    assert counts(cluster)[END] == 2


async def test_send_offsets_v1_adds_offsets_then_commits_them_at_the_group_coordinator(cluster: MockCluster) -> None:
    async with producer(cluster) as p, p.transaction():
        await p.send("t", b"v", partition=0)
        await p.send_offsets_to_transaction({("t", 0): 7, ("t", 1): 3}, "group-1")
    seen = counts(cluster)
    assert seen[ADD_OFFSETS] == 1 and seen[TXN_OFFSETS] == 1 and seen[END] == 1


async def test_calls_on_a_producer_without_transactional_id(cluster: MockCluster) -> None:
    async with Producer(cluster.bootstrap_servers) as p:
        with pytest.raises(TransactionStateError, match="transactional_id"):
            await p.begin_transaction()


async def test_send_outside_a_transaction_is_a_state_error(cluster: MockCluster) -> None:
    async with producer(cluster) as p:
        with pytest.raises(TransactionStateError, match="begin_transaction"):
            await p.send("t", b"v")
        with pytest.raises(TransactionStateError):
            await p.send_many([])
        with pytest.raises(TransactionStateError):
            await p.commit_transaction()


async def test_a_record_kafka_refuses_fails_the_commit_then_abort_recovers(cluster: MockCluster) -> None:
    """A batch refused for good (INVALID_RECORD) while others of the transaction wait: commit stops waiting and
    raises, abort fails what is queued, bumps the epoch (TV1) and the next transaction commits."""
    async with producer(cluster) as p:
        await p.begin_transaction()
        await p.send("t", b"fine", partition=1)
        cluster.push_request_errors(PRODUCE, ErrorCode.INVALID_RECORD)
        doomed = [await p.enqueue("t", b"d%d" % i, partition=0) for i in range(3)]
        with pytest.raises(TransactionRequiresAbortError) as failed:
            await p.commit_transaction()
        assert failed.value.__cause__ is not None and failed.value.__cause__.code == ErrorCode.INVALID_RECORD
        for delivery in doomed:
            with pytest.raises(Exception):  # noqa: B017 - the refused batch's error, or aborted
                await delivery
        inits = counts(cluster)[INIT]
        await p.abort_transaction()
        assert counts(cluster)[INIT] == inits + 1, "the abort bumps the epoch: sequences restart"
        await one_transaction(p)


@pytest.mark.parametrize("code", [6, 7, 19])  # NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS
async def test_retriable_produce_errors_are_retried_within_the_transaction(cluster: MockCluster, code: int) -> None:
    cluster.push_request_errors(PRODUCE, code, code)
    async with producer(cluster) as p:
        await one_transaction(p)
        await one_transaction(p)
    assert counts(cluster)[END] == 2


async def test_close_after_a_failed_commit_aborts_the_transaction(cluster: MockCluster) -> None:
    """Regression: a commit that failed after its caller stopped waiting (a timeout) left the transaction open on
    close, since close aborted only when no operation was pending; the coordinator kept it until it timed out."""
    p = producer(cluster, linger_ms=60000)
    await p.start()
    await p.begin_transaction()
    await p.enqueue("t", b"refused when the commit sends it", partition=0)
    cluster.push_request_errors(PRODUCE, ErrorCode.INVALID_RECORD)
    with pytest.raises(TransactionTimeoutError):
        await p.commit_transaction(timeout=0)
    assert p._txn is not None and p._txn._operation is not None
    await asyncio.wait({p._txn._operation})  # the commit has failed by now; nobody saw it
    await p.close()
    assert counts(cluster)[END] == 1, "close sent EndTxn(abort)"


class _Hooked:
    """A record hook: send_table then takes send_many's path, one call per chunk of rows."""

    def on_record_acknowledged(self, record: object, metadata: object, error: object) -> None:
        pass


@pytest.mark.parametrize("call", ["send_many", "enqueue_many", "send_table", "send_table-hooked"])
async def test_a_bulk_call_never_spans_two_transactions(cluster: MockCluster, call: str) -> None:
    """A bulk call waiting for a partition while its transaction was aborted and a new one begun went on buffering
    into the new transaction: its first records were aborted and its last ones committed with other work. The
    records not buffered when the call's transaction ended now fail with TransactionStateError."""
    import pyarrow as pa

    cluster.create_topic("growing", 1)
    settings: dict[str, object] = {
        "allow_auto_create_topics": False,
        "metadata_max_age_ms": 100,
        "max_block_ms": 10_000,
    }
    if call.endswith("-hooked"):
        settings["hooks"] = [_Hooked()]
    async with producer(cluster, linger_ms=60_000, **settings) as p:
        await p.begin_transaction()
        topics, partitions = ["t", "t", "t", "growing", "t"], [0, 1, 0, 1, 1]
        values = [b"%d" % i for i in range(5)]
        if call.startswith("send_table"):
            table = pa.table({"topic": topics, "value": values, "partition": pa.array(partitions, pa.int32())})
            running = asyncio.ensure_future(
                p.send_table(table, topic_column="topic", value="value", partition="partition")
            )
        else:
            records = [ProducerRecord(t, v, partition=n) for t, v, n in zip(topics, values, partitions, strict=True)]
            running = asyncio.ensure_future(getattr(p, call)(records))
        await asyncio.sleep(0.3)  # the first three are buffered; the call waits for partition 1 of "growing"
        assert not running.done()
        await p.abort_transaction()
        await p.begin_transaction()
        cluster.delete_topic("growing")  # the mock has no CreatePartitions: delete and create it larger
        cluster.create_topic("growing", 2)
        outcome = await asyncio.wait_for(running, 15)
        if call == "enqueue_many":
            outcome = await outcome
        if call.startswith("send_table"):
            failed = {row: type(failure.error) for failure in outcome.failures for row in failure.row_numbers()}
            kinds = [failed[row] for row in range(5)]
        else:
            kinds = [type(result) for result in outcome]
        assert kinds == [TransactionAbortedError] * 3 + [TransactionStateError] * 2
        after = await p.enqueue("t", b"next", partition=0)  # the new transaction is untouched by the call
        await p.commit_transaction()
        assert (await after).partition == 0
