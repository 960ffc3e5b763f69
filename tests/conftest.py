"""Shared test setup.

* ``SLURM_*``, ``PMI*``, ``PMIX_*`` and ``OMPI_*`` variables are removed from the environment
  at import time, so tests run the same inside an allocation (CI may run in one) as outside,
  and MPI is never initialised in the pytest process itself.
* Tests marked ``slurm`` use the real local cluster: the ``local_cluster`` fixture brings it up
  (``elastic-slurm cluster up``, as a separate process so the daemons are not children of
  pytest) and takes it down at the end only if it started it. After a failed ``slurm`` test,
  ``sinfo``, ``squeue``, ``sacct`` and the reasons of nodes Slurm took out of service are
  printed. A ``slurm`` test after which a node is drained (Slurm's "Kill task failed", for
  example) fails with Slurm's reason, and the node is resumed, so that one test's leftover
  does not fail every test after it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

for _var in [v for v in os.environ if v.startswith(("SLURM_", "PMI", "PMIX_", "OMPI_"))]:
    del os.environ[_var]

# Importing mpi4py.MPI (the doctest collection of elastic_slurm.mpi_runtime does) would make
# this process an Open MPI singleton, which puts OMPI_*/PMIX_* variables into the environment
# of every command the tests start, jobs included. MPI runs only in the processes tests start.
try:
    import mpi4py
except ImportError:  # the MPI tests skip themselves with a reason
    pass
else:
    mpi4py.rc.initialize = False
    mpi4py.rc.finalize = False

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "elastic_slurm"]


def _cluster_cmd(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "cluster", *args], capture_output=True, text=True, check=check, timeout=900
    )


@pytest.fixture(scope="session")
def local_cluster() -> Iterator[dict[str, str]]:
    """The local 4-node cluster; yields the environment that points Slurm's tools at it."""
    if os.geteuid() != 0:
        pytest.skip("the local cluster needs root")
    status = _cluster_cmd("status", "--json", check=False)
    was_up = status.returncode == 0
    if not was_up:
        up = _cluster_cmd("up", "--nodes", "4", check=False)
        if up.returncode != 0:
            pytest.fail(f"cluster up failed:\n{up.stdout}\n{up.stderr}")
    from elastic_slurm.config import load_site

    env = {"SLURM_CONF": str(load_site().slurm_conf)}
    os.environ.update(env)
    yield env
    if not was_up and os.environ.get("ELASTIC_SLURM_KEEP_CLUSTER") != "1":
        _cluster_cmd("down", check=False)


@pytest.fixture()
def slurm(local_cluster: dict[str, str]):  # noqa: ANN201 - SlurmCLI
    """The command-line backend on the local cluster."""
    from elastic_slurm.adapter.factory import slurm_for
    from elastic_slurm.config import load_site

    return slurm_for(load_site())


@pytest.fixture()
def shared_tmp(tmp_path: Path) -> Path:
    """A temporary directory the cluster's nodes can read and write (same filesystem here)."""
    tmp_path.chmod(0o755)
    return tmp_path


def _drained() -> list[str]:
    """``node: reason`` of every drained or draining node (``sinfo``), empty without Slurm."""
    res = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N|%T|%E"], capture_output=True, text=True, check=False
    )
    rows = [line.split("|", 2) for line in res.stdout.splitlines() if line.count("|") == 2]
    return [f"{node}: {reason}" for node, state, reason in rows if "drain" in state]


@pytest.fixture(autouse=True)
def _no_node_left_drained(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a ``slurm`` test after which a node is drained, and resume the node."""
    yield
    if request.node.get_closest_marker("slurm") is None or not shutil.which("sinfo"):
        return
    if "local_cluster" not in request.fixturenames or not os.environ.get("SLURM_CONF"):
        return
    drained = _drained()
    if drained:
        for entry in drained:
            node = entry.split(":", 1)[0]
            subprocess.run(
                ["scontrol", "update", f"NodeName={node}", "State=RESUME"],
                capture_output=True,
                check=False,
            )
        pytest.fail(f"Slurm drained node(s) during this test (now resumed): {'; '.join(drained)}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # noqa: ANN201
    """After a failed ``slurm`` test, show what Slurm sees (like dask-jobqueue's CI does)."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed and item.get_closest_marker("slurm"):
        lines = []
        for argv in (
            ["sinfo", "-N"],
            ["sinfo", "-R"],
            ["squeue", "-s"],
            ["squeue"],
            ["sacct", "-X", "-o", "JobID,JobName,State,NNodes,NodeList"],
        ):
            if shutil.which(argv[0]):
                res = subprocess.run(argv, capture_output=True, text=True, check=False)
                lines.append(f"$ {' '.join(argv)}\n{res.stdout}{res.stderr}")
        report.sections.append(("Slurm after failure", "\n".join(lines)))
