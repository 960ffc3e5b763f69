"""Each flavour's real Slurm picks the dialect its version needs (issue 9).

For a chroot flavour the test brings its cluster up if it is not (``cluster up --flavour``,
in a separate process so the daemons are not children of pytest) and takes it down again
only if it started it. It is skipped, with the reason, when the flavour's chroot is not built
or the tests do not run as root; with ``ELASTIC_SLURM_REQUIRE_FLAVOURS=1`` (CI, which builds
the chroots first) a missing chroot fails instead. The bookworm cluster is the suite's own.

Besides the version, each test checks that the adapter a user gets for the flavour's site
(:func:`~elastic_slurm.adapter.factory.slurm_for`) acts on the probed dialect: the transport,
the JSON shape, the number of resizes without slurmdbd (two node-list shrinks in a row), and
the reconfigure after a node-list shrink (22.05 with select/linear only).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from elastic_slurm import api
from elastic_slurm.adapter.capabilities import probe
from elastic_slurm.adapter.dialect import observed_json_shape, probe_dialect
from elastic_slurm.adapter.factory import job_python, slurm_for
from elastic_slurm.adapter.transport.chroot import ChrootTransport
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
        if os.environ.get("ELASTIC_SLURM_REQUIRE_FLAVOURS") == "1":
            pytest.fail(f"the {name} chroot is not built at {root} (CI builds it first)")
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


def _shrink_twice(slurm, site, workdir) -> tuple[int, list[tuple[str, ...]]]:
    """A 3-node rigid sleep job shrunk to 2 then 1 node by node list; its sizes."""
    from datetime import timedelta

    from elastic_slurm.model.request import ElasticRequest, JobKind

    req = ElasticRequest(
        program=("sleep", "120"),
        kind=JobKind.RIGID,
        nodes_min=3,
        nodes_max=3,
        walltime=timedelta(minutes=3),
        job_name="dialect-shrink",
    )
    job = api.submit(req, slurm, workdir=workdir, output="/dev/null", python=job_python(site))
    try:
        deadline = time.monotonic() + 60
        while (rec := slurm.job(job)) is None or len(rec.nodes) != 3:
            assert time.monotonic() < deadline, f"job {job} did not start: {rec}"
            time.sleep(0.2)
        order = [rec.batch_host] + [n for n in rec.nodes if n != rec.batch_host]
        return job, [slurm.shrink(job, order[:2]), slurm.shrink(job, order[:1])]
    finally:
        slurm.cancel_job(job)


def test_the_flavours_adapter_acts_on_its_dialect(flavour_cluster: ChrootCluster) -> None:
    name = flavour_cluster.flavour.name
    site = flavour_cluster.site
    slurm = slurm_for(site)
    assert isinstance(slurm.transport, ChrootTransport)  # the chroot's own Slurm commands
    dialect = slurm.dialect()
    assert dialect.series == SERIES[name]
    caps = probe(slurm.transport, preference=site.grow_path, test_spawn=False)
    assert caps.dialect == dialect.to_json()
    # the probe left this process's Slurm alone: children still see os.environ's SLURM_CONF
    # (an imported pyslurm was once re-initialised with the flavour's file here)
    seen = subprocess.run(["sh", "-c", 'echo "$SLURM_CONF"'], capture_output=True, text=True)
    assert seen.stdout.strip() == os.environ.get("SLURM_CONF", "")
    assert caps.resizes_per_job.startswith("any number") and not caps.warnings
    workdir = flavour_cluster.cfg.state_dir / "dialect-test"
    workdir.mkdir(exist_ok=True)
    _job, sizes = _shrink_twice(slurm, site, workdir)  # no slurmdbd: 22.05 refuses the 2nd
    assert [len(s) for s in sizes] == [2, 1]
    assert slurm._shrink_needs_reconfigure is False  # 24.11/26.05: no reconfigure after it


def test_the_flavours_mpi_joins_added_nodes_by_spawn_when_asked(
    flavour_cluster: ChrootCluster,
) -> None:
    """PRRTE (Open MPI 5/6) restarts by default; asked to spawn, with the parent on mpirun's
    node, it spawns onto nodes merged into the job (the launcher's ``PRTE_MCA_`` settings and
    :func:`~elastic_slurm.mpi_runtime.probe.spawn_info`) and heat2d ends with the serial result."""
    from elastic_slurm.cluster.matrix import run_checks

    lines: list[str] = []
    (res,) = run_checks(flavour_cluster.flavour.name, flavour_cluster, ["spawn-join"], lines.append)
    assert res.ok is True, lines
    assert "MPI_Comm_spawn" in res.detail and res.timings["spawn_phase"] > 0


def test_bookworm_adapter_acts_on_its_dialect(slurm, shared_tmp) -> None:
    from elastic_slurm.config import load_site

    dialect = slurm.dialect()
    assert dialect.series == "22.05"
    select = slurm.select_type()
    _job, sizes = _shrink_twice(slurm, load_site(), shared_tmp)  # slurmdbd: any number
    assert [len(s) for s in sizes] == [2, 1]
    assert slurm._shrink_needs_reconfigure is (select == "select/linear")


def test_bookworm_dialect() -> None:
    res = LocalTransport().run(["scontrol", "--version"], timeout_s=20)
    if res.returncode != 0:
        pytest.skip(f"this machine has no scontrol: {res.stderr.strip()}")
    dialect = probe_dialect(LocalTransport())
    assert dialect.series == "22.05"
    assert dialect.resizes_allowed("accounting_storage/none") == 1
    assert dialect.reconfigure_after_nodelist_shrink("select/linear")
