"""Many records' outcomes at once: the deliveries of one `send_many` or `enqueue_many` call (`Deliveries`, what
`enqueue_many` returns), and `Producer.wait`'s batch-by-batch wait over a list of them.

`send_many` and `wait` settle per batch, not per record (one wake-up per batch, as `Delivery` callbacks do), and
build each record's `RecordMetadata` or error as its batch settles, in slices, both through a `Deliveries`: its
batch outcomes' waiters count the batches down, and loop callbacks build the results. The compiled twin of
`BulkDeliveries` keeps each record as five integers in a C array.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Generator, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from aioproducer.accelerated import compiled_twin
from aioproducer.deliveries.delivery import BatchOutcome, Delivery, resolve
from aioproducer.models import RecordMetadata
from aioproducer.serializers import RecordSerializer

__all__ = ["BulkDeliveries", "Deliveries", "PureBulkDeliveries", "SettledWatch", "wait_all", "when_settled"]


class BulkDeliveries:
    """The deliveries of one `send_many` call (or of one `wait`), in record order; a record refused at the call
    holds its error instead."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: list[Any] = []

    def __len__(self) -> int:
        return len(self._items)

    def add(self, item: Any) -> None:
        """Append a record's Delivery, or the error it failed with at the call."""
        self._items.append(item)

    def add_waitables(self, items: Iterable[Any]) -> dict[int, Any]:
        """Append each item for `wait_all`: a Delivery not cancelled as a record; anything else (a cancelled
        Delivery, another awaitable) as a None placeholder, returned by position."""
        others: dict[int, Any] = {}
        for position, item in enumerate(items, len(self._items)):
            if isinstance(item, Delivery) and not item._cancelled:
                self._items.append(item)
            else:
                others[position] = item
                self._items.append(None)
        return others

    def is_delivery(self, position: int) -> bool:
        """Whether the record at `position` was buffered (holds a Delivery), rather than refused at the call."""
        if not 0 <= position < len(self._items):
            raise IndexError(position)
        return isinstance(self._items[position], Delivery)

    def outcomes(self, start: int = 0, stop: int | None = None) -> list[BatchOutcome]:
        """Each batch outcome the records `start` to `stop` (default: all) went to, once."""
        outcomes: dict[int, BatchOutcome] = {}
        for item in self._items[max(start, 0) : stop]:
            if isinstance(item, Delivery):
                outcomes.setdefault(id(item._outcome), item._outcome)
        return list(outcomes.values())

    def results(
        self,
        resolve: Callable[[BatchOutcome, int], tuple[BatchOutcome, int]],
        start: int = 0,
        stop: int | None = None,
    ) -> list[Any]:
        """Each record's RecordMetadata or error, in order, for records `start` to `stop` (default: all; every
        outcome they went to must be settled)."""
        results: list[Any] = []
        for item in self._items[max(start, 0) : stop]:
            results.append(_result_of(item, resolve))
        return results

    def fill_settled(
        self,
        resolve: Callable[[BatchOutcome, int], tuple[BatchOutcome, int]],
        results: list[Any],
        start: int,
        stop: int,
        unbuilt: object,
    ) -> int:
        """Put in `results` (one entry per record, `unbuilt` where a record's result is not built yet) the result of
        each record from `start` to `stop` whose entry is `unbuilt` and whose batch has settled. Returns the first of
        those positions whose entry is still `unbuilt` (`stop` when none): what can be built of a call's results
        while some of its batches are still out, in any order."""
        if len(results) != len(self._items):
            raise ValueError("fill_settled takes a list with one entry per record")
        stop = min(max(stop, 0), len(self._items))
        first_unbuilt = stop
        for position in range(max(start, 0), stop):
            if results[position] is not unbuilt:
                continue
            item = self._items[position]
            if isinstance(item, Delivery) and not resolve(item._outcome, item._index)[0].done:
                first_unbuilt = min(first_unbuilt, position)
            else:
                results[position] = _result_of(item, resolve)
        return first_unbuilt


def _result_of(item: Any, resolve: Callable[[BatchOutcome, int], tuple[BatchOutcome, int]]) -> Any:
    """A record's RecordMetadata or error once its batch settled; a record refused at the call is its error."""
    if not isinstance(item, Delivery):
        return item
    outcome, index = resolve(item._outcome, item._index)
    error = outcome.error
    return error if error is not None else outcome.metadata(index, item._timestamp_ms, item._key_size, item._value_size)


# The results are built this many at a time (~1-3 ms each), letting the loop run between slices.
_RESULTS_PER_SLICE = 20_000
# A result not built yet, in a Deliveries' list of them (no result is this object).
_UNBUILT = object()
# How many records, per record of a call, the builds made before its last batch settled may look at in all. Each
# looks from the first record still unbuilt: with that one's batch still out and the others settling one per loop
# turn, every build would look at the same records again, and the work would grow with the square of the call
# (a MockProducer completing 20 000 records one by one: 105 ms before the early builds, 18 s with them unbounded).
# Past the budget the results wait for the last batch, as they all did before.
_EARLY_LOOKS_PER_RECORD = 4


