"""Real Apache Kafka as the judge of the versions we negotiate and the transaction requests we encode: what a broker
advertises, what it refuses although it advertises it (KIP-896), its finalized features, and a sane answer to every
coordinator and transaction request at each version we pick, down to what a read_committed reader then sees. Each test
runs on the session's broker (the newest release) and on the last 3.x release, the older broker negotiation must
serve."""

from __future__ import annotations

import socket
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kafka_versions import OLDER_KAFKA_VERSION
from test_protocol_brokers import CLIENT_SOFTWARE, Peer, record_batch, shared_versions

from aioproducer.error_codes import ErrorCode
from aioproducer.kafka_errors import RebootstrapRequiredError
from aioproducer.network.connection import BrokerConnection
from aioproducer.protocol import (
    SUPPORTED_VERSIONS,
    ApiKey,
    Coordinator,
    CoordinatorType,
    api_version_ranges,
    coordinators_from_response,
    finalized_features,
    find_coordinator_body,
    negotiate_versions,
    transaction_versions,
)
from aioproducer.testing import DEFAULT_KAFKA_VERSION, KafkaCluster, read_back
from aioproducer.testing.kafka_node import random_cluster_id

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.producer import ProduceRequest
    from kafka.record.default_records import DefaultRecordBatchBuilder


@dataclass(frozen=True)
class Release:
    """What one Kafka release advertises for the APIs we speak, what we negotiate with it, and its defaults."""

    advertised: dict[ApiKey, tuple[int, int]]
    negotiated: dict[ApiKey, int]
    transaction_version: int  # finalized on a cluster this release formats with its defaults
    refuses_produce_v2: bool  # KIP-896


# 4.4.0: kafka-clients' ApiKeys (oldestVersion, latestVersion(false)), except Produce, advertised from v0 for
# librdkafka's sake (KAFKA-18659) although v0-2 are refused. 3.9.2: as its brokers answer ApiVersions.
RELEASES = {
    "4.4.0": Release(
        advertised={
            ApiKey.PRODUCE: (0, 13),
            ApiKey.METADATA: (0, 13),
            ApiKey.FIND_COORDINATOR: (0, 6),
            ApiKey.SASL_HANDSHAKE: (0, 1),
            ApiKey.API_VERSIONS: (0, 5),
            ApiKey.CREATE_TOPICS: (2, 7),
            ApiKey.INIT_PRODUCER_ID: (0, 5),
            ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
            ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
            ApiKey.END_TXN: (0, 5),
            ApiKey.TXN_OFFSET_COMMIT: (0, 6),
            ApiKey.SASL_AUTHENTICATE: (0, 2),
            ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
        },
        negotiated={
            ApiKey.PRODUCE: 12,
            ApiKey.METADATA: 13,
            ApiKey.FIND_COORDINATOR: 6,
            ApiKey.SASL_HANDSHAKE: 1,
            ApiKey.API_VERSIONS: 5,
            ApiKey.CREATE_TOPICS: 7,
            ApiKey.INIT_PRODUCER_ID: 5,
            ApiKey.ADD_PARTITIONS_TO_TXN: 3,
            ApiKey.ADD_OFFSETS_TO_TXN: 4,
            ApiKey.END_TXN: 5,
            ApiKey.TXN_OFFSET_COMMIT: 6,
            ApiKey.SASL_AUTHENTICATE: 2,
            ApiKey.DESCRIBE_TRANSACTIONS: 0,
        },
        transaction_version=2,
        refuses_produce_v2=True,
    ),
    OLDER_KAFKA_VERSION: Release(
        advertised={
            ApiKey.PRODUCE: (0, 11),
            ApiKey.METADATA: (0, 12),
            ApiKey.FIND_COORDINATOR: (0, 6),
            ApiKey.SASL_HANDSHAKE: (0, 1),
            ApiKey.API_VERSIONS: (0, 4),
            ApiKey.CREATE_TOPICS: (0, 7),
            ApiKey.INIT_PRODUCER_ID: (0, 5),
            ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
            ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
            ApiKey.END_TXN: (0, 4),
            ApiKey.TXN_OFFSET_COMMIT: (0, 4),
            ApiKey.SASL_AUTHENTICATE: (0, 2),
            ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
        },
        negotiated={
            ApiKey.PRODUCE: 11,
            ApiKey.METADATA: 12,
            ApiKey.FIND_COORDINATOR: 6,
            ApiKey.SASL_HANDSHAKE: 1,
            ApiKey.API_VERSIONS: 4,
            ApiKey.CREATE_TOPICS: 7,
            ApiKey.INIT_PRODUCER_ID: 5,
            ApiKey.ADD_PARTITIONS_TO_TXN: 3,
            ApiKey.ADD_OFFSETS_TO_TXN: 4,
            ApiKey.END_TXN: 4,
            ApiKey.TXN_OFFSET_COMMIT: 4,
            ApiKey.SASL_AUTHENTICATE: 2,
            ApiKey.DESCRIBE_TRANSACTIONS: 0,
        },
        transaction_version=0,
        refuses_produce_v2=False,
    ),
}
OLDER_RELEASE = OLDER_KAFKA_VERSION
# Errors a coordinator answers while it is still loading or being elected, or busy: ask again. On a new cluster
# FindCoordinator already names the node while it is still loading __transaction_state (then NOT_COORDINATOR).
COORDINATOR_LOAD_IN_PROGRESS = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
COORDINATOR_NOT_AVAILABLE = ErrorCode.COORDINATOR_NOT_AVAILABLE
NOT_COORDINATOR = ErrorCode.NOT_COORDINATOR
CONCURRENT_TRANSACTIONS = ErrorCode.CONCURRENT_TRANSACTIONS
RETRY_COORDINATOR = (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS)
NOT_LEADER_OR_FOLLOWER, TRANSACTION_ABORTABLE = ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.TRANSACTION_ABORTABLE
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def older_kafka() -> Iterator[KafkaCluster]:
    """The last 3.x release, for this module: one more JVM, so negotiation meets an older broker in every run."""
    with KafkaCluster(nodes=1, version=OLDER_RELEASE) as cluster:
        yield cluster


