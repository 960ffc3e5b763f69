"""The controller killed with SIGKILL in the middle of a grow and of a shrink, then restarted.

Each trial runs the real daemon (``elastic-slurm controller run``) against a malleable heat2d
job and kills it when its journal shows a resize at a chosen phase, restarts it on the same
journal, and checks the end state against Slurm itself (``squeue``): the nodes Slurm gives the
job are the nodes the application says it runs on, no expander or sibling allocation is left
over, the journal has nothing open, and no order was followed twice.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from elastic_slurm import api
from elastic_slurm.config import load_site
from elastic_slurm.controller.journal import PHASES, Journal, ResizeRow
from elastic_slurm.model import ElasticRequest, JobKind
from elastic_slurm.model.resize_order import AckStatus
from elastic_slurm.protocol.address import controller_url
from elastic_slurm.protocol.jobdir import JobDir
from elastic_slurm.resources import example

from .helpers import all_idle, helpers_alive, job_state, slurm_held, squeue_jobs, wait

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]


def read(journal: Path) -> Journal:
    """The journal, read-only: a poll never holds a lock the controller's writes wait for."""
    return Journal(journal, readonly=True)


def start_controller(journal: Path, log: Path, site: Path | None = None) -> subprocess.Popen:
    argv = [sys.executable, "-m", "elastic_slurm", "controller", "run", "--journal", str(journal)]
    with open(log, "a") as fh:
        return subprocess.Popen(
            argv + (["--site", str(site)] if site is not None else []),
            stdout=fh,
            stderr=subprocess.STDOUT,
        )


def patient_site(where: Path) -> Path:
    """The local site, but a job is left alone for 15 s after it starts or resizes: time for a
    negotiating job to register (its offers go only to a registered job) on a loaded machine."""
    text = (ROOT / "site_configs" / "local.yaml").read_text()
    assert "min_resize_interval_s: 2 " in text
    path = where / "site-patient.yaml"
    path.write_text(text.replace("min_resize_interval_s: 2 ", "min_resize_interval_s: 15 "))
    return path


def kill_at(
    proc: subprocess.Popen,
    journal: Path,
    action: str,
    phase: str,
    also: Callable[[ResizeRow], bool] | None = None,
) -> ResizeRow:
    """SIGKILL ``proc`` as soon as an open ``action`` resize is at ``phase`` (or later) and,
    if given, ``also`` holds for it."""
    want = PHASES.index(phase)

    def caught() -> ResizeRow | None:
        try:  # read-only: the controller's writes never wait for this poll
            rows = read(journal).resizes(open_only=True)
        except sqlite3.OperationalError:  # not there yet, or its tables not yet
            return None
        rows = [r for r in rows if r.action == action]
        return next(
            (r for r in rows if PHASES.index(r.phase) >= want and (also is None or also(r))),
            None,
        )

    deadline = time.monotonic() + 90
    while (row := caught()) is None:
        assert proc.poll() is None, "the controller stopped by itself"
        assert time.monotonic() < deadline, f"no {action} reached {phase} within 90 s"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    return row


def handing_over(jobdir: JobDir) -> Callable[[ResizeRow], bool]:
    """Whether the next generation of the resize's order was started (it waits for the
    running one's hand-over) and the order is not yet done: the overlapped path's window."""

    def now(row: ResizeRow) -> bool:
        started = any(e.get("successor_of") == row.seq for e in jobdir.events())
        return started and jobdir.final_ack(row.seq) is None

    return now


def settled(journal: Path, jobdir: JobDir, job: int, size: int) -> bool:
    """Nothing open in the journal, the job's last order done, and ``size`` nodes held."""
    if read(journal).resizes(open_only=True):
        return False
    seq = jobdir.last_order_seq()
    ack = jobdir.final_ack(seq) if seq else None
    return ack is not None and ack.status is AckStatus.DONE and len(slurm_held(job)) == size


def consistent(journal: Path, jobdir: JobDir, job: int) -> set[str]:
    """Check the job against Slurm; return the nodes it runs on."""
    seq = jobdir.last_order_seq()
    ack = jobdir.final_ack(seq)
    assert ack is not None and ack.status is AckStatus.DONE
    held = slurm_held(job)
    assert held == set(ack.nodes), f"Slurm gives job {job} {held}, it runs on {ack.nodes}"
    for helper in helpers_alive(job):  # only siblings whose nodes the job uses
        (row,) = [r for r in squeue_jobs() if r[0] == helper]
        assert row[2] == "RUNNING" and row[1].startswith("sibling:"), row
    assert job_state(job) == "RUNNING"
    rows = read(journal).resizes()
    assert not [r for r in rows if r.open]
    done = [(r.job_id, r.seq) for r in rows if r.outcome == "done"]
    assert len(done) == len(set(done)), f"an order was carried out twice: {done}"
    for n in range(1, seq + 1):  # every order was followed exactly once, in turn
        assert jobdir.final_ack(n) is not None, f"order {n} has no final acknowledgement"
    return held


