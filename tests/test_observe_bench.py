"""The observing-cost benchmark's arithmetic, without running it: a cost is the median of per-round ratios to the
same round's baseline, so a machine that speeds up and slows down between rounds does not move it."""

from __future__ import annotations

import pytest

from tests.benchmarks.observe_bench import MODES, report, summarise


def _data(off: list[float], factor: dict[str, float]) -> dict[str, object]:
    samples = {
        workload: {mode: [(cpu * factor[mode], cpu * factor[mode] * 2) for cpu in off] for mode in MODES}
        for workload in ("enqueue", "send_many")
    }
    return {"samples": samples, "rounds": len(off), "records": 100, "otel_records": 10}


def test_the_cost_is_paired_per_round_and_immune_to_drift() -> None:
    # The machine's speed swings by 2x between rounds; metrics always costs 2 % of its own round's baseline.
    drifting = [2.0, 4.0, 2.2, 3.9, 2.1, 4.2, 2.05]
    summary = summarise(_data(drifting, {"off": 1.0, "metrics": 1.02, "otel": 30.0}))
    for workload in ("enqueue", "send_many"):
        assert summary[workload]["metrics"]["cost"] == pytest.approx(0.02)
        assert summary[workload]["metrics"]["cost_q1"] == pytest.approx(0.02)
        assert summary[workload]["metrics"]["cost_q3"] == pytest.approx(0.02)
        assert summary[workload]["otel"]["cost"] == pytest.approx(29.0)
        assert summary[workload]["off"]["cost"] == 0
        assert summary[workload]["off"]["cpu_us"] == pytest.approx(2.2)  # the median, not the mean


def test_the_report_has_a_row_per_workload_and_mode() -> None:
    data = _data([2.0, 2.1, 1.9], {"off": 1.0, "metrics": 1.01, "otel": 20.0})
    data.update(
        started="now",
        python="3",
        machine="m",
        compiled=True,
        load_before=1.0,
        load_after=1.0,
        direct={
            "enqueue": {
                "observer_ns_per_record": 10,
                "observer_ns_per_call": 1000,
                "clock_ns": 500,
                "records_per_batch": 100,
                "cpu_us": 2.0,
            }
        },
    )
    text = report(data, summarise(data))
    assert text.count("| enqueue |") == 4 and text.count("| send_many |") == 3
    assert "+1.0 %" in text and "0.50 %" in text
