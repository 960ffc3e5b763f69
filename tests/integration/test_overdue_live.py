"""A job that ignores a shrink order past its grace period is handled as the site config says.

The job is a malleable allocation running ``sleep`` (it never reaches a resize point, so it
never vacates anything). The controller's actuator orders it to shrink; after the job's
``--grace-period`` (3 s) it is kept, force-shrunk or requeued, per ``on_overdue``, and the
journal says which. Slurm itself (``squeue``) is checked.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from elastic_slurm import api
from elastic_slurm.controller.actuate import Actuator
from elastic_slurm.controller.journal import Journal
from elastic_slurm.model import ElasticRequest, JobKind
from elastic_slurm.model.decisions import Shrink

from .helpers import all_idle, job_state, scontrol_job, slurm_held, wait

pytestmark = pytest.mark.slurm


@pytest.mark.parametrize("on_overdue", ["requeue", "keep", "force"])
def test_a_job_that_ignores_a_shrink(slurm, shared_tmp, on_overdue):
    wait(all_idle, 60, "all nodes idle before the test")
    req = ElasticRequest(
        program=("/bin/sleep", "300"),
        kind=JobKind.MALLEABLE,
        nodes_min=1,
        nodes_max=2,
        nodes_start=2,
        walltime=timedelta(minutes=5),
        job_name="deaf",
        grace_period_s=3.0,
    )
    job = api.submit(req, slurm, workdir=shared_tmp, output=str(shared_tmp / "deaf-%j.out"))
    journal = Journal()
    actuator = Actuator(slurm, journal, resize_timeout_s=600.0, on_overdue=on_overdue)
    try:
        wait(lambda: job_state(job) == "RUNNING", 30, "the job to start")
        jobs = {j.job_id: j for j in slurm.jobs()}
        before = slurm_held(job)
        assert len(before) == 2
        t0 = time.monotonic()
        actuator.apply([Shrink(job, 1, "test")], jobs)
        assert job in actuator.in_flight
        finished = []
        while time.monotonic() - t0 < 20 and not finished:
            finished = actuator.poll({j.job_id: j for j in slurm.jobs()})
            if on_overdue == "keep" and actuator.in_flight[job].overdue:
                break
            time.sleep(0.5)
        waited = time.monotonic() - t0
        assert waited >= 3.0  # not before its grace period
        (late,) = [r for r in journal.records if r["kind"] == "overdue"]
        assert late["action"] == on_overdue and "after 3 s; " in late["message"]
        if on_overdue == "keep":
            assert not finished and actuator.in_flight[job].overdue
            assert slurm_held(job) == before and job_state(job) == "RUNNING"
        elif on_overdue == "force":
            (outcome,) = finished
            assert not outcome.ok and len(outcome.after) == 1
            batch_host = scontrol_job(job).get("BatchHost")
            assert set(outcome.after) == {batch_host}
            # Slurm ended what ran on the node taken back; the job's launcher may then fail
            assert slurm_held(job) <= {batch_host}
        else:
            (outcome,) = finished
            assert not outcome.ok and "requeueing" in outcome.message
            wait(lambda: job_state(job) in ("PENDING", "REQUEUED") or None, 30, "requeued")
        (row,) = journal.resizes()
        assert row.overdue and row.open == (on_overdue == "keep")
    finally:
        slurm.cancel_job(job)
    wait(all_idle, 30, "nothing left allocated")
