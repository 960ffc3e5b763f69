"""The local cluster itself: real nodes with their own hostnames and networks, idempotent, clean."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from elastic_slurm.cli.main import main
from elastic_slurm.cluster.local import HOSTS_FILE, LocalCluster
from elastic_slurm.config import load_site
from elastic_slurm.errors import ClusterError, NotRootError

pytestmark = pytest.mark.slurm


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "elastic_slurm", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_status_reports_four_nodes_and_running_daemons(local_cluster):
    res = _cli("cluster", "status", "--json")
    assert res.returncode == 0, res.stderr
    st = json.loads(res.stdout)
    assert st["up"] is True and st["nodes"] == 4
    assert set(st["daemons"]) == {
        "munged",
        "mariadbd",
        "slurmdbd",
        "slurmctld",
        "slurmd@n1",
        "slurmd@n2",
        "slurmd@n3",
        "slurmd@n4",
    }
    assert all(st["daemons"].values())


def test_each_node_has_its_own_hostname_address_and_network(local_cluster):
    def per_node(*cmd: str) -> dict[str, str]:
        out = subprocess.run(
            ["srun", "-N4", "--ntasks-per-node=1", "-l", *cmd],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        return dict(line.split(": ", 1) for line in out.strip().splitlines())

    assert sorted(per_node("hostname").values()) == ["n1", "n2", "n3", "n4"]
    addrs = per_node("sh", "-c", "ip -4 -o addr show eth0 | awk '{print $4}'")
    assert len(set(addrs.values())) == 4
    assert all(a.startswith("10.77.0.") for a in addrs.values())
    netns = per_node("readlink", "/proc/self/ns/net")
    assert len(set(netns.values())) == 4
    assert os.readlink("/proc/self/ns/net") not in netns.values()


def test_up_again_changes_nothing(local_cluster):
    cluster = LocalCluster(load_site())
    before = [(d.name, d.pid) for d in cluster.load_state().daemons]
    res = _cli("cluster", "up")
    assert res.returncode == 0, res.stderr
    assert "already up" in res.stdout
    assert [(d.name, d.pid) for d in cluster.load_state().daemons] == before


def test_up_with_another_node_count_is_refused(local_cluster):
    res = _cli("cluster", "up", "--nodes", "3")
    assert res.returncode == 1  # not a usage error: the cluster is in the way
    assert "up with 4 nodes, not 3" in res.stderr and "cluster down" in res.stderr


def test_not_root_is_told_clearly(local_cluster, monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(NotRootError, match="must run as root"):
        LocalCluster(load_site()).up()
    assert main(["cluster", "down"]) == 2
    assert "must run as root" in capsys.readouterr().err


@pytest.fixture()
def open_tmp() -> Path:
    """A temporary directory the munge and mysql users can enter (pytest's are private)."""
    path = Path(tempfile.mkdtemp(prefix="es-broken-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_a_cluster_that_fails_to_start_leaves_nothing_behind(local_cluster, open_tmp: Path):
    tmp_path = open_tmp
    site_file = tmp_path / "broken.yaml"
    site_file.write_text(
        yaml.safe_dump(
            {
                "name": "broken",
                "local_cluster": {
                    "nodes": 2,
                    "node_prefix": "x",
                    "head_hostname": "xhead",
                    "state_dir": str(tmp_path / "state"),
                    "run_dir": str(tmp_path / "run"),
                    "network": {"bridge": "esbr9", "subnet": "10.79.0.0/24", "netns_prefix": "ex-"},
                    "start_timeout_s": 0.001,  # nothing starts that fast: the first wait fails
                },
            }
        )
    )
    cluster = LocalCluster(load_site(str(site_file)))
    with pytest.raises(ClusterError, match=r"timed out after 0.001 s waiting for") as err:
        cluster.up()
    assert "logs are kept in" in str(err.value) and "cluster up" in str(err.value)
    assert not [p for p in Path("/run/netns").iterdir() if p.name.startswith("ex-")]
    assert not Path("/sys/class/net/esbr9").exists()
    assert "esbr9" not in HOSTS_FILE.read_text()
    assert cluster.load_state() is None
    assert sorted(p.name for p in (tmp_path / "state").iterdir()) == ["log"]
    # the real cluster was not disturbed
    assert LocalCluster(load_site()).healthy(4)
