"""The Python API: ``elastic_slurm.submit`` returns a Job to read, wait on, resize and cancel.

Run against the in-memory Slurm (:class:`~elastic_slurm.adapter.fake.FakeSlurm`, which passes
the backend contract tests), with a site config made here; the live tests
(``tests/integration/test_api_live.py``) run the same calls on the real cluster.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

import elastic_slurm
from elastic_slurm import api
from elastic_slurm.adapter.fake import FakeSlurm
from elastic_slurm.config.schema import ControllerConfig, SiteConfig
from elastic_slurm.controller.journal import Journal, ResizeRow
from elastic_slurm.errors import ConfigError, InvalidRequest
from elastic_slurm.job import Job, expand_output_pattern, scontrol_field
from elastic_slurm.jobspec import load_spec
from elastic_slurm.model.resize_order import ResizeAction, ResizeOrder
from elastic_slurm.protocol.jobdir import JobDir
from elastic_slurm.waiting import DeadlineExceeded


@pytest.fixture
def site(tmp_path: Path) -> SiteConfig:
    return SiteConfig(
        name="apitest",
        partition="debug",
        account="physics",
        controller=ControllerConfig(
            journal=tmp_path / "journal.sqlite", address="127.0.0.1:7717", slurm_retry_s=1
        ),
    )


@pytest.fixture
def fake() -> FakeSlurm:
    return FakeSlurm()


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "work"
    d.mkdir()
    monkeypatch.chdir(d)
    return d


def test_submit_a_program_then_read_wait_and_cancel(site, fake, workdir):
    job = elastic_slurm.submit(program="/bin/sleep 60", nodes=2, site=site, slurm=fake)
    assert isinstance(job, Job) and job.job_id in fake.store
    record = fake.store[job.job_id]
    assert record.nodes_min == 2 and record.workdir == str(workdir)
    assert record.account == "physics"  # the site's default
    assert job.state == "RUNNING" and not job.done()
    fake.finish(job.job_id, "FAILED")
    assert job.wait(timeout=5, interval_s=0.01) == "FAILED" and job.done()
    other = elastic_slurm.submit(program=["/bin/sleep", "60"], site=site, slurm=fake)
    assert other.cancel() == [other.job_id]
    assert other.state == "CANCELLED"


def test_wait_raises_a_timeout_error_and_the_job_goes_on(site, fake, workdir):
    job = elastic_slurm.submit(program="/bin/sleep 60", site=site, slurm=fake)
    start = time.monotonic()
    with pytest.raises(DeadlineExceeded, match=f"job {job.job_id} to end") as info:
        job.wait(timeout=0.2, interval_s=0.05)
    assert isinstance(info.value, TimeoutError)
    assert time.monotonic() - start < 5
    assert job.state == "RUNNING"
    with pytest.raises(InvalidRequest, match="timeout must be"):
        job.wait(timeout=-1)


def test_an_elastic_job_from_a_mapping_with_options_on_top(site, fake, workdir):
    spec = {"program": "/bin/sleep 60", "kind": "malleable", "nodes": "1-2", "job_name": "a"}
    job = elastic_slurm.submit(
        spec, nodes=(1, 4), start_nodes=2, job_name="b", site=site, slurm=fake
    )
    record = fake.store[job.job_id]
    assert record.name == "b" and len(record.nodes) == 2
    assert "kind=malleable;min=1;max=4" in record.comment
    info = job.info()
    assert (info.kind, info.size, info.nodes_min, info.nodes_max) == ("malleable", 2, 1, 4)


def test_a_job_file_with_its_workdir_relative_to_the_file(site, fake, tmp_path, workdir):
    files = tmp_path / "files"
    (files / "run").mkdir(parents=True)
    spec = files / "job.yaml"
    spec.write_text("program: [/bin/sleep, '60']\nworkdir: run\nnodes: 3\n")
    job = elastic_slurm.submit(spec, site=site, slurm=fake)
    assert fake.store[job.job_id].workdir == str(files / "run")
    assert fake.store[job.job_id].nodes_min == 3
    assert job.workdir == files / "run"


def test_bad_jobs_are_refused_before_slurm_sees_them(site, fake, workdir):
    with pytest.raises(ConfigError, match=r"^submit\(\): nodez: Extra inputs"):
        elastic_slurm.submit(program="/bin/true", nodez=2, site=site, slurm=fake)
    with pytest.raises(InvalidRequest, match="at least 9 node"):
        elastic_slurm.submit(program="/bin/true", nodes=9, site=site, slurm=fake)
    with pytest.raises(InvalidRequest, match="moldable job needs a node range"):
        elastic_slurm.submit(program="/bin/true", kind="moldable", nodes=2, site=site, slurm=fake)
    with pytest.raises(InvalidRequest, match="does not exist"):
        elastic_slurm.submit(program="./missing.py", site=site, slurm=fake)
    with pytest.raises(ConfigError, match="nowhere.yaml"):
        elastic_slurm.submit(workdir / "nowhere.yaml", site=site, slurm=fake)
    assert fake.store == {}


def test_from_id_checks_that_the_job_exists(site, fake, workdir):
    job = elastic_slurm.submit(program="/bin/sleep 60", site=site, slurm=fake)
    again = Job.from_id(str(job.job_id), site=site, slurm=fake)
    assert again == job and again.workdir == workdir
    with pytest.raises(InvalidRequest, match="job 4242 does not exist"):
        Job.from_id(4242, site=site, slurm=fake)
    with pytest.raises(InvalidRequest, match="a job id is a positive integer"):
        Job.from_id("12; rm -rf /", site=site, slurm=fake)
    with pytest.raises(InvalidRequest, match="a job id is a positive integer"):
        Job(0, site=site, slurm=fake)


def test_the_state_of_a_job_slurmctld_forgot_comes_from_accounting(site, fake, workdir):
    job = elastic_slurm.submit(program="/bin/sleep 60", site=site, slurm=fake)
    fake.finish(job.job_id)
    history = fake.store[job.job_id].history
    fake.store.pop(job.job_id)  # MinJobAge passed
    fake.allocation_history = lambda job_id: list(history)  # type: ignore[method-assign]
    assert job.state == "COMPLETED"
    fake.allocation_history = lambda job_id: []  # type: ignore[method-assign]
    with pytest.raises(InvalidRequest, match="does not exist"):
        job.state  # noqa: B018


def test_resize_refuses_what_cannot_be_resized(site, fake, workdir):
    rigid = elastic_slurm.submit(program="/bin/sleep 60", site=site, slurm=fake)
    with pytest.raises(InvalidRequest, match="is rigid: only malleable and evolving"):
        rigid.resize(2, grow_path="merge")
    elastic = elastic_slurm.submit(
        program="/bin/sleep 60", kind="malleable", nodes="1-2", site=site, slurm=fake
    )
    with pytest.raises(InvalidRequest, match="outside job .* range 1-2"):
        elastic.resize(3, grow_path="merge")
    assert len(fake.store[elastic.job_id].nodes) == 1  # nothing changed


def test_history_is_what_show_lists(site, fake, workdir):
    job = elastic_slurm.submit(
        program="/bin/sleep 60", kind="malleable", nodes="1-4", site=site, slurm=fake
    )
    assert job.history == []
    user = fake.store[job.job_id].user
    JobDir.for_job(workdir, job.job_id, user=user).write_order(
        ResizeOrder(1, ResizeAction.EXPAND, ("n1", "n2"), time.time())
    )
    journal = Journal(site.controller.journal)
    journal.record_observed(
        ResizeRow(
            job.job_id, 0, "expand", "observed", ("n1",), ("n1", "n3"), time.time(), by="user"
        )
    )
    journal.close()
    shown = [(r.seq, r.action, r.status, r.by) for r in job.history]
    assert shown == [(1, "expand", "open", ""), (0, "expand", "observed", "user")]
    fake.finish(job.job_id)
    assert [r.status for r in job.history] == ["job_ended", "observed"]


def test_output_paths_follow_the_pattern_submitted(site, fake, workdir):
    job = elastic_slurm.submit(
        program="/bin/sleep 60", output="logs/%x-%j.log", job_name="heat", site=site, slurm=fake
    )
    assert job.stdout == workdir / "logs" / f"heat-{job.job_id}.log"
    assert job.stderr == job.stdout
    plain = elastic_slurm.submit(program="/bin/sleep 60", site=site, slurm=fake)
    assert plain.stdout == workdir / f"slurm-{plain.job_id}.out"


def test_scontrol_fields_and_patterns():
    line = "JobId=7 JobName=x WorkDir=/w d StdErr=/w d/slurm-7.out StdIn=/dev/null StdOut=/o"
    assert scontrol_field(line, "StdErr") == "/w d/slurm-7.out"
    assert scontrol_field(line, "StdOut") == "/o"
    assert scontrol_field(line, "Missing") == ""
    path = expand_output_pattern("%u/%A_%a-%j.%%", job_id=9, user="al", array_job_id=8)
    assert str(path) == "al/8_%a-9.%"


def test_prepare_fills_in_the_site_defaults(site, tmp_path, workdir):
    spec = load_spec(None, {"program": ["/bin/true"], "qos": "high", "workdir": "sub"})
    req, sized_by, where = api.prepare(spec, site, base=tmp_path)
    assert (req.partition, req.account, req.qos) == ("debug", "physics", "high")
    assert sized_by == "slurm" and where == (tmp_path / "sub").resolve()
    spec = load_spec(None, {"program": ["/bin/true"], "grace_period_s": 7200})
    with pytest.raises(InvalidRequest, match="longer than this site allows"):
        api.prepare(spec, site)


def test_importing_the_package_loads_neither_the_job_module_nor_numpy():
    code = (
        "import sys, elastic_slurm\n"
        "assert 'elastic_slurm.job' not in sys.modules\n"
        "assert 'numpy' not in sys.modules and 'mpi4py' not in sys.modules\n"
        "from elastic_slurm import Job, submit\n"
        "assert Job.__module__ == 'elastic_slurm.job' and callable(submit)\n"
        "assert 'numpy' not in sys.modules\n"
        "try:\n    elastic_slurm.nothing\nexcept AttributeError as e:\n    print(e)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert res.returncode == 0, res.stderr
    assert "has no attribute 'nothing'" in res.stdout


@pytest.mark.parametrize(
    ("kind", "nodes", "tag"),
    [
        ("moldable", "1-3", "kind=moldable;min=1;max=3"),
        ("evolving", "1-4", "kind=evolving;min=1;max=4"),
        ("malleable", "2-4", "kind=malleable;min=2;max=4"),
    ],
)
def test_each_elastic_kind_is_tagged_for_the_controller(site, fake, workdir, kind, nodes, tag):
    job = elastic_slurm.submit(
        program="/bin/sleep 60", kind=kind, nodes=nodes, speedup="amdahl:0.9", site=site, slurm=fake
    )
    assert tag in fake.store[job.job_id].comment
    assert job.info().kind == kind


def test_submit_a_batch_script_its_sbatch_lines_apply_and_options_override(site, fake, workdir):
    script = workdir / "run.sh"
    script.write_text('#!/bin/bash\n#SBATCH --time=5\n#SBATCH -N 2\nsrun hostname "$1"\n')
    job = elastic_slurm.submit(script=script, script_args=["x"], site=site, slurm=fake)
    record = fake.store[job.job_id]
    assert record.name == "run.sh"  # named after its file, as sbatch names it
    assert (record.nodes_min, record.time_limit_s) == (2, 300)
    again = elastic_slurm.submit(script=script, nodes=1, time="7", site=site, slurm=fake)
    assert (fake.store[again.job_id].nodes_min, fake.store[again.job_id].time_limit_s) == (1, 420)
    with pytest.raises(InvalidRequest, match="one of spec, program and script"):
        elastic_slurm.submit(program="true", script=script, site=site, slurm=fake)
    (workdir / "app.py").write_text("print(1)\n")
    with pytest.raises(InvalidRequest, match="not a batch script"):
        elastic_slurm.submit(script=workdir / "app.py", site=site, slurm=fake)
