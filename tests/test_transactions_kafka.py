"""Transactions judged by real Apache Kafka (the newest release by default), under transaction version 2 (Kafka 4's
default) and 1 (the cluster downgraded with Kafka's FeatureCommand): only a real broker hides aborted records from
read_committed readers, fences a zombie and times a transaction out. Readers are librdkafka consumers (confluent-kafka)
with an isolation level."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from transactions_helpers import coordinator_of, last_stable_offsets, set_transaction_version, values

from aioproducer import Producer, ProducerRecord
from aioproducer.error_codes import ErrorCode
from aioproducer.errors import (
    KafkaError,
    ProducerFencedError,
    RecordTooLargeError,
    TransactionAbortedError,
    TransactionRequiresAbortError,
    TransactionStateError,
)
from aioproducer.protocol import ApiKey
from aioproducer.testing import DEFAULT_KAFKA_VERSION, KafkaCluster
from aioproducer.transactions.group import ConsumerGroupMetadata, group_metadata
from aioproducer.transactions.requests import CoordinatorRequest, TransactionRequests

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module", params=[2, 1], ids=["tv2", "tv1"])
def transaction_version(request: pytest.FixtureRequest, kafka_session_cluster: KafkaCluster) -> Iterator[int]:
    """The session cluster with `transaction.version` at the parameter; Kafka 4's default (2) is restored after."""
    level: int = request.param
    set_transaction_version(kafka_session_cluster, level)
    try:
        yield level
    finally:
        if level != 2:
            set_transaction_version(kafka_session_cluster, 2)


@pytest.fixture
def cluster(kafka_cluster: KafkaCluster, transaction_version: int) -> KafkaCluster:
    return kafka_cluster


def new_topic(cluster: KafkaCluster, partitions: int = 2, **config: str) -> str:
    return cluster.create_topic(f"txn-{uuid.uuid4().hex[:12]}", partitions, config=config or None)


def transactional(cluster: KafkaCluster, transactional_id: str | None = None, **settings: Any) -> Producer:
    return Producer(
        cluster.bootstrap_servers,
        transactional_id=transactional_id or f"tx-{uuid.uuid4().hex[:12]}",
        linger_ms=settings.pop("linger_ms", 2),
        **settings,
    )


def assert_version(producer: Producer, level: int) -> None:
    """The producer runs the path under test (TV2: Produce v12 adds partitions; TV1: AddPartitionsToTxn)."""
    assert producer._txn is not None
    assert producer._txn.state.tv2 is (level >= 2)


async def send_all(producer: Producer, topic: str, payloads: list[bytes], partitions: int = 2) -> None:
    deliveries = [await producer.enqueue(topic, v, partition=i % partitions) for i, v in enumerate(payloads)]
    await producer.flush()
    for delivery in deliveries:
        assert (await delivery).offset >= 0


def wait_stable(bootstrap: str, topic: str, expected: dict[int, int], timeout_s: float = 30.0) -> None:
    """Markers are written after EndTxn answers: wait until each partition's last stable offset reaches `expected`."""
    deadline = time.monotonic() + timeout_s
    while (offsets := last_stable_offsets(bootstrap, topic, len(expected))) != expected:
        assert time.monotonic() < deadline, f"last stable offsets {offsets}, expected {expected}"
        time.sleep(0.1)


async def test_read_committed_sees_committed_records_only(cluster: KafkaCluster, transaction_version: int) -> None:
    topic = new_topic(cluster)
    bootstrap = cluster.bootstrap_servers
    async with transactional(cluster) as producer:
        assert_version(producer, transaction_version)
        await producer.begin_transaction()
        await send_all(producer, topic, [b"c1-0", b"c1-1", b"c1-2", b"c1-3"])
        # Written but not committed: the last stable offset stays before them, read_committed sees nothing.
        assert last_stable_offsets(bootstrap, topic, 2) == {0: 0, 1: 0}
        assert values(bootstrap, topic, "read_committed") == []
        assert len(values(bootstrap, topic, "read_uncommitted")) == 4
        await producer.commit_transaction()
        wait_stable(bootstrap, topic, {0: 3, 1: 3})  # two records and a commit marker each

        await producer.begin_transaction()
        await send_all(producer, topic, [b"a-0", b"a-1"])
        await producer.abort_transaction()
        wait_stable(bootstrap, topic, {0: 5, 1: 5})

        async with producer.transaction():
            await send_all(producer, topic, [b"c2-0", b"c2-1"])
        wait_stable(bootstrap, topic, {0: 7, 1: 7})
    assert values(bootstrap, topic, "read_committed") == [b"c1-0", b"c1-2", b"c2-0", b"c1-1", b"c1-3", b"c2-1"]
    assert values(bootstrap, topic, "read_uncommitted") == [
        *(b"c1-0", b"c1-2", b"a-0", b"c2-0"),
        *(b"c1-1", b"c1-3", b"a-1", b"c2-1"),
    ]