@pytest.fixture(params=["session", OLDER_RELEASE])
def broker(request: pytest.FixtureRequest) -> KafkaCluster:
    """The session's broker (`kafka_cluster`), then the last 3.x release."""
    name = "kafka_cluster" if request.param == "session" else "older_kafka"
    cluster: KafkaCluster = request.getfixturevalue(name)
    return cluster


@pytest.fixture
def release(broker: KafkaCluster) -> Release:
    if broker.version not in RELEASES:
        pytest.fail(f"no expectations for Kafka {broker.version}: add its row to RELEASES")
    return RELEASES[broker.version]


@pytest.fixture
def peer(broker: KafkaCluster) -> Iterator[Peer]:
    connection = Peer(broker.bootstrap_servers)
    yield connection
    connection.sock.close()


@pytest.fixture
def negotiated(peer: Peer) -> dict[ApiKey, int]:
    return negotiate_versions(api_version_ranges(peer.call(ApiKey.API_VERSIONS, 4, CLIENT_SOFTWARE)), [])


def until_ok(call: Callable[[], dict[str, Any]], code_of: Callable[[dict[str, Any]], int]) -> dict[str, Any]:
    """`call()` again while the coordinator is loading or busy (on a slow machine, for seconds)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        answer = call()
        code = code_of(answer)
        if code not in RETRY_COORDINATOR or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def coordinator(peer: Peer, version: int, key_type: CoordinatorType, key: str) -> Coordinator:
    body = find_coordinator_body(version, key_type, [key])
    found: dict[str, Coordinator] = {}

    def ask() -> dict[str, Any]:
        found.update(coordinators_from_response(version, peer.call(ApiKey.FIND_COORDINATOR, version, body), [key]))
        return {}

    until_ok(ask, lambda _: found[key].error_code)
    return found[key]


def init_producer_id(peer: Peer, version: int, transactional_id: str) -> dict[str, Any]:
    """Find the transaction coordinator (on a new cluster, that creates __transaction_state), then ask it for the
    transactional id's producer id and epoch."""
    assert coordinator(peer, 6, CoordinatorType.TRANSACTION, transactional_id).node_id == 1
    body = {"transactional_id": transactional_id, "transaction_timeout_ms": 60000}
    answer = until_ok(lambda: peer.call(ApiKey.INIT_PRODUCER_ID, version, body), lambda a: a["error_code"])
    assert answer["error_code"] == 0 and answer["producer_id"] >= 0, f"InitProducerId v{version}: {answer}"
    return answer


