"""The wait for the last transaction's markers (transactions/completion.py): which answers hold the next transaction's
first batches, which end the wait, and that the wait is bounded and never outlives close. Judged against a scripted
coordinator here; tests/test_transactions_kafka.py judges it against real Kafka."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from aioproducer.error_codes import ErrorCode
from aioproducer.protocol import ApiKey
from aioproducer.transactions.completion import PREPARING_STATES, MarkerWatch, still_preparing

TXN = "tx-1"


def answer(state: str, *, error: int = ErrorCode.NONE, transactional_id: str = TXN) -> dict[str, Any]:
    return {
        "throttle_time_ms": 0,
        "transaction_states": [
            {
                "error_code": error,
                "transactional_id": transactional_id,
                "transaction_state": state,
                "transaction_timeout_ms": 60000,
                "transaction_start_time_ms": -1,
                "producer_id": 7,
                "producer_epoch": 3,
                "topics": [],
            }
        ],
    }


class Coordinator:
    """Answers DescribeTransactions from a script (None: the request could not be sent); records each request."""

    def __init__(self, script: Iterator[dict[str, Any] | None]) -> None:
        self.script = script
        self.requests: list[tuple[ApiKey, Mapping[str, Any]]] = []

    async def ask(self, api: ApiKey, body: Mapping[str, Any]) -> dict[str, Any] | None:
        self.requests.append((api, body))
        await asyncio.sleep(0)
        return next(self.script)


def watch_of(coordinator: Coordinator, bound_ms: int = 5000) -> tuple[MarkerWatch, list[int], set[asyncio.Task[None]]]:
    woken: list[int] = []
    tasks: set[asyncio.Task[None]] = set()

    def spawn(coro: Any) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        tasks.add(task)
        return task

    return MarkerWatch(TXN, coordinator.ask, lambda: woken.append(1), spawn, bound_ms), woken, tasks


@pytest.mark.parametrize("state", sorted(PREPARING_STATES))
def test_prepare_states_mean_markers_are_still_being_written(state: str) -> None:
    assert still_preparing(answer(state), TXN) is True


@pytest.mark.parametrize("state", ["CompleteCommit", "CompleteAbort", "Empty", "Ongoing", "Dead"])
def test_other_states_mean_the_next_transaction_may_start(state: str) -> None:
    assert still_preparing(answer(state), TXN) is False


@pytest.mark.parametrize(
    "response",
    [
        answer("PrepareCommit", error=ErrorCode.NOT_COORDINATOR),
        answer("PrepareCommit", error=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        answer("PrepareCommit", transactional_id="someone-else"),
        {"throttle_time_ms": 0, "transaction_states": []},
    ],
    ids=["not-coordinator", "denied", "other-id", "no-entry"],
)
def test_an_answer_that_cannot_say_ends_the_wait(response: dict[str, Any]) -> None:
    assert still_preparing(response, TXN) is None


async def test_the_wait_lasts_while_the_coordinator_prepares_and_ends_when_it_completes() -> None:
    coordinator = Coordinator(iter([answer("PrepareCommit")] * 3 + [answer("CompleteCommit")]))
    watch, woken, tasks = watch_of(coordinator)
    assert not watch.pending
    watch.start()
    assert watch.pending
    await asyncio.wait(tasks)
    assert not watch.pending
    assert [api for api, _ in coordinator.requests] == [ApiKey.DESCRIBE_TRANSACTIONS] * 4
    assert coordinator.requests[0][1] == {"transactional_ids": [TXN]}
    assert woken == [1], "the sender is told once the wait ends"


async def test_starting_again_while_waiting_polls_once() -> None:
    coordinator = Coordinator(iter([answer("PrepareCommit"), answer("CompleteCommit")]))
    watch, _, tasks = watch_of(coordinator)
    watch.start()
    watch.start()
    assert len(tasks) == 1
    await asyncio.wait(tasks)
    assert len(coordinator.requests) == 2


async def test_no_answer_ends_the_wait_and_the_watch_for_good() -> None:
    """A broker without DescribeTransactions (or a request that failed) ends the wait at once; the watch does not
    ask again after the next transaction."""
    coordinator = Coordinator(iter([None]))
    watch, woken, tasks = watch_of(coordinator)
    watch.start()
    await asyncio.wait(tasks)
    watch.start()
    assert not watch.pending and len(tasks) == 1 and len(coordinator.requests) == 1
    assert woken == [1]


async def test_a_denied_describe_is_not_asked_again_but_a_moved_coordinator_is() -> None:
    denied = Coordinator(iter([answer("", error=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)]))
    watch, _, tasks = watch_of(denied)
    watch.start()
    await asyncio.wait(tasks)
    watch.start()
    assert len(denied.requests) == 1 and not watch.pending

    moved = Coordinator(iter([answer("", error=ErrorCode.NOT_COORDINATOR), answer("CompleteCommit")]))
    watch, _, tasks = watch_of(moved)
    watch.start()
    await asyncio.wait(tasks)
    watch.start()
    await asyncio.wait(tasks)
    assert len(moved.requests) == 2, "the next commit watches again"


async def test_the_wait_is_bounded_when_the_coordinator_never_completes() -> None:
    coordinator = Coordinator(iter(lambda: answer("PrepareCommit"), None))
    watch, woken, tasks = watch_of(coordinator, bound_ms=60)
    started = time.monotonic()
    watch.start()
    await asyncio.wait(tasks, timeout=5)
    assert not watch.pending, "the wait ended at its bound"
    assert time.monotonic() - started >= 0.06
    assert woken == [1]
    # Polled from 1 ms, doubling: a handful of requests in 60 ms, not one per event-loop turn.
    assert 3 <= len(coordinator.requests) <= 10


async def test_cancelling_the_watch_ends_the_wait_and_wakes_the_sender() -> None:
    """close() cancels the transaction engine's tasks: the batches waiting must not wait on a dead watch."""
    coordinator = Coordinator(iter(lambda: answer("PrepareAbort"), None))
    watch, woken, tasks = watch_of(coordinator)
    watch.start()
    await asyncio.sleep(0.01)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    assert not watch.pending
    assert woken == [1]


async def test_wait_returns_when_the_watch_ends_and_at_once_without_one() -> None:
    watch, _, tasks = watch_of(Coordinator(iter([answer("PrepareCommit"), answer("CompleteCommit")])))
    await asyncio.wait_for(watch.wait(), 1)  # no watch yet
    watch.start()
    await asyncio.wait_for(watch.wait(), 5)
    assert not watch.pending and all(task.done() for task in tasks)


async def test_hurry_asks_again_at_once_instead_of_after_the_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit flushing the next transaction hurries the watch: the next DescribeTransactions goes out without
    waiting out the backoff (made 10 s here, so only the hurry can explain a second request)."""
    import aioproducer.transactions.completion as completion

    monkeypatch.setattr(completion, "_FIRST_POLL_BACKOFF_MS", 10_000)
    coordinator = Coordinator(iter([answer("PrepareCommit"), answer("CompleteCommit")]))
    watch, _, tasks = watch_of(coordinator, bound_ms=60_000)
    watch.hurry()  # no watch yet: nothing to hurry, and no hurry kept for the next one
    watch.start()
    await asyncio.sleep(0.05)  # the first answer is read and the backoff begins
    assert watch.pending and len(coordinator.requests) == 1, "waiting out the backoff"
    watch.hurry()
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert len(coordinator.requests) == 2 and not watch.pending
