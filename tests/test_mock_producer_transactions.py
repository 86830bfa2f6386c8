"""MockProducer's transactions: held until commit, dropped on abort, and the Producer's own state rules and errors."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from aioproducer import Producer, ProducerRecord, errors
from aioproducer.testing import MockProducer

TRANSACTIONAL_API = (
    "init_transactions",
    "begin_transaction",
    "send_offsets_to_transaction",
    "commit_transaction",
    "abort_transaction",
    "transaction",
)


@pytest.mark.parametrize("name", TRANSACTIONAL_API)
def test_transactional_methods_have_the_producers_signatures(name: str) -> None:
    mine = getattr(MockProducer, name)
    theirs = getattr(Producer, name)
    assert str(inspect.signature(mine)) == str(inspect.signature(theirs))
    assert inspect.iscoroutinefunction(mine) == inspect.iscoroutinefunction(theirs)


async def test_commit_makes_the_records_visible_with_kafkas_offsets() -> None:
    async with MockProducer(transactional_id="tx", topics={"t": 1}) as mock:
        assert mock.transaction_initialized and not mock.transaction_in_flight
        await mock.begin_transaction()
        first = await mock.send("t", b"a")
        second = await mock.send("t", b"b")
        assert (first.offset, second.offset) == (0, 1)
        assert mock.records() == [] and mock.history() == []
        assert [r.value for r in mock.uncommitted_history()] == [b"a", b"b"]
        assert mock.transaction_in_flight
        await mock.commit_transaction()
        assert [(r.offset, r.value) for r in mock.records("t")] == [(0, b"a"), (1, b"b")]
        assert mock.history() == [ProducerRecord("t", b"a"), ProducerRecord("t", b"b")]
        assert mock.uncommitted_history() == []
        assert mock.transaction_committed and not mock.transaction_aborted and not mock.transaction_in_flight
        assert mock.commit_count == 1
        await mock.begin_transaction()
        third = await mock.send("t", b"c")
    assert third.offset == 3  # offset 2 is the commit's control record, as on a broker


async def test_abort_drops_completed_records_and_fails_pending_ones() -> None:
    async with MockProducer(transactional_id="tx", auto_complete=False) as mock:
        await mock.begin_transaction()
        await mock.enqueue("t", b"done")
        assert mock.complete_next()
        late = await mock.enqueue("t", b"late")
        await mock.abort_transaction()
        with pytest.raises(errors.TransactionAbortedError):
            await late
        assert mock.records() == [] and mock.history() == [] and mock.uncommitted_history() == []
        assert mock.transaction_aborted and not mock.transaction_committed and mock.commit_count == 0
        await mock.begin_transaction()  # the producer goes on with a new transaction
        kept = await mock.enqueue("t", b"kept")
        await mock.commit_transaction()  # commit flushes: manual records complete
        assert (await kept).offset == 2
        assert [r.value for r in mock.records()] == [b"kept"]


@pytest.mark.parametrize("transactional", [False, True])
async def test_state_errors_are_the_producers(transactional: bool) -> None:
    """Each wrong call raises the class the Producer raises for it (the Producer's checks run before any I/O)."""
    settings: dict[str, Any] = {"transactional_id": "tx"} if transactional else {}
    async with MockProducer(**settings) as mock:
        if not transactional:
            with pytest.raises(errors.TransactionStateError, match="not a transactional producer"):
                await mock.begin_transaction()
            return
        with pytest.raises(errors.TransactionStateError):
            await mock.send("t", b"outside a transaction")
        with pytest.raises(errors.TransactionStateError):
            await mock.send_many([ProducerRecord("t", b"outside")])
        with pytest.raises(errors.TransactionStateError):
            await mock.commit_transaction()
        with pytest.raises(errors.TransactionStateError):
            await mock.abort_transaction()
        with pytest.raises(errors.TransactionStateError):
            await mock.send_offsets_to_transaction({("in", 0): 5}, "group")
        await mock.init_transactions()  # initialised and idle: nothing to do, as the Producer
        await mock.begin_transaction()
        with pytest.raises(errors.TransactionStateError):
            await mock.begin_transaction()
        with pytest.raises(errors.TransactionStateError):
            await mock.init_transactions()
        await mock.commit_transaction()  # an empty transaction commits


async def test_the_producers_state_errors_match_before_start() -> None:
    for producer in (Producer("h:1", transactional_id="tx"), MockProducer(transactional_id="tx")):
        with pytest.raises(errors.ProducerClosedError):
            await producer.begin_transaction()


async def test_a_failed_record_requires_abort_as_on_the_producer() -> None:
    async with MockProducer(transactional_id="tx") as mock:
        await mock.begin_transaction()
        await mock.send("t", b"ok")
        mock.inject_error(errors.KafkaError("broker said no"))
        with pytest.raises(errors.KafkaError):
            await mock.send("t", b"fails")
        with pytest.raises(errors.TransactionRequiresAbortError):
            await mock.send("t", b"after")
        with pytest.raises(errors.TransactionRequiresAbortError) as caught:
            await mock.commit_transaction()
        assert caught.value.requires_abort
        await mock.abort_transaction()
        assert mock.records() == []
        async with mock.transaction():
            await mock.send("t", b"next")
        assert [r.value for r in mock.records()] == [b"next"]


async def test_transaction_context_commits_on_success_and_aborts_on_error() -> None:
    async with MockProducer(transactional_id="tx") as mock:
        async with mock.transaction():
            await mock.send("t", b"committed")
        assert mock.transaction_committed
        with pytest.raises(RuntimeError):
            async with mock.transaction():
                await mock.send("t", b"aborted")
                raise RuntimeError("boom")
        assert mock.transaction_aborted
        assert [r.value for r in mock.records()] == [b"committed"]
        assert mock.commit_count == 1


async def test_send_offsets_are_kept_per_group_for_committed_transactions_only() -> None:
    async with MockProducer(transactional_id="tx") as mock:
        async with mock.transaction():
            await mock.send_offsets_to_transaction({("in", 0): 10, ("in", 1): 4}, "group-a")
            await mock.send_offsets_to_transaction({("in", 0): 12}, "group-a")
            await mock.send_offsets_to_transaction({("in", 2): 1}, "group-b")
            assert mock.sent_offsets
            assert mock.consumer_group_offsets_history() == []  # not before the commit
        await mock.begin_transaction()
        await mock.send_offsets_to_transaction({("in", 0): 99}, "group-a")
        await mock.abort_transaction()
        async with mock.transaction():
            await mock.send_offsets_to_transaction({}, "group-a")  # nothing to commit, as Java: not recorded
            assert not mock.sent_offsets
    assert mock.consumer_group_offsets_history() == [
        {"group-a": {("in", 0): 12, ("in", 1): 4}, "group-b": {("in", 2): 1}}
    ]
    assert mock.commit_count == 2


async def test_fence_makes_every_later_call_raise_the_fenced_error() -> None:
    async with MockProducer(transactional_id="tx", auto_complete=False) as mock:
        await mock.begin_transaction()
        pending = await mock.enqueue("t", b"pending")
        mock.fence()
        with pytest.raises(errors.ProducerFencedError):
            await pending
        for call in (mock.commit_transaction(), mock.abort_transaction(), mock.begin_transaction()):
            with pytest.raises(errors.ProducerFencedError):
                await call
        with pytest.raises(errors.ProducerFencedError):
            await mock.send("t", b"x")
        assert mock.records() == [] and mock.uncommitted_history() == []
    assert mock.closed  # close raises nothing after fencing


async def test_injected_commit_errors() -> None:
    async with MockProducer(transactional_id="tx") as mock:
        # A timeout leaves the commit pending: other calls are refused, calling commit again finishes it.
        await mock.begin_transaction()
        await mock.send("t", b"a")
        mock.commit_error = errors.TransactionTimeoutError("slow coordinator")
        with pytest.raises(errors.TransactionTimeoutError):
            await mock.commit_transaction()
        with pytest.raises(errors.TransactionStateError, match="commit_transaction"):
            await mock.abort_transaction()
        assert mock.records() == []
        await mock.commit_transaction()
        assert [r.value for r in mock.records()] == [b"a"]
        # Any other commit error: the transaction must be aborted.
        await mock.begin_transaction()
        await mock.send("t", b"b")
        mock.commit_error = errors.KafkaError("coordinator refused")
        with pytest.raises(errors.TransactionRequiresAbortError):
            await mock.commit_transaction()
        await mock.abort_transaction()
        assert [r.value for r in mock.records()] == [b"a"]
        # A fatal one ends the producer.
        await mock.begin_transaction()
        mock.commit_error = errors.TransactionFatalError("broken")
        with pytest.raises(errors.TransactionFatalError):
            await mock.commit_transaction()
        with pytest.raises(errors.TransactionFatalError):
            await mock.begin_transaction()


async def test_injected_abort_error_is_fatal() -> None:
    async with MockProducer(transactional_id="tx") as mock:
        await mock.begin_transaction()
        mock.abort_error = errors.KafkaError("coordinator gone")
        with pytest.raises(errors.TransactionFatalError):
            await mock.abort_transaction()
        with pytest.raises(errors.TransactionFatalError):
            await mock.begin_transaction()


async def test_close_aborts_an_open_transaction() -> None:
    mock = MockProducer(transactional_id="tx", auto_complete=False)
    await mock.start()
    await mock.begin_transaction()
    pending = await mock.enqueue("t", b"open")
    await mock.close()
    with pytest.raises(errors.TransactionAbortedError):
        await pending
    assert mock.transaction_aborted and mock.records() == []


def test_transactional_helpers_refuse_a_plain_mock() -> None:
    mock = MockProducer()
    with pytest.raises(errors.TransactionStateError):
        mock.fence()
    with pytest.raises(errors.TransactionStateError):
        mock.commit_error = errors.KafkaError("x")
    assert not mock.transaction_initialized and mock.commit_count == 0


async def _script(producer: Producer | MockProducer, topic: str) -> list[str]:
    """One sequence of right and wrong transactional calls; the outcome of each, by class name."""
    outcomes: list[str] = []

    async def attempt(call: Any) -> None:
        try:
            await call
        except errors.AioProducerError as exc:
            outcomes.append(type(exc).__name__)
        else:
            outcomes.append("ok")

    await attempt(producer.send(topic, b"before begin"))
    await attempt(producer.commit_transaction(timeout=30))
    await attempt(producer.abort_transaction(timeout=30))
    await attempt(producer.send_offsets_to_transaction({(topic, 0): 1}, "g", timeout=30))
    await attempt(producer.init_transactions(timeout=30))
    await attempt(producer.begin_transaction())
    await attempt(producer.begin_transaction())
    await attempt(producer.init_transactions(timeout=30))
    await attempt(producer.send(topic, b"in"))
    await attempt(producer.commit_transaction(timeout=30))
    await attempt(producer.commit_transaction(timeout=30))
    await attempt(producer.begin_transaction())
    await attempt(producer.send(topic, b"aborted"))
    await attempt(producer.abort_transaction(timeout=30))
    await attempt(producer.send(topic, b"after abort"))
    return outcomes


async def test_the_same_calls_raise_what_the_producer_raises_on_real_kafka(
    bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(1)
    async with Producer(bootstrap, transactional_id=f"mock-judge-{topic}") as real:
        theirs = await _script(real, topic)
    async with MockProducer(transactional_id="tx", topics={topic: 1}) as mock:
        mine = await _script(mock, topic)
    assert mine == theirs
    assert theirs.count("ok") == 7 and "TransactionStateError" in theirs  # the script exercises both kinds


async def test_commit_waits_for_records_with_latency_and_send_many_is_held_too() -> None:
    async with MockProducer(transactional_id="tx", latency_ms=20) as mock:
        await mock.begin_transaction()
        deliveries = [await mock.enqueue("t", b"slow") for _ in range(3)]
        results = await mock.send_many([ProducerRecord("t", b"bulk"), ProducerRecord("t", b"bulk2")])
        assert [r.offset for r in results] == [3, 4]  # type: ignore[union-attr]
        assert mock.records() == [] and len(mock.uncommitted_history()) == 5
        await mock.commit_transaction(timeout=30)
        assert all(d.done() for d in deliveries)
        assert [r.value for r in mock.records()] == [b"slow"] * 3 + [b"bulk", b"bulk2"]
        assert len(mock.history()) == 5


async def test_a_commit_that_times_out_on_slow_records_can_be_called_again() -> None:
    async with MockProducer(transactional_id="tx", latency_ms=300) as mock:
        await mock.begin_transaction()
        await mock.enqueue("t", b"slow")
        with pytest.raises(errors.TransactionTimeoutError):
            await mock.commit_transaction(timeout=0.01)
        with pytest.raises(errors.TransactionStateError, match="commit_transaction"):
            await mock.begin_transaction()
        await mock.commit_transaction(timeout=30)
        assert [r.value for r in mock.records()] == [b"slow"]


@pytest.mark.parametrize("call", ["send_many", "send_table"])
async def test_a_bulk_call_never_spans_two_transactions_on_the_mock_either(call: str) -> None:
    """The mock let a bulk call span two transactions, where the Producer does not: a send_many whose async
    serializer ran while its transaction was aborted and a new one begun put its records in the new one, and a
    send_table whose first rows were pending put its later rows there."""
    import asyncio

    import pyarrow as pa

    class Slow:
        async def serialize(self, topic: str, headers: Any, value: Any) -> bytes:
            await asyncio.sleep(0.05)
            return bytes(value)

    if call == "send_many":
        mock = MockProducer(transactional_id="tx", value_serializer=Slow())
    else:
        mock = MockProducer(transactional_id="tx", auto_complete=False)
    async with mock:
        await mock.begin_transaction()
        if call == "send_many":
            running = asyncio.ensure_future(mock.send_many([ProducerRecord("t", b"%d" % i) for i in range(3)]))
        else:
            batches = [pa.record_batch({"v": [b"b0", b"b1"]}), pa.record_batch({"v": [b"b2", b"b3"]})]
            running = asyncio.ensure_future(mock.send_table(pa.Table.from_batches(batches), topic="t", value="v"))
        await asyncio.sleep(0.01)  # the call is in its serializer, or waits for its first rows
        assert not running.done()
        await mock.abort_transaction()
        await mock.begin_transaction()
        outcome = await asyncio.wait_for(running, 5)
        await mock.commit_transaction()
    if call == "send_many":
        kinds = [type(result) for result in outcome]
        assert kinds == [errors.TransactionStateError] * 3
    else:
        failed = {row: type(failure.error) for failure in outcome.failures for row in failure.row_numbers()}
        assert failed == {0: errors.TransactionAbortedError, 1: errors.TransactionAbortedError} | {
            2: errors.TransactionStateError,
            3: errors.TransactionStateError,
        }
    assert mock.records() == []  # nothing of the call was committed