@pytest.mark.parametrize(
    ("grow_phase", "shrink_phase", "negotiates", "handover"),
    [
        ("granting", "awaiting_vacate", False, False),
        ("awaiting_done", "awaiting_done", False, False),
        ("awaiting_done", "awaiting_vacate", False, True),
        ("offered", "offered", True, False),
    ],
    ids=[
        "mid-grant+mid-vacate",
        "mid-expand+mid-relaunch",
        "mid-handover",
        "negotiating:mid-offer",
    ],
)
def test_a_killed_controller_resumes_consistent_with_slurm(
    slurm, shared_tmp, grow_phase, shrink_phase, negotiates, handover
):
    """``handover``: killed while the next generation waits to take over (the overlapped path:
    started on the new node set, the running generation not yet at its resize point)."""
    wait(all_idle, 60, "all nodes idle before the test")
    name = f"{grow_phase}-handover" if handover else grow_phase
    journal = shared_tmp / f"journal-{name}.sqlite"
    log = shared_tmp / f"controller-{name}.log"
    req = ElasticRequest(
        program=(str(example("heat2d.py")), "--n", "256", "--iterations", "100000"),
        kind=JobKind.MALLEABLE,
        nodes_min=1,
        nodes_max=4,
        nodes_start=2,
        walltime=timedelta(minutes=10),
        job_name="recover",
    )
    # a negotiating job talks to the daemon's HTTP server (which dies with it: the job's
    # messages then go to its directory, and the restarted daemon serves it again)
    url = controller_url(load_site()) if negotiates else None
    job = api.submit(
        req, slurm, workdir=shared_tmp, output=str(shared_tmp / "out-%j.txt"), controller=url
    )
    jobdir = JobDir.for_job(shared_tmp, job)
    rigid = None
    procs: list[subprocess.Popen] = []
    try:
        wait(lambda: any(e["event"] == "launch" for e in jobdir.events()), 60, "the launch")
        site = patient_site(shared_tmp) if negotiates else None
        # 1. killed during the expansion to the 2 idle nodes, restarted
        procs.append(start_controller(journal, log, site))
        only_then = handing_over(jobdir) if handover else None
        grow = kill_at(procs[-1], journal, "expand", grow_phase, only_then)
        # what the operator sees with the controller down: the resize it left open
        res = subprocess.run(
            [sys.executable, "-m", "elastic_slurm", "status", "--journal", str(journal), "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
        status = json.loads(res.stdout)
        left = read(journal).resizes(open_only=True)  # as the killed controller left it
        assert [(r["job_id"], r["seq"], r["phase"]) for r in status["resizes"]] == [
            (r.job_id, r.seq, r.phase) for r in left
        ]
        assert job in [j["job_id"] for j in status["jobs"]] and status["nodes"] == 4
        procs.append(start_controller(journal, log, site))
        wait(lambda: settled(journal, jobdir, job, 4), 120, "the job grown to 4 nodes")
        assert len(consistent(journal, jobdir, job)) == 4
        notes = [r for r in read(journal).records if r["kind"] == "recovery"]
        assert [n["seq"] for n in notes] == [grow.seq], notes
        # 2. a rigid job needs 2 nodes: the controller shrinks the malleable job; killed there
        needs_two = ElasticRequest(
            program=("/bin/sleep", "300"),
            kind=JobKind.RIGID,
            nodes_min=2,
            nodes_max=2,
            walltime=timedelta(minutes=10),
            job_name="rigid",
        )
        rigid = api.submit(needs_two, slurm, workdir=shared_tmp, output=str(shared_tmp / "r.out"))
        shrink = kill_at(procs[-1], journal, "shrink", shrink_phase, only_then)
        procs.append(start_controller(journal, log, site))
        wait(lambda: job_state(rigid) == "RUNNING", 120, "the rigid job to start")
        wait(lambda: settled(journal, jobdir, job, 2), 120, "the job shrunk to 2 nodes")
        kept = consistent(journal, jobdir, job)
        assert len(kept) == 2 and not kept & slurm_held(rigid)
        notes = [r for r in read(journal).records if r["kind"] == "recovery"]
        assert notes[-1]["seq"] == shrink.seq
        assert any(w in notes[-1]["message"] for w in ("following it", "awaiting the answer"))
        offers = [r for r in read(journal).records if r["kind"] == "offer"]
        if negotiates:  # both resizes were offered, and the job accepted each
            assert {o["action"] for o in offers} == {"expand", "shrink"}
            answers = [r["answer"] for r in read(journal).records if r["kind"] == "answer"]
            assert answers and set(answers) == {"accept"}
            assert jobdir.registration() is not None
        else:
            assert offers == []
        # the operator's report of the journal: every resize and recovery on the chart
        res = subprocess.run(
            [sys.executable, "-m", "elastic_slurm", "report", str(journal), "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
        report = json.loads(res.stdout)
        assert report["recoveries"] == len(notes) == 2 and report["resizes_done"] >= 2
        assert report["jobs"] == 2 and 0 < report["utilization"] <= 1
        assert Path(report["figure"]).stat().st_size > 10_000
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                proc.wait(timeout=30)
        slurm.cancel_job(job)
        if rigid is not None:
            slurm.cancel(rigid)
        print(log.read_text()[-4000:] if log.exists() else "")
    wait(all_idle, 60, "nothing left allocated")
