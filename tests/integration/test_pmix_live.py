"""PMIx on the real cluster: layouts, the ask-PMIx-first fallback, and jobs that survive.

* The layout read from PMIx equals the one computed from the environment, under
  ``srun --mpi=pmix`` (a 2-node step in a 3-node allocation: PMIx describes the step) and under
  the elastic launcher's ``mpirun``.
* An evolving application's requests (``request_nodes``) first go to
  ``PMIx_Allocation_request``; here it returns -47, recorded once for the job's lifetime, and
  the requests reach the job directory (the controller's path). Meanwhile that job and a rigid
  job whose ``srun --mpi=pmix`` step holds a PMIx connection are shrunk and grown, and both
  end with status 0.
* Where the probe finds a PMIx server that serves allocation requests, the native path is
  tested; here it is skipped with the probe's answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from elastic_slurm import api
from elastic_slurm.adapter.capabilities import _pmix, cached_probe
from elastic_slurm.adapter.transport.local import LocalTransport
from elastic_slurm.model import ElasticRequest, JobKind
from elastic_slurm.model.resize_order import AckStatus, ResizeAction, ResizeOrder
from elastic_slurm.protocol.jobdir import JobDir

from .helpers import all_idle, job_state, slurm_held, wait

pytestmark = pytest.mark.slurm

APP = r"""
import json, os, sys, time
from mpi4py import MPI
from elastic_slurm.mpi_runtime import init, layout, pmix

mode = sys.argv[1]
comm = MPI.COMM_WORLD
if mode == "layout":
    client, why = pmix.connect()
    rows = comm.gather({
        "pmix": layout.from_pmix(client).to_json() if client else None,
        "env": layout.from_env().to_json(),
        "same": bool(client) and layout.from_pmix(client).same_placement(layout.from_env()),
        "why": why,
    }, root=0)
    if comm.rank == 0:
        print("LAYOUT " + json.dumps(rows), flush=True)
elif mode == "alive":  # a plain step that keeps a PMIx connection through resizes
    lay = layout.current_layout()
    stop = sys.argv[2]
    while not os.path.exists(stop):
        time.sleep(0.1)
    print(f"ALIVE {lay.source} {lay.scope} {lay.size}", flush=True)
elif mode == "evolve":  # asks +1 in its first generation, -1 after its first restart
    ec = init()
    ec.state.setdefault("asked", 0)
    if ec.state["asked"] < 2 and (ec.state["asked"] == 0 or ec.resumed):
        ec.request_nodes(1 if ec.state["asked"] == 0 else -1)
        ec.state["asked"] += 1
    stop = sys.argv[2]
    while not os.path.exists(stop):
        ec.resize_point()
        time.sleep(0.05)
    print(f"EVOLVE done ranks={ec.size} generation={ec.generation}", flush=True)