async def test_zombie_is_fenced_and_its_open_transaction_never_visible(
    cluster: KafkaCluster, transaction_version: int
) -> None:
    topic = new_topic(cluster)
    transactional_id = f"tx-{uuid.uuid4().hex[:12]}"
    async with transactional(cluster, transactional_id) as zombie:
        await zombie.begin_transaction()
        await send_all(zombie, topic, [b"zombie-0", b"zombie-1"])
        async with transactional(cluster, transactional_id) as successor:  # its init fences the zombie
            with pytest.raises(ProducerFencedError) as fenced:
                await zombie.commit_transaction()
            assert fenced.value.fatal
            with pytest.raises(ProducerFencedError):
                await zombie.begin_transaction()
            async with successor.transaction():
                await send_all(successor, topic, [b"successor"], partitions=1)
    wait_stable(cluster.bootstrap_servers, topic, {0: 4, 1: 2})
    assert values(cluster.bootstrap_servers, topic, "read_committed") == [b"successor"]


async def test_consume_transform_produce_commits_offsets_only_with_the_transaction(
    cluster: KafkaCluster, transaction_version: int
) -> None:
    bootstrap = cluster.bootstrap_servers
    source, sink = new_topic(cluster), new_topic(cluster)
    async with Producer(bootstrap) as plain:
        await send_all(plain, source, [b"in-%d" % i for i in range(10)])
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([source])
        consumed: list[Any] = []
        deadline = time.monotonic() + 60
        while len(consumed) < 10:
            assert time.monotonic() < deadline, "the consumer group never delivered the input"
            message = await asyncio.to_thread(consumer.poll, 0.5)
            if message is not None and message.error() is None:
                consumed.append(message)
        positions = consumer.position(consumer.assignment())
        metadata = consumer.consumer_group_metadata()
        async with transactional(cluster) as producer:
            assert_version(producer, transaction_version)
            await producer.begin_transaction()
            await send_all(producer, sink, [b"out-aborted-" + m.value() for m in consumed])
            await producer.send_offsets_to_transaction(positions, metadata)
            await producer.abort_transaction()
            committed = consumer.committed([confluent_kafka.TopicPartition(source, p) for p in range(2)], timeout=10)
            assert [tp.offset for tp in committed] == [confluent_kafka.OFFSET_INVALID] * 2, "abort commits nothing"

            async with producer.transaction():
                await send_all(producer, sink, [b"out-" + m.value() for m in consumed])
                await producer.send_offsets_to_transaction(positions, metadata)
        committed = consumer.committed([confluent_kafka.TopicPartition(source, p) for p in range(2)], timeout=10)
        assert {tp.partition: tp.offset for tp in committed} == {tp.partition: tp.offset for tp in positions}
        assert sum(tp.offset for tp in committed) == 10
    finally:
        consumer.close()
    deadline = time.monotonic() + 30
    while len(output := values(bootstrap, sink, "read_committed")) < 10:
        assert time.monotonic() < deadline, f"{len(output)} of 10 outputs visible"
        await asyncio.sleep(0.2)
    assert sorted(output) == sorted(b"out-in-%d" % i for i in range(10))


async def test_stale_consumer_generation_is_refused_and_only_aborts(
    cluster: KafkaCluster, transaction_version: int
) -> None:
    """KIP-447: offsets sent with a group generation the coordinator has moved past are refused (ILLEGAL_GENERATION
    or UNKNOWN_MEMBER_ID): the transaction must abort, the producer goes on."""
    bootstrap = cluster.bootstrap_servers
    source = new_topic(cluster)
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.subscribe([source])
        deadline = time.monotonic() + 60
        while not consumer.assignment():
            assert time.monotonic() < deadline, "the consumer never joined its group"
            await asyncio.to_thread(consumer.poll, 0.5)
        live = group_metadata(consumer.consumer_group_metadata())
        assert live.generation_id >= 1 and live.member_id
        stale = ConsumerGroupMetadata(group, live.generation_id + 5, live.member_id, None)
        async with transactional(cluster) as producer:
            await producer.begin_transaction()
            with pytest.raises(TransactionRequiresAbortError) as refused:
                await producer.send_offsets_to_transaction({(source, 0): 0}, stale)
            assert isinstance(refused.value.__cause__, KafkaError)
            assert refused.value.__cause__.code in (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID)
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send_offsets_to_transaction({(source, 0): 0}, live)
    finally:
        consumer.close()