def transactional_batch(producer_id: int, epoch: int, sequence: int, values: list[bytes]) -> bytes:
    """A transactional v2 batch built by kafka-python, independent of aioproducer's records code."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=True,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        batch_size=1 << 20,
    )
    for offset, value in enumerate(values):
        builder.append(offset, timestamp=1_700_000_000_000, key=None, value=value, headers=[])
    return bytes(builder.build())


def produce(peer: Peer, version: int, transactional_id: str, topic: str, partition: int, batch: bytes) -> int:
    """The error code of producing `batch`, after retrying what a producer retries: Kafka 4.1 answers
    NOT_LEADER_OR_FOLLOWER to the first transactional Produce to a partition created a moment before (its leader
    already in Metadata), and CONCURRENT_TRANSACTIONS (TV2) while the previous transaction's markers are written."""
    body = {
        "transactional_id": transactional_id,
        "acks": -1,
        "timeout_ms": 10000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": batch}]}],
    }

    def send() -> dict[str, Any]:
        ((answer,),) = [t["partition_responses"] for t in peer.call(ApiKey.PRODUCE, version, body)["responses"]]
        return answer  # type: ignore[no-any-return]

    deadline = time.monotonic() + DEADLINE_S
    while (code := send()["error_code"]) in (NOT_LEADER_OR_FOLLOWER, CONCURRENT_TRANSACTIONS) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.1)
    return code  # type: ignore[no-any-return]


def end_txn(peer: Peer, version: int, transactional_id: str, ids: dict[str, Any], commit: bool) -> dict[str, Any]:
    body = {
        "transactional_id": transactional_id,
        "producer_id": ids["producer_id"],
        "producer_epoch": ids["producer_epoch"],
        "committed": commit,
    }
    return until_ok(lambda: peer.call(ApiKey.END_TXN, version, body), lambda a: a["error_code"])


def test_each_release_advertises_what_negotiation_expects(
    peer: Peer, release: Release, negotiated: dict[ApiKey, int]
) -> None:
    ranges = api_version_ranges(peer.call(ApiKey.API_VERSIONS, 4, CLIENT_SOFTWARE))
    assert {api: ranges[int(api)] for api in SUPPORTED_VERSIONS} == release.advertised
    assert negotiated == release.negotiated


def test_the_finalized_transaction_version_is_the_releases_default(peer: Peer, release: Release) -> None:
    """Kafka 4 formats clusters with transaction version 2; 3.9 leaves it unset (level 0: the classic protocol)."""
    for version in (3, 4):
        features = finalized_features(peer.call(ApiKey.API_VERSIONS, version, CLIENT_SOFTWARE))
        assert features.transaction_version == release.transaction_version, f"ApiVersions v{version}"
        assert features.epoch >= 0 and features.level("metadata.version") > 0
    assert finalized_features(peer.call(ApiKey.API_VERSIONS, 2, {})).epoch == -1  # v2 cannot say


