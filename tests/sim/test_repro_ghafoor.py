"""Ghafoor's Table 6.2 reproduction (quick mode) and the Downey-model generator behind it."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from elastic_slurm.errors import InvalidRequest
from elastic_slurm.model import JobKind
from elastic_slurm.model.speedup import DowneyHigh, DowneyLow, Linear, LinearResizeCost
from elastic_slurm.simulator import SimJob, run
from elastic_slurm.simulator.generators.downey import (
    DowneyModel,
    GhafoorMalleable,
    ghafoor_model,
    lina_synthetic,
)
from elastic_slurm.simulator.repro import ghafoor


def test_quick_reproduction_returns_checks_and_a_figure(tmp_path: Path) -> None:
    section = ghafoor.reproduce(tmp_path, quick=True)
    assert section.checks and all(c.ours and c.paper for c in section.checks)
    assert [f.name for f in section.figures] == ["ghafoor_table_6_2.png"]
    assert section.figures[0].stat().st_size > 10_000
    assert "| % malleable |" in section.markdown and "86,115" in section.markdown
    by_name = {c.what: c for c in section.checks}
    # The shape of the table holds even on 300 jobs: turnaround falls with malleable jobs.
    assert by_name["256 nodes: turnaround falls as malleable jobs are added"].agrees
    assert by_name["512 nodes: turnaround falls as malleable jobs are added"].agrees


# --- the generator ---------------------------------------------------------------------------


def test_downey_model_is_deterministic_and_within_its_ranges() -> None:
    model = DowneyModel(jobs=2000, nodes=256, size_range=(16, 128), load=0.8)
    a, b = model.generate(seed=3), model.generate(seed=3)
    assert a == b and a != model.generate(seed=4)
    sizes = [j.nodes_requested for j in a.jobs]
    runs = [j.runtime_s for j in a.jobs]
    assert min(sizes) >= 16 and max(sizes) <= 128
    assert 100 <= min(runs) and max(runs) <= 3600
    assert a.jobs[0].submit_s == 0.0
    assert all(x.submit_s <= y.submit_s for x, y in zip(a.jobs, a.jobs[1:], strict=False))
    # log-uniform: the median size is near the geometric mean sqrt(16 * 128) = 45
    assert 38 <= sorted(sizes)[1000] <= 53
    # the offered load: work / (machine * arrival span) is close to 0.8
    work = sum(j.nodes_requested * j.runtime_s for j in a.jobs)
    assert work / (256 * a.jobs[-1].submit_s) == pytest.approx(0.8, rel=0.1)


def test_downey_model_cumulative_work_and_speedups() -> None:
    # Downey's own reading: the range is the work (node-seconds); linear speedup divides it
    # by the size, so run time * size stays within the range.
    model = DowneyModel(
        jobs=200, nodes=64, size_range=(1, 64), runtime_range_s=(1000, 100_000),
        runtime_basis="cumulative", speedup="linear", load=0.5,
    )  # fmt: skip
    for job in model.generate(seed=1).jobs:
        assert isinstance(job.speedup, Linear)
        assert 999 <= job.runtime_s * job.nodes_requested <= 100_001
    downey = DowneyModel(jobs=200, nodes=64, size_range=(1, 64), speedup="downey", load=0.5)
    kinds = {type(j.speedup) for j in downey.generate(seed=1).jobs}
    assert kinds == {DowneyLow, DowneyHigh}


def test_downey_model_refuses_bad_parameters() -> None:
    with pytest.raises(InvalidRequest, match="size_range"):
        DowneyModel(size_range=(10, 5))
    with pytest.raises(InvalidRequest, match="load or the mean"):
        DowneyModel(load=None)
    with pytest.raises(InvalidRequest, match="exceeds the machine"):
        DowneyModel(nodes=8, size_range=(16, 128))


def test_the_papers_models() -> None:
    lina = lina_synthetic(jobs=500).generate(seed=17)
    assert lina.nodes == 10_000
    assert all(2 <= j.nodes_requested <= 4965 for j in lina.jobs)
    assert all(295 < j.runtime_s < 20_140 for j in lina.jobs)
    gh = ghafoor_model(jobs=100).generate(seed=1)
    assert gh.nodes == 256 and len(gh.jobs) == 100
    # one arrival every 20 s on average
    assert gh.jobs[-1].submit_s / 99 == pytest.approx(20.0, rel=0.35)


def test_ghafoor_conversion_spreads_malleable_jobs_evenly() -> None:
    jobs = [SimJob(i, float(i), 100.0, 16 if i != 7 else 200) for i in range(1, 11)]
    out = GhafoorMalleable(0.3).apply(jobs, random.Random(0), 256)
    # floor((i + 1) 0.3) > floor(i 0.3) for i = 3, 6, 9 (0-based): jobs 4, 7 and 10
    assert [j.job_id for j in out if j.kind is JobKind.MALLEABLE] == [4, 7, 10]
    job7 = out[6]
    # job 7 asked for 200 > 128: moved to 128, run time scaled to keep its work
    assert (job7.nodes_min, job7.nodes_requested, job7.nodes_max) == (2, 128, 128)
    assert job7.runtime_s * 128 == pytest.approx(100.0 * 200)
    assert job7.resize_cost == LinearResizeCost(per_node_s=0.002, fixed_s=0.0015)
    assert all(j.kind is JobKind.RIGID for j in out if j.job_id not in (4, 7, 10))
    assert len(GhafoorMalleable(0.5, placement="random").apply(jobs, random.Random(1), 256)) == 10
    every = GhafoorMalleable(1.0).apply(jobs, random.Random(0), 64)
    assert [j.nodes_max for j in every] == [64] * 10  # the range is clipped to the machine


def test_malleable_jobs_fill_the_machine_under_pending_first() -> None:
    # 120 jobs on 64 nodes, saturated: all rigid leaves nodes idle behind wide jobs; all
    # malleable (2-64) fills them.
    model = DowneyModel(jobs=120, nodes=64, size_range=(8, 32), mean_interarrival_s=5.0, load=None)
    workload = model.generate(seed=2)
    rigid = run(workload, "pending_first").metrics
    malleable = run(
        workload, "pending_first", conversion=GhafoorMalleable(1.0, flexibility=(2, 64))
    ).metrics
    assert rigid.utilization < 0.95 < malleable.utilization
    assert malleable.avg_turnaround_s < rigid.avg_turnaround_s
    assert math.isfinite(malleable.avg_turnaround_s)