async def test_offsets_of_a_topic_whose_id_the_producer_knows_go_by_id_where_the_coordinator_takes_it(
    cluster: KafkaCluster, transaction_version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TxnOffsetCommit v6 (Kafka 4.4, KIP-1319) names topics by id, and answers by id: as Java's TransactionManager,
    the producer uses it when its metadata knows every topic's id (here the source's, asked for first) and the
    transaction runs as TV2; the offsets must land in the group all the same, read back by a consumer."""
    bootstrap = cluster.bootstrap_servers
    source, sink = new_topic(cluster), new_topic(cluster)
    group = f"g-{uuid.uuid4().hex[:8]}"
    chosen: list[int] = []
    commit_offsets = TransactionRequests.commit_offsets

    def observed(self: TransactionRequests, *args: Any, **kwargs: Any) -> CoordinatorRequest:
        request = commit_offsets(self, *args, **kwargs)
        version = request.version
        assert version is not None

        def pick(conn: Any) -> int:
            chosen.append(version(conn))
            return chosen[-1]

        return dataclasses.replace(request, version=pick)

    monkeypatch.setattr(TransactionRequests, "commit_offsets", observed)
    async with transactional(cluster) as producer:
        assert len(await producer.partitions_for(source)) == 2  # the source's id is now in the producer's metadata
        async with producer.transaction():
            await send_all(producer, sink, [b"out"])
            await producer.send_offsets_to_transaction({(source, 0): 7, (source, 1): 3}, group)
        negotiated = (await producer._cluster.connect_any()).versions[ApiKey.TXN_OFFSET_COMMIT]
    # TV1 stays below the TV2 version (v5), as Java's builders do; TV2 takes the newest the broker offers.
    assert chosen and set(chosen) == {negotiated if transaction_version >= 2 else min(negotiated, 4)}
    if cluster.version == DEFAULT_KAFKA_VERSION and transaction_version >= 2:
        assert chosen[0] == 6, "the default judge offers v6: the by-id path must be the one under test"
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        committed = consumer.committed([confluent_kafka.TopicPartition(source, p) for p in range(2)], timeout=10)
        assert {tp.partition: tp.offset for tp in committed} == {0: 7, 1: 3}
    finally:
        consumer.close()


async def test_empty_transactions_commit_and_abort(cluster: KafkaCluster, transaction_version: int) -> None:
    topic = new_topic(cluster)
    async with transactional(cluster) as producer:
        for _ in range(2):
            await producer.begin_transaction()
            await producer.commit_transaction()
            await producer.begin_transaction()
            await producer.abort_transaction()
        async with producer.transaction():
            await send_all(producer, topic, [b"real"], partitions=1)
    wait_stable(cluster.bootstrap_servers, topic, {0: 2, 1: 0})
    assert values(cluster.bootstrap_servers, topic, "read_committed") == [b"real"]


async def test_back_to_back_transactions_send_without_probes_or_retries(
    cluster: KafkaCluster, transaction_version: int
) -> None:
    """Regression: under transaction version 2 every commit gives the producer a new epoch, and each partition's first
    batch of the next transaction went out alone as a probe (idempotence.R5), the partition's other batches waiting
    for its answer: small transactions committed one after another paid a round trip per partition. A partition whose
    broker acknowledged the producer id a moment ago now starts the new epoch without a probe; only the very first
    transaction probes, and no batch is retried."""
    topic = new_topic(cluster, partitions=3)
    stamped: list[tuple[int, int, bool]] = []  # (transaction, partition, stamped as a probe)
    held_behind_probe: list[tuple[int, int]] = []
    retried: list[int] = []
    current = [0]  # the transaction under way
    # Small batches: each partition has several per transaction, all ready at once when the commit flushes.
    async with transactional(cluster, batch_size=2048, batch_max_size=2048) as producer:
        assert_version(producer, transaction_version)
        assert producer._txn is not None
        idem = producer._txn._idem
        may_drain, on_drain, on_response = idem.may_drain, idem.on_drain, idem.on_response

        def watched_may_drain(batch: Any) -> bool:
            allowed = may_drain(batch)
            stream = idem._streams.get(batch.tp)
            if not allowed and stream is not None and stream.probe is not None:
                held_behind_probe.append((current[0], batch.tp[1]))
            return allowed

        def watched_on_drain(batch: Any, now_ms: int = 0) -> None:
            new = batch.base_sequence < 0
            on_drain(batch, now_ms)
            if new:
                stamped.append((current[0], batch.tp[1], idem._streams[batch.tp].probe is batch))

        def watched_on_response(batch: Any, error_code: int, now_ms: int, **answer: Any) -> Any:
            decision = on_response(batch, error_code, now_ms, **answer)
            if decision.action.value == "retry":
                retried.append(error_code)
            return decision

        idem.may_drain, idem.on_drain, idem.on_response = watched_may_drain, watched_on_drain, watched_on_response
        epochs = []
        for number in range(6):
            current[0] = number
            await producer.begin_transaction()
            for i in range(60):
                await producer.enqueue(topic, b"v" * 100, partition=i % 3)
            await producer.commit_transaction()
            epochs.append(idem.producer_epoch)
    if transaction_version >= 2:
        assert len(set(epochs)) == len(epochs), f"TV2 gives every transaction a new epoch: {epochs}"
    assert len({(t, p) for t, p, _ in stamped}) == 6 * 3, "every transaction wrote to every partition"
    assert all(sum(1 for t, p, _ in stamped if (t, p) == key) >= 2 for key in {(t, p) for t, p, _ in stamped})
    later_probes = [(t, p) for t, p, probe in stamped if probe and t > 0]
    assert later_probes == [], f"after the first transaction no batch waits as a probe: {later_probes}"
    assert [t for t, _ in held_behind_probe if t > 0] == [], "no batch held back behind a probe"
    assert retried == [], f"no Produce was retried: {retried}"
    assert len(values(cluster.bootstrap_servers, topic, "read_committed")) == 6 * 60


async def test_the_next_transaction_starts_once_the_coordinator_wrote_the_last_ones_markers(
    cluster: KafkaCluster, transaction_version: int
) -> None:
    """Regression: the coordinator answers EndTxn before it writes the transaction's markers, and the next
    transaction's first batch (TV2) or AddPartitionsToTxn (TV1) reached it while it still wrote them: refused with
    CONCURRENT_TRANSACTIONS, retried 20 ms later, so back-to-back small transactions ran at a third of librdkafka's
    pace. Now the first batches wait for DescribeTransactions to say the last transaction is complete; the commits
    and aborts stay exact for read_committed readers."""
    topic = new_topic(cluster, partitions=3)
    ended = [0]  # EndTxn answered so far; the watch after the n-th one answers for transaction n
    answers: list[tuple[int, str]] = []  # (the EndTxn watched, the coordinator's state)
    first_batch_after: dict[int, str | None] = {}  # transaction -> the last state seen before its first batch left
    async with transactional(cluster) as producer:
        assert_version(producer, transaction_version)
        txn = producer._txn
        assert txn is not None
        watch, idem = txn._markers, txn._idem
        ask, on_drain, end_transaction = watch._ask, idem.on_drain, txn._end_transaction

        async def watched_end(**kwargs: Any) -> None:
            await end_transaction(**kwargs)
            ended[0] += 1

        async def watched_ask(api: ApiKey, body: Any) -> Any:
            watching = ended[0]
            response = await ask(api, body)
            assert response is not None, "Kafka answers DescribeTransactions"
            answers.append((watching, response["transaction_states"][0]["transaction_state"]))
            return response

        def watched_on_drain(batch: Any, now_ms: int = 0) -> None:
            if ended[0] not in first_batch_after:
                seen = [state for number, state in answers if number == ended[0]]
                first_batch_after[ended[0]] = seen[-1] if seen else None
            on_drain(batch, now_ms)

        txn._end_transaction, watch._ask, idem.on_drain = watched_end, watched_ask, watched_on_drain
        for number in range(8):
            await producer.begin_transaction()
            for i in range(30):
                await producer.enqueue(topic, f"{number}-{i}".encode(), partition=i % 3)
            if number % 4 == 3:
                await producer.flush()  # sent, so the abort ends a transaction the coordinator knows
                await producer.abort_transaction()
            else:
                await producer.commit_transaction()
        await watch.wait()
    assert ended[0] == 8
    assert sorted(first_batch_after) == list(range(8))
    for number in range(1, 8):
        # Each transaction but the first started after an answer that the last one was complete (the wait may also
        # end at its bound, which on one idle node would mean markers took over 30 s: a failure here too).
        assert first_batch_after[number] in ("CompleteCommit", "CompleteAbort"), (number, first_batch_after, answers)
    assert {number for number, _ in answers} == set(range(1, 9)), "every commit and abort was followed by a watch"
    committed = sorted(v.decode() for v in values(cluster.bootstrap_servers, topic, "read_committed"))
    assert committed == sorted(f"{n}-{i}" for n in range(8) if n % 4 != 3 for i in range(30))


async def test_commit_after_a_failed_send_raises_and_abort_recovers(
    cluster: KafkaCluster, transaction_version: int
) -> None:
    topic = new_topic(cluster, **{"max.message.bytes": "1000"})
    async with transactional(cluster) as producer:
        await producer.begin_transaction()
        await send_all(producer, topic, [b"fine"], partitions=1)
        with pytest.raises(RecordTooLargeError):
            await producer.send(topic, b"x" * 5000, partition=0)  # the broker refuses it: MESSAGE_TOO_LARGE
        with pytest.raises(TransactionRequiresAbortError) as failed:
            await producer.commit_transaction()
        assert isinstance(failed.value.__cause__, RecordTooLargeError) and failed.value.requires_abort
        with pytest.raises(TransactionRequiresAbortError):
            await producer.send(topic, b"refused at once", partition=1)
        await producer.abort_transaction()
        async with producer.transaction():
            await send_all(producer, topic, [b"next"], partitions=1)
    wait_stable(cluster.bootstrap_servers, topic, {0: 4, 1: 0})
    assert values(cluster.bootstrap_servers, topic, "read_committed") == [b"next"]


async def test_abort_fails_buffered_records_and_waits_for_sent_ones(
    cluster: KafkaCluster, transaction_version: int
) -> None:
    topic = new_topic(cluster)
    async with transactional(cluster, linger_ms=60000) as producer:
        await producer.begin_transaction()
        sent = [await producer.enqueue(topic, b"sent-%d" % i, partition=i % 2) for i in range(3)]
        await producer.flush()
        buffered = [await producer.enqueue(topic, b"buffered-%d" % i, partition=i % 2) for i in range(5)]
        await producer.abort_transaction()
        for delivery in buffered:
            with pytest.raises(TransactionAbortedError):
                await delivery
        assert all(offset >= 0 for offset in [(await delivery).offset for delivery in sent])
        async with producer.transaction():
            await send_all(producer, topic, [b"later"], partitions=1)
    # partition 0: sent-0, sent-2, the abort marker, later, the commit marker; partition 1: sent-1, the abort marker
    wait_stable(cluster.bootstrap_servers, topic, {0: 5, 1: 2})
    assert values(cluster.bootstrap_servers, topic, "read_committed") == [b"later"]
    assert sorted(values(cluster.bootstrap_servers, topic, "read_uncommitted")) == [
        b"later",
        b"sent-0",
        b"sent-1",
        b"sent-2",
    ]


@pytest.mark.parametrize("call", ["send_many", "send_table"])
async def test_a_bulk_call_never_spans_two_transactions(
    cluster: KafkaCluster, transaction_version: int, call: str
) -> None:
    """A bulk call waiting for a partition while its transaction was aborted and a new one begun went on buffering
    into the new one, whose commit then made the call's last records visible to read_committed readers. Now the
    records the call had not buffered when its transaction ended fail, and the broker holds none of the call's."""
    import pyarrow as pa

    topic, growing = new_topic(cluster), new_topic(cluster, partitions=1)
    bootstrap = cluster.bootstrap_servers
    async with transactional(cluster, linger_ms=60_000, metadata_max_age_ms=100, max_block_ms=30_000) as producer:
        await producer.begin_transaction()
        topics, partitions = [topic, topic, topic, growing, topic], [0, 1, 0, 1, 1]
        payloads = [b"call-%d" % i for i in range(5)]
        if call == "send_table":
            table = pa.table({"topic": topics, "value": payloads, "partition": pa.array(partitions, pa.int32())})
            running = asyncio.ensure_future(
                producer.send_table(table, topic_column="topic", value="value", partition="partition")
            )
        else:
            records = [ProducerRecord(t, v, partition=n) for t, v, n in zip(topics, payloads, partitions, strict=True)]
            running = asyncio.ensure_future(producer.send_many(records))
        await asyncio.sleep(0.5)  # three records buffered; the call waits for partition 1 of `growing`
        assert not running.done()
        await producer.abort_transaction()
        await producer.begin_transaction()
        await asyncio.to_thread(cluster.add_partitions, growing, 2)
        outcome = await asyncio.wait_for(running, 60)
        if call == "send_table":
            failed = {row: type(failure.error) for failure in outcome.failures for row in failure.row_numbers()}
            kinds = [failed[row] for row in range(5)]
        else:
            kinds = [type(result) for result in outcome]
        assert kinds == [TransactionAbortedError] * 3 + [TransactionStateError] * 2
        await send_all(producer, topic, [b"next"], partitions=1)
        await producer.commit_transaction()
    deadline = time.monotonic() + 30
    while not (committed := values(bootstrap, topic, "read_committed")):
        assert time.monotonic() < deadline, "the commit never became visible"
        await asyncio.sleep(0.1)
    assert committed == [b"next"]
    assert values(bootstrap, topic, "read_uncommitted") == [b"next"]  # none of the call's records reached Kafka
    assert values(bootstrap, growing, "read_uncommitted") == []


