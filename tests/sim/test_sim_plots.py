"""Figures: utilisation, job sizes, metric against elastic fraction."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic_slurm.model import JobKind
from elastic_slurm.model.speedup import Linear
from elastic_slurm.simulator import SimJob, run
from elastic_slurm.simulator.plots import (
    plot_job_sizes,
    plot_metric_vs_fraction,
    plot_utilization,
    sweep_fractions,
)

JOBS = [SimJob(i, 10.0 * i, 50.0 + i, 1 + i % 3, walltime_s=60.0 + i) for i in range(1, 13)]


def test_sweep_and_metric_plot(tmp_path: Path) -> None:
    points = sweep_fractions(
        JOBS, ["fcfs", "pending_first"], [0.0, 0.5, 1.0], nodes=4, metric="utilization"
    )
    assert sorted(points) == ["fcfs", "pending_first"]
    assert [f for f, _ in points["fcfs"]] == [0.0, 0.5, 1.0]
    assert all(0 < v <= 1 for pts in points.values() for _, v in pts)
    out = plot_metric_vs_fraction(
        points, tmp_path / "util.svg", metric="utilization", baseline=points["fcfs"][0][1]
    )
    assert out.read_text().lstrip().startswith("<?xml")


def test_utilization_and_sizes_plots(tmp_path: Path) -> None:
    malleable = SimJob(
        1,
        0,
        100,
        2,
        kind=JobKind.MALLEABLE,
        nodes_min=1,
        nodes_max=4,
        walltime_s=100,
        speedup=Linear(),
    )
    jobs = [malleable]
    result = run(jobs + JOBS[1:], "pending_first", nodes=4)
    assert result.metrics.expansions + result.metrics.shrinks > 0
    assert plot_utilization(result, tmp_path / "u.png").stat().st_size > 1000
    assert plot_job_sizes(result, tmp_path / "s.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="png or .svg"):
        plot_utilization(result, tmp_path / "u.pdf")