def test_kafka_4_refuses_the_produce_v2_it_advertises(broker: KafkaCluster, release: Release) -> None:
    """KIP-896: Kafka 4 advertises Produce v0-2 (KAFKA-18659) but drops the connection on them, without an answer;
    3.9 still answers. A client whose floor followed the broker's would lose every record. The request is built by
    kafka-python, since our codec has no v2."""
    topic = broker.create_topic(f"floor-{uuid.uuid4().hex[:8]}", 1)
    partition = ProduceRequest.TopicProduceData.PartitionProduceData(version=2, index=0, records=record_batch(b"v2"))
    topic_data = ProduceRequest.TopicProduceData(version=2, name=topic, partition_data=[partition])
    request = ProduceRequest(version=2, acks=1, timeout_ms=5000, topic_data=[topic_data])
    request.with_header(correlation_id=7, client_id="floor-test")
    host, _, port = broker.bootstrap_servers.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        answer = sock.recv(4096)
    if release.refuses_produce_v2:
        assert answer == b"", "Kafka 4 answered a Produce v2 request"
    else:
        assert answer[4:8] == (7).to_bytes(4, "big"), "Kafka 3.9 should answer Produce v2"


def test_metadata_at_our_newest_version_says_no_error_at_the_top(
    peer: Peer, broker: KafkaCluster, negotiated: dict[ApiKey, int]
) -> None:
    """v13 adds the top-level error code (KIP-1102); on 3.9 the same call runs at v12, without it."""
    topic = f"md-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 2)
    reply = peer.call(ApiKey.METADATA, negotiated[ApiKey.METADATA], {"topics": [{"name": topic}]})
    assert reply["error_code"] == 0
    assert [b["node_id"] for b in reply["brokers"]] == [1]
    assert [(t["name"], t["error_code"], len(t["partitions"])) for t in reply["topics"]] == [(topic, 0, 2)]


@pytest.mark.parametrize("key_type", list(CoordinatorType), ids=lambda k: k.name)
def test_find_coordinator_at_every_version(peer: Peer, broker: KafkaCluster, key_type: CoordinatorType) -> None:
    """v1-3 ask for one key, v4-6 batch; all name the single node. A transaction key makes the broker create
    __transaction_state, a group key __consumer_offsets: the first answers may be 'not available yet'."""
    ranges = api_version_ranges(peer.call(ApiKey.API_VERSIONS, 4, CLIENT_SOFTWARE))
    host, _, port = broker.bootstrap_servers.rpartition(":")
    for version in shared_versions(ranges, ApiKey.FIND_COORDINATOR):
        key = f"{key_type.name.lower()}-{uuid.uuid4().hex[:8]}"
        found = coordinator(peer, version, key_type, key)
        assert (found.key, found.error_code, found.node_id) == (key, 0, 1), f"v{version}"
        assert (found.host, found.port) == (host, int(port)), f"v{version}"
    batched = find_coordinator_body(6, key_type, ["k1", "k2", "k3"])
    answer = coordinators_from_response(6, peer.call(ApiKey.FIND_COORDINATOR, 6, batched), ["k1", "k2", "k3"])
    assert [(c.key, c.error_code, c.node_id) for c in answer.values()] == [("k1", 0, 1), ("k2", 0, 1), ("k3", 0, 1)]


def test_init_producer_id_with_a_transactional_id_at_every_version(peer: Peer) -> None:
    """Each call for the same transactional id fences the previous one: same producer id, a higher epoch."""
    transactional_id = f"init-{uuid.uuid4().hex[:8]}"
    assert coordinator(peer, 6, CoordinatorType.TRANSACTION, transactional_id).node_id == 1
    ranges = api_version_ranges(peer.call(ApiKey.API_VERSIONS, 4, CLIENT_SOFTWARE))
    granted = []
    for version in shared_versions(ranges, ApiKey.INIT_PRODUCER_ID):
        answer = init_producer_id(peer, version, transactional_id)
        assert answer["error_code"] == 0, f"InitProducerId v{version}"
        granted.append((answer["producer_id"], answer["producer_epoch"]))
    assert len(granted) == 6
    assert len({producer_id for producer_id, _ in granted}) == 1 and granted[0][0] >= 0
    epochs = [epoch for _, epoch in granted]
    assert epochs == sorted(epochs) and len(set(epochs)) == len(epochs), epochs