"""


@pytest.fixture()
def app(shared_tmp: Path) -> Path:
    path = shared_tmp / "pmix_app.py"
    path.write_text(APP)
    return path


def _rows(out: str) -> list[dict]:
    (line,) = [ln for ln in out.splitlines() if ln.startswith("LAYOUT ")]
    return json.loads(line[len("LAYOUT ") :])


def _submit(slurm, tmp: Path, program, kind: JobKind, nodes: int, name: str) -> int:
    req = ElasticRequest(
        program=tuple(str(p) for p in program),
        kind=kind,
        nodes_min=1 if kind is not JobKind.RIGID else nodes,
        nodes_max=nodes if kind is JobKind.RIGID else 4,
        nodes_start=nodes if kind is not JobKind.RIGID else None,
        walltime=timedelta(minutes=5),
        job_name=name,
    )
    return api.submit(req, slurm, workdir=tmp, output=str(tmp / f"{name}-%j.out"))


def test_layouts_from_pmix_and_environment_agree_under_srun_and_mpirun(
    slurm, local_cluster, shared_tmp, app
):
    wait(all_idle, 60, "all nodes idle before the test")
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    step = ["srun", "--mpi=pmix", "-N2", "-n4", "--overcommit", sys.executable, str(app)]
    res = subprocess.run(
        ["salloc", "-N3", "-t", "2", *step, "layout"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    rows = _rows(res.stdout)
    assert len(rows) == 4 and all(r["same"] for r in rows), rows
    for rank, row in enumerate(rows):
        lay = row["pmix"]
        assert (lay["source"], lay["scope"], lay["size"], lay["rank"]) == ("pmix", "step", 4, rank)
        assert len(lay["nodes"]) == 2 and len(lay["allocation_nodes"]) == 3  # step != job
        assert set(lay["nodes"]) < set(lay["allocation_nodes"])

    job = _submit(slurm, shared_tmp, [app, "layout"], JobKind.MALLEABLE, 2, "pmix-layout")
    try:
        state = wait(lambda: (s := job_state(job)) in ("COMPLETED", "FAILED") and s, 60, "end")
    finally:
        slurm.cancel_job(job)
    out = (shared_tmp / f"pmix-layout-{job}.out").read_text()
    assert state == "COMPLETED", out
    rows = _rows(out)
    assert len(rows) == 2 and all(r["same"] for r in rows), rows
    assert {r["pmix"]["scope"] for r in rows} == {"mpirun"}
    assert len(set(rows[0]["pmix"]["nodes"])) == 2
    wait(all_idle, 30, "all nodes idle")


def _order(jobdir: JobDir, seq: int, action: ResizeAction, nodes) -> None:
    jobdir.write_order(ResizeOrder(seq, action, tuple(nodes), time.time()))


def test_requests_fall_back_once_and_resizes_leave_both_jobs_alive(slurm, shared_tmp, app):
    wait(all_idle, 60, "all nodes idle before the test")
    stop = shared_tmp / "stop"
    python = sys.executable
    evolving = _submit(slurm, shared_tmp, [app, "evolve", stop], JobKind.EVOLVING, 2, "pmix-evolve")
    srun_step = ["srun", "--mpi=pmix", "-N1", "-n1", python, app, "alive", stop]
    rigid = _submit(slurm, shared_tmp, srun_step, JobKind.RIGID, 2, "pmix-alive")
    jobdir = JobDir.for_job(shared_tmp, evolving)
    path = cached_probe(slurm.transport, "local", refresh=True).grow_path
    try:
        wait(lambda: len(jobdir.requests()) == 1, 60, "the first request in the job directory")
        assert jobdir.requests()[0]["delta"] == 1
        (event,) = [e for e in jobdir.events() if e["event"] == "pmix"]
        assert (event["directive"], event["status"]) == ("EXTEND", -47), event
        assert json.loads((jobdir.path / "pmix.json").read_text())["status"] == -47

        # shrink the evolving job (checkpoint-restart) and the rigid one off its step's node
        held = sorted(slurm_held(evolving))
        _order(jobdir, 1, ResizeAction.SHRINK, held[:1])
        wait(lambda: jobdir.read_ack(1, AckStatus.VACATED), 60, "the job to vacate")
        slurm.shrink(evolving, held[:1])
        assert wait(lambda: jobdir.final_ack(1), 60, "order 1").status is AckStatus.DONE
        wait(lambda: job_state(rigid) == "RUNNING", 30, "the rigid job to start")
        wait(lambda: any(s.endswith(".0") for s in slurm.steps(rigid)), 30, "the srun step")
        step_nodes = next(n for s, n in slurm.steps(rigid).items() if s.endswith(".0"))
        slurm.shrink(rigid, step_nodes)
        # the restarted generation asks to give a node back: controller only, no PMIx again
        wait(lambda: len(jobdir.requests()) == 2, 60, "the second request")
        assert jobdir.requests()[1]["delta"] == -1
        assert len([e for e in jobdir.events() if e["event"] == "pmix"]) == 1

        grown = slurm.grow(evolving, 1, path=path, grant_timeout_s=20)
        _order(jobdir, 2, ResizeAction.EXPAND, grown.nodes)
        assert wait(lambda: jobdir.final_ack(2), 60, "order 2").status is AckStatus.DONE
        slurm.grow(rigid, 1, path=path, grant_timeout_s=20)
        stop.touch()
        for job in (evolving, rigid):
            wait(lambda j=job: job_state(j) not in ("RUNNING", "PENDING"), 60, f"{job} to end")
    finally:
        stop.touch()
        slurm.cancel_job(evolving)
        slurm.cancel_job(rigid)
    assert job_state(evolving) == "COMPLETED" and job_state(rigid) == "COMPLETED"
    alive = (shared_tmp / f"pmix-alive-{rigid}.out").read_text()
    assert "ALIVE pmix step 1" in alive, alive
    done = (shared_tmp / f"pmix-evolve-{evolving}.out").read_text()
    assert "EVOLVE done ranks=2" in done, done
    wait(all_idle, 60, "all nodes idle")


def test_a_pmix_server_that_grants_allocations_is_used_first(slurm, local_cluster, shared_tmp, app):
    """Runs only where the probe finds allocation support (not on Slurm 22.05 / ORTE)."""
    wait(all_idle, 60, "all nodes idle before the test")
    _version, _spawn, allocation, detail = _pmix(LocalTransport(env=local_cluster), True)
    able = [launcher for launcher, ok in allocation.items() if ok is True]
    if "mpirun" not in able:  # the elastic launcher runs the application under mpirun
        pytest.skip(
            "no PMIx allocation support here (probe): "
            + "; ".join(
                f"{k}: {(detail.get(k) or {}).get('allocation_detail') or v}"
                for k, v in allocation.items()
            )
        )
    stop = shared_tmp / "stop"
    job = _submit(slurm, shared_tmp, [app, "evolve", stop], JobKind.EVOLVING, 1, "pmix-native")
    jobdir = JobDir.for_job(shared_tmp, job)
    try:
        wait(lambda: any(e["event"] == "pmix" for e in jobdir.events()), 60, "the PMIx request")
        (event,) = [e for e in jobdir.events() if e["event"] == "pmix"]
        assert event["status"] == 0 and jobdir.requests() == []
    finally:
        stop.touch()
        slurm.cancel_job(job)