async def wait_all(items: Iterable[Any]) -> list[Any]:
    """Each item's outcome, in order: a record's `RecordMetadata` or the exception it failed with.

    Waits batch by batch (one wake-up per batch, however many of its records are listed) instead of once per
    record as `asyncio.gather` does.
    Anything that is not a pending-or-settled `Delivery` (a cancelled one, an asyncio future, a coroutine) is
    awaited through `asyncio.gather(..., return_exceptions=True)`, so its result or exception takes its place too.
    """
    bulk = BulkDeliveries()
    others = bulk.add_waitables(items)
    # The other awaitables start at once, as gather starts them (a coroutine runs while the records wait; one may be
    # what settles them), and a cancelled wait cancels them, as a cancelled gather does.
    gathered = asyncio.gather(*others.values(), return_exceptions=True) if others else None
    try:
        # The records' results as a Deliveries builds them (the others' places hold None for now). Awaited bare:
        # nobody else holds this Deliveries, so a cancelled wait cancels its future, and the results are not built.
        deliveries = Deliveries(bulk)
        # A cancelled wait's frame may outlive it, held by its exception's traceback (CPython 3.12 keeps the last
        # one): let it hold only the Deliveries, which lets go of the records' entries when cancelled.
        del bulk
        results = await deliveries._settled_future()
    except BaseException:
        if gathered is not None:
            gathered.cancel()
        raise
    if gathered is not None:
        settled = await gathered
        for position, result in zip(others, settled, strict=True):
            results[position] = result
    return results


class Deliveries:
    """The records of one `enqueue_many` call, in order: await it for one result per record, its `RecordMetadata`
    or the exception it failed with (never raised; a record refused at the call holds its error).

    Awaiting does not hurry sending (`linger_ms` applies, as to `enqueue`'s records; `flush` sends at once). It may
    be awaited more than once, and `len()` is the number of records. Cancelling an await cancels only the waiting.
    """

    __slots__ = (
        "_building_settled",
        "_built",
        "_bulk",
        "_count",
        "_early_budget",
        "_first_unbuilt",
        "_refused",
        "_results",
        "_watch",
    )

    def __init__(self, bulk: BulkDeliveries, refused: Mapping[int, BaseException] | None = None) -> None:
        self._bulk = bulk
        # The serializers' refusals by position in the call's list (those records are not in `bulk`).
        self._refused = refused
        self._count = len(bulk) + len(refused or ())
        # Settled by the batch outcomes' waiters and loop callbacks, never by a task: a shutdown handler that
        # cancels every task cannot cancel it (nor the record hooks' acknowledgement, which waits on it).
        self._results: asyncio.Future[list[Any]] | None = None
        self._watch: SettledWatch | None = None  # the batch outcomes watched for the results, until they are built
        # The results, one entry per record in `bulk`, built as their batches settle (`_UNBUILT` until then); none
        # before the first batch settles.
        self._built: list[Any] | None = None
        self._first_unbuilt = 0  # every entry before it is built
        self._building_settled = False  # a loop callback is due to build more of them
        self._early_budget = 0  # how many more records the builds before the last batch settles may look at

    def __len__(self) -> int:
        return self._count

    def __repr__(self) -> str:
        return f"<Deliveries of {self._count} records>"

    def __await__(self) -> Generator[Any, None, list[RecordMetadata | BaseException]]:
        return self._await().__await__()

    async def _await(self) -> list[RecordMetadata | BaseException]:
        # Shielded: a cancelled await leaves the results coming for the next one. A copy: each await's list is its own.
        return list(await asyncio.shield(self._settled_future()))

    def _settled_future(self) -> asyncio.Future[list[Any]]:
        """The one future of the results, set once every batch the records went to settled: the package's own
        (`send_many` and `wait_all` await it bare, as nobody else holds their Deliveries; the record hooks wait on
        it), never handed to a caller who could cancel it. Watching starts at the first call; once the results are
        built the records' handles are let go (a kept `Deliveries` holds only its list)."""
        results = self._results
        if results is None:
            results = self._results = asyncio.get_running_loop().create_future()
            results.add_done_callback(self._let_go_if_cancelled)
            self._early_budget = _EARLY_LOOKS_PER_RECORD * len(self._bulk)
            self._watch = when_settled(
                self._bulk.outcomes(), partial(self._all_settled, results), partial(self._some_settled, results)
            )
        return results

    def _let_go_if_cancelled(self, results: asyncio.Future[list[Any]]) -> None:
        # Cancelled by its only waiter (a send_many or wait cancelled): the results will never be built, so the
        # records' entries go now rather than when their batches settle (a caller retrying a wait with a timeout
        # while the broker is away would otherwise keep one copy per attempt).
        if results.cancelled():
            self._bulk, self._refused, self._built = BulkDeliveries(), None, None
            if self._watch is not None:  # nor do its waiters stay on every batch still pending
                self._watch.cancel()
        self._watch = None

    def _some_settled(self, results: asyncio.Future[list[Any]]) -> None:
        # Some of the batches settled, not all: their records' results are built now, while the loop mostly waits
        # for the last answers. A send_many call of 10 k records sends its largest request last, and building all
        # its results only once that was answered took 0.7 ms more, with the broker idle meanwhile. At most one
        # callback is due at a time; it builds what has settled by the time it runs, within the early budget.
        if not self._building_settled and self._early_budget > 0:
            loop = results.get_loop()
            if not loop.is_closed():
                self._building_settled = True
                loop.call_soon(self._build_settled, results)

    def _build_settled(self, results: asyncio.Future[list[Any]]) -> None:
        self._building_settled = False
        if not results.done():  # not cancelled by send_many's caller, nor built already
            start = self._first_unbuilt
            self._build_slice()
            self._early_budget -= min(_RESULTS_PER_SLICE, len(self._bulk) - start)

    def _build_slice(self) -> list[Any]:
        """Build the results of the records whose batches have settled, in the next `_RESULTS_PER_SLICE` records
        from the first one still unbuilt (later ones wait for the next slice: a loop callback holds the loop a few
        ms at most). Returns the list of results."""
        bulk, built = self._bulk, self._built
        if built is None:
            built = self._built = [_UNBUILT] * len(bulk)
        start = self._first_unbuilt
        self._first_unbuilt = bulk.fill_settled(resolve, built, start, start + _RESULTS_PER_SLICE, _UNBUILT)
        return built

    def _all_settled(self, results: asyncio.Future[list[Any]]) -> None:
        # Built from a loop callback rather than inside the settling that called this (the sender's, or a
        # MockProducer completed from outside the loop): on the loop of the future it sets. That loop may have
        # closed since (a test's): nobody can await the future any more, so nothing is built.
        loop = results.get_loop()
        if not loop.is_closed():
            loop.call_soon(self._build_results, results)

    def _build_results(self, future: asyncio.Future[list[Any]]) -> None:
        # Every batch has settled: the results not built yet are, a slice per loop callback, so that a caller
        # waiting for a million records holds the loop a few ms at a time, not for the whole list.
        if future.done():  # cancelled by send_many's caller: nobody is waiting
            return
        results = self._build_slice()
        if self._first_unbuilt < len(self._bulk):
            future.get_loop().call_soon(self._build_results, future)
            return
        refused = self._refused
        # The records' entries are let go: a kept Deliveries holds only its results.
        self._bulk, self._refused, self._built = BulkDeliveries(), None, None
        future.set_result(RecordSerializer.merge(results, refused) if refused else results)