async def test_coordinator_timeout_aborts_and_the_producer_recovers(
    cluster: KafkaCluster, transaction_version: int
) -> None:
    """The coordinator aborts a transaction older than transaction_timeout_ms and bumps the epoch: a later send fails
    as abortable (KIP-588) and commit refuses. Under TV2 the abort then succeeds and the same producer goes on; under
    TV1 the coordinator answers the abort's old epoch with PRODUCER_FENCED (strict epoch equality, as for Java's
    client), so a new producer with the same transactional id takes over."""
    topic = new_topic(cluster)
    transactional_id = f"tx-{uuid.uuid4().hex[:12]}"
    async with transactional(cluster, transactional_id, transaction_timeout_ms=1000) as producer:
        await producer.begin_transaction()
        await send_all(producer, topic, [b"doomed"], partitions=1)
        deadline = time.monotonic() + 60
        while True:  # the coordinator looks for expired transactions every 10 s (Kafka's default)
            assert time.monotonic() < deadline, "the coordinator never timed the transaction out"
            await asyncio.sleep(0.5)
            try:
                await producer.send(topic, b"late", partition=0)
            except KafkaError as late:
                assert not late.retriable
                break
        with pytest.raises(TransactionRequiresAbortError):
            await producer.commit_transaction()
        if transaction_version >= 2:
            await producer.abort_transaction()
            async with producer.transaction():
                await send_all(producer, topic, [b"recovered"], partitions=1)
        else:
            with pytest.raises(ProducerFencedError):
                await producer.abort_transaction()
    if transaction_version < 2:
        async with transactional(cluster, transactional_id) as successor, successor.transaction():
            await send_all(successor, topic, [b"recovered"], partitions=1)
    deadline = time.monotonic() + 30
    while values(cluster.bootstrap_servers, topic, "read_committed") != [b"recovered"]:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.2)


