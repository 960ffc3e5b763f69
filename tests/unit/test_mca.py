"""MPI parameters from the site config and the job spec reach the launcher's ``mpirun``."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from elastic_slurm import api, mca
from elastic_slurm.adapter.fake import FakeSlurm
from elastic_slurm.config import load_site
from elastic_slurm.config.schema import SiteConfig
from elastic_slurm.model.request import ElasticRequest, JobKind
from elastic_slurm.mpi_runtime.launcher import Launcher

YIELD = "OMPI_MCA_mpi_yield_when_idle"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"FOO": "1"}, "'FOO' is not an MPI parameter's variable"),
        ({"OMPI_COMM_WORLD_RANK": "0"}, "is not an MPI parameter's variable"),
        ({"OMPI_MCA_": "1"}, "is not an MPI parameter's variable"),
        ({YIELD: 1}, "must be a string"),
        ({YIELD: "a\0b"}, "without NUL"),
        ({YIELD: "x" * 5000}, "at most 4096 characters"),
        ({f"OMPI_MCA_p{i}": "1" for i in range(65)}, "65 MPI parameters: at most 64"),
    ],
)
def test_bad_parameters_are_refused_naming_the_problem(params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        mca.check(params)
    with pytest.raises(ValidationError, match="mpi_env"):
        SiteConfig(name="x", mpi_env=params)


def test_the_local_clusters_make_open_mpi_yield_and_other_sites_set_nothing() -> None:
    for name in ("local", "local-trixie", "local-forky"):
        assert load_site(name).mpi_env == {YIELD: "1"}
    assert SiteConfig(name="x").mpi_env == {}


def _submitted_script(monkeypatch: pytest.MonkeyPatch, req: ElasticRequest, **kw) -> str:
    fake = FakeSlurm()
    scripts: list[str] = []
    real = fake.sbatch

    def sbatch(options, script="#!/bin/sh\n"):  # type: ignore[no-untyped-def]
        scripts.append(script)
        return real(options, script)

    monkeypatch.setattr(fake, "sbatch", sbatch)
    api.submit(req, fake, workdir=Path("/tmp"), python="/venv/bin/python", **kw)
    (script,) = scripts
    return script


def _request(**kw) -> ElasticRequest:  # type: ignore[no-untyped-def]
    return ElasticRequest(
        program=("/bin/true",), kind=JobKind.MALLEABLE, nodes_min=1, nodes_max=2, **kw
    )


def test_the_batch_script_exports_the_site_s_parameters_and_lists_them(monkeypatch) -> None:
    script = _submitted_script(monkeypatch, _request(), mpi_env={YIELD: "1", "PRTE_MCA_x": "a b"})
    assert f"export {YIELD}=1\n" in script
    assert "export PRTE_MCA_x='a b'\n" in script
    assert f"export ELASTIC_SLURM_MPI_ENV={YIELD},PRTE_MCA_x\n" in script


def test_a_job_spec_s_parameter_wins_over_the_site_s(monkeypatch) -> None:
    req = _request(extra_env=((YIELD, "0"), ("OMPI_MCA_btl", "self,tcp"), ("OTHER", "1")))
    script = _submitted_script(monkeypatch, req, mpi_env={YIELD: "1"})
    assert f"export {YIELD}=0\n" in script and f"export {YIELD}=1\n" not in script
    assert f"export ELASTIC_SLURM_MPI_ENV=OMPI_MCA_btl,{YIELD}\n" in script
    assert "export OTHER=1\n" in script


def test_no_parameters_no_list(monkeypatch) -> None:
    assert "ELASTIC_SLURM_MPI_ENV" not in _submitted_script(monkeypatch, _request())


class _OneNode:
    """The job's Slurm as ``_launch_env`` asks it: job 7 holds n1."""

    def elastic_nodes(self, job_id: int) -> dict[str, int]:
        return {"n1": job_id}


def test_the_launcher_passes_on_only_the_listed_parameters(tmp_path: Path) -> None:
    env = {
        "SLURM_JOB_ID": "7",
        "ELASTIC_SLURM_JOB_DIR": str(tmp_path / "job"),
        "PATH": "/usr/bin:/bin",
        "OMPI_MCA_ess": "singleton",  # left by an MPI singleton in the submitting process
        "PMIX_RANK": "0",
        YIELD: "1",
        "OMPI_MCA_plm": "isolated",  # listed, but the launcher's own settings come last
        "ELASTIC_SLURM_MPI_ENV": f"{YIELD},OMPI_MCA_plm,PMIX_RANK",
    }
    launcher = Launcher(["app.py"], env=env, slurm=_OneNode())  # type: ignore[arg-type]
    got = launcher._launch_env(["n1"], 0)
    assert got[YIELD] == "1"
    assert "OMPI_MCA_ess" not in got and "PMIX_RANK" not in got
    assert got["OMPI_MCA_plm"] == "rsh"