def when_settled(
    outcomes: Iterable[BatchOutcome], settled: Callable[[], object], progress: Callable[[], object] | None = None
) -> SettledWatch:
    """Call `settled` once every outcome given is settled (each half of one that was split): from the last one's
    settling, or at once when all are; `progress` (if given) each time one settles before the last. Through
    the outcomes' waiters, so no task is kept that could be cancelled; `cancel()` on the watch returned takes them
    off the outcomes still pending."""
    return SettledWatch(outcomes, settled, progress)


class SettledWatch:
    """Counts a set of batch outcomes down to `settled` (see `when_settled`)."""

    __slots__ = ("_pending", "_progress", "_settled", "_waiters")

    def __init__(
        self,
        outcomes: Iterable[BatchOutcome],
        settled: Callable[[], object],
        progress: Callable[[], object] | None = None,
    ) -> None:
        self._settled: Callable[[], object] | None = settled
        self._progress = progress
        self._waiters: list[partial[None]] = []  # each holds the outcome it waits on: `waiter.args[0]`
        self._pending = 1  # held until every outcome is watched, so none settling meanwhile calls `settled` early
        for outcome in outcomes:
            self._watch(outcome)
        self._outcome_settled(None)

    def _watch(self, outcome: BatchOutcome) -> None:
        if outcome.done:
            return
        if outcome.first is not None and outcome.second is not None:  # split (MESSAGE_TOO_LARGE): watch both halves
            self._watch(outcome.first)
            self._watch(outcome.second)
            return
        self._pending += 1
        waiter = partial(self._outcome_settled, outcome)
        self._waiters.append(waiter)
        outcome.add_waiter(waiter)

    def cancel(self) -> None:
        """`settled` will not be called: the waiters left on outcomes still pending go (a wait retried while the
        broker is away would otherwise leave one per batch per attempt until the batches settle)."""
        self._settled = self._progress = None
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.args[0].remove_waiter(waiter)

    def _outcome_settled(self, outcome: BatchOutcome | None) -> None:
        if outcome is not None:
            self._watch(outcome)  # a split outcome is not settled: its halves are watched now
        self._pending -= 1
        if self._pending == 0:
            settled, self._settled, self._waiters, self._progress = self._settled, None, [], None
            if settled is not None:
                settled()
        elif outcome is not None and outcome.done and self._progress is not None:
            self._progress()


# The compiled twin, when built (see aioproducer.accelerated): each record as five integers in one C array rather
# than an object per record, which the cyclic collector would walk again and again while a call runs.
PureBulkDeliveries = BulkDeliveries
_twin = compiled_twin("aioproducer.deliveries._bulk")
if not TYPE_CHECKING and _twin is not None:
    BulkDeliveries = _twin.BulkDeliveries