@pytest.mark.parametrize("level", [2, 1], ids=["tv2", "tv1"])
async def test_coordinator_killed_mid_transaction(kafka_cluster_3: KafkaCluster, level: int) -> None:
    """Three nodes: the transaction coordinator dies between sends; the producer finds the new coordinator (which
    loads the transaction log) and commits, every record exactly once."""
    cluster = kafka_cluster_3
    await asyncio.to_thread(set_transaction_version, cluster, level)
    try:
        topic = new_topic(cluster, 4)
        transactional_id = f"tx-{uuid.uuid4().hex[:12]}"
        async with transactional(cluster, transactional_id, request_timeout_ms=10000) as producer:
            assert_version(producer, level)
            await producer.begin_transaction()
            await send_all(producer, topic, [b"before-%d" % i for i in range(20)], partitions=4)
            coordinator = await coordinator_of(cluster.bootstrap_servers, transactional_id)
            await asyncio.to_thread(cluster.kill, coordinator)
            await send_all(producer, topic, [b"after-%d" % i for i in range(20)], partitions=4)
            await producer.commit_transaction(timeout=120)
        bootstrap = cluster.bootstrap_servers
        deadline = time.monotonic() + 60
        while len(committed := values(bootstrap, topic, "read_committed")) < 40:
            assert time.monotonic() < deadline, f"only {len(committed)} records visible"
            await asyncio.sleep(0.5)
        assert sorted(committed) == sorted([b"before-%d" % i for i in range(20)] + [b"after-%d" % i for i in range(20)])
    finally:
        await asyncio.to_thread(cluster.heal)
        if level != 2:
            await asyncio.to_thread(set_transaction_version, cluster, 2)
