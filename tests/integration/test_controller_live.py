"""``elastic-slurm controller run`` against live Slurm."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
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
            try:  # read-only: the controller's writes never wait for this poll
                recs = Journal(journal, readonly=True).records
            except sqlite3.OperationalError:  # not there yet, or its tables not yet
                return []
            return [r for r in recs if r["kind"] == "decision" and r["job_id"] == job]

        (first, *_) = wait(decided, 30, "a decision about the job")
        assert first["decision"] == "Expand" and first["dry_run"] is True
        assert len(scontrol_nodes(job)) == 1  # nothing was done
        assert not (shared_tmp / ".elastic-slurm" / f"job-{job}" / "orders").exists()
    finally:
        try:
            if proc is not None:
                proc.send_signal(signal.SIGINT)
                out, _ = proc.communicate(timeout=30)
                assert proc.returncode == 0, out
                assert "dry run" in out
        finally:
            slurm.cancel(job)  # even when the controller's exit failed: no node stays taken


def test_a_size_set_by_hand_is_journaled_and_kept(slurm, shared_tmp):
    """A grow made outside the controller is journaled ``by: user``, and not followed up."""
    wait(all_idle, 60, "all nodes idle before the test")
    req = ElasticRequest(
        program=("/bin/sleep", "120"),
        kind=JobKind.MALLEABLE,
        nodes_min=1,
        nodes_max=4,
        nodes_start=1,
        walltime=timedelta(minutes=5),
        job_name="byhand",
    )
    job = api.submit(req, slurm, workdir=shared_tmp, output=str(shared_tmp / "%j.out"))
    journal = shared_tmp / "journal.sqlite"
    proc = None

    def expands() -> list[dict]:
        if not journal.exists():
            return []
        recs = Journal(journal, readonly=True).records
        return [
            r
            for r in recs
            if r["kind"] == "decision" and r["job_id"] == job and r["decision"] == "Expand"
        ]

    def by_user() -> list:
        if not journal.exists():
            return []
        rows = Journal(journal, readonly=True).resizes()
        return [r for r in rows if r.job_id == job and getattr(r, "by", "") == "user"]

    try:
        wait(lambda: job_state(job) == "RUNNING", 30, "the job to start")
        # a dry run: the policy's wishes are journaled, nothing is done, so the only size
        # change is the one made by hand below
        proc = subprocess.Popen(
            [sys.executable, "-m", "elastic_slurm", "controller", "run", "--dry-run"]
            + ["--journal", str(journal)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        wait(expands, 30, "the policy to want to grow the job")
        before = scontrol_nodes(job)
        grown = slurm.grow(job, 1, path="merge")  # what `elastic-slurm resize` does first
        (row,) = wait(by_user, 30, "the grow to be journaled as the user's")
        assert (row.action, row.outcome, row.before, set(row.target)) == (
            "expand",
            "observed",
            before,
            set(grown.nodes),
        )
        seen = len(expands())
        time.sleep(3.0)  # several cycles: the policy still wants idle nodes used
        assert len(expands()) == seen, "the policy went on deciding for a job held by hand"
        assert len(scontrol_nodes(job)) == 2
    finally:
        try:
            if proc is not None:
                proc.send_signal(signal.SIGTERM)
                out, _ = proc.communicate(timeout=30)
                assert proc.returncode == 0, out
        finally:
            slurm.cancel(job)  # even when the controller's exit failed: no node stays taken
