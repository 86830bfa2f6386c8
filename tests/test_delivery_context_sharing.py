"""Done callbacks added without a context: each sees the contextvars exactly as they were when it was added, as with
asyncio's copy per callback, on both twins of the handle; and adding or running callbacks never compares the
variables' values (which may be anything: arrays, frames, objects whose == raises or lies)."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import numpy as np
import pytest

from aioproducer.deliveries import delivery as delivery_module
from aioproducer.deliveries.delivery import BatchOutcome, Delivery
from tests.twins import TWINS, use_twin


@pytest.fixture(autouse=True, params=TWINS)
def twin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    use_twin(monkeypatch, request.param)
    return request.param  # type: ignore[no-any-return]


def make_delivery(outcome: BatchOutcome, index: int) -> Delivery:
    return delivery_module.new_delivery(outcome, index, 1_000, -1, 3)


async def test_a_callback_sees_the_very_object_its_variable_held_at_add_time_not_an_equal_one() -> None:
    """The compiled handle shared one context snapshot among records whose variables were *equal* (==), not the
    same: a record added under `request = {"id": 1}` (a fresh dict) ran its callback with the previous record's
    equal dict, so a change made to its own dict since was not seen, and 1 became True."""
    request: contextvars.ContextVar[Any] = contextvars.ContextVar("request")
    outcome = BatchOutcome("t", 0, asyncio.get_running_loop())
    first, second, third = (make_delivery(outcome, i) for i in range(3))
    seen: list[Any] = []
    mine = {"id": 1}
    request.set({"id": 1})
    first.add_done_callback(lambda _: seen.append(request.get()))
    request.set(mine)
    second.add_done_callback(lambda _: seen.append(request.get()))
    request.set(True)
    third.add_done_callback(lambda _: seen.append(request.get()))
    mine["retries"] = 2  # the caller's own object, changed after adding: asyncio's callback sees the change
    outcome.succeed(0, -1)
    await asyncio.sleep(0)
    assert seen[1] is mine
    assert seen[2] is True


async def test_a_callback_that_sets_an_equal_value_does_not_hand_it_to_the_next_records_callback() -> None:
    """A callback that set its variable to a new, equal object (a fresh empty list) left the compiled handle's
    working copy in use for the next record, whose callback then saw that object instead of its own."""
    items: contextvars.ContextVar[list[int]] = contextvars.ContextVar("items")
    outcome = BatchOutcome("t", 0, asyncio.get_running_loop())
    first, second = make_delivery(outcome, 0), make_delivery(outcome, 1)
    original: list[int] = []
    items.set(original)
    seen: list[list[int]] = []

    def replace(_: Delivery) -> None:
        items.set([])

    first.add_done_callback(replace)
    second.add_done_callback(lambda _: seen.append(items.get()))
    outcome.succeed(0, -1)
    await asyncio.sleep(0)
    assert seen[0] is original


async def test_adding_a_callback_under_a_variable_whose_equality_raises_does_not_raise() -> None:
    """add_done_callback compared the current context with the batch's snapshot (`==` on every differing value):
    under a variable holding a numpy array, a fresh one per record, the second record's add_done_callback raised
    ValueError ("truth value of an array ... is ambiguous"), where asyncio.Future's never raises."""
    frame: contextvars.ContextVar[Any] = contextvars.ContextVar("frame")
    outcome = BatchOutcome("t", 0, asyncio.get_running_loop())
    seen: list[Any] = []
    arrays = [np.arange(3) + i for i in range(2)]
    for index, array in enumerate(arrays):
        frame.set(array)
        make_delivery(outcome, index).add_done_callback(lambda _: seen.append(frame.get()))
    outcome.succeed(0, -1)
    await asyncio.sleep(0)
    assert len(seen) == 2 and seen[0] is arrays[0] and seen[1] is arrays[1]


async def test_a_records_later_callbacks_run_after_its_first_one_set_an_array_variable() -> None:
    """run_callbacks_of compared the working copy of a shared snapshot with the snapshot after a record's first
    callback; when that callback had set a variable to a numpy array the comparison raised, outside the guard that
    reports a callback's error, and the record's later callbacks were dropped: a task awaiting the record (its
    wake-up is such a later callback, added with the task's context) waited forever, and cancelling it or
    asyncio.wait_for could not end the wait, the record being delivered."""
    frame: contextvars.ContextVar[Any] = contextvars.ContextVar("frame")
    frame.set(np.arange(3))
    outcome = BatchOutcome("t", 0, asyncio.get_running_loop())
    delivery = make_delivery(outcome, 0)
    woken: list[Delivery] = []
    delivery.add_done_callback(lambda _: frame.set(np.arange(4)))
    delivery.add_done_callback(woken.append, context=contextvars.copy_context())  # as a Task adds its wake-up
    outcome.succeed(7, -1)
    for _ in range(3):
        await asyncio.sleep(0)
    assert woken == [delivery]
