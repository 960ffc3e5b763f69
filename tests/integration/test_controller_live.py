"""``elastic-slurm controller run`` against live Slurm."""

from __future__ import annotations

import signal
import subprocess
import sys
from datetime import timedelta

import pytest

from elastic_slurm import api
from elastic_slurm.controller.journal import Journal
from elastic_slurm.model import ElasticRequest, JobKind

from .helpers import all_idle, job_state, scontrol_nodes, wait

pytestmark = pytest.mark.slurm


def test_dry_run_decides_but_changes_nothing(slurm, shared_tmp):
    wait(all_idle, 60, "all nodes idle before the test")
    req = ElasticRequest(
        program=("/bin/sleep", "120"),
        kind=JobKind.MALLEABLE,
        nodes_min=1,
        nodes_max=3,
        walltime=timedelta(minutes=5),
        job_name="dry",
    )
    job = api.submit(req, slurm, workdir=shared_tmp, output=str(shared_tmp / "%j.out"))
    journal = shared_tmp / "journal.sqlite"
    proc = None
    try:
        wait(lambda: job_state(job) == "RUNNING", 30, "the job to start")
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "elastic_slurm",
                "controller",
                "run",
                "--dry-run",
                "--journal",
                str(journal),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

        def decided() -> list[dict]:
            if not journal.exists():
                return []
            recs = Journal(journal).records
            return [r for r in recs if r["kind"] == "decision" and r["job_id"] == job]

        (first, *_) = wait(decided, 30, "a decision about the job")
        assert first["decision"] == "Expand" and first["dry_run"] is True
        assert len(scontrol_nodes(job)) == 1  # nothing was done
        assert not (shared_tmp / ".elastic-slurm" / f"job-{job}" / "orders").exists()
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGINT)
            out, _ = proc.communicate(timeout=30)
            assert proc.returncode == 0, out
            assert "dry run" in out
        slurm.cancel(job)
