"""The local cluster's ``slurm.conf`` and ``slurmdbd.conf``: ``cluster/slurmconf.py``.

The golden files hold ``@TMP@`` where the test's temporary directory was, so they do not depend
on where pytest puts it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from elastic_slurm.cluster.layout import Layout
from elastic_slurm.cluster.slurmconf import render_slurm_conf, render_slurmdbd_conf
from elastic_slurm.config.schema import LocalClusterConfig, SchedulerConfig

if TYPE_CHECKING:
    from conftest import Golden


def _layout(tmp_path: Path, nodes: int = 3, **fields: object) -> Layout:
    cfg = LocalClusterConfig(
        state_dir=tmp_path / "state",
        run_dir=tmp_path / "run",
        **fields,  # type: ignore[arg-type]
    )
    return Layout(cfg, nodes)


def _settings(text: str) -> dict[str, str]:
    """``Key=Value`` lines (not comments, not NodeName/PartitionName lines)."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith(("#", "NodeName=", "PartitionName=")):
            key, value = line.split("=", 1)
            assert key not in out, f"{key} set twice"
            out[key] = value
    return out


def test_slurm_conf_golden(golden: Golden, tmp_path: Path) -> None:
    text = render_slurm_conf(_layout(tmp_path), "elastic")
    golden.check("slurmconf_slurm.conf.txt", text.replace(str(tmp_path), "@TMP@"))


def test_slurmdbd_conf_golden(golden: Golden, tmp_path: Path) -> None:
    text = render_slurmdbd_conf(_layout(tmp_path), "0123456789abcdef")
    golden.check("slurmconf_slurmdbd.conf.txt", text.replace(str(tmp_path), "@TMP@"))


def test_slurm_conf_key_settings(tmp_path: Path) -> None:
    text = render_slurm_conf(_layout(tmp_path), "mycluster")
    s = _settings(text)
    state, run = tmp_path / "state", tmp_path / "run"
    assert s["ClusterName"] == "mycluster"
    assert s["SlurmctldHost"] == "eshead(10.77.0.2)"
    assert s["SchedulerType"] == "sched/backfill"
    assert s["SchedulerParameters"].split(",") == [
        "permit_job_expansion",
        "sched_interval=2",
        "bf_interval=2",
    ]
    assert s["SelectType"] == "select/linear"
    assert "SelectTypeParameters" not in s
    assert s["StateSaveLocation"] == f"{state}/slurmctld"
    assert s["SlurmdSpoolDir"] == f"{state}/slurmd/%n"
    assert s["TmpFS"] == f"{state}/tmp/%n"
    assert s["SlurmdPidFile"] == f"{run}/slurmd-%n.pid"
    assert s["SlurmctldPidFile"] == f"{run}/slurmctld.pid"
    assert s["AuthInfo"] == f"socket={run}/munge/munge.socket"
    assert s["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert s["AccountingStoragePort"] == "6819"
    assert s["MpiDefault"] == "pmix"
    assert (s["SlurmctldPort"], s["SlurmdPort"]) == ("6817", "6818")
    assert text.endswith("\n")


def test_slurm_conf_node_and_partition_lines(tmp_path: Path) -> None:
    text = render_slurm_conf(_layout(tmp_path, 3, cpus_per_node=2, real_memory_mib=512), "c")
    node_lines = [line for line in text.splitlines() if line.startswith("NodeName=")]
    assert node_lines == [
        f"NodeName=n{i} NodeHostname=n{i} NodeAddr=10.77.0.{10 + i} CPUs=2 RealMemory=512 "
        "State=UNKNOWN"
        for i in (1, 2, 3)
    ]
    partitions = [line for line in text.splitlines() if line.startswith("PartitionName=")]
    assert partitions == [
        "PartitionName=debug Nodes=n[1-3] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
    ]


def test_slurm_conf_one_node(tmp_path: Path) -> None:
    text = render_slurm_conf(_layout(tmp_path, 1, node_prefix="cn", partition="p1"), "c")
    assert [
        line for line in text.splitlines() if line.startswith(("NodeName", "PartitionName"))
    ] == [
        "NodeName=cn1 NodeHostname=cn1 NodeAddr=10.77.0.11 CPUs=1 RealMemory=1024 State=UNKNOWN",
        "PartitionName=p1 Nodes=cn1 Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO",
    ]


@pytest.mark.parametrize(
    ("select_type", "params"),
    [("linear", None), ("cons_tres", "CR_CPU")],
)
def test_slurm_conf_select_type(tmp_path: Path, select_type: str, params: str | None) -> None:
    s = _settings(render_slurm_conf(_layout(tmp_path, select_type=select_type), "c"))
    assert s["SelectType"] == f"select/{select_type}"
    assert s.get("SelectTypeParameters") == params


def test_slurm_conf_scheduler_intervals(tmp_path: Path) -> None:
    layout = _layout(tmp_path, scheduler=SchedulerConfig(sched_interval_s=5, bf_interval_s=30))
    s = _settings(render_slurm_conf(layout, "c"))
    assert s["SchedulerParameters"] == "permit_job_expansion,sched_interval=5,bf_interval=30"


def test_slurmdbd_conf_settings(tmp_path: Path) -> None:
    layout = _layout(tmp_path, slurmdbd_port=7000, mariadb_port=23306)
    s = _settings(render_slurmdbd_conf(layout, "pw"))
    assert s == {
        "AuthType": "auth/munge",
        "AuthInfo": f"socket={tmp_path}/run/munge/munge.socket",
        "DbdHost": "eshead",
        "DbdAddr": "10.77.0.2",
        "DbdPort": "7000",
        "SlurmUser": "root",
        "PidFile": f"{tmp_path}/run/slurmdbd.pid",
        "StorageType": "accounting_storage/mysql",
        "StorageHost": "127.0.0.1",
        "StoragePort": "23306",
        "StorageUser": "slurm",
        "StoragePass": "pw",
        "StorageLoc": "slurm_acct_db",
    }