def test_a_transaction_version_1_cycle_at_the_versions_a_tv1_client_picks(
    peer: Peer, broker: KafkaCluster, negotiated: dict[ApiKey, int]
) -> None:
    """AddPartitionsToTxn, Produce v11, AddOffsetsToTxn, TxnOffsetCommit v4 (with KIP-447 group fields) and EndTxn v4:
    committed records become visible to read_committed, aborted ones never do, and the epoch stays put (TV1)."""
    versions = transaction_versions(negotiated, transaction_v2=False)
    assert (versions[ApiKey.PRODUCE], versions[ApiKey.TXN_OFFSET_COMMIT], versions[ApiKey.END_TXN]) == (11, 4, 4)
    topic, transactional_id, group = (f"tv1-{uuid.uuid4().hex[:8]}" for _ in range(3))
    broker.create_topic(topic, 2)
    ids = init_producer_id(peer, versions[ApiKey.INIT_PRODUCER_ID], transactional_id)
    sequences = [0, 0]
    for commit, values in ((True, [b"committed-1", b"committed-2"]), (False, [b"aborted"])):
        # The second transaction reuses the epoch: under TV1 only InitProducerId bumps it.
        added = add_partitions(peer, versions[ApiKey.ADD_PARTITIONS_TO_TXN], transactional_id, ids, topic, [0, 1])
        assert added == [0, 0]
        for partition, value in enumerate(values):
            batch = transactional_batch(ids["producer_id"], ids["producer_epoch"], sequences[partition], [value])
            assert produce(peer, versions[ApiKey.PRODUCE], transactional_id, topic, partition, batch) == 0
            sequences[partition] += 1
        assert add_offsets(peer, versions[ApiKey.ADD_OFFSETS_TO_TXN], transactional_id, ids, group) == 0
        committed = txn_offset_commit(peer, versions[ApiKey.TXN_OFFSET_COMMIT], transactional_id, group, ids, topic)
        assert committed == [0, 0]
        assert end_txn(peer, versions[ApiKey.END_TXN], transactional_id, ids, commit)["error_code"] == 0
    visible = read_back(broker.bootstrap_servers, topic, isolation_level="read_committed")
    assert sorted(r.value for r in visible) == [b"committed-1", b"committed-2"]
    everything = read_back(broker.bootstrap_servers, topic)
    assert b"aborted" in {r.value for r in everything}, "the aborted record should be in the log, hidden"


def test_a_transaction_version_2_cycle_at_the_versions_we_pick(
    peer: Peer, broker: KafkaCluster, release: Release, negotiated: dict[ApiKey, int]
) -> None:
    """Produce v12 adds the partition and TxnOffsetCommit v5 the offsets implicitly (no AddPartitionsToTxn or
    AddOffsetsToTxn), and EndTxn v5 names the epoch to use next, one higher (KIP-890 part 2). Kafka 3.9 runs
    transaction version 1 and offers none of those versions: a TV1 client's versions are all it has."""
    if release.transaction_version < 2:
        assert transaction_versions(negotiated, transaction_v2=False) == negotiated
        return
    versions = transaction_versions(negotiated, transaction_v2=True)
    # TxnOffsetCommit v6 (Kafka 4.4, KIP-1319) names the topic by its id, taken from Metadata here.
    by_id = release.advertised[ApiKey.TXN_OFFSET_COMMIT][1] >= 6
    expected = (12, 6 if by_id else 5, 5)
    assert (versions[ApiKey.PRODUCE], versions[ApiKey.TXN_OFFSET_COMMIT], versions[ApiKey.END_TXN]) == expected
    topic, transactional_id, group = (f"tv2-{uuid.uuid4().hex[:8]}" for _ in range(3))
    broker.create_topic(topic, 2)
    ids = init_producer_id(peer, versions[ApiKey.INIT_PRODUCER_ID], transactional_id)
    batch = transactional_batch(ids["producer_id"], ids["producer_epoch"], 0, [b"tv2-committed"])
    assert produce(peer, versions[ApiKey.PRODUCE], transactional_id, topic, 0, batch) == 0
    topic_id = None
    if by_id:
        reply = peer.call(ApiKey.METADATA, negotiated[ApiKey.METADATA], {"topics": [{"name": topic}]})
        topic_id = reply["topics"][0]["topic_id"]
        assert topic_id.int != 0
    committed = txn_offset_commit(
        peer, versions[ApiKey.TXN_OFFSET_COMMIT], transactional_id, group, ids, topic, topic_id=topic_id
    )
    assert committed == [0, 0]
    ended = end_txn(peer, versions[ApiKey.END_TXN], transactional_id, ids, True)
    assert ended["error_code"] == 0
    assert ended["producer_id"] == ids["producer_id"]
    assert ended["producer_epoch"] == ids["producer_epoch"] + 1
    # The next transaction runs at the new epoch, its sequences starting at 0 again.
    next_ids = {"producer_id": ended["producer_id"], "producer_epoch": ended["producer_epoch"]}
    aborted = transactional_batch(next_ids["producer_id"], next_ids["producer_epoch"], 0, [b"tv2-aborted"])
    assert produce(peer, versions[ApiKey.PRODUCE], transactional_id, topic, 0, aborted) == 0
    assert end_txn(peer, versions[ApiKey.END_TXN], transactional_id, next_ids, False)["error_code"] == 0
    visible = read_back(broker.bootstrap_servers, topic, isolation_level="read_committed")
    assert [r.value for r in visible] == [b"tv2-committed"]


