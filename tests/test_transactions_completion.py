"""The wait for the last transaction's markers (transactions/completion.py): which answers hold the next transaction's
first batches, which end the wait, and that the wait is bounded and never outlives close. Judged against a scripted
coordinator, then in a real producer on librdkafka's mock cluster with scripted answers;
tests/test_transactions_kafka.py judges it against real Kafka."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any

import pytest

from aioproducer import Producer
from aioproducer.error_codes import ErrorCode
from aioproducer.errors import ProtocolError, UnsupportedVersionError
from aioproducer.protocol import ApiKey
from aioproducer.testing import MockCluster
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


def watch_of(
    ask: Coordinator | Callable[[ApiKey, Mapping[str, Any]], Awaitable[dict[str, Any] | None]], bound_ms: int = 5000
) -> tuple[MarkerWatch, list[int], set[asyncio.Task[None]]]:
    """A watch asking `ask` (or a scripted Coordinator), with the sender's wake-ups and the watch's tasks kept."""
    woken: list[int] = []
    tasks: set[asyncio.Task[None]] = set()

    def spawn(coro: Any) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro)
        tasks.add(task)
        return task

    asking = ask.ask if isinstance(ask, Coordinator) else ask
    return MarkerWatch(TXN, asking, lambda: woken.append(1), spawn, bound_ms), woken, tasks


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


async def test_starting_again_replaces_the_watch_under_way() -> None:
    """A watch still running at the next EndTxn (only possible past its deadline) is stale: it is cancelled."""
    coordinator = Coordinator(iter([answer("PrepareCommit"), answer("CompleteCommit")]))
    watch, _, tasks = watch_of(coordinator)
    watch.start()
    first = next(iter(tasks))
    watch.start()
    await asyncio.wait(tasks)
    assert first.cancelled() and len(tasks) == 2
    assert not watch.pending and len(coordinator.requests) == 2


async def test_no_answer_ends_this_wait_only() -> None:
    """No coordinator known or no connection (a broker restarting) ends this wait at once; the next transaction's
    watch asks again (a transient failure must not turn the pacing off for the producer's life)."""
    coordinator = Coordinator(iter([None, answer("PrepareCommit"), answer("CompleteCommit")]))
    watch, woken, tasks = watch_of(coordinator)
    watch.start()
    await asyncio.wait(tasks)
    assert not watch.pending and woken
    watch.start()
    await asyncio.wait(tasks)
    assert len(coordinator.requests) == 3


async def test_a_broker_without_describe_transactions_ends_the_watch_for_good() -> None:
    asked: list[ApiKey] = []

    async def ask(api: ApiKey, body: Mapping[str, Any]) -> dict[str, Any] | None:
        asked.append(api)
        raise UnsupportedVersionError("broker 1 does not offer DESCRIBE_TRANSACTIONS")

    watch, woken, tasks = watch_of(ask, 5000)
    watch.start()
    await asyncio.wait(tasks)
    watch.start()
    assert not watch.pending and len(tasks) == 1 and asked == [ApiKey.DESCRIBE_TRANSACTIONS] and woken


async def test_an_unreadable_answer_ends_this_wait() -> None:
    """An answer the codec could not read (ProtocolError) ends this wait, logged, instead of killing the task
    silently; the next watch asks again."""
    calls = 0

    async def ask(api: ApiKey, body: Mapping[str, Any]) -> dict[str, Any] | None:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ProtocolError("truncated DescribeTransactions response")
        return answer("CompleteCommit")

    watch, _, tasks = watch_of(ask, 5000)
    watch.start()
    await asyncio.wait(tasks)
    assert all(task.exception() is None for task in tasks)
    watch.start()
    await asyncio.wait(tasks)
    assert calls == 2


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
    assert woken, "the sender was told"
    # Asked with a backoff, not once per turn of the event loop (thousands in 60 ms).
    assert 2 <= len(coordinator.requests) < 30


async def test_the_wait_ends_at_its_bound_even_while_a_question_is_unanswered() -> None:
    """Regression: the deadline was checked only after an answer, so a question asked just before it (a coordinator
    slow to answer) held the batches up to another request timeout. Now `pending` ends at the deadline and the
    sender is woken then, whatever is still out."""
    never: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

    async def ask(api: ApiKey, body: Mapping[str, Any]) -> dict[str, Any] | None:
        return await never

    watch, woken, tasks = watch_of(ask, 50)
    watch.start()
    assert watch.pending
    await asyncio.sleep(0.3)
    assert not watch.pending and woken == [1], "released at the deadline, the question still out"
    await asyncio.wait_for(watch.wait(), 1)  # nobody waits past the deadline either
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_cancel_right_after_a_hurry_is_not_lost() -> None:
    """Regression: close() cancels the watch just after abort's flush hurried it; asyncio.wait_for (before Python
    3.12) swallowed that cancellation when the hurry had just woken it, and the watch went on asking until its bound
    (close(timeout=1) took 15 s). The watch must end at the cancellation."""
    coordinator = Coordinator(iter(lambda: answer("PrepareAbort"), None))
    watch, _, tasks = watch_of(coordinator, bound_ms=60_000)
    watch.start()
    await asyncio.sleep(0.01)
    watch.hurry()
    for task in tasks:
        task.cancel()
    done, _ = await asyncio.wait(tasks, timeout=5)
    assert done == tasks and all(task.cancelled() for task in tasks)
    assert not watch.pending


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
    assert woken


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


# -- the producer's use of the watch, on librdkafka's mock cluster (which does not offer DescribeTransactions: the
# coordinator's answers are scripted, everything else is the real producer and a real broker protocol) ------------
class ScriptedCoordinator:
    """DescribeTransactions answers from `state` (changed by the test); counts the questions."""

    def __init__(self, state: str = "PrepareCommit") -> None:
        self.state = state
        self.asked = 0

    async def ask(self, api: ApiKey, body: Mapping[str, Any]) -> dict[str, Any] | None:
        assert api is ApiKey.DESCRIBE_TRANSACTIONS and body == {"transactional_ids": ["tx"]}
        self.asked += 1
        await asyncio.sleep(0.001)
        return answer(self.state, transactional_id="tx")


@contextlib.asynccontextmanager
async def scripted_producer(
    cluster: MockCluster, coordinator: ScriptedCoordinator, **settings: Any
) -> AsyncIterator[Producer]:
    producer = Producer(cluster.bootstrap_servers, transactional_id="tx", linger_ms=1, **settings)
    await producer.start()
    try:
        assert producer._txn is not None
        producer._txn._markers._ask = coordinator.ask
        yield producer
    finally:
        await producer.close()


@pytest.fixture
def cluster(mock_cluster: MockCluster) -> MockCluster:
    mock_cluster.create_topic("t", 2)
    mock_cluster.start_request_tracking()
    return mock_cluster


@pytest.mark.timeout(60)
async def test_the_next_transaction_s_first_batch_waits_for_the_markers(cluster: MockCluster) -> None:
    coordinator = ScriptedCoordinator()
    async with scripted_producer(cluster, coordinator) as producer:
        async with producer.transaction():
            await producer.send("t", b"first", partition=0)
        await producer.begin_transaction()
        delivery = await producer.enqueue("t", b"second", partition=1)
        await asyncio.sleep(0.3)
        assert not delivery.done(), "held while the coordinator still writes the last transaction's markers"
        assert coordinator.asked >= 2
        coordinator.state = "CompleteCommit"
        assert (await asyncio.wait_for(delivery, 5)).offset >= 0
        await producer.commit_transaction()


@pytest.mark.timeout(60)
async def test_send_offsets_waits_for_the_markers(cluster: MockCluster) -> None:
    """Under TV1 (the mock) AddOffsetsToTxn would meet CONCURRENT_TRANSACTIONS too: it waits for the markers."""
    coordinator = ScriptedCoordinator()
    async with scripted_producer(cluster, coordinator) as producer:
        async with producer.transaction():
            await producer.send("t", b"first", partition=0)
        await producer.begin_transaction()
        sending = asyncio.ensure_future(producer.send_offsets_to_transaction({("t", 0): 1}, "group-1"))
        await asyncio.sleep(0.3)
        assert not sending.done()
        assert not [r for r in cluster.requests() if r.api_key == int(ApiKey.ADD_OFFSETS_TO_TXN)]
        coordinator.state = "CompleteCommit"
        await asyncio.wait_for(sending, 5)
        await producer.commit_transaction()


@pytest.mark.timeout(60)
async def test_a_commit_asks_at_once_instead_of_waiting_out_the_backoff(
    cluster: MockCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a first delay and backoff of 10 s, only the commit's hurry can let its first batch out within 5 s."""
    import aioproducer.transactions.completion as completion

    monkeypatch.setattr(completion, "_FIRST_POLL_DELAY_MS", 10_000)
    monkeypatch.setattr(completion, "_FIRST_POLL_BACKOFF_MS", 10_000)
    coordinator = ScriptedCoordinator("CompleteCommit")
    async with scripted_producer(cluster, coordinator) as producer:
        async with producer.transaction():
            await producer.send("t", b"first", partition=0)
        await producer.begin_transaction()
        await producer.enqueue("t", b"second", partition=1)
        await producer.commit_transaction(timeout=5)
        assert coordinator.asked == 1


@pytest.mark.timeout(60)
async def test_close_mid_watch_keeps_its_timeout(cluster: MockCluster) -> None:
    """Regression: close() with an open transaction aborts it (its flush hurries the watch) and cancels the watch;
    before Python 3.12 the cancellation could be lost and close(timeout=1) took the whole request timeout (15 s)
    while the coordinator kept answering PrepareCommit (markers stuck behind a partition without a leader)."""
    coordinator = ScriptedCoordinator()
    async with scripted_producer(cluster, coordinator, request_timeout_ms=15_000) as producer:
        async with producer.transaction():
            await producer.send("t", b"first", partition=0)
        await producer.begin_transaction()
        await producer.enqueue("t", b"second", partition=0)
        await asyncio.sleep(0.1)
        started = time.monotonic()
        await producer.close(timeout=1)
        assert time.monotonic() - started < 5
