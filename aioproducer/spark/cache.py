"""Producers that outlive a Spark task: one event-loop thread per Python worker process and, on it, one producer per
distinct settings, lent to each task and kept between tasks (and micro-batches) until idle for a while, as Spark's
own sink keeps its JVM producers (CachedKafkaProducer). Knows nothing of Spark, Arrow or reports.

Lifetime rules:
- Everything is created lazily in the process that uses it; a forked child starts with an empty cache (the parent's
  loop thread does not exist there, and its sockets are not the child's to close).
- Every change to the cache happens on the loop thread, so a lease, a release and an idle eviction never race.
- A producer is closed when no task has used it for `idle_timeout_s`, when a task saw it fail in a way that may
  outlast the task (anything but an invalid record), and at interpreter exit. A Spark worker that ends through
  `os._exit` or SIGKILL closes nothing: its connections just drop. Nothing is lost then, because a task returns only
  once every record it sent is acknowledged or failed.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import gc
import logging
import os
import threading
from collections.abc import Coroutine, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from aioproducer import Producer
from aioproducer.models import TableReport
from aioproducer.spark._deps import EXTRA_HINT

try:
    import anyio
    from anyio.from_thread import BlockingPortal
except ImportError as exc:  # pragma: no cover - the spark extra brings anyio
    raise ImportError(f"{EXTRA_HINT} ({exc})") from exc

__all__ = [
    "REUSE_WORKER",
    "Lease",
    "LoopThread",
    "ProducerCache",
    "freeze_in_a_reused_worker",
    "freeze_long_lived_objects",
    "shared_cache",
]

log = logging.getLogger("aioproducer.spark")
T = TypeVar("T")
_CLOSE_TIMEOUT_S = 10.0  # how long closing a producer may flush at eviction or exit


class LoopThread:
    """An asyncio event loop in a daemon thread, reached from other threads through anyio's blocking portal (which
    hands coroutines over, returns their futures and cancels them), until `stop()`.

    The thread runs the portal itself, rather than through anyio's `start_blocking_portal` context manager: that one
    is a suspended generator, and a forked child that drops this object (see `_forget_after_fork`) would close it
    and wait forever for a portal thread the child does not have, before Spark's `exec` of its JVM ever ran.
    """

    def __init__(self, name: str = "aioproducer-spark") -> None:
        started: concurrent.futures.Future[BlockingPortal] = concurrent.futures.Future()
        self._thread = threading.Thread(target=_serve, args=(started,), name=name, daemon=True)
        self._thread.start()
        self._portal = started.result()
        self.loop: asyncio.AbstractEventLoop = self._portal.call(asyncio.get_running_loop)
        self._stopped = False

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coroutine` on the loop; its future can be waited for (or cancelled, which cancels the coroutine)
        from any thread."""
        return self._portal.start_task_soon(_run, coroutine)

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the loop and wait for its result."""
        return self.submit(coroutine).result()

    @property
    def stopped(self) -> bool:
        return self._stopped

    def stop(self) -> None:
        """Cancel whatever still runs on the loop, end it and join its thread; idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._portal.call(self._portal.stop, True)
        self._thread.join()


def _serve(started: concurrent.futures.Future[BlockingPortal]) -> None:
    """The loop thread: a portal open until stopped (anyio closes the loop after)."""

    async def portal() -> None:
        async with BlockingPortal() as opened:
            started.set_result(opened)
            await opened.sleep_until_stopped()

    try:
        anyio.run(portal, backend="asyncio")
    except BaseException as exc:  # the loop could not start: the constructor raises it
        if not started.done():
            started.set_exception(exc)
        else:
            raise


async def _run(coroutine: Coroutine[Any, Any, T]) -> T:
    return await coroutine


@dataclass(eq=False)
class _Entry:
    producer: Producer
    leases: int = 0
    cached: bool = True
    suspect: bool = False
    timer: asyncio.TimerHandle | None = None


class Lease:
    """A producer lent to one task. `send_table` runs on the cache's loop; set `suspect` when the producer failed in a
    way that may outlast the task, and it is closed instead of kept."""

    def __init__(self, entry: _Entry, loop_thread: LoopThread, created: bool) -> None:
        self.producer = entry.producer
        self.loop_thread = loop_thread
        self.created = created  # this lease started the producer
        self.suspect = False
        self._entry = entry

    def send_table(self, data: Any, **columns: Any) -> concurrent.futures.Future[TableReport]:
        """`Producer.send_table(data, **columns)` on the cache's loop."""
        return self.loop_thread.submit(self.producer.send_table(data, **columns))

    def connections_opened(self) -> int:
        """The producer's `connection-creation-total` so far (read on its loop, where the metrics change)."""
        return self.loop_thread.call(_connections_opened(self.producer))


async def _connections_opened(producer: Producer) -> int:
    return int(producer.metrics().producer["connection-creation-total"])


