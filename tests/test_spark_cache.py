"""The per-process producer cache of `aioproducer.spark` without Spark: lending, keeping, idle eviction, suspect
producers, concurrent tasks, fork and exit; and `run_task` borrowing from it only where Spark reuses its workers.
Producers talk to the session's broker (real Kafka)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator

import pyarrow as pa  # type: ignore[import-untyped]
import pytest

from aioproducer.spark.cache import ProducerCache, shared_cache
from aioproducer.spark.task import TaskPlan, run_task
from aioproducer.testing import ConsumedRecord


@pytest.fixture
def cache() -> Iterator[ProducerCache]:
    running = ProducerCache()
    yield running
    running.close()


def wait_until(condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def test_a_kept_producer_is_lent_to_the_next_task_and_closed_once_idle(cache: ProducerCache, bootstrap: str) -> None:
    config = {"bootstrap.servers": bootstrap, "linger.ms": "1"}
    with cache.lease(config, keep=True, idle_timeout_s=60) as first:
        assert first.created
    with cache.lease(dict(config), keep=True, idle_timeout_s=0.2) as second:
        assert second.producer is first.producer and not second.created
    assert cache.created == 1
    # The last lease's idle timeout applies: 0.2 s after it ends, the producer is closed and forgotten.
    wait_until(lambda: cache.closed == 1)
    assert cache.size() == 0
    with cache.lease(config, keep=True, idle_timeout_s=60) as third:
        assert third.created and third.producer is not first.producer


def test_different_settings_get_different_producers_and_keep_false_closes_at_the_end(
    cache: ProducerCache, bootstrap: str
) -> None:
    acks_1 = {"bootstrap.servers": bootstrap, "acks": "1"}
    with (
        cache.lease({"bootstrap.servers": bootstrap}, keep=True, idle_timeout_s=60) as plain,
        cache.lease(acks_1, keep=True, idle_timeout_s=60) as other,
    ):
        assert other.producer is not plain.producer
    assert cache.size() == 2
    with cache.lease({"bootstrap.servers": bootstrap}, keep=False, idle_timeout_s=60) as own:
        assert own.created and own.producer is not plain.producer
        report = own.send_table(pa.table({"v": [b"v"]}), topic="cache-own", value="v", offsets=True).result(60)
    assert pa.array(report.offsets).to_pylist()[0] >= 0  # delivered before the lease ended, the producer closed after
    assert (cache.created, cache.closed, cache.size()) == (3, 1, 2)


def test_a_suspect_producer_is_closed_when_its_last_task_ends_and_never_lent_again(
    cache: ProducerCache, bootstrap: str
) -> None:
    config = {"bootstrap.servers": bootstrap}
    with cache.lease(config, keep=True, idle_timeout_s=60) as one, cache.lease(config, keep=True, idle_timeout_s=60):
        one.suspect = True
    wait_until(lambda: cache.closed == 1)
    with cache.lease(config, keep=True, idle_timeout_s=60) as fresh:
        assert fresh.created and fresh.producer is not one.producer


def test_tasks_asking_at_once_share_one_start(cache: ProducerCache, bootstrap: str) -> None:
    config = {"bootstrap.servers": bootstrap, "client.id": "concurrent"}
    producers: list[object] = []
    gate = threading.Barrier(4)

    def task() -> None:
        gate.wait()
        with cache.lease(config, keep=True, idle_timeout_s=60) as lease:
            producers.append(lease.producer)

    threads = [threading.Thread(target=task) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(producers) == 4 and len(set(map(id, producers))) == 1 and cache.created == 1


def test_close_flushes_and_stops_the_loop_thread(
    bootstrap: str, topic_factory: Callable[..., str], read_back_records: Callable[..., list[ConsumedRecord]]
) -> None:
    cache = ProducerCache()
    topic = topic_factory(1)
    with cache.lease({"bootstrap.servers": bootstrap, "linger.ms": "60000"}, keep=True, idle_timeout_s=60) as lease:
        # Buffered and lingering for a minute: close() must send it, not drop it.
        delivery = lease.loop_thread.call(lease.producer.enqueue(topic, b"lingering"))
    cache.close()
    assert delivery.done() and [r.value for r in read_back_records(topic)] == [b"lingering"]
    assert cache.loop_thread.loop.is_closed() and cache.closed == 1
    assert shared_cache() is not cache


def test_a_forked_child_starts_with_an_empty_cache_of_its_own() -> None:
    script = textwrap.dedent(
        """
        import os
        from aioproducer.spark.cache import shared_cache
        parent = shared_cache()
        pid = os.fork()
        if pid == 0:
            child = shared_cache()
            ok = child is not parent and child.loop_thread.call(child._size()) == 0
            os._exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        print("child exit", os.waitstatus_to_exitcode(status))
        parent.close()
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "child exit 0", done.stderr


