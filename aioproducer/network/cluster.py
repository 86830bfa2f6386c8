"""The async side of cluster knowledge: connections per broker, bootstrap, and Metadata refreshes.

Owns connection lifecycles (opened lazily, reconnect backoff, closed on `close()`) and the futures that `send`
awaits for a topic's metadata. Decisions about *when* to refresh live in the pure `metadata.MetadataState`.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from aioproducer.config import ProducerConfig
from aioproducer.config_values import split_address
from aioproducer.error_codes import ErrorCode
from aioproducer.errors import (
    AioProducerError,
    AuthenticationError,
    ConnectionFailedError,
    KafkaError,
    MetadataTimeoutError,
    ProducerClosedError,
    TransportError,
    UnknownPartitionError,
)
from aioproducer.kafka_errors import RebootstrapRequiredError, kafka_error
from aioproducer.network.connection import BrokerConnection
from aioproducer.network.metadata import BrokerInfo, ClusterMetadata, MetadataState, TopicInfo
from aioproducer.network.node_states import NodeStates, idle_expiry
from aioproducer.observability.observer import Observer, new_observer
from aioproducer.protocol import ApiKey, FinalizedFeatures
from aioproducer.security.tls import client_context

__all__ = ["Cluster"]

log = logging.getLogger("aioproducer.cluster")
_CLUSTER_CHECK = 5  # the first ApiVersions version carrying the cluster id and node id (KIP-1242)


def monotonic_ms() -> int:
    """The event loop's clock in whole milliseconds. asyncio's loop.time() is time.monotonic() (uvloop's is the same
    CLOCK_MONOTONIC), read here directly: get_running_loop() costs a getpid() system call per call before Python
    3.12, and the sender reads the clock several times per batch."""
    return int(time.monotonic() * 1000)


class Cluster:
    """Connections to brokers and the producer's view of the cluster."""

    def __init__(
        self,
        config: ProducerConfig,
        wake: Callable[[], None],
        observer: Observer | None = None,
        topics_in_use: Callable[[], Iterable[str]] = tuple,
    ) -> None:
        self._config = config
        # A cluster on its own (tools, tests) observes into metrics nobody reads.
        self.observer = observer if observer is not None else new_observer(config, (), {}, monotonic_ms, 0)
        self._wake = wake
        self._topics_in_use = topics_in_use  # topics with records not delivered yet: never idle
        self._rng = random.Random()
        self.state = MetadataState(
            max_age_ms=config.metadata_max_age_ms,
            max_idle_ms=config.metadata_max_idle_ms,
            retry_backoff_ms=config.retry_backoff_ms,
        )
        self._connections: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Task[BrokerConnection]] = {}
        # Reconnect backoff and connection setup timeout per broker id, or per ("bootstrap", address).
        self._nodes = NodeStates(
            reconnect_backoff_ms=config.reconnect_backoff_ms,
            reconnect_backoff_max_ms=config.reconnect_backoff_max_ms,
            setup_timeout_ms=config.socket_connection_setup_timeout_ms,
            setup_timeout_max_ms=config.socket_connection_setup_timeout_max_ms,
            rng=self._rng,
        )
        self._idle_timer: asyncio.TimerHandle | None = None
        # Per topic: (waiter, partitions it needs) of callers waiting for the topic's layout.
        self._topic_waiters: dict[str, list[tuple[asyncio.Future[TopicInfo], int]]] = {}
        self._update_task: asyncio.Task[None] | None = None
        self._bootstrap_connection: BrokerConnection | None = None
        self._bootstrapping: asyncio.Task[BrokerConnection] | None = None
        self._bootstrap_failures: dict[str, str] = {}  # bootstrap address → why its last attempt failed
        self._closed = False
        # Set once the first Metadata attempt ended, answered or not: `start()` waits for it (bounded).
        self.first_attempt_done = asyncio.Event()
        self.last_error: BaseException | None = None
        self.auth_error: AuthenticationError | None = None
        # The newest finalized feature levels any broker reported (Java's ApiVersions keeps the highest epoch).
        self.features = FinalizedFeatures()
        # Whether a broker of this cluster has answered ApiVersions v5 (KIP-1242): only then do connections name the
        # cluster and node they mean. Some Kafka-compatible brokers (Tansu) drop a v5 request that carries them.
        self._cluster_check = False

    @property
    def metadata(self) -> ClusterMetadata:
        return self.state.cluster

    # -- topics -------------------------------------------------------------------------------------------------
    async def wait_for_topic(self, topic: str, timeout_ms: int, partition: int | None = None) -> TopicInfo:
        """The topic's layout, asking the cluster when it is unknown (or lacks `partition`), for at most
        `timeout_ms`: then MetadataTimeoutError, or UnknownPartitionError when only the partition is missing.

        A partition beyond the known count asks for fresh metadata until it appears (Java's
        KafkaProducer.waitOnMetadata): the topic may have grown since the last refresh."""
        now = monotonic_ms()
        self.state.add_topic(topic, now)
        needed = 1 if partition is None else partition + 1
        info = self.state.cluster.topics.get(topic)
        if info is not None and info.num_partitions >= needed:
            return info
        if info is not None:
            self.state.request_update()
        waiter: asyncio.Future[TopicInfo] = asyncio.get_running_loop().create_future()
        entry = (waiter, needed)
        self._topic_waiters.setdefault(topic, []).append(entry)
        self._wake()
        try:
            return await asyncio.wait_for(asyncio.shield(waiter), timeout_ms / 1000)
        except asyncio.TimeoutError:
            info = self.state.cluster.topics.get(topic)
            if partition is not None and info is not None and info.num_partitions:
                raise UnknownPartitionError(
                    f"partition {partition} of topic {topic!r} is not in its metadata after {timeout_ms} ms "
                    f"(max_block_ms): the topic has partitions 0..{info.num_partitions - 1}"
                ) from None
            cause = f" (last error: {self.last_error})" if self.last_error else ""
            raise MetadataTimeoutError(
                f"topic {topic!r} not present in metadata after {timeout_ms} ms (max_block_ms){cause}"
            ) from None
        finally:
            waiters = self._topic_waiters.get(topic)
            if waiters is not None and entry in waiters:
                waiters.remove(entry)
                if not waiters:
                    del self._topic_waiters[topic]
            if not waiter.done():
                waiter.cancel()

    def _resolve_waiters(self) -> None:
        cluster = self.state.cluster
        for topic in list(self._topic_waiters):
            info = cluster.topics.get(topic)
            error = cluster.topic_error(topic)
            if info is None and error is None:
                continue
            waiting = []
            for waiter, needed in self._topic_waiters.pop(topic):
                if waiter.done():
                    continue
                if info is not None and info.num_partitions >= needed:
                    waiter.set_result(info)
                elif error is not None:
                    waiter.set_exception(error)
                else:
                    waiting.append((waiter, needed))
            if waiting:
                # The topic lacks a partition someone waits for: ask again (after retry_backoff_ms).
                self._topic_waiters[topic] = waiting
                self.state.request_update()

    def fail_waiters(self, error: AioProducerError) -> None:
        """Fail every caller waiting for a topic's metadata with `error` (the producer is closing)."""
        waiters, self._topic_waiters = self._topic_waiters, {}
        for entries in waiters.values():
            for waiter, _needed in entries:
                if not waiter.done():
                    waiter.set_exception(error)

    # -- metadata refresh ----------------------------------------------------------------------------------------
    def maybe_update(self, now_ms: int) -> int:
        """Start a Metadata request if one is due; returns ms until the next one is due."""
        if self._closed or (self._update_task is not None and not self._update_task.done()):
            return self._config.metadata_max_age_ms
        delay = self.state.next_update_delay_ms(now_ms)
        if delay == 0:
            self.state.on_attempt(now_ms)
            self._update_task = asyncio.get_running_loop().create_task(self._update(now_ms))
            return self._config.retry_backoff_ms
        return delay

    def request_update(self) -> None:
        self.state.request_update()

    async def _update(self, now_ms: int) -> None:
        topics = self.state.topics_to_request(now_ms, self._topics_in_use())
        try:
            try:
                conn = await self.connect_any()
            except TransportError as exc:
                # No broker could be reached at all (a lost request on a live connection is a lesser thing: the
                # next attempt picks another connection, or finds this one).
                self.last_error = exc
                self.observer.cluster_unreachable(exc, ",".join(self._config.bootstrap_servers))
                self.state.on_failure(monotonic_ms())
                return
            response = await conn.request(
                ApiKey.METADATA, _metadata_body(topics, self._config.allow_auto_create_topics)
            )
            self._check_top_level_error(response)
            self.state.on_response(ClusterMetadata.from_response(response), topics, monotonic_ms())
            self.last_error = None
            self.observer.metadata_refreshed()
        except AuthenticationError as exc:
            self._fail_waiters(exc)
        except (TransportError, KafkaError) as exc:
            self.last_error = exc
            self.observer.note_error(exc)
            log.debug("metadata request failed: %s", exc)
            self.state.on_failure(monotonic_ms())
        except AioProducerError as exc:  # a protocol or negotiation error: fail waiters instead of retrying forever
            self._fail_waiters(exc)
        finally:
            self.first_attempt_done.set()
            self._resolve_waiters()
            self._drop_stale_connections()
            self._wake()

    def _check_top_level_error(self, response: Mapping[str, Any]) -> None:
        """Metadata v13's top-level error (KIP-1102) fails this refresh, which is retried after the backoff.

        REBOOTSTRAP_REQUIRED says our view of the cluster is stale: as Java's NetworkClient does with
        metadata.recovery.strategy=rebootstrap (the 4.0 default, always on here), forget every broker we know and
        ask the bootstrap servers again. Unlike Java we also close the connections to the brokers we knew: the
        same node id may now be another broker. Their requests fail as lost connections and are retried.
        """
        code = response.get("error_code", ErrorCode.NONE)
        if code == ErrorCode.NONE:
            return
        if code == ErrorCode.REBOOTSTRAP_REQUIRED:
            self._rebootstrap()
        raise kafka_error(code)

    def _rebootstrap(self) -> None:
        """Forget every broker and connection we know; the next request asks the bootstrap servers again."""
        log.info("the cluster asked for a re-bootstrap; asking %s", ", ".join(self._config.bootstrap_servers))
        self.state.cluster = ClusterMetadata()
        stale = [*self._connections.values(), self._bootstrap_connection]
        self._connections.clear()
        self._bootstrap_connection = None
        for conn in stale:
            if conn is not None:
                conn.close()

    def _fail_waiters(self, exc: AioProducerError) -> None:
        self.last_error = exc
        self.observer.note_error(exc)
        self.state.on_failure(monotonic_ms())
        for waiters in self._topic_waiters.values():
            for waiter, _needed in waiters:
                if not waiter.done():
                    waiter.set_exception(exc)

    async def connect_any(self) -> BrokerConnection:
        """A ready connection for cluster-wide requests: to a known broker if one answers, else to the bootstrap
        list, tried in order (re-bootstrap). Of the open connections, the least loaded (Java's leastLoadedNode),
        so a refresh does not queue behind a slow Produce request."""
        conn = self._least_loaded()
        if conn is not None:
            return conn
        now = monotonic_ms()
        broker = self.state.pick_broker(self._rng, lambda node_id: self._nodes.can_connect(node_id, now))
        if broker is not None:
            try:
                return await self._connect(broker)
            except TransportError as exc:
                self.last_error = exc
        if self._bootstrap_connection is not None and not self._bootstrap_connection.closed:
            return self._bootstrap_connection
        # Callers at once (a metadata refresh, a coordinator lookup) join one attempt: each opening its own would
        # leave all but the last connection unreferenced and open.
        if self._bootstrapping is None or self._bootstrapping.done():
            self._bootstrapping = asyncio.get_running_loop().create_task(self._bootstrap())
            self._bootstrapping.add_done_callback(_retrieve_exception)
        return await asyncio.shield(self._bootstrapping)

    async def _bootstrap(self) -> BrokerConnection:
        errors: list[str] = []
        for address in self._config.bootstrap_servers:
            node = ("bootstrap", address)
            if not self._nodes.can_connect(node, monotonic_ms()):
                # Say why it failed last, not only that we wait: that is what an operator needs to read.
                last = self._bootstrap_failures.get(address, "a failed attempt")
                errors.append(f"{last} (backing off: reconnect_backoff_ms)")
                continue
            host, port = split_address(address)
            try:
                conn = await self._open(host, port, -1, node)
            except TransportError as exc:
                self._nodes.failed(node, monotonic_ms())
                self._bootstrap_failures[address] = str(exc)
                errors.append(str(exc))
                continue
            self._bootstrap_failures.pop(address, None)
            self._nodes.connected(node)
            if self._closed:
                conn.close()
                raise ConnectionFailedError("producer closed while connecting")
            self._bootstrap_connection = conn
            return conn
        raise ConnectionFailedError("no bootstrap server answered: " + "; ".join(errors))

    # -- connections --------------------------------------------------------------------------------------------
    def connection(self, node_id: int) -> BrokerConnection | None:
        """The ready connection to a broker, or None while it is (re)connecting (started here if allowed)."""
        conn = self._connections.get(node_id)
        if conn is not None and not conn.closed:
            return conn
        if node_id not in self._connecting and not self._closed:
            broker = self.state.cluster.brokers.get(node_id)
            if broker is not None and self._nodes.can_connect(node_id, monotonic_ms()):
                self._start_connecting(broker)
        return None

    def next_reconnect_delay_ms(self, now_ms: int) -> int | None:
        return self._nodes.next_attempt_delay_ms(now_ms)

    async def connect_to(self, broker: BrokerInfo) -> BrokerConnection:
        """A ready connection to a broker known by its address, e.g. a coordinator named by FindCoordinator."""
        return await self._connect(broker)

    async def _connect(self, broker: BrokerInfo) -> BrokerConnection:
        """The broker's connection, joining an attempt already under way: never two connections to one broker.
        A broker backing off after a failed attempt is not tried again before its reconnect backoff is over."""
        conn = self._connections.get(broker.node_id)
        if conn is not None and not conn.closed:
            return conn
        task = self._connecting.get(broker.node_id)
        if task is None:
            if not self._nodes.can_connect(broker.node_id, monotonic_ms()):
                raise ConnectionFailedError(
                    f"broker {broker.node_id} is backing off after a failed connection attempt (reconnect_backoff_ms)"
                )
            task = self._start_connecting(broker)
        return await asyncio.shield(task)

    def _start_connecting(self, broker: BrokerInfo) -> asyncio.Task[BrokerConnection]:
        task = asyncio.get_running_loop().create_task(self._open_broker(broker))
        self._connecting[broker.node_id] = task
        task.add_done_callback(_retrieve_exception)
        return task

    async def _open_broker(self, broker: BrokerInfo) -> BrokerConnection:
        try:
            conn = await self._open(broker.host, broker.port, broker.node_id, broker.node_id)
        except TransportError as exc:
            self._nodes.failed(broker.node_id, monotonic_ms())
            self.last_error = exc
            self.observer.connect_failed(broker.node_id, exc)
            self.state.request_update()
            raise
        except AuthenticationError as exc:
            # Java treats this as fatal for what waits on it: the sender fails the queued records (not forever:
            # the connection backs off, and later records try again).
            self._nodes.failed(broker.node_id, monotonic_ms())
            self.last_error = self.auth_error = exc
            raise
        except AioProducerError as exc:
            self.last_error = exc
            raise
        finally:
            self._connecting.pop(broker.node_id, None)
            self._wake()
        self._nodes.connected(broker.node_id)
        if self._closed:
            conn.close()
            raise ConnectionFailedError("producer closed while connecting")
        self._connections[broker.node_id] = conn
        return conn

    async def _open(self, host: str, port: int, node_id: int, node: Hashable) -> BrokerConnection:
        try:
            conn = await BrokerConnection.open(
                host,
                port,
                node_id=node_id,
                client_id=self._config.client_id,
                request_timeout_ms=self._config.request_timeout_ms,
                connect_timeout_ms=self._nodes.setup_timeout_ms(node),
                ssl_context=client_context(self._config),
                sasl=self._config.sasl_credentials,
                cluster_id=self.state.cluster.cluster_id if self._cluster_check else None,
            )
        except RebootstrapRequiredError as exc:
            # ApiVersions v5 (KIP-1242): this address now answers for another cluster or node. As for Metadata's
            # REBOOTSTRAP_REQUIRED, forget what we know; to the caller it is a connection that failed.
            self._rebootstrap()
            raise ConnectionFailedError(f"broker {host}:{port} is not node {node_id} of our cluster: {exc}") from exc
        conn.on_lost = self._on_connection_lost
        conn.on_writable = self._wake  # a connection that pushed back takes requests again
        self.features = self.features.newest(conn.features)
        self._cluster_check = self._cluster_check or conn.versions.get(ApiKey.API_VERSIONS, 0) >= _CLUSTER_CHECK
        self._check_idle_later(self._config.connections_max_idle_ms / 1000)
        self.observer.connected(conn)
        return conn

    def _check_idle_later(self, delay_s: float) -> None:
        if self._idle_timer is None and self._config.connections_max_idle_ms >= 0 and not self._closed:
            self._idle_timer = asyncio.get_running_loop().call_later(delay_s, self._close_idle)

    def _close_idle(self) -> None:
        """Close connections that sent and received nothing for `connections_max_idle_ms` (Java's Selector)."""
        self._idle_timer = None
        loop = asyncio.get_running_loop()
        bootstrap = self._bootstrap_connection
        candidates = [conn for conn in (*self._connections.values(), bootstrap) if conn is not None and not conn.closed]
        expired, next_check = idle_expiry(
            ((conn, conn.last_active, conn.in_flight) for conn in candidates),
            loop.time(),
            self._config.connections_max_idle_ms / 1000,
        )
        for conn in expired:
            log.debug("closing %r: idle for connections_max_idle_ms=%s", conn, self._config.connections_max_idle_ms)
            # Our own doing, not a sign of stale metadata: no refresh is asked for (Java's disconnect handler asks).
            conn.on_lost = None
            if self._connections.get(conn.node_id) is conn:
                del self._connections[conn.node_id]
            if conn is bootstrap:
                self._bootstrap_connection = None
            conn.close()
        if next_check is not None:
            self._check_idle_later(next_check)

    def _on_connection_lost(self, conn: BrokerConnection) -> None:
        self.observer.disconnected(conn, self._closed)
        if self._connections.get(conn.node_id) is conn:
            del self._connections[conn.node_id]
        if not self._closed:
            self.state.request_update()
            self._wake()

    def _drop_stale_connections(self) -> None:
        """Close connections to brokers that left the cluster."""
        brokers = self.state.cluster.brokers
        for node_id in [n for n in self._connections if brokers and n not in brokers]:
            self._connections.pop(node_id).close()

    def any_connection(self) -> BrokerConnection | None:
        """Some ready connection (for cluster-wide requests such as InitProducerId); starts one if there is none."""
        conn = self._least_loaded()
        if conn is not None:
            return conn
        if self._bootstrap_connection is not None and not self._bootstrap_connection.closed:
            return self._bootstrap_connection
        for node_id in self.state.cluster.brokers:
            self.connection(node_id)
        return None

    def open_connections(self) -> list[BrokerConnection]:
        """The open connections to brokers (not the bootstrap one)."""
        return [conn for conn in self._connections.values() if not conn.closed]

    def _least_loaded(self) -> BrokerConnection | None:
        """The open broker connection with the fewest requests in flight (Java's leastLoadedNode)."""
        open_connections = [conn for conn in self._connections.values() if not conn.closed]
        return min(open_connections, key=lambda conn: conn.in_flight) if open_connections else None

    async def close(self, drain_timeout_s: float = 0.0) -> None:
        """Close every connection: each once what was written to it is in its socket, for at most `drain_timeout_s`
        (then what is left is dropped); requests waiting for an answer fail with ConnectionClosedError."""
        self._closed = True
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        tasks: list[asyncio.Task[Any]] = list(self._connecting.values())
        if self._update_task is not None:
            tasks.append(self._update_task)
        if self._bootstrapping is not None:
            tasks.append(self._bootstrapping)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        connections = list(self._connections.values())
        if self._bootstrap_connection is not None:
            connections.append(self._bootstrap_connection)
        self._connections.clear()
        await asyncio.gather(*(conn.drain_and_close(drain_timeout_s) for conn in connections))
        # A caller still waiting for metadata learns why it will never come (never a bare CancelledError).
        self.fail_waiters(ProducerClosedError("the producer was closed while waiting for the topic's metadata"))


def _metadata_body(topics: Sequence[str], allow_auto_create: bool) -> dict[str, Any]:
    return {
        "topics": [{"name": topic} for topic in topics],
        "allow_auto_topic_creation": allow_auto_create,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }


def _retrieve_exception(task: asyncio.Task[BrokerConnection]) -> None:
    # A background attempt's failure is recorded in `last_error`; mark it seen so asyncio does not log it.
    if not task.cancelled():
        task.exception()
