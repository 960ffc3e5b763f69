"""``elastic-slurm doctor`` on the local cluster, with and without permit_job_expansion, and
transient errors retried against a slurmctld that stops answering for a while."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from elastic_slurm.adapter.slurm_cli import SlurmCLI
from elastic_slurm.adapter.transport.local import LocalTransport
from elastic_slurm.cluster.local import LocalCluster
from elastic_slurm.config import load_site

pytestmark = pytest.mark.slurm


def test_doctor_reports_the_facts_and_the_grow_path(local_cluster, grow_path, tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    res = subprocess.run(
        [sys.executable, "-m", "elastic_slurm", "doctor", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    facts = json.loads(res.stdout.strip().splitlines()[-1])
    assert facts["slurm_version"] == "22.05.8"
    assert facts["permit_job_expansion"] is (grow_path == "merge")
    assert facts["grow_path"] == grow_path
    if grow_path == "sibling":
        assert "permit_job_expansion" in facts["grow_path_reason"]
    assert facts["disable_job_shrink"] is False
    assert facts["prolog_flags"] == []
    assert facts["accounting"] == "accounting_storage/slurmdbd"
    assert facts["select_type"] == "select/linear"
    assert facts["json_output"] is True
    assert facts["mpi"] == "Open MPI 4.1.4" and facts["mpi_can_spawn"] is True
    assert (tmp_path / "elastic-slurm" / "local.json").exists()  # cached for other commands
    # PMIx, asked in one-node steps: Slurm's server neither spawns nor allocates, ORTE spawns
    assert facts["pmix_version"].startswith("OpenPMIx 4.2.2"), facts["pmix_detail"]
    assert facts["pmix_spawn"] == {"srun": False, "mpirun": True}, facts["pmix_detail"]
    assert facts["pmix_allocation"] == {"srun": False, "mpirun": False}
    for launcher in ("srun", "mpirun"):
        detail = facts["pmix_detail"][launcher]
        assert (detail["extend_status"], detail["release_status"]) == (-47, -47)
    assert facts["pmix_detail"]["srun"]["spawn_status"] == -25  # no query handler in slurmstepd
    assert facts["pmix_detail"]["mpirun"]["server"] == "Open MPI ORTE (mpirun)"


def test_an_unresponsive_slurmctld_is_retried_until_it_answers(local_cluster):
    state = LocalCluster(load_site()).load_state()
    (ctld,) = [d for d in state.daemons if d.name == "slurmctld"]
    cli = SlurmCLI(LocalTransport(env=local_cluster), retry_s=60, command_timeout_s=2)
    os.kill(ctld.pid, signal.SIGSTOP)
    resumed = threading.Timer(5.0, os.kill, args=(ctld.pid, signal.SIGCONT))
    resumed.start()
    try:
        t0 = time.monotonic()
        nodes = cli.nodes()  # times out while stopped (transient), then succeeds
        elapsed = time.monotonic() - t0
    finally:
        resumed.join()
        os.kill(ctld.pid, signal.SIGCONT)
    assert len(nodes) == 4
    assert elapsed >= 4.0  # it did wait for slurmctld rather than fail


def test_doctor_over_ssh_with_a_site_file(local_cluster, sshd, tmp_path):
    import yaml

    site = tmp_path / "over-ssh.yaml"
    site.write_text(
        yaml.safe_dump(
            {
                "name": "over-ssh",
                "transport": {
                    "kind": "ssh",
                    "host": sshd.host,
                    "port": sshd.port,
                    "user": sshd.user,
                    "key_file": str(sshd.key_file),
                    "known_hosts": str(sshd.known_hosts),
                    "remote_env": dict(local_cluster),
                },
            }
        )
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    env.pop("SLURM_CONF", None)  # everything must come over SSH
    res = subprocess.run(
        [sys.executable, "-m", "elastic_slurm", "--site", str(site), "doctor", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    facts = json.loads(res.stdout.strip().splitlines()[-1])
    assert (facts["site"], facts["slurm_version"]) == ("over-ssh", "22.05.8")
    assert facts["accounting"] == "accounting_storage/slurmdbd"
    assert facts["mpi"] == "Open MPI 4.1.4" and facts["mpi_can_spawn"] is None
    assert "not tested over SSH" in facts["mpi_detail"]
    assert facts["pmix_spawn"]["srun"].startswith("unknown: not probed over SSH")
    assert "run doctor on the login node" in facts["explanations"]["PMIx"]
    assert facts["ssh"] == f"root@{sshd.host}:{sshd.port}"


def test_doctor_without_mpi4py_says_unknown_and_why(local_cluster, tmp_path):
    """The test spawn needs mpi4py in doctor's own Python: without it (a base install), the
    spawn is unknown and the explanation names the extra, instead of a bare False."""
    shadow = tmp_path / "shadow" / "mpi4py"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no mpi4py in this install')\n")
    import elastic_slurm

    src = Path(elastic_slurm.__file__).resolve().parents[1]
    env = {
        **os.environ,
        "XDG_CACHE_HOME": str(tmp_path),
        "PYTHONPATH": f"{shadow.parent}{os.pathsep}{src}",
        "COLUMNS": "200",
    }
    out = {}
    for mode in ("--json", None):
        res = subprocess.run(
            [sys.executable, "-m", "elastic_slurm", "doctor", *([mode] if mode else [])],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert res.returncode == 0, res.stderr
        out[mode] = res.stdout
    facts = json.loads(out["--json"].strip().splitlines()[-1])
    assert facts["mpi"] == "Open MPI 4.1.4" and facts["mpi_can_spawn"] is None
    why = facts["explanations"]["MPI can spawn"]
    assert "cannot import mpi4py" in why and "elastic-slurm[mpi]" in why
    assert "PMIx allocation requests" in facts["explanations"]
    table = " ".join(out[None].split())
    assert "MPI can spawn │ unknown:" in table and "cannot import mpi4py" in table
    assert "MPI can spawn: unknown:" in table  # the explanation below the table