def test_a_process_holding_the_cache_can_still_fork_and_exec() -> None:
    """The loop thread once lived in anyio's `start_blocking_portal` context manager, a suspended generator: a child
    forked with Python code before its exec (pyspark's launch_gateway, any preexec_fn) dropped the cache, closed the
    generator and waited forever for a portal thread it did not have, so Spark's JVM never started."""
    script = textwrap.dedent(
        """
        import gc, subprocess
        from aioproducer.spark.cache import shared_cache
        shared_cache()  # held only by the module, which a forked child forgets
        done = subprocess.run(["true"], preexec_fn=gc.collect, timeout=20)
        print("exec'd", done.returncode)
        shared_cache().close()
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.stdout.strip() == "exec'd 0", done.stderr


def test_run_task_keeps_its_producer_only_where_spark_reuses_workers(
    bootstrap: str,
    topic_factory: Callable[..., str],
    read_back_records: Callable[..., list[ConsumedRecord]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = topic_factory(2)
    batch = pa.RecordBatch.from_arrays([pa.array([b"a", b"b", b"c"])], ["value"])
    plan = TaskPlan({"bootstrap.servers": bootstrap, "client.id": "run-task-reuse"}, topic, chunk_rows=2)
    monkeypatch.delenv("SPARK_REUSE_WORKER", raising=False)
    assert [run_task([batch], plan).new_producer for _ in range(2)] == [True, True]

    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")
    reports = [run_task([batch], plan) for _ in range(3)]
    assert [r.new_producer for r in reports] == [True, False, False]
    # The started producer's connections are the first task's; the next tasks reuse them.
    assert reports[0].connections_opened >= 1 and [r.connections_opened for r in reports[1:]] == [0, 0]
    assert [r.delivered for r in reports] == [3, 3, 3]
    no_cache = TaskPlan(plan.producer_config, topic, chunk_rows=2, producer_cache=False)
    assert run_task([batch], no_cache).new_producer
    assert len(read_back_records(topic)) == 18
    shared_cache().close()


def lines_printed_in_a_worker_of_its_own(body: str, bootstrap: str, topic: str) -> list[str]:
    """Run `body` in a fresh process, as a Spark worker's tasks would (freezing is process-wide), after a prelude
    that gives it `batch` (three values), `plan` (a task on `topic`), `run_task` and `shared_cache`; return what it
    printed."""
    prelude = """
        import gc, os, sys
        import pyarrow as pa
        from aioproducer.spark.cache import shared_cache
        from aioproducer.spark.task import TaskPlan, run_task
        batch = pa.RecordBatch.from_arrays([pa.array([b"a", b"b", b"c"])], ["value"])
        plan = TaskPlan({"bootstrap.servers": sys.argv[1]}, sys.argv[2], chunk_rows=2)
        """
    script = textwrap.dedent(prelude) + textwrap.dedent(body)
    done = subprocess.run(
        [sys.executable, "-c", script, bootstrap, topic], capture_output=True, text=True, timeout=120, check=False
    )
    assert not done.returncode, done.stderr
    return done.stdout.splitlines()


def test_a_reused_worker_keeps_its_long_lived_objects_out_of_the_collection_after_each_task(
    bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    """PySpark's daemon runs a full gc.collect() after every task of a reused Python worker, and each one walked
    every object of pyspark, pyarrow and the cached producer (about 100,000 objects, 45 ms of CPU per task of each
    micro-batch). A task whose producer the cache keeps now freezes what is alive once; closing the producer thaws
    it, so that its cycles can be freed."""
    body = """
        os.environ.pop("SPARK_REUSE_WORKER", None)
        print("not reused", run_task([batch], plan).delivered, gc.get_freeze_count())
        os.environ["SPARK_REUSE_WORKER"] = "1"
        print("reused", run_task([batch], plan).delivered, gc.get_freeze_count() > 0)
        (entry,) = shared_cache()._entries.values()
        print("producer frozen", not any(o is entry.producer for o in gc.get_objects()))
        made_since = [object()]  # only the first task freezes: what later tasks make stays collectable
        print("next task", run_task([batch], plan).delivered, any(o is made_since for o in gc.get_objects()))
        shared_cache().close()
        print("closed", gc.get_freeze_count())
        """
    assert lines_printed_in_a_worker_of_its_own(body, bootstrap, topic_factory(1)) == [
        "not reused 3 0",
        "reused 3 True",
        "producer frozen True",
        "next task 3 True",
        "closed 0",
    ]


def test_a_worker_whose_own_code_froze_objects_is_left_as_it_froze_them(
    bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    """Freezing is process-wide: where the process's own code froze objects before (CPython's pre-fork advice), a
    task must neither freeze more nor thaw theirs when the cache closes its producer."""
    body = """
        gc.freeze()
        theirs = gc.get_freeze_count()
        os.environ["SPARK_REUSE_WORKER"] = "1"
        # Frozen objects that die leave the count: it may shrink, never grow (the task froze nothing of its own).
        print("task", run_task([batch], plan).delivered, 0 < gc.get_freeze_count() <= theirs)
        shared_cache().close()
        print("closed", 0 < gc.get_freeze_count() <= theirs)
        """
    assert lines_printed_in_a_worker_of_its_own(body, bootstrap, topic_factory(1)) == ["task 3 True", "closed True"]


def test_the_worker_that_builds_a_stream_writer_for_each_micro_batch_freezes_its_modules_once_reused(
    bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    """Spark builds a streaming query's writer again for every micro-batch in a Python worker it reuses, and its
    daemon collects after each use: that worker holds aioproducer's modules as a task's worker does, so it freezes
    them too once it is a reused worker (and a process Spark does not reuse freezes nothing)."""
    body = """
        from pyspark.sql.types import BinaryType, StructField, StructType
        from aioproducer.spark.datasource import KafkaDataSource
        source = KafkaDataSource({"kafka.bootstrap.servers": sys.argv[1], "topic": sys.argv[2]})
        schema = StructType([StructField("value", BinaryType())])
        os.environ.pop("SPARK_REUSE_WORKER", None)
        source.streamWriter(schema, False)
        print("not reused", gc.get_freeze_count())
        os.environ["SPARK_REUSE_WORKER"] = "1"
        source.streamWriter(schema, False)
        print("reused", gc.get_freeze_count() > 0)
        """
    assert lines_printed_in_a_worker_of_its_own(body, bootstrap, topic_factory(1)) == ["not reused 0", "reused True"]


def test_a_task_whose_producer_turned_suspect_freezes_nothing(bootstrap: str) -> None:
    """A task whose producer failed for a reason other than a bad record has it closed on release; the freeze that
    followed ran while the task's frame still held the lease, so the closed producer was frozen with everything
    else and stayed uncollectable until some later producer closed (maybe never in a steady worker)."""
    body = """
        plan = TaskPlan(
            {"bootstrap.servers": sys.argv[1], "max.block.ms": "300", "allow.auto.create.topics": "false"},
            "no-such-topic-" + os.urandom(4).hex(),
            chunk_rows=2,
        )
        os.environ["SPARK_REUSE_WORKER"] = "1"
        report = run_task([batch], plan)
        print("failed", report.failed, "frozen", gc.get_freeze_count())
        """
    assert lines_printed_in_a_worker_of_its_own(body, bootstrap, "unused") == ["failed 3 frozen 0"]
