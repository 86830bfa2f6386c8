"""Records' handles and the cyclic garbage collector: the compiled handle of a record waiting for its batch with done
callbacks is not tracked by the collector meanwhile (walking it cost a sixth of a done-callback loop). These tests pin
what that must never cost: a reference cycle through a handle (a callback or cancel message that refers back to it)
is collected once its batch settled, once its loop closed, and once an event loop ended with the producer left open,
on both twins."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import warnings
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from aioproducer import Producer
from aioproducer.deliveries import delivery as delivery_module
from aioproducer.deliveries.delivery import BatchOutcome
from aioproducer.errors import KafkaTimeoutError
from aioproducer.testing import MockCluster, MockProducer
from tests.twins import TWINS, use_twin


@pytest.fixture(autouse=True, params=TWINS)
def twin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    use_twin(monkeypatch, request.param)
    return request.param  # type: ignore[no-any-return]


class HoldsItsRecord:
    """A done callback (or cancel message) that refers to the handle it was given to: a cycle through the handle."""

    def __init__(self, ran: list[Any] | None = None) -> None:
        self.delivery: Any = None
        self.ran = [] if ran is None else ran

    def __call__(self, delivery: Any) -> None:
        self.ran.append(delivery)


def watched(outcome: BatchOutcome, index: int, ran: list[Any]) -> weakref.ref[HoldsItsRecord]:
    """A record of `outcome`'s batch whose done callback refers back to it (and notes its runs in `ran`); only a weak
    reference to the callback is kept."""
    return held_by_its_callback(delivery_module.new_delivery(outcome, index, 1_000, -1, 3), ran)


def held_by_its_callback(delivery: Any, ran: list[Any]) -> weakref.ref[HoldsItsRecord]:
    """Give `delivery` a done callback that refers back to it (noting its runs in `ran`); a weak reference to it."""
    callback = HoldsItsRecord(ran)
    callback.delivery = delivery
    delivery.add_done_callback(callback)
    return weakref.ref(callback)


async def started_producer(bootstrap: str) -> Producer:
    """A producer whose records wait in it (linger 60 s), connected and with the test topic's metadata."""
    producer = Producer(bootstrap, linger_ms=60_000)
    await producer.start()
    await producer.enqueue("left-open", b"metadata and connections")
    await producer.flush()  # sent at once, not after linger_ms
    return producer


def run_on_a_mock_cluster(main: Callable[[str], Coroutine[Any, Any, None]]) -> None:
    """`asyncio.run(main(bootstrap))` against a fresh one-broker librdkafka mock cluster with the test topic."""
    with MockCluster(1) as cluster:
        cluster.create_topic("left-open", 3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)  # transports of a loop closed with the producer open
            asyncio.run(main(cluster.bootstrap_servers))


def collected(refs: list[weakref.ref[HoldsItsRecord]]) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)  # transports of a loop closed with the producer open
        gc.collect()
    return sum(1 for ref in refs if ref() is None)


async def test_callbacks_that_refer_to_their_records_are_collected_once_the_batch_settled() -> None:
    outcome = BatchOutcome("t", 0, asyncio.get_running_loop(), held=True)
    ran: list[Any] = []
    refs = [watched(outcome, index, ran) for index in range(3)]
    outcome.succeed(0, -1)
    await asyncio.sleep(0)
    assert len(ran) == 3  # each ran once
    del outcome, ran
    assert collected(refs) == 3


async def test_a_cancelled_record_whose_cancel_message_refers_back_is_collected_after_its_batch_settled() -> None:
    """A record cancelled while it waits stays in its batch's list (untracked) until the batch settles; its cancel
    message may refer back to it. Once the batch settled, nothing but that cycle holds the two."""
    outcome = BatchOutcome("t", 0, asyncio.get_running_loop(), held=True)
    delivery = delivery_module.new_delivery(outcome, 0, 1_000, -1, 3)
    delivery.add_done_callback(lambda _: None)
    message = HoldsItsRecord()
    message.delivery = delivery
    assert delivery.cancel(message)
    ref = weakref.ref(message)
    del delivery, message
    outcome.succeed(0, -1)
    await asyncio.sleep(0)
    del outcome
    assert collected([ref]) == 1


def test_records_of_a_batch_settled_after_its_loop_closed_are_collected() -> None:
    """Nothing can run the callbacks of a batch settled on a closed loop: its records are dropped, and must not
    stay out of the collector's sight with their callbacks."""
    loop = asyncio.new_event_loop()
    outcome = BatchOutcome("t", 0, loop, held=True)
    ran: list[Any] = []
    refs = [watched(outcome, index, ran) for index in range(3)]
    loop.close()
    outcome.succeed(0, -1)
    del outcome, loop
    assert collected(refs) == 3
    assert not ran


