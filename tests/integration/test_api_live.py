"""The Python API on the real cluster: submit, read the state, wait, resize, cancel, history.

What Slurm itself reports (``scontrol``, ``sacct``) is the reference, not the API's answers.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import elastic_slurm
from elastic_slurm import Job
from elastic_slurm.errors import InvalidRequest
from elastic_slurm.resources import example

from .helpers import all_idle, helpers_alive, job_state, scontrol_job, slurm_held, wait

pytestmark = pytest.mark.slurm


def test_a_malleable_job_is_resized_from_python_and_cancelled(local_cluster, shared_tmp):
    wait(all_idle, 60, "all nodes idle before the test")
    job = elastic_slurm.submit(
        program=[str(example("heat2d.py")), "--n", "256", "--iterations", "4000"]
        + ["--pace-s", "0.01"],
        kind="malleable",
        nodes="1-4",
        start_nodes=2,
        job_name="api-heat",
        output="heat-%j.out",
        grace_period_s=60,
        workdir=str(shared_tmp),
    )
    try:
        assert isinstance(job, Job)
        wait(lambda: job.state == "RUNNING", 30, "the job to start")
        assert job_state(job.job_id) == "RUNNING"  # Slurm agrees
        assert scontrol_job(job.job_id)["JobName"] == "api-heat"
        events = shared_tmp / ".elastic-slurm" / f"job-{job.job_id}" / "events.jsonl"
        wait(lambda: events.exists() and "launch" in events.read_text(), 60, "the application")
        grown = job.resize(4)
        assert len(grown.after) == 4 and len(slurm_held(job.job_id)) == 4
        shrunk = job.resize(1)
        assert len(shrunk.after) == 1
        assert slurm_held(job.job_id) == {scontrol_job(job.job_id)["BatchHost"]}
        shown = [(r.action, len(r.nodes), r.status) for r in job.history]
        assert shown == [("expand", 4, "done"), ("shrink", 1, "done")]
        assert all(r.seconds and r.seconds > 0 for r in job.history)
        with pytest.raises(InvalidRequest, match="already runs on 1 node"):
            job.resize(1)
        assert job.stdout == shared_tmp / f"heat-{job.job_id}.out"
        assert job.cancel()[0] == job.job_id
        assert job.wait(timeout=60) == "CANCELLED"
        assert job_state(job.job_id) == "CANCELLED" and job.done()
    finally:
        subprocess.run(["scancel", str(job.job_id)], check=False)
    wait(all_idle, 30, "nothing left allocated")
    assert helpers_alive(job.job_id) == []


def test_a_rigid_job_is_waited_for_and_found_again_by_id(local_cluster, shared_tmp: Path):
    wait(all_idle, 60, "all nodes idle before the test")
    job = elastic_slurm.submit(
        program="/bin/sh -c 'echo hello from $SLURM_JOB_ID'",
        nodes=2,
        time=2,
        workdir=str(shared_tmp),
    )
    try:
        assert job.wait(timeout=120, interval_s=0.2) == "COMPLETED"
        assert job_state(job.job_id) == "COMPLETED"
        assert job.stdout == shared_tmp / f"slurm-{job.job_id}.out"
        # a rigid program runs with its ranks (one per node here), as srun runs it
        assert job.stdout.read_text().split("\n")[:2] == [f"hello from {job.job_id}"] * 2
        again = Job.from_id(job.job_id)
        assert again.state == "COMPLETED" and again.workdir == shared_tmp
        assert again.stdout == job.stdout  # from scontrol's StdOut this time
        assert again.stderr == job.stdout
        assert again.history == []
    finally:
        subprocess.run(["scancel", str(job.job_id)], check=False)
    with pytest.raises(InvalidRequest, match="does not exist"):
        Job.from_id(99_999_999)


def test_a_moldable_job_starts_within_its_range_and_completes(local_cluster, shared_tmp: Path):
    wait(all_idle, 60, "all nodes idle before the test")
    job = elastic_slurm.submit(
        program="/bin/sleep 2", kind="moldable", nodes="1-3", time=2, workdir=str(shared_tmp)
    )
    try:
        wait(lambda: job.state != "PENDING", 60, "the job to start")
        assert 1 <= int(scontrol_job(job.job_id)["NumNodes"]) <= 3
        assert job.info().kind == "moldable"
        assert job.wait(timeout=120, interval_s=0.2) == "COMPLETED"
    finally:
        subprocess.run(["scancel", str(job.job_id)], check=False)
