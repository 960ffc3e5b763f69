"""The example policy of ``docs/writing-policies.md`` works as the guide says.

The test runs the guide's own code block: on a hand-made snapshot, through the registry's
option checks, under ``legality.check``, and in the simulator.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest
from snapshots import job, snapshot

from elastic_slurm.errors import PolicyError
from elastic_slurm.model import Start, Trigger
from elastic_slurm.model.estimates import TRUE_RUNTIMES
from elastic_slurm.plugins.legality import check
from elastic_slurm.simulator import SimJob, run

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "writing-policies.md"


@pytest.fixture(scope="module")
def example() -> types.ModuleType:
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)
    (code,) = [b for b in blocks if "class ShortestFirst(Policy)" in b]
    module = types.ModuleType("guide_shortest_first")
    sys.modules[module.__name__] = module  # dataclasses resolve annotations through it
    try:
        exec(compile(code, str(GUIDE), "exec"), module.__dict__)
        yield module
    finally:
        del sys.modules[module.__name__]


def test_the_example_starts_the_shortest_jobs_that_fit(example):
    # 4 idle nodes; queued: job 1 (3 nodes, 100 s), job 2 (2 nodes, 10 s), job 3 (2 nodes,
    # 50 s). Shortest first: job 2 (2 left), then job 3 (0 left); job 1 waits.
    snap = snapshot(
        job(1, 3, walltime=100.0), job(2, 2, walltime=10.0), job(3, 2, walltime=50.0), idle=4
    )
    decisions = example.ShortestFirst().decide(snap, Trigger.periodic())
    assert decisions == [
        Start(2, 2, "shortest job first"),
        Start(3, 2, "shortest job first"),
    ]
    assert all(v.legal for v in check(snap, decisions))
    # the estimates come from the snapshot: with true run times job 3 is the shortest
    truth = snapshot(
        job(1, 3, walltime=100.0, runtime_s=1.0),
        job(2, 2, walltime=10.0),
        job(3, 2, walltime=50.0, runtime_s=5.0),
        idle=4,
        estimates=TRUE_RUNTIMES,
    )
    assert [d.job_id for d in example.ShortestFirst().decide(truth, Trigger.periodic())] == [1]


def test_the_example_options_and_metadata(example):
    policy = example.ShortestFirst.from_options({"max_starts": 1})
    snap = snapshot(job(1, 1, walltime=5.0), job(2, 1, walltime=1.0), idle=2)
    assert [d.job_id for d in policy.decide(snap, Trigger.periodic())] == [2]
    with pytest.raises(PolicyError, match="max_start"):
        example.ShortestFirst.from_options({"max_start": 1})
    described = example.ShortestFirst.describe()
    assert described["resizes"] is False
    assert described["options"] == {"max_starts": "default 0"}


def test_the_example_runs_in_the_simulator(example):
    jobs = [
        SimJob(job_id=i, submit_s=float(i), runtime_s=10.0 * (5 - i % 5), nodes_requested=1 + i % 3)
        for i in range(1, 41)
    ]
    result = run(jobs, example.ShortestFirst(), nodes=4)
    assert result.metrics.jobs == 40
    assert all(r.start_s >= r.submit_s for r in result.records)
