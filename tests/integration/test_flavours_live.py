"""Each flavour's real Slurm picks the dialect its version needs (issue 9).

For a chroot flavour the test brings its cluster up if it is not (``cluster up --flavour``,
in a separate process so the daemons are not children of pytest) and takes it down again
only if it started it. It is skipped, with the reason, when the flavour's chroot is not built
or the tests do not run as root. It never starts or reconfigures the bookworm cluster: for
bookworm only ``scontrol --version`` of this machine's Slurm is probed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from elastic_slurm.adapter.dialect import observed_json_shape, probe_dialect
from elastic_slurm.adapter.transport.local import LocalTransport
from elastic_slurm.cluster import chroot
from elastic_slurm.cluster.flavoured import ChrootCluster, make_cluster
from elastic_slurm.config import load_site

SERIES = {"trixie": "24.11", "forky": "26.05"}
CLI = [sys.executable, "-m", "elastic_slurm"]


def _cli(*args: str) -> None:
    res = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"elastic-slurm {' '.join(args)} failed:\n{res.stdout}{res.stderr}"


@pytest.fixture(scope="module", params=list(SERIES))
def flavour_cluster(request: pytest.FixtureRequest) -> Iterator[ChrootCluster]:
    """The cluster of one chroot flavour, up (skipped when its chroot is not built)."""
    name = request.param
    site = load_site(f"local-{name}")
    assert site.local_cluster is not None
    root = chroot.chroot_dir(name, site.local_cluster.chroots_dir)
    if not chroot.is_built(root):
        pytest.skip(
            f"the {name} chroot is not built at {root}: "
            f"run `elastic-slurm cluster up --flavour {name}` (as root) first"
        )
    if os.geteuid() != 0:
        pytest.skip(f"the {name} cluster needs root to start")
    cluster = make_cluster(site)
    assert isinstance(cluster, ChrootCluster)
    started = not cluster.status().up
    if started:
        _cli("cluster", "up", "--flavour", name)
    yield cluster
    if started:
        _cli("cluster", "down", "--flavour", name)


def test_chroot_flavour_dialect(flavour_cluster: ChrootCluster) -> None:
    name = flavour_cluster.flavour.name
    dialect = probe_dialect(flavour_cluster.transport)
    assert dialect.series == SERIES[name]
    # the dialect's claims about JSON, checked against a real job of that Slurm
    env = flavour_cluster.slurm_env
    run = flavour_cluster.transport.run
    sub = run(["sbatch", "--parsable", "-N1", "-o", "/dev/null", "--wrap", "sleep 30"], env=env)
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip().split(";")[0]
    try:
        deadline = time.monotonic() + 30
        shape: dict[str, bool] = {}
        while not shape and time.monotonic() < deadline:
            res = run(["squeue", "--json", "-j", job], env=env)
            assert res.returncode == 0, res.stderr
            shape = observed_json_shape(res.stdout)
            time.sleep(0.2)
        assert shape == {
            "numbers_wrapped": dialect.json_numbers_wrapped,
            "job_state_is_list": dialect.job_state_is_list,
        }
        # no slurmdbd here: a job resizes more than once (22.05 would refuse the second)
        assert dialect.resizes_allowed("accounting_storage/none") is None
    finally:
        run(["scancel", job], env=env)


def test_bookworm_dialect() -> None:
    res = LocalTransport().run(["scontrol", "--version"], timeout_s=20)
    if res.returncode != 0:
        pytest.skip(f"this machine has no scontrol: {res.stderr.strip()}")
    dialect = probe_dialect(LocalTransport())
    assert dialect.series == "22.05"
    assert dialect.resizes_allowed("accounting_storage/none") == 1
    assert dialect.reconfigure_after_nodelist_shrink("select/linear")