def test_a_producer_left_open_when_asyncio_run_ends_is_collected_with_its_waiting_records() -> None:
    """asyncio.run ends by cancelling the tasks left, the producer's sender among them, and closes the loop: nothing
    will ever settle the records still buffered. The producer, its batches, their records and their callbacks must
    all be collected, as they were before the waiting handles left the collector's sight."""
    refs: list[weakref.ref[HoldsItsRecord]] = []
    ran: list[Any] = []
    producers: list[weakref.ref[Producer]] = []

    async def leave_a_producer_open(bootstrap: str) -> None:
        producer = await started_producer(bootstrap)
        for index in range(200):
            refs.append(held_by_its_callback(await producer.enqueue("left-open", b"%d" % index), ran))
        producers.append(weakref.ref(producer))

    run_on_a_mock_cluster(leave_a_producer_open)
    assert collected(refs) == len(refs) == 200
    assert producers[0]() is None
    assert not ran  # nothing settled them


def test_records_a_mock_producer_left_pending_are_collected_when_asyncio_run_ends() -> None:
    """A MockProducer in manual mode (auto_complete=False) has no sender task: when asyncio.run ends with records it
    never completed, nothing settles them and nothing re-tracked their handles, so the compiled handles, their
    batches and their callbacks stayed alive for good (the tracked version collects them)."""
    refs: list[weakref.ref[HoldsItsRecord]] = []
    ran: list[Any] = []

    async def leave_records_pending() -> None:
        producer = MockProducer(auto_complete=False)
        await producer.start()
        for index in range(5):
            refs.append(held_by_its_callback(await producer.enqueue("pending", b"%d" % index), ran))

    asyncio.run(leave_records_pending())
    assert collected(refs) == len(refs) == 5
    assert not ran


async def test_a_mock_producer_dropped_with_pending_records_is_collected_while_its_loop_runs() -> None:
    """The same mock dropped while its event loop goes on (a session-wide test loop): its pending batches are garbage
    with their records and callbacks, but the compiled handles, out of the collector's sight, kept them all alive."""
    refs: list[weakref.ref[HoldsItsRecord]] = []

    async def drop_a_mock_with_pending_records() -> None:
        producer = MockProducer(auto_complete=False)
        await producer.start()
        for index in range(5):
            delivery = await producer.enqueue("pending", b"%d" % index)
            callback = HoldsItsRecord()
            callback.delivery = delivery
            delivery.add_done_callback(callback)
            refs.append(weakref.ref(callback))

    await drop_a_mock_with_pending_records()
    assert collected(refs) == len(refs) == 5


def test_records_whose_callbacks_were_dropped_with_their_closed_loop_are_collected() -> None:
    """A done callback raising KeyboardInterrupt makes run_callbacks_of schedule the batch's other records again and
    propagate; the program closes its loop, dropping that scheduled call. The compiled handles it carried were still
    untracked (only run_callbacks_of re-tracks them as it reaches each), so they and their callbacks were kept."""
    loop = asyncio.new_event_loop()
    outcome = BatchOutcome("t", 0, loop, held=True)
    interrupting = delivery_module.new_delivery(outcome, 0, 1_000, -1, 3)

    def interrupt(_: Any) -> None:
        raise KeyboardInterrupt

    interrupting.add_done_callback(interrupt)
    ran: list[Any] = []
    refs = [watched(outcome, index, ran) for index in range(1, 4)]
    outcome.succeed(0, -1)
    interrupted = False
    try:
        loop.run_forever()  # the batch's call runs first, and interrupts the loop
    except KeyboardInterrupt:  # not kept: its traceback holds run_callbacks_of's frame
        interrupted = True
    assert interrupted
    loop.close()  # the rescheduled call goes with the loop's ready queue
    del outcome, loop, interrupting
    assert collected(refs) == 3
    assert not ran


def test_records_waited_for_after_asyncio_run_cancelled_the_sender_are_collected() -> None:
    """A task's cleanup that waits, with a timeout, for records still buffered when asyncio.run cancels the tasks
    left (a last flush, then asyncio.wait) registers done callbacks after the sender's exit re-tracked the waiting
    handles: those handles went out of the collector's sight for good, keeping their batches and the closed event
    loop alive."""
    loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []
    producers: list[weakref.ref[Producer]] = []

    async def wait_for_buffered_records_on_cancel(bootstrap: str) -> None:
        producer = await started_producer(bootstrap)
        buffered = [await producer.enqueue("left-open", b"%d" % index) for index in range(20)]

        async def worker() -> None:
            try:
                await asyncio.sleep(3600)
            finally:  # cancelled by asyncio.run's end: give the buffered records a last chance
                with contextlib.suppress(KafkaTimeoutError):
                    await producer.flush(0.05)
                await asyncio.wait(buffered, timeout=0.05)

        asyncio.get_running_loop().create_task(worker())
        await asyncio.sleep(0)
        loops.append(weakref.ref(asyncio.get_running_loop()))
        producers.append(weakref.ref(producer))

    run_on_a_mock_cluster(wait_for_buffered_records_on_cancel)
    collected([])
    assert producers[0]() is None
    assert loops[0]() is None