@pytest.mark.parametrize(("produce_version", "expected"), [(11, TRANSACTION_ABORTABLE), (12, 0)])
def test_only_produce_v12_adds_a_partition_implicitly(
    peer: Peer, broker: KafkaCluster, negotiated: dict[ApiKey, int], produce_version: int, expected: int
) -> None:
    """Why a TV1 client must stay below v12 and a TV2 client may skip AddPartitionsToTxn: to a partition never
    added, Kafka answers Produce v11 with TRANSACTION_ABORTABLE (partition verification, KIP-890 part 1, in 3.9
    too) and a TV2 broker accepts v12."""
    if produce_version > negotiated[ApiKey.PRODUCE]:
        return  # the release has no such version (3.9 speaks Produce up to v11): nothing to ask
    topic, transactional_id = f"implicit-{uuid.uuid4().hex[:8]}", f"implicit-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 1)
    ids = init_producer_id(peer, 5, transactional_id)
    batch = transactional_batch(ids["producer_id"], ids["producer_epoch"], 0, [b"unadded"])
    assert produce(peer, produce_version, transactional_id, topic, 0, batch) == expected


def test_every_client_version_of_the_tv1_requests(peer: Peer, broker: KafkaCluster) -> None:
    """AddPartitionsToTxn v0-3, AddOffsetsToTxn v0-4 and EndTxn v0-4, each in a transaction of its own."""
    topic, transactional_id, group = (f"every-{uuid.uuid4().hex[:8]}" for _ in range(3))
    broker.create_topic(topic, 1)
    ids = init_producer_id(peer, 5, transactional_id)
    for version in range(0, 5):
        assert add_partitions(peer, min(version, 3), transactional_id, ids, topic, [0]) == [0], f"v{min(version, 3)}"
        assert add_offsets(peer, version, transactional_id, ids, group) == 0, f"AddOffsetsToTxn v{version}"
        assert end_txn(peer, version, transactional_id, ids, version % 2 == 0)["error_code"] == 0, f"EndTxn v{version}"


def add_partitions(
    peer: Peer, version: int, transactional_id: str, ids: dict[str, Any], topic: str, partitions: list[int]
) -> list[int]:
    """AddPartitionsToTxn (the client versions' fields): each partition's error code."""
    body = {
        "v3_and_below_transactional_id": transactional_id,
        "v3_and_below_producer_id": ids["producer_id"],
        "v3_and_below_producer_epoch": ids["producer_epoch"],
        "v3_and_below_topics": [{"name": topic, "partitions": partitions}],
    }

    def codes(answer: dict[str, Any]) -> list[int]:
        return [
            p["partition_error_code"]
            for t in answer["results_by_topic_v3_and_below"]
            for p in t["results_by_partition"]
        ]

    return codes(until_ok(lambda: peer.call(ApiKey.ADD_PARTITIONS_TO_TXN, version, body), lambda a: max(codes(a))))


