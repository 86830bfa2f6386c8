"""Talking to coordinators: find the broker coordinating a transactional id or a consumer group, keep it, and send
it one request at a time, retrying what is retriable with backoff (Java's TransactionManager request loop).

Owns the coordinator cache, the one-request-at-a-time lock, and the retry of FindCoordinator, of disconnects and of
NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS / CONCURRENT_TRANSACTIONS answers. What a
non-retriable answer means to the transaction is `verdicts`' call, acted on by `manager`.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Mapping
from typing import Any

from aioproducer.config import ProducerConfig
from aioproducer.errors import TransportError, UnsupportedVersionError
from aioproducer.kafka_errors import kafka_error
from aioproducer.network.cluster import Cluster
from aioproducer.network.connection import BrokerConnection
from aioproducer.network.metadata import BrokerInfo
from aioproducer.protocol import ApiKey, CoordinatorType, coordinators_from_response, find_coordinator_body
from aioproducer.transactions.verdicts import FIND_COORDINATOR, Verdict, verdict

__all__ = ["CoordinatorRefused", "Coordinators", "Retry"]

log = logging.getLogger("aioproducer.transactions")

# Java's AddPartitionsToTxnHandler: the first add of a transaction that meets CONCURRENT_TRANSACTIONS (the previous
# transaction is still being completed) retries after 20 ms rather than the full backoff (KAFKA-5482).
CONCURRENT_TRANSACTIONS_BACKOFF_MS = 20

Target = tuple[CoordinatorType, str]


class CoordinatorRefused(Exception):
    """A coordinator request ended with an answer that is not retriable: `verdict` says what it means."""

    def __init__(self, verdict: Verdict, error: BaseException) -> None:
        super().__init__(str(error))
        self.verdict = verdict
        self.error = error


class Retry(Exception):
    """Raised by a response handler: send the request again after a backoff (`find` first looks the coordinator
    up again; `backoff_ms` overrides the exponential backoff)."""

    def __init__(self, reason: str, *, find: bool = False, backoff_ms: int | None = None) -> None:
        super().__init__(reason)
        self.find = find
        self.backoff_ms = backoff_ms


class Coordinators:
    """The coordinators of a producer's transactional id and of the groups it commits offsets for."""

    def __init__(self, config: ProducerConfig, cluster: Cluster) -> None:
        self._config = config
        self._cluster = cluster
        self._nodes: dict[Target, BrokerInfo] = {}
        # One transactional request in flight at a time, as Java's Sender: the coordinator sees them in order.
        self._lock = asyncio.Lock()
        self._rng = random.Random()

    def forget(self, target: Target) -> None:
        """The coordinator moved (or its connection broke): look it up again before the next request."""
        self._nodes.pop(target, None)

    async def call(
        self,
        target: Target,
        api: ApiKey,
        body: Callable[[BrokerConnection], Mapping[str, Any]],
        handle: Callable[[BrokerConnection, dict[str, Any]], Any],
        *,
        version: Callable[[BrokerConnection], int] | None = None,
    ) -> Any:
        """Send `api` to `target`'s coordinator until `handle` accepts the answer, and return what it returns.

        `body` builds the request for the connection it goes to (versions differ per broker). `handle` raises
        Retry to send again, CoordinatorRefused to give up; a disconnect or timeout is retried at the coordinator
        looked up again. Retries never end on their own: the caller bounds its wait, and cancels on close.
        """
        attempt = 0
        while True:
            conn = await self.connection(target)
            try:
                async with self._lock:
                    response = await conn.request(api, body(conn), version=None if version is None else version(conn))
                return handle(conn, response)
            except TransportError as exc:
                log.debug("%s to the coordinator of %s failed, looking it up again: %s", api.name, target[1], exc)
                self.forget(target)
                delay_ms = self.backoff_ms(attempt)
            except Retry as retry:
                log.debug("%s for %s retried: %s", api.name, target[1], retry)
                if retry.find:
                    self.forget(target)
                delay_ms = retry.backoff_ms if retry.backoff_ms is not None else self.backoff_ms(attempt)
            attempt += 1
            await asyncio.sleep(delay_ms / 1000)

    async def ask_once(self, target: Target, api: ApiKey, body: Mapping[str, Any]) -> dict[str, Any] | None:
        """One attempt at `api` to `target`'s coordinator when it is known: its answer, or None when no coordinator
        is known or the attempt failed (bounded by the connection's own timeouts); UnsupportedVersionError when the
        broker does not offer the API. For requests that only inform (DescribeTransactions): nothing is retried and
        nothing is looked up again."""
        node = self._nodes.get(target)
        if node is None:
            return None
        try:
            conn = await self._cluster.connect_to(node)
            version = conn.versions.get(api)
            if version is None:
                raise UnsupportedVersionError(f"broker {conn.node_id} does not offer {api.name}")
            async with self._lock:
                return await conn.request(api, body, version=version)
        except TransportError as exc:
            log.debug("%s to the coordinator of %s not answered: %r", api.name, target[1], exc)
            return None

    async def connection(self, target: Target) -> BrokerConnection:
        """A ready connection to `target`'s coordinator, found with FindCoordinator when not known."""
        attempt = 0
        while True:
            node = self._nodes.get(target)
            try:
                if node is None:
                    node = self._nodes[target] = await self._find(target)
                return await self._cluster.connect_to(node)
            except TransportError as exc:
                log.debug("no connection to the coordinator of %s yet: %s", target[1], exc)
                self.forget(target)
            except Retry as retry:
                log.debug("FindCoordinator for %s retried: %s", target[1], retry)
            await asyncio.sleep(self.backoff_ms(attempt) / 1000)
            attempt += 1

    async def _find(self, target: Target) -> BrokerInfo:
        key_type, key = target
        conn = await self._cluster.connect_any()
        version = conn.versions.get(ApiKey.FIND_COORDINATOR)
        if version is None:
            raise CoordinatorRefused(
                Verdict.FATAL, UnsupportedVersionError(f"broker {conn.node_id} does not offer FindCoordinator")
            )
        async with self._lock:
            response = await conn.request(
                ApiKey.FIND_COORDINATOR, find_coordinator_body(version, key_type, [key]), version=version
            )
        found = coordinators_from_response(version, response, [key])[key]
        decision = verdict(FIND_COORDINATOR, found.error_code)
        if decision is Verdict.DONE:
            log.info("%s coordinator for %r is broker %s", key_type.name.lower(), key, found.node_id)
            return BrokerInfo(found.node_id, found.host, found.port)
        error = kafka_error(found.error_code, found.error_message)
        if decision is Verdict.RETRY:
            raise Retry(f"FindCoordinator: {error!r}")
        raise CoordinatorRefused(decision, error)

    def backoff_ms(self, attempt: int) -> int:
        """Exponential backoff with +-20% jitter, `retry_backoff_ms` up to `retry_backoff_max_ms` (KIP-580)."""
        base = min(self._config.retry_backoff_max_ms, self._config.retry_backoff_ms * (2 ** min(attempt, 30)))
        return int(base * self._rng.uniform(0.8, 1.2))
