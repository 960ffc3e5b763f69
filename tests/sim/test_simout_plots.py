"""Figures for long traces: binned utilisation and queue length, the Gantt chart of a window."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_slurm.controller import report
from elastic_slurm.model import JobKind
from elastic_slurm.model.speedup import Linear
from elastic_slurm.simulator import SimJob, plots, run
from elastic_slurm.simulator.metrics import utilization_series


def _brute_mean(times: list[float], values: list[float], a: float, b: float) -> float:
    """Integrate the step function on a fine grid of the breakpoints inside [a, b]."""
    points = sorted({a, b, *(t for t in times if a < t < b)})
    area = 0.0
    for x, y in zip(points[:-1], points[1:], strict=True):
        v = 0.0
        for t, val in zip(times, values, strict=True):
            if t <= x:
                v = val
        area += v * (y - x)
    return area / (b - a)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 1000), st.floats(0, 1)), min_size=1, max_size=40),
    st.integers(1, 30),
)
def test_binned_means_are_exact_averages(steps: list[tuple[int, float]], bins: int) -> None:
    by_time = dict(sorted(steps))
    times = [float(t) for t in by_time]
    values = list(by_time.values())
    edges = [i * 1100.0 / bins for i in range(bins + 1)]
    got = plots.binned_means(times, values, edges)
    want = [_brute_mean(times, values, a, b) for a, b in zip(edges[:-1], edges[1:], strict=True)]
    assert got == pytest.approx(want, abs=1e-9)


def long_result():  # noqa: ANN201
    # 600 jobs over about 10 days on 4 nodes, one malleable job that is resized
    jobs = [
        SimJob(i, 1400.0 * i, 2000.0 + 37 * (i % 11), 1 + i % 3, walltime_s=3000)
        for i in range(1, 600)
    ]
    jobs[5] = SimJob(
        6, 7000.0, 9000.0, 2, kind=JobKind.MALLEABLE, nodes_min=1, nodes_max=4, speedup=Linear()
    )
    return run(jobs, "pending_first", nodes=4)


def test_queue_series_counts_waiting_jobs() -> None:
    r = run([SimJob(1, 0, 10, 2), SimJob(2, 0, 10, 2), SimJob(3, 5, 10, 2)], "fcfs", nodes=2)
    assert plots.queue_series(r) == ([0.0, 5.0, 10.0, 20.0], [1, 2, 1, 0])


def test_utilisation_of_a_long_run_is_binned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = long_result()
    assert r.records[-1].end_s > 3 * 86400
    seen: dict[str, int] = {}
    real = plots.binned_means

    def spy(times, values, edges):  # noqa: ANN001, ANN202
        seen["bins"] = len(edges) - 1
        return real(times, values, edges)

    monkeypatch.setattr(plots, "binned_means", spy)
    assert plots.plot_utilization(r, tmp_path / "u.png").stat().st_size > 1000
    assert seen["bins"] == plots.BINS
    # the bins' mean is the run's utilisation (the integral is exact)
    times, values = utilization_series(r.timeline, r.nodes)
    first, end = min(x.submit_s for x in r.records), max(times)
    edges = [first + i * (end - first) / 50 for i in range(51)]
    assert sum(real(times, values, edges)) / 50 == pytest.approx(r.metrics.utilization, rel=1e-9)


def test_gantt_of_a_window_uses_the_report_s_drawing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = long_result()
    calls = []
    real = report.draw_gantt

    def spy(ax, spans, events, **kw):  # noqa: ANN001, ANN003, ANN202
        calls.append((spans, events, kw))
        return real(ax, spans, events, **kw)

    monkeypatch.setattr(report, "draw_gantt", spy)
    out = plots.plot_gantt(r, tmp_path / "g.svg", window=(5000.0, 30000.0))
    assert out.read_text().lstrip().startswith("<?xml")
    ((spans, events, kw),) = calls
    assert kw["xlim"] == (5000.0, 30000.0)
    for s in spans:
        assert all(5000.0 <= iv.start_s <= iv.end_s <= 30000.0 for iv in s.intervals)
    malleable = next(s for s in spans if s.job_id == 6)
    assert malleable.kind == "malleable"
    assert {e.what for e in events if e.job_id == 6} <= {"expand", "shrink"}
    assert any(e.job_id == 6 for e in events)
    # default window: one day in the middle of a run longer than three days
    lo, hi = plots.default_window(r)
    assert hi - lo == 86400.0


def test_sim_spans_pending_then_each_size() -> None:
    job = SimJob(1, 0, 100, 2, kind=JobKind.MALLEABLE, nodes_min=1, nodes_max=4, speedup=Linear())
    r = run([SimJob(2, 0, 10, 2), job, SimJob(3, 1, 5, 4)], "pending_first", nodes=4)
    spans, events = plots.sim_spans(r)
    by_id = {s.job_id: s for s in spans}
    rec = {x.job_id: x for x in r.records}
    for job_id, s in by_id.items():
        assert s.end_s == rec[job_id].end_s
        running = sum(iv.nodes_held * iv.duration_s for iv in s.intervals)
        assert running == pytest.approx(rec[job_id].node_s)
        pending = [iv for iv in s.intervals if iv.state == "pending"]
        assert sum(iv.duration_s for iv in pending) == pytest.approx(rec[job_id].wait_s)
    assert len(events) == rec[1].expansions + rec[1].shrinks
