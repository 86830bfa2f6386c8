"""When `enqueue` and `send_many` let the event loop run: `Appender.yield_due`, on both twins.

The rule: never before YIELD_AFTER_BYTES buffered since the last yield; from there once YIELD_AFTER_S have passed as
well, the clock being read again only after another YIELD_AFTER_BYTES; always at YIELD_AFTER_BYTES_MAX.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from aioproducer.accelerated import compiled_twin
from aioproducer.append import appender
from aioproducer.append.appender import YIELD_AFTER_BYTES, YIELD_AFTER_BYTES_MAX, YIELD_AFTER_S
from aioproducer.buffer.accumulator import RecordAccumulator
from aioproducer.deliveries.delivery import BatchOutcome
from aioproducer.network.metadata import MetadataState
from aioproducer.partitioner import DefaultPartitioner
from aioproducer.records.compression import CompressionType
from aioproducer.serializers import resolve_serializer

_compiled = compiled_twin("aioproducer.append._appender")
TWINS = [pytest.param(appender.PureAppender, id="pure")]
if _compiled is not None:
    TWINS.append(pytest.param(_compiled.Appender, id="compiled"))


@pytest.fixture(params=TWINS)
def subject(request: pytest.FixtureRequest) -> Any:
    acc = RecordAccumulator(
        batch_size=16384,
        linger_ms=5,
        buffer_memory=1 << 20,
        compression=CompressionType.NONE,
        compression_level=None,
        new_outcome=lambda tp: BatchOutcome(tp[0], tp[1], None),
    )
    made = request.param(
        accumulator=acc,
        pool=acc.pool,
        cluster_state=MetadataState(max_age_ms=300_000, max_idle_ms=300_000, retry_backoff_ms=100),
        partitioner=DefaultPartitioner(16384),
        key_serializer=resolve_serializer("bytes", role="key"),
        value_serializer=resolve_serializer("bytes"),
        plain_bytes_keys=True,
        plain_bytes_values=True,
        max_record_bytes=1 << 20,
        size_limit_message="too large",
        clock_ms=lambda: 0,
        wake_sender=lambda: None,
    )
    made.yielded()
    return made


def after_the_interval() -> None:
    # A little past it, not twice it: an interval grown to twice its value must show as "not yet".
    time.sleep(YIELD_AFTER_S * 1.2)


def test_no_yield_is_due_below_yield_after_bytes_however_long_ago_the_last_was(subject: Any) -> None:
    after_the_interval()
    subject.unyielded_bytes = YIELD_AFTER_BYTES - 1
    assert not subject.yield_due()


def test_a_yield_is_due_once_the_bytes_and_the_interval_are_both_there(subject: Any) -> None:
    after_the_interval()
    subject.unyielded_bytes = YIELD_AFTER_BYTES
    assert subject.yield_due()
    assert subject.yield_due(), "a due yield stays due until the caller yields"


def test_yield_after_bytes_max_makes_a_yield_due_whatever_the_clock(subject: Any) -> None:
    subject.unyielded_bytes = YIELD_AFTER_BYTES_MAX
    assert subject.yield_due()


def test_a_yield_soon_after_the_last_waits_for_more_bytes_then_looks_at_the_clock_again(subject: Any) -> None:
    # The clock may pass the interval between yielded() and the check on a loaded machine: any of several tries
    # showing "not yet" shows the rule looks at the clock.
    for _ in range(50):
        subject.yielded()
        subject.unyielded_bytes = YIELD_AFTER_BYTES
        if not subject.yield_due():
            break
    else:
        pytest.fail("a yield right after the last one was due every time: the clock is not consulted")
    # The clock is not read again before another YIELD_AFTER_BYTES, however much time passes.
    after_the_interval()
    subject.unyielded_bytes = 2 * YIELD_AFTER_BYTES - 1
    assert not subject.yield_due()
    subject.unyielded_bytes = 2 * YIELD_AFTER_BYTES
    assert subject.yield_due()


def test_the_cap_holds_after_the_clock_said_not_yet(subject: Any) -> None:
    """A "not yet" just below YIELD_AFTER_BYTES_MAX set the next look another YIELD_AFTER_BYTES on, past the cap, so
    a caller could buffer up to the cap plus 64 KiB without yielding."""
    for _ in range(50):
        subject.yielded()
        subject.unyielded_bytes = YIELD_AFTER_BYTES_MAX - 1
        if not subject.yield_due():
            break
    else:
        pytest.fail("a yield right after the last one was due every time: the clock is not consulted")
    subject.unyielded_bytes = YIELD_AFTER_BYTES_MAX
    assert subject.yield_due()


def test_yielded_starts_the_count_again(subject: Any) -> None:
    subject.unyielded_bytes = YIELD_AFTER_BYTES_MAX
    assert subject.yield_due()
    subject.yielded()
    assert subject.unyielded_bytes == 0
    after_the_interval()
    assert not subject.yield_due()


def test_yielded_starts_the_interval_again(subject: Any) -> None:
    after_the_interval()
    # As above, any of several tries showing "not yet" right after yielded() shows it reset the clock.
    for _ in range(50):
        subject.yielded()
        subject.unyielded_bytes = YIELD_AFTER_BYTES
        if not subject.yield_due():
            return
    pytest.fail("a yield right after yielded() was due every time: yielded() leaves the interval's start behind")


def test_yielded_looks_at_the_clock_again_from_yield_after_bytes(subject: Any) -> None:
    for _ in range(50):
        subject.yielded()
        subject.unyielded_bytes = YIELD_AFTER_BYTES
        if not subject.yield_due():
            break  # the next look at the clock is now another YIELD_AFTER_BYTES on
    else:
        pytest.fail("a yield right after the last one was due every time: the clock is not consulted")
    subject.yielded()
    after_the_interval()
    subject.unyielded_bytes = YIELD_AFTER_BYTES
    assert subject.yield_due(), "yielded() kept the later look at the clock that a 'not yet' before it had set"