class ProducerCache:
    """Producers by settings (Java-named strings), on one loop thread. `created` and `closed` count producers."""

    def __init__(self) -> None:
        self.loop_thread = LoopThread()
        self._entries: dict[frozenset[tuple[str, str]], _Entry] = {}
        self._lock: asyncio.Lock | None = None  # created on the loop
        self.created = 0
        self.closed = 0

    @contextmanager
    def lease(self, config: Mapping[str, str], *, keep: bool, idle_timeout_s: float) -> Iterator[Lease]:
        """Lend the producer for `config` (creating and starting it when there is none) for the `with` block.

        With `keep` the producer stays for the next task until idle for `idle_timeout_s`; without, the block has a
        producer of its own, closed (flushed) when it ends.
        """
        lease = Lease(*self.loop_thread.call(self._acquire(config, keep)))
        try:
            yield lease
        finally:
            self.loop_thread.call(self._release(lease, idle_timeout_s))

    def size(self) -> int:
        """How many producers are cached (in use or idle)."""
        return self.loop_thread.call(self._size())

    async def _size(self) -> int:
        return len(self._entries)

    async def _acquire(self, config: Mapping[str, str], keep: bool) -> tuple[_Entry, LoopThread, bool]:
        if self._lock is None:
            self._lock = asyncio.Lock()
        key = frozenset(config.items())
        async with self._lock:  # one start per settings, however many tasks ask at once
            entry = self._entries.get(key) if keep else None
            created = entry is None
            if entry is None:
                producer = Producer(config=dict(config))
                await producer.start()
                self.created += 1
                entry = _Entry(producer, cached=keep)
                if keep:
                    self._entries[key] = entry
            entry.leases += 1
            if entry.timer is not None:
                entry.timer.cancel()
                entry.timer = None
            return entry, self.loop_thread, created

    async def _release(self, lease: Lease, idle_timeout_s: float) -> None:
        entry = lease._entry
        entry.leases -= 1
        if lease.suspect and not entry.suspect:
            entry.suspect = True
            self._forget(entry)  # the next task gets a fresh producer; this one closes once nobody uses it
        if entry.leases:
            return
        if entry.cached and not entry.suspect:
            entry.timer = asyncio.get_running_loop().call_later(idle_timeout_s, self._expire, entry)
            return
        await self._close(entry)

    def _expire(self, entry: _Entry) -> None:
        if entry.leases == 0 and entry.timer is not None:
            entry.timer = None
            self._forget(entry)
            asyncio.get_running_loop().create_task(self._close(entry))

    def _forget(self, entry: _Entry) -> None:
        for key, cached in list(self._entries.items()):
            if cached is entry:
                del self._entries[key]

    async def _close(self, entry: _Entry) -> None:
        try:
            await entry.producer.close(_CLOSE_TIMEOUT_S)
        except Exception:  # closing must not fail a task or the exit: the producer is gone either way
            log.warning("closing a cached producer failed", exc_info=True)
        self.closed += 1
        _thaw()  # the closed producer's cycles may be among the frozen objects: let the collector free them

    def close(self) -> None:
        """Close every cached producer (each flushing for at most 10 s), then stop the loop thread."""
        if self.loop_thread.stopped:
            return
        try:
            self.loop_thread.call(self._close_all())
        finally:
            self.loop_thread.stop()

    async def _close_all(self) -> None:
        entries = list(self._entries.values())
        self._entries.clear()
        for entry in entries:
            if entry.timer is not None:
                entry.timer.cancel()
        await asyncio.gather(*(self._close(entry) for entry in entries))


_shared: ProducerCache | None = None
_shared_lock = threading.Lock()
_frozen = False  # this module froze the collector's objects (and has not thawed them since)
_freeze_lock = threading.Lock()
# Set by PySpark's worker daemon in the Python workers it reuses (spark.python.worker.reuse).
REUSE_WORKER = "SPARK_REUSE_WORKER"


def freeze_long_lived_objects() -> None:
    """Move every object alive now out of the cyclic collector's reach (`gc.freeze`), once, after a task of a Python
    worker that Spark reuses and whose producer the cache keeps.

    PySpark's worker daemon runs a full `gc.collect()` after every task of a reused worker; every such collection
    walks every tracked object: pyspark's, pyarrow's and ours (modules, the loop thread, the cached producer), about
    100,000 objects and 45 ms of CPU per task, which a streaming query pays for each task of each micro-batch. Those
    objects live as long as the worker, so freezing them (what CPython's docs advise for long-lived pre-fork state)
    leaves the collections only the objects made since. When the cache closes a producer, `_thaw` puts the objects
    back, so that the closed producer's cycles can be freed; the next task freezes what is alive again.
    """
    global _frozen
    with _freeze_lock:  # the cache's loop thread thaws when it closes an idle producer
        if _frozen or gc.get_freeze_count():
            return  # frozen already, by us or by the process's own code: whoever froze it decides when to thaw
        gc.collect()  # no garbage frozen: only what is alive
        gc.freeze()
        _frozen = True


def freeze_in_a_reused_worker() -> None:
    """`freeze_long_lived_objects` in a Python worker that Spark reuses (its daemon sets SPARK_REUSE_WORKER there and
    collects after each use): the workers that build a streaming query's writer and commit its micro-batches, one
    use per micro-batch, hold aioproducer's modules as the task workers do. Anywhere else (the user's own driver
    process, a worker Spark does not reuse), nothing."""
    if os.environ.get(REUSE_WORKER):
        freeze_long_lived_objects()


def _thaw() -> None:
    global _frozen
    with _freeze_lock:
        if _frozen:
            _frozen = False
            gc.unfreeze()


def shared_cache() -> ProducerCache:
    """This process's cache, created on first use (again after `close()`) and closed at interpreter exit."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared.loop_thread.stopped:
            _shared = ProducerCache()
            atexit.register(_shared.close)
        return _shared


def _forget_after_fork() -> None:
    # The child has no loop thread; dropping the parent's objects (without closing: their sockets are shared with
    # the parent) gives it a fresh cache on first use. The atexit hook of the parent's cache is dropped with it.
    global _shared, _shared_lock, _frozen, _freeze_lock
    if _shared is not None:
        atexit.unregister(_shared.close)
    _shared = None
    _shared_lock = threading.Lock()
    _freeze_lock = threading.Lock()
    _frozen = False  # the child's own tasks decide (what the parent froze stays frozen in the child's copy)


os.register_at_fork(after_in_child=_forget_after_fork)
