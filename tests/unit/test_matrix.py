"""The flavour matrix's pure parts, and how a flavour's site picks its transport and Python."""

from __future__ import annotations

import sys

import pytest

from elastic_slurm.adapter.factory import job_python, transport_for
from elastic_slurm.adapter.transport.chroot import ChrootTransport
from elastic_slurm.adapter.transport.local import LocalTransport
from elastic_slurm.cluster import matrix
from elastic_slurm.cluster.flavoured import _sets_tcp_interfaces
from elastic_slurm.config import load_site


def _r(fl: str, check: str, ok: bool | None, s: float) -> matrix.CheckResult:
    return matrix.CheckResult(fl, check, ok, s, "detail", {"to2": 0.0123})


def test_table_has_one_row_per_flavour_and_one_cell_per_check():
    results = [
        _r("bookworm", "probe", True, 0.71),
        _r("bookworm", "elastic-app", False, 43.4),
        _r("forky", "probe", True, 3.4),
        _r("forky", "elastic-app", None, 0.0),
    ]
    lines = matrix.table(results).splitlines()
    assert lines[0].split() == ["flavour", "probe", "elastic-app"]
    assert lines[1].split() == ["bookworm", "PASS", "0.7s", "FAIL", "43.4s"]
    assert lines[2].split() == ["forky", "PASS", "3.4s", "skip"]


def test_results_serialise_with_rounded_timings():
    got = _r("trixie", "shrink", True, 1.234).to_json()
    assert got == {
        "flavour": "trixie",
        "check": "shrink",
        "ok": True,
        "seconds": 1.23,
        "detail": "detail",
        "timings": {"to2": 0.012},
    }


def test_an_unknown_check_is_refused_before_anything_runs():
    with pytest.raises(ValueError, match="unknown check.*'grow'.*grow-merge"):
        matrix.run_checks("trixie", object(), ["probe", "grow"])  # type: ignore[arg-type]


def test_every_listed_check_has_a_runner():
    assert set(matrix.CHECKS) == set(matrix._RUNNERS)


@pytest.mark.parametrize("name", ["trixie", "forky"])
def test_a_chroot_flavour_site_runs_slurm_and_jobs_in_its_chroot(name):
    site = load_site(f"local-{name}")
    transport = transport_for(site)
    assert isinstance(transport, ChrootTransport)
    assert transport.root == site.local_cluster.chroots_dir / name
    assert transport.env["SLURM_CONF"] == str(site.slurm_conf)
    assert job_python(site) == "python3"


def test_the_bookworm_site_runs_here_with_this_python():
    site = load_site("local")
    assert type(transport_for(site)) is LocalTransport
    assert job_python(site) == sys.executable
    assert job_python(site.model_copy(update={"python": "/opt/py"})) == "/opt/py"


@pytest.mark.parametrize(
    ("line", "sets"),
    [
        ("btl_tcp_if_include=lo", True),
        ("btl_tcp_if_exclude = lo,docker0", True),
        ("btl_base_warn_component_unused=0", False),
        ("# btl_tcp_if_include=lo", False),
    ],
)
def test_mca_lines_that_choose_tcp_interfaces(line, sets):
    assert _sets_tcp_interfaces(line) is sets
