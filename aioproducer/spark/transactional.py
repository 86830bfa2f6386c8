"""`delivery="transactional"`: one Kafka transaction per Spark task attempt, with a transactional id stable per Spark
partition (`<prefix>-<partition>`, no attempt number). A retried attempt's producer fences the attempt before it
and aborts whatever that one left open, so read_committed readers never see rows of a failed attempt.

Owns the executor side of that mode (its own producer and event loop per task) and the driver's checks; the
at-least-once path is `task.py`'s. Imports no Spark.
"""

from __future__ import annotations

import asyncio
import re
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from aioproducer import Producer
from aioproducer.errors import ConfigError, TransactionRequiresAbortError
from aioproducer.models import TableReport
from aioproducer.spark.report import TaskTally

__all__ = ["AT_LEAST_ONCE", "DELIVERY_MODES", "TRANSACTIONAL", "check_delivery", "publish_in_transaction"]

AT_LEAST_ONCE = "at_least_once"
TRANSACTIONAL = "transactional"
DELIVERY_MODES = (AT_LEAST_ONCE, TRANSACTIONAL)
# Room for "-<partition>" within Kafka's limit on a transactional id (it is a string key of the coordinator's log).
_PREFIX = re.compile(r"[A-Za-z0-9._-]{1,200}")
_MAX_PENDING_CHUNKS = 4


def check_delivery(delivery: str, transactional_id_prefix: str | None) -> None:
    """The driver's check of the delivery options: raises ConfigError before any task runs (a `kafka.transactional.id`
    option is refused by `options.check_producer_config`)."""
    if delivery not in DELIVERY_MODES:
        raise ConfigError(f"delivery must be one of {DELIVERY_MODES}, got {delivery!r}")
    if delivery == TRANSACTIONAL:
        if not isinstance(transactional_id_prefix, str) or not _PREFIX.fullmatch(transactional_id_prefix):
            raise ConfigError(
                "delivery='transactional' needs transactional_id_prefix: 1-200 characters of letters, digits, '.', "
                f"'_' or '-', unique to this sink (each Spark partition p uses '<prefix>-p'); got "
                f"{transactional_id_prefix!r}"
            )
    elif transactional_id_prefix is not None:
        raise ConfigError("transactional_id_prefix is only for delivery='transactional'")


def warn_if_speculative(speculation: bool) -> None:
    if speculation:
        warnings.warn(
            "spark.speculation is on: a speculative copy of a task shares its partition's transactional id and "
            "fences the original (one of them fails); if the original committed before the copy started, the copy "
            "commits the rows a second time",
            RuntimeWarning,
            stacklevel=3,
        )


def transactional_id(prefix: str, spark_partition: int) -> str:
    return f"{prefix}-{spark_partition}"


async def publish_in_transaction(
    chunks: Iterator[Any],
    columns: Callable[[Any], Mapping[str, Any]],
    config: Mapping[str, str],
    prefix: str,
    spark_partition: int,
    tally: TaskTally,
) -> int:
    """Publish one task's Arrow chunks (`columns` names their roles for `send_table`) in one transaction and commit
    it; on any error abort and raise, so that Spark
    retries the task (a record refused by Kafka would only be refused again: the task fails after its retries).
    Returns how many broker connections the task's producer opened (0: an empty partition starts none)."""
    first = next(chunks, None)
    if first is None:
        return 0  # an empty partition opens no transaction
    settings = {**config, "transactional.id": transactional_id(prefix, spark_partition)}
    roles = columns(first)
    async with Producer(config=settings) as producer, producer.transaction():
        pending: deque[tuple[int, asyncio.Future[TableReport]]] = deque()
        try:
            row = 0
            for chunk in _prepend(first, chunks):
                pending.append((row, asyncio.ensure_future(producer.send_table(chunk, **roles))))
                row += chunk.num_rows
                if len(pending) > _MAX_PENDING_CHUNKS:
                    first_row, future = pending.popleft()
                    tally.add_table(first_row, await future)
            while pending:
                first_row, future = pending.popleft()
                tally.add_table(first_row, await future)
        finally:
            for _, future in pending:
                future.cancel()
            await asyncio.gather(*(future for _, future in pending), return_exceptions=True)
        # All or nothing: a record refused at the call does not doom the transaction by itself, so check here.
        # A record Kafka refused does, and commit (on leaving the block) raises; either way the block aborts.
        if tally.failed:
            raise TransactionRequiresAbortError(
                f"{tally.failed} record(s) of Spark partition {spark_partition} were not delivered: its transaction "
                "is aborted and the task fails (Spark retries it)"
            )
    return int(producer.metrics().producer["connection-creation-total"])


def _prepend(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest
