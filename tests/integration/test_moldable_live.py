"""A moldable job sized by the controller, end to end on the real cluster (Huang et al.).

``elastic-slurm submit --sized-by controller`` queues the job held; a real
:class:`~elastic_slurm.controller.daemon.Controller` running ``huang_moldable`` chooses its size
from its speedup model, fixes it in Slurm and releases it; Slurm starts it at exactly that size
(``scontrol``, ``sacct``), where on its own it would have taken every idle node. Held jobs that
are not the controller's to release (a user's hold, an operator's hold) stay held although the
policy wants them started.
"""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import timedelta

import pytest

from elastic_slurm import api
from elastic_slurm.controller.daemon import Controller
from elastic_slurm.model import ElasticRequest, JobKind
from elastic_slurm.plugins.registry import make_policy

from .helpers import (
    all_idle,
    job_state,
    sacct_sizes,
    scontrol_job,
    scontrol_nodes,
    squeue_jobs,
    wait,
)

pytestmark = pytest.mark.slurm

#: Downey's low-variance model with average parallelism 2 gains nothing beyond 2A - 1 = 3 nodes
SPEEDUP = "downey:2:0.1"


def _submit_cli(*args: str, cwd) -> int:
    res = subprocess.run(
        [sys.executable, "-m", "elastic_slurm", "submit", "--parsable", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    return int(res.stdout.strip())


def test_controller_sizes_and_releases_only_its_own_held_jobs(slurm, shared_tmp):
    wait(all_idle, 60, "all nodes idle before the test")
    wait(lambda: not squeue_jobs(), 30, "an empty queue (the policy sees every pending job)")
    ours = _submit_cli(
        "--kind", "moldable", "--nodes", "1-4", "--speedup", SPEEDUP, "--sized-by", "controller",
        "-J", "ours", "-t", "5", "-o", "/dev/null", "--", "/bin/sleep", "60",
        cwd=shared_tmp,
    )  # fmt: skip
    # marked for the controller, but then held by an operator: never the controller's to release
    admin = _submit_cli(
        "--kind", "moldable", "--nodes", "1-4", "--speedup", SPEEDUP, "--sized-by", "controller",
        "-J", "admin", "-t", "5", "-o", "/dev/null", "--", "/bin/sleep", "60",
        cwd=shared_tmp,
    )  # fmt: skip
    subprocess.run(["scontrol", "hold", str(admin)], check=True)
    # held by its user at submission, not marked: the user releases it, nobody else
    users = api.submit(
        ElasticRequest(
            program=("/bin/sleep", "60"),
            kind=JobKind.MOLDABLE,
            nodes_min=1,
            nodes_max=2,
            walltime=timedelta(minutes=5),
            job_name="users",
        ),
        slurm,
        workdir=shared_tmp,
        output="/dev/null",
        hold=True,
    )
    jobs = (ours, admin, users)
    controller = Controller(slurm, make_policy("huang_moldable"), poll_interval_s=0.3)

    def run_until(check, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            controller.step()
            if check():
                return
            time.sleep(0.3)
        raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")

    try:
        assert [scontrol_job(j)["Reason"] for j in jobs] == [
            "JobHeldUser",
            "JobHeldAdmin",
            "JobHeldUser",
        ]
        assert scontrol_job(ours)["Comment"].endswith(f";speedup={SPEEDUP};sized=controller")
        assert job_state(ours) == "PENDING"

        run_until(lambda: job_state(ours) == "RUNNING", 40, "the controller-sized job to start")
        records = controller.journal.records
        starts = [r for r in records if r["kind"] == "decision" and r["job_id"] == ours]
        outcomes = [r for r in records if r["kind"] == "outcome" and r["job_id"] == ours]
        assert [r["ok"] for r in outcomes] == [True], outcomes
        chosen = outcomes[0]["count"]
        assert starts[-1]["count"] == chosen
        # Huang et al.'s improved policy: the two jobs held by their user or an operator are
        # not shown to it (they cannot start), so ours is alone on the 4 idle nodes and
        # capped at 3 by its speedup model; Slurm alone would have started it on all 4
        assert chosen == 3, records

        # what Slurm says: exactly the chosen size, in the job's record and in accounting
        fields = scontrol_job(ours)
        assert fields["NumNodes"] == str(chosen)
        assert len(scontrol_nodes(ours)) == chosen
        sizes = wait(  # slurmdbd learns of the start a moment later
            lambda: [(st, n) for st, n, _ in sacct_sizes(ours) if st != "PENDING"],
            20,
            "the job's accounting record of its start",
        )
        assert sizes == [("RUNNING", chosen)]

        # the other two stay held: no policy plans for them, the controller releases neither
        until = time.monotonic() + 4.0  # two of Slurm's scheduling passes, and more
        run_until(lambda: time.monotonic() >= until, 10, "a few more cycles")
        records = controller.journal.records
        for job, reason in ((admin, "JobHeldAdmin"), (users, "JobHeldUser")):
            fields = scontrol_job(job)
            assert (fields["JobState"], fields["Reason"]) == ("PENDING", reason), fields
            assert job not in {v.job_id for v in controller.last.snapshot.jobs}
            assert not [r for r in records if r.get("job_id") == job and r["kind"] != "sizes"]
        assert job_state(ours) == "RUNNING" and len(scontrol_nodes(ours)) == chosen
    finally:
        slurm.cancel(*jobs)
    wait(all_idle, 30, "nothing left allocated")
