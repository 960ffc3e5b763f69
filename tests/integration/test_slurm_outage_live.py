"""A real slurmctld outage on the local cluster: user commands say so, nothing is lost.

slurmctld is stopped (by its recorded PID: it saves its state) while a job runs; ``queue`` and
``show`` must exit 1 with one line saying that the Slurm controller is unreachable, within a
bounded time, and the backends must raise :class:`SlurmUnavailableError` (not an empty list).
slurmctld is then started again as ``cluster up`` starts it, always (``finally``), and the job
must still be running. The outage lasts about 40 s: with slurmctld stopped each 22.05 command
takes 19 s to give up (slurm.conf's ``MessageTimeout``); ``show`` still builds its backend
with the fixed 20 s window (two tries), ``queue`` uses the site's ``slurm_retry_s`` (one try).

Run it alone, under the cluster lock (it stops the shared slurmctld).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from elastic_slurm.adapter.pyslurm_backend import PyslurmBackend, pyslurm_available
from elastic_slurm.config import load_site
from elastic_slurm.errors import SlurmUnavailableError
from elastic_slurm.jobs import site_backend

from .helpers import all_idle, job_state, wait
from .slurmctld_outage import slurmctld_alive, start_slurmctld, stop_slurmctld

pytestmark = pytest.mark.slurm

UNREACHABLE = "elastic-slurm: the Slurm controller is unreachable ("


def _cli(site: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "elastic_slurm", "--site", str(site), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _site_with_retry(tmp_path: Path, retry_s: float) -> Path:
    """The local site's config with ``controller.slurm_retry_s`` set."""
    raw = yaml.safe_load(Path(load_site().source).read_text())
    raw.setdefault("controller", {})["slurm_retry_s"] = retry_s
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def _finished(proc: subprocess.Popen[str], timeout_s: float) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"{proc.args} still ran after {timeout_s} s: {err}") from None
    return proc.returncode, out, err


def _unavailable(call) -> str:  # noqa: ANN001 - a backend query
    """``"ok"`` when ``call()`` raises SlurmUnavailableError, else what it did."""
    try:
        got = call()
    except SlurmUnavailableError:
        return "ok"
    except Exception as exc:  # noqa: BLE001 - reported by the test
        return f"raised {exc!r}"
    return f"returned {got!r}"


def test_an_outage_is_reported_and_nothing_is_lost(local_cluster, shared_tmp, tmp_path):
    wait(all_idle, 60, "all nodes idle before the test")
    site = _site_with_retry(tmp_path, 2.0)
    job = int(
        subprocess.run(
            ["sbatch", "--parsable", "-N", "2", "-J", "outage", "--wrap", "sleep 300"],
            capture_output=True,
            text=True,
            check=True,
            cwd=shared_tmp,
        ).stdout.split(";")[0]
    )
    slurm = site_backend(load_site())
    ok, _why = pyslurm_available(slurm.version(), load_site().slurm_conf)
    pyslurm = PyslurmBackend(slurm_conf=load_site().slurm_conf, retry_s=1.0) if ok else None
    try:
        wait(lambda: job_state(job) == "RUNNING", 30, "the job to start")
        nodes_before = slurm.job(job).nodes
        outage_s = _outage(site, job, pyslurm)
        listed = subprocess.run(
            [sys.executable, "-m", "elastic_slurm", "--site", str(site), "queue", "--json"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert listed.returncode == 0, listed.stderr
        assert f'"job_id": {job}' in listed.stdout
        after = wait(lambda: slurm.job(job), 30, "the job after restart")
        assert after.state == "RUNNING" and after.nodes == nodes_before
        assert outage_s < 90
        print(f"outage {outage_s:.1f} s; pyslurm checked: {pyslurm is not None}")
    finally:
        subprocess.run(["scancel", str(job)], check=False)
        wait(all_idle, 60, "all nodes idle after the test")


def _outage(site: Path, job: int, pyslurm: PyslurmBackend | None) -> float:
    """Stop slurmctld, check what users and backends see, start it again; the outage's s."""
    t0 = time.monotonic()
    try:
        stop_slurmctld()
        assert not slurmctld_alive()
        t0 = time.monotonic()
        queue, show = _cli(site, "queue"), _cli(site, "show", str(job))
        backend = site_backend(load_site(str(site)))
        with ThreadPoolExecutor(2) as pool:
            # job(): "unknown", never "does not exist"; it asks jobs()
            cli_said = pool.submit(_unavailable, lambda: backend.job(job))
            ps_said = pool.submit(_unavailable, pyslurm.jobs) if pyslurm else None
            assert cli_said.result() == "ok"
            assert ps_said is None or ps_said.result() == "ok"
        for name, proc, bound_s in (("queue", queue, 45), ("show", show, 60)):
            rc, out, err = _finished(proc, bound_s + 30)
            took = time.monotonic() - t0
            assert rc == 1 and out == "", (name, rc, out, err)
            assert err.startswith(UNREACHABLE) and err.count("\n") == 1, (name, err)
            assert "Traceback" not in err and took < bound_s, (name, took, err)
    finally:
        start_slurmctld()
    assert slurmctld_alive()
    return time.monotonic() - t0


def test_a_generation_started_during_an_outage_runs_once_slurmctld_is_back(slurm, shared_tmp):
    """A soak lost a job launched as slurmctld stopped: ``srun`` could not start ``mpirun``'s
    daemon, ``mpirun`` failed, and the job with it. The launcher now launches such a generation
    again once slurmctld answers. To hit the window every time, the job's ``srun`` (what the
    launch agent execs for the daemon on the second node) waits for a file the test creates
    only once slurmctld is stopped; the real ``srun`` then finds no slurmctld."""
    from .test_runtime_live import _heat2d, _summary

    gate = shared_tmp / "gated-srun"
    gate.mkdir()
    opened = gate / "open"
    real = shutil.which("srun")
    assert real is not None
    (gate / "srun").write_text(
        f"#!/bin/sh\nn=0\nwhile [ ! -e {opened} ] && [ $n -lt 3000 ]; do sleep 0.1; "
        f'n=$((n+1)); done\nexec {real} "$@"\n'
    )
    (gate / "srun").chmod(0o755)
    job, jobdir = _heat2d(
        slurm, shared_tmp, start=2, iterations=200, env={"PATH": f"{gate}:{os.environ['PATH']}"}
    )
    try:
        try:
            stop_slurmctld()
            opened.touch()  # the daemon's srun runs now, with slurmctld down
            wait(
                lambda: [e for e in jobdir.events() if e["event"] == "exit"],
                150,
                "mpirun to fail without slurmctld",
            )
        finally:
            start_slurmctld()
        wait(lambda: job_state(job) == "COMPLETED", 180, f"job {job} to complete")
    finally:
        slurm.cancel_job(job)
    events = [e["event"] for e in jobdir.events() if e["event"] in ("launch", "exit", "relaunch")]
    assert events == ["launch", "exit", "relaunch", "launch", "exit"], jobdir.events()
    summary = _summary(shared_tmp, job)
    assert summary["matches_reference"] is True and summary["ranks"] == 2, summary
    wait(all_idle, 60, "all nodes idle after the test")
