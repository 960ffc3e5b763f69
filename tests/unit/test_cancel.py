"""``elastic-slurm cancel`` and :func:`elastic_slurm.jobs.cancel` on the in-memory Slurm.

A job that has already ended is said to have ended, not reported as cancelled; its helper
allocations still pending or running are cancelled; as with ``scancel``, one job that cannot be
cancelled does not stop the others.
"""

from __future__ import annotations

import json

import pytest

from elastic_slurm import jobs
from elastic_slurm.adapter.fake import FakeSlurm
from elastic_slurm.cli.main import main
from elastic_slurm.errors import InvalidRequest


@pytest.fixture
def slurm(monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    fake = FakeSlurm(("n1", "n2", "n3", "n4"))
    monkeypatch.setattr(jobs, "site_backend", lambda site: fake)
    return fake


def _job(slurm: FakeSlurm, nodes: int = 1) -> int:
    return slurm.sbatch([f"--nodes={nodes}", "--job-name=app"])


def test_a_running_job_is_cancelled_with_its_sibling(slurm):
    job = _job(slurm)
    sibling = slurm.allocate(1, name=f"sibling:{job}", immediate_s=1)
    assert jobs.cancel(slurm, job) == [job, sibling]
    assert {slurm.store[job].state, slurm.store[sibling].state} == {"CANCELLED"}


def test_an_ended_job_is_not_reported_as_cancelled(slurm):
    job = _job(slurm)
    slurm.finish(job)
    with pytest.raises(InvalidRequest, match=rf"job {job} has already ended \(COMPLETED\)"):
        jobs.cancel(slurm, job)
    assert slurm.store[job].state == "COMPLETED"


def test_an_ended_jobs_leftover_allocation_is_cancelled(slurm):
    job = _job(slurm)
    sibling = slurm.allocate(1, name=f"sibling:{job}", immediate_s=1)
    slurm.finish(job)
    assert jobs.cancel(slurm, job) == [sibling]
    assert slurm.store[sibling].state == "CANCELLED"


def test_the_command_cancels_the_others_and_names_the_ended_one(slurm, capsys):
    ended, running = _job(slurm), _job(slurm)
    slurm.finish(ended)
    assert main(["cancel", str(ended), str(running)]) == 2
    out, err = capsys.readouterr()
    assert out == f"cancelled job {running}\n"
    assert (
        err
        == f"elastic-slurm: error: job {ended} has already ended (COMPLETED): nothing to cancel\n"
    )
    assert slurm.store[running].state == "CANCELLED"


def test_the_command_says_which_allocations_of_an_ended_job_it_cancelled(slurm, capsys):
    job = _job(slurm)
    sibling = slurm.allocate(1, name=f"sibling:{job}", immediate_s=1)
    slurm.finish(job)
    assert main(["cancel", str(job)]) == 0
    assert (
        capsys.readouterr().out
        == f"job {job} had already ended; cancelled its allocations [{sibling}]\n"
    )


def test_the_json_answer_carries_what_could_not_be_cancelled(slurm, capsys):
    ended, running = _job(slurm), _job(slurm)
    slurm.finish(ended)
    assert main(["cancel", "--json", str(ended), str(running), "99999"]) == 2
    answer = json.loads(capsys.readouterr().out)
    assert answer["cancelled"] == {str(running): [running]}
    assert set(answer["errors"]) == {str(ended), "99999"}
    assert "does not exist" in answer["errors"]["99999"]
