"""A 2-D process-grid array (ScaLAPACK-style blocks) through real resizes on the cluster.

``examples/jacobi2d_grid.py`` registers its grid with ``dist=Block2D()``; the test plays the
controller's part (grow through Slurm, order; order a shrink, shrink in Slurm), so the array
moves 2x1 -> 2x2 -> 1x2 grids through the restart path, and the result must equal the serial run
bitwise.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta
from pathlib import Path

import pytest

from elastic_slurm import api
from elastic_slurm.model import ElasticRequest, JobKind
from elastic_slurm.model.resize_order import AckStatus, ResizeAction, ResizeOrder
from elastic_slurm.protocol.jobdir import JobDir
from elastic_slurm.resources import example

from .helpers import all_idle, job_state, scontrol_nodes, slurm_held, wait

pytestmark = pytest.mark.slurm


def test_a_block2d_array_grows_and_shrinks_exactly(slurm, shared_tmp: Path) -> None:
    wait(all_idle, 60, "all nodes idle before the test")
    req = ElasticRequest(
        program=(
            str(example("jacobi2d_grid.py")),
            *("--n", "128", "--iterations", "1500", "--pace-s", "0.01", "--check"),
        ),
        kind=JobKind.MALLEABLE,
        nodes_min=1,
        nodes_max=4,
        nodes_start=2,
        walltime=timedelta(minutes=10),
        job_name="grid-test",
    )
    job = api.submit(req, slurm, workdir=shared_tmp, output=str(shared_tmp / "grid-%j.out"))
    jobdir = JobDir.for_job(shared_tmp, job)
    try:
        wait(lambda: job_state(job) == "RUNNING", 30, f"job {job} to start")
        wait(lambda: any(e["event"] == "launch" for e in jobdir.events()), 30, "the launch")
        start_nodes = scontrol_nodes(job)
        grown = slurm.grow(job, 2, grant_timeout_s=20)
        jobdir.write_order(ResizeOrder(1, ResizeAction.EXPAND, tuple(grown.nodes), time.time()))
        ack = wait(lambda: jobdir.final_ack(1), 90, "the grow to be done")
        assert ack.status is AckStatus.DONE and ack.ranks == 4, ack
        keep = start_nodes[:1]
        jobdir.write_order(ResizeOrder(2, ResizeAction.SHRINK, tuple(keep), time.time()))
        wait(lambda: jobdir.read_ack(2, AckStatus.VACATED), 90, "the job to vacate")
        slurm.shrink(job, keep)
        assert slurm_held(job) == set(keep)
        ack = wait(lambda: jobdir.final_ack(2), 90, "the shrink to be done")
        assert ack.status is AckStatus.DONE and ack.ranks == 1, ack
        wait(lambda: job_state(job) == "COMPLETED", 240, "the job to complete")
    finally:
        slurm.cancel_job(job)
    out = (shared_tmp / f"grid-{job}.out").read_text()
    summary = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
    assert summary["resizes"] == 2 and summary["ranks"] == 1
    assert summary["matches_serial"] is True and summary["max_abs_error"] == 0.0, summary
    wait(all_idle, 30, "all nodes idle")