def add_offsets(peer: Peer, version: int, transactional_id: str, ids: dict[str, Any], group: str) -> int:
    body = {"transactional_id": transactional_id, "group_id": group, **_ids(ids)}
    answer = until_ok(lambda: peer.call(ApiKey.ADD_OFFSETS_TO_TXN, version, body), lambda a: a["error_code"])
    code: int = answer["error_code"]
    return code


def txn_offset_commit(
    peer: Peer,
    version: int,
    transactional_id: str,
    group: str,
    ids: dict[str, Any],
    topic: str,
    *,
    topic_id: uuid.UUID | None = None,
) -> list[int]:
    """Commit offsets 10 and 20 of `topic`'s partitions 0 and 1 inside the transaction, as a group with no members
    would (generation -1, no member id: KIP-447's fields at their 'no group membership' values). v6 needs the
    topic's id, and answers with it in place of the name."""
    group_coordinator = coordinator(peer, 6, CoordinatorType.GROUP, group)
    assert group_coordinator.node_id == 1
    body = {
        "transactional_id": transactional_id,
        "group_id": group,
        **_ids(ids),
        "generation_id": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": topic,
                "topic_id": topic_id,
                "partitions": [
                    {"partition_index": 0, "committed_offset": 10, "committed_metadata": "from a test"},
                    {"partition_index": 1, "committed_offset": 20, "committed_metadata": None},
                ],
            }
        ],
    }
    answer = until_ok(
        lambda: peer.call(ApiKey.TXN_OFFSET_COMMIT, version, body),
        lambda a: max(p["error_code"] for t in a["topics"] for p in t["partitions"]),
    )
    if version >= 6:
        assert [t["topic_id"] for t in answer["topics"]] == [topic_id]
    return [p["error_code"] for t in answer["topics"] for p in t["partitions"]]


def _ids(ids: dict[str, Any]) -> dict[str, Any]:
    return {"producer_id": ids["producer_id"], "producer_epoch": ids["producer_epoch"]}


async def test_api_versions_v5_refuses_a_connection_meant_for_another_cluster_or_node(
    broker: KafkaCluster, release: Release
) -> None:
    """KIP-1242 (Kafka 4.4): a client that names the cluster and node it means to reach is told REBOOTSTRAP_REQUIRED
    by a broker that is not that node of that cluster (an address reused after a cluster was replaced), instead of
    being served by the wrong one. An older broker has no ApiVersions v5: the fallback to v4 sends neither, and the
    connection is made unchecked, as Java's is."""
    host, port = broker.bootstrap_servers.rsplit(":", 1)

    async def connect(cluster_id: str | None, node_id: int) -> BrokerConnection:
        return await BrokerConnection.open(
            host,
            int(port),
            node_id=node_id,
            client_id="kip-1242",
            request_timeout_ms=30_000,
            connect_timeout_ms=10_000,
            cluster_id=cluster_id,
        )

    checks = release.advertised[ApiKey.API_VERSIONS][1] >= 5
    right = await connect(broker.cluster_id, 1)
    assert right.versions[ApiKey.API_VERSIONS] == (5 if checks else 4)
    right.close()
    for cluster_id, node_id in ((random_cluster_id(), 1), (broker.cluster_id, 2)):
        if checks:
            with pytest.raises(RebootstrapRequiredError):
                await connect(cluster_id, node_id)
        else:
            (await connect(cluster_id, node_id)).close()
    (await connect(random_cluster_id(), -1)).close()  # a bootstrap connection names no node, so nothing is checked


def test_the_releases_are_the_default_and_the_last_3_x() -> None:
    """The table must cover the fixture's default release, or the session's tests fail for want of expectations."""
    assert set(RELEASES) == {DEFAULT_KAFKA_VERSION, OLDER_RELEASE}
