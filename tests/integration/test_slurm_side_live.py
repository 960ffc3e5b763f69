"""The Slurm-side pieces an admin installs: job_submit.lua in the local cluster, and the
slurm.conf fragment agrees with the local cluster's working configuration."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from elastic_slurm.cluster.local import SLURM_SIDE, LocalCluster
from elastic_slurm.config import load_site

pytestmark = pytest.mark.slurm


@pytest.fixture()
def lua_loaded(local_cluster) -> Iterator[None]:
    cluster = LocalCluster(load_site(), progress=lambda line: None)
    cluster.reconfigure(job_submit_lua=True)
    yield
    cluster.reconfigure(job_submit_lua=False)


def _sbatch(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sbatch", "--parsable", "-o", "/dev/null", f"--chdir={tmp}", *args, "--wrap", "true"],
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["-N3", "--comment=elastic-slurm:kind=malleable;min=4;max=2"],
            "impossible node range 4-2",
        ),
        (
            ["-N3", "--comment=elastic-slurm:kind=malleable;min=1;max=2"],
            "the job asks for 3 node(s), outside its range 1-2",
        ),
        (
            ["-N1", "--comment=elastic-slurm:kind=rigid;min=1;max=2"],
            "a rigid job has one size, not the range 1-2",
        ),
        (["-N1", "--comment=elastic-slurm:kind=wobbly;min=1;max=2"], "unknown job kind 'wobbly'"),
        (["-N1", "--comment=elastic-slurm:kind=malleable"], "malformed elastic tag"),
    ],
)
def test_bad_elastic_submissions_are_refused_by_slurm(lua_loaded, shared_tmp, args, message):
    res = _sbatch(shared_tmp, *args)
    assert res.returncode != 0 and res.stdout == ""
    assert f"elastic-slurm: {message}" in res.stderr, res.stderr


def test_good_and_ordinary_submissions_pass(lua_loaded, shared_tmp):
    ids = []
    try:
        for args in (
            ["-N2", "--comment=elastic-slurm:kind=malleable;min=1;max=3"],
            ["-N1"],
            ["-N1", "--comment=a user's own comment"],
        ):
            res = _sbatch(shared_tmp, *args)
            assert res.returncode == 0, res.stderr
            ids.append(res.stdout.strip())
    finally:
        subprocess.run(["scancel", *ids], check=False)


def test_the_fragment_matches_what_the_local_cluster_runs(local_cluster):
    fragment = {}
    for line in (SLURM_SIDE / "elastic.conf").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, value = line.split("=", 1)
            fragment[key] = value
    conf = Path(local_cluster["SLURM_CONF"]).read_text()
    running = dict(
        line.split("=", 1)
        for line in conf.splitlines()
        if "=" in line and not line.startswith("#") and " " not in line.split("=")[0]
    )
    assert "permit_job_expansion" in running["SchedulerParameters"]
    for key in ("AccountingStorageType", "SelectType", "MpiDefault"):
        assert running[key] == fragment[key]
    assert set(fragment) == {
        "SchedulerParameters",
        "AccountingStorageType",
        "SelectType",
        "MpiDefault",
        "JobSubmitPlugins",
    }
