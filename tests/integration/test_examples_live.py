"""The shipped examples on the real cluster: a sweep that keeps every task through resizes, and
an evolving application served by the controller."""

from __future__ import annotations

import json
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest

from elastic_slurm import api
from elastic_slurm.adapter.capabilities import cached_probe
from elastic_slurm.controller.daemon import Controller
from elastic_slurm.model import ElasticRequest, JobKind
from elastic_slurm.model.resize_order import AckStatus, ResizeAction, ResizeOrder
from elastic_slurm.plugins.registry import make_policy
from elastic_slurm.protocol.jobdir import JobDir
from elastic_slurm.resources import example

from .helpers import all_idle, job_state, sacct_sizes, scontrol_job, slurm_held, wait

pytestmark = pytest.mark.slurm


def _submit(slurm, tmp: Path, program, *, kind=JobKind.MALLEABLE, start=2, lo=1, hi=4):
    wait(all_idle, 60, "all nodes idle before the test")
    req = ElasticRequest(
        program=tuple(program),
        kind=kind,
        nodes_min=lo,
        nodes_max=hi,
        nodes_start=start,
        walltime=timedelta(minutes=10),
        job_name="example",
    )
    job = api.submit(req, slurm, workdir=tmp, output=str(tmp / "out-%j.txt"))
    jobdir = JobDir.for_job(tmp, job)
    wait(lambda: any(e["event"] == "launch" for e in jobdir.events()), 60, "the first launch")
    return job, jobdir


def _summary(tmp: Path, job: int) -> dict:
    text = (tmp / f"out-{job}.txt").read_text()
    return json.loads([line for line in text.splitlines() if line.startswith("{")][-1])


@pytest.mark.parametrize("start", [2, 1], ids=["restart", "spawn"])
def test_the_sweep_loses_no_task_and_does_none_twice_through_resizes(slurm, shared_tmp, start):
    program = [
        str(example("sweep_master_worker.py")),
        # long enough to still run when the shrink comes: the grow now overlaps computation
        # (~80 tasks/s at 4 ranks), so a short sweep can end before the second order
        "--tasks",
        "480",
        "--batch",
        "3",
        "--pace-s",
        "0.05",
    ]
    job, jobdir = _submit(slurm, shared_tmp, program, start=start)
    path = cached_probe(slurm.transport, "local", refresh=True).grow_path
    try:
        grown = slurm.grow(job, 4 - start, path=path, grant_timeout_s=20)
        jobdir.write_order(ResizeOrder(1, ResizeAction.EXPAND, grown.nodes, time.time()))
        ack = wait(lambda: jobdir.final_ack(1), 60, "the expansion")
        assert ack.status is AckStatus.DONE and ack.ranks == 4
        assert ack.strategy == ("spawn" if start == 1 else "restart")
        keep = [scontrol_job(job)["BatchHost"]]
        jobdir.write_order(ResizeOrder(2, ResizeAction.SHRINK, tuple(keep), time.time()))
        wait(lambda: jobdir.read_ack(2, AckStatus.VACATED), 60, "the job to vacate")
        slurm.shrink(job, keep)
        assert slurm_held(job) == set(keep)
        ack = wait(lambda: jobdir.final_ack(2), 60, "the shrink")
        assert ack.status is AckStatus.DONE and ack.ranks == 1
        wait(lambda: job_state(job) == "COMPLETED", 180, "the sweep to finish")
    finally:
        slurm.cancel_job(job)
    summary = _summary(shared_tmp, job)
    assert (summary["results"], summary["unique"]) == (480, 480)
    assert summary["lost"] == [] and summary["done_twice"] == []
    assert summary["generations"] == [0, 1, 2]  # tasks were done at 2 (or 1), 4 and 1 nodes
    assert len(summary["hosts"]) == 4 and summary["values_ok"] is True


def test_an_evolving_application_is_served_by_the_controller(slurm, shared_tmp):
    program = [
        str(example("amr_evolving.py")),
        "--steps",
        "150",
        "--coarsen-steps",
        "60",
        "--pace-s",
        "0.05",
        "--seed",
        "2",
        "--check",
    ]
    job, jobdir = _submit(slurm, shared_tmp, program, kind=JobKind.EVOLVING, start=1)
    path = cached_probe(slurm.transport, "local", refresh=True).grow_path
    controller = Controller(
        slurm,
        make_policy("pending_first"),
        poll_interval_s=0.3,
        min_resize_interval_s=1.0,
        grow_path=path,
    )
    closed = []  # the resizes the controller closed (it keeps only recent ones)
    try:
        deadline = time.monotonic() + 300
        while (
            job_state(job) in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")
            and time.monotonic() < deadline
        ):
            closed += controller.step().finished
            time.sleep(0.3)
        assert job_state(job) == "COMPLETED", (shared_tmp / f"out-{job}.txt").read_text()[-2000:]
    finally:
        slurm.cancel_job(job)
    summary = _summary(shared_tmp, job)
    assert summary["matches_reference"] is True and summary["requests"] >= 2
    answered = [r for r in jobdir.requests() if jobdir.answer_path(r["number"]).exists()]
    assert answered, "no evolving request was served"
    if path == "merge":  # it grew, as Slurm's accounting saw
        sizes = [nn for _s, nn, _nl in sacct_sizes(job)]
        assert max(sizes) > 1, sizes
    else:  # it grew with sibling allocations, jobs of their own in accounting
        out = subprocess.run(
            ["sacct", "-X", "-n", "-P", "-o", "JobName", "-S", "now-1hour"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert f"sibling:{job}" in out.split()
    outcomes = [o for o in closed if o.job_id == job]
    assert any(o.action == "expand" and o.ok for o in outcomes)
    wait(all_idle, 30, "nothing left allocated")
