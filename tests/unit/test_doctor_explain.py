"""``doctor`` explains each "no" it prints, and says that it runs probe steps."""

from __future__ import annotations

import contextlib
import io
from dataclasses import replace
from pathlib import Path

import pytest
from probed import GOOD

from elastic_slurm.adapter.transport.local import LocalTransport
from elastic_slurm.cli.doctor import explain, spawn_test_blocker
from elastic_slurm.cli.main import main


def test_the_local_cluster_s_noes_are_explained_as_expected():
    why = dict(explain(GOOD))
    assert set(why) == {"PMIx spawn", "PMIx allocation requests"}
    assert "as expected" in why["PMIx spawn"] and "mpirun" in why["PMIx spawn"]
    assert (
        "as expected" in why["PMIx allocation requests"]
        and "-47" in why["PMIx allocation requests"]
    )


def test_every_no_gets_an_explanation_with_a_fix():
    bad = replace(
        GOOD,
        permit_job_expansion=False,
        disable_job_shrink=True,
        prolog_flags=("Contain",),
        accounting="accounting_storage/none",
        resizes_per_job="1 per job: Slurm 22.05 without slurmdbd refuses later updates",
        json_output=False,
        mpi_can_spawn=False,
        mpi_detail="a test spawn failed: mpirun detected that one or more processes exited",
        pyslurm=None,
        pyslurm_detail="not installed",
        pmix_spawn={"srun": False, "mpirun": False},
        pmix_detail={"srun": {"extend_status": 1}, "mpirun": {"extend_status": 1}},
        grow_path="sibling",
        grow_path_reason="permit_job_expansion is not set",
    )
    why = dict(explain(bad))
    assert list(why) == [
        "permit_job_expansion",
        "disable_job_shrink",
        "PrologFlags",
        "accounting",
        "JSON output (squeue --json)",
        "MPI can spawn",
        "pyslurm",
        "PMIx spawn",
        "PMIx allocation requests",
        "grow path",
    ]
    assert "scontrol reconfigure" in why["permit_job_expansion"]
    assert "remove disable_job_shrink" in why["disable_job_shrink"]
    assert "slurmdbd" in why["accounting"]
    assert "mpirun -n 1" in why["MPI can spawn"]  # how to see the whole failure
    assert "as expected" not in why["PMIx allocation requests"]
    assert "mpirun: no" in why["PMIx spawn"]


def test_missing_mpi_and_unknown_probe_steps_are_explained():
    why = dict(
        explain(
            replace(
                GOOD,
                mpi=None,
                mpi_can_spawn=None,
                mpi_detail="no mpirun: not found",
                pmix_version=None,
                pmix_spawn={"srun": "unknown: no node free", "mpirun": "unknown: no node free"},
                pmix_allocation={},
            )
        )
    )
    assert "install Open MPI" in why["MPI"]
    assert "no node free" in why["PMIx"] and "idle" in why["PMIx"]


def test_a_spawn_test_without_mpi4py_is_unknown_not_false(tmp_path: Path):
    shadow = tmp_path / "mpi4py"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('no mpi4py here')\n")
    failed = replace(GOOD, mpi_can_spawn=False, mpi_detail="a test spawn failed: Exit code: 1")
    blocker = spawn_test_blocker(failed, LocalTransport(env={"PYTHONPATH": str(tmp_path)}))
    assert blocker is not None and "cannot import mpi4py" in blocker
    assert "elastic-slurm[mpi]" in blocker
    # with mpi4py, the failure is about MPI and stays a no
    assert spawn_test_blocker(failed, LocalTransport()) is None
    assert spawn_test_blocker(GOOD, LocalTransport(env={"PYTHONPATH": str(tmp_path)})) is None


def test_the_help_says_that_doctor_runs_probe_steps():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["doctor", "--help"])
    text = " ".join(out.getvalue().split())
    assert "test MPI spawn" in text and "one-node job steps" in text
    assert "explained" in text


def test_over_ssh_the_unprobed_parts_say_where_to_run_doctor():
    why_ssh = "unknown: not probed over SSH (run doctor on the login node)"
    why = dict(
        explain(
            replace(
                GOOD,
                mpi_can_spawn=None,
                mpi_detail="spawn not tested over SSH (run doctor on the login node)",
                pyslurm=None,
                pyslurm_detail="not probed over SSH",
                pmix_version=None,
                pmix_spawn={"srun": why_ssh, "mpirun": why_ssh},
                pmix_allocation={"srun": why_ssh, "mpirun": why_ssh},
                pmix_detail={},
            )
        )
    )
    assert set(why) == {"MPI can spawn", "pyslurm", "PMIx"}
    assert "run doctor on the login node" in why["PMIx"] and "idle" not in why["PMIx"]
    assert why["MPI can spawn"].startswith("unknown: spawn not tested over SSH")
