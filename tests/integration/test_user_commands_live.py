"""What a user types: submit, queue, show, resize, cancel, end to end on the real cluster."""

from __future__ import annotations

import getpass
import json
import subprocess
import sys
from pathlib import Path

import pytest

from elastic_slurm import jobs
from elastic_slurm.errors import InvalidRequest
from elastic_slurm.resources import example

from .helpers import all_idle, helpers_alive, job_state, scontrol_job, slurm_held, wait

pytestmark = pytest.mark.slurm


def cli(*args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
    res = subprocess.run(
        [sys.executable, "-m", "elastic_slurm", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        check=False,
    )
    if check:
        assert res.returncode == 0, res.stdout + res.stderr
    return res


def test_submit_watch_resize_show_cancel(local_cluster, shared_tmp):
    wait(all_idle, 60, "all nodes idle before the test")
    heat = str(example("heat2d.py"))
    job = int(
        cli(
            "submit",
            "--parsable",
            "--kind",
            "malleable",
            "--nodes",
            "1-4",
            "--start-nodes",
            "2",
            "-J",
            "heat",
            "-o",
            "heat-%j.out",
            "--grace-period",
            "60",
            "--",
            heat,
            "--n",
            "256",
            "--iterations",
            "4000",
            "--pace-s",
            "0.01",
            cwd=shared_tmp,
        ).stdout
    )
    try:
        wait(lambda: job_state(job) == "RUNNING", 30, "the job to start")
        fields = scontrol_job(job)
        assert fields["NumNodes"] == "2" and fields["JobName"] == "heat"
        assert "elastic-slurm:kind=malleable;min=1;max=4;grace=60" in fields["Comment"]
        (line,) = [j for j in json.loads(cli("queue", "--json").stdout) if j["job_id"] == job]
        assert (line["kind"], line["size"], line["nodes_min"], line["nodes_max"]) == (
            "malleable",
            2,
            1,
            4,
        )
        events = shared_tmp / ".elastic-slurm" / f"job-{job}" / "events.jsonl"
        wait(lambda: events.exists() and "launch" in events.read_text(), 60, "the application")
        out = json.loads(cli("resize", str(job), "--nodes", "4", "--json").stdout)
        assert out["ok"] is True and len(out["nodes"]) == 4
        assert len(slurm_held(job)) == 4  # Slurm agrees
        out = json.loads(cli("resize", str(job), "--nodes", "1", "--json").stdout)
        assert out["ok"] is True and slurm_held(job) == {scontrol_job(job)["BatchHost"]}
        shown = json.loads(cli("show", str(job), "--json").stdout)
        assert [(r["action"], len(r["nodes"]), r["status"]) for r in shown["resizes"]] == [
            ("expand", 4, "done"),
            ("shrink", 1, "done"),
        ]
        assert all(r["seconds"] > 0 for r in shown["resizes"])
        text = cli("show", str(job)).stdout
        assert "Kind=malleable" in text and "1. expand to 4 node(s)" in text
        res = cli("cancel", str(job))
        assert f"cancelled job {job}" in res.stdout
        wait(lambda: job_state(job) != "RUNNING", 30, "the job to end")
    finally:
        subprocess.run(["scancel", str(job)], check=False)
    wait(all_idle, 30, "nothing left allocated")
    assert helpers_alive(job) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nodes", "3-2", "--kind", "malleable"], "impossible node range 3-2"),
        (["--nodes", "2", "--kind", "moldable"], "a moldable job needs a node range"),
        (["--nodes", "1-2"], "a rigid job has one size"),
        (["--time", "soon"], "not in a Slurm format"),
        (
            ["--speedup", "amdahl:1.5", "--kind", "moldable", "--nodes", "1-2"],
            "parallel fraction must be in [0, 1]",
        ),
        (["--nodes", "99"], "at least 99 node(s) but the cluster has 4"),
        (["--array", "x-y"], "is not a list of task ids"),
    ],
)
def test_bad_submissions_say_what_to_change(local_cluster, shared_tmp, args, message):
    before = {j["job_id"] for j in json.loads(cli("queue", "--json").stdout)}
    res = cli("submit", *args, "--", "/bin/true", cwd=shared_tmp, check=False)
    # as sbatch's: 255 for what was typed, 1 for what the cluster cannot do
    assert res.returncode == (1 if "99" in args else 255), res.stderr
    assert message in res.stderr, res.stderr
    assert {j["job_id"] for j in json.loads(cli("queue", "--json").stdout)} == before


def test_a_job_file_with_command_line_overrides(local_cluster, shared_tmp):
    spec = shared_tmp / "job.yaml"
    spec.write_text(
        "program: [/bin/sleep, '30']\nkind: moldable\nnodes: 1-3\ntime: '5'\n"
        "job_name: from-file\nspeedup: downey:4:0.5\n"
    )
    job = int(cli("submit", "--parsable", str(spec), "-J", "overridden", cwd=shared_tmp).stdout)
    try:
        fields = scontrol_job(job)
        assert fields["JobName"] == "overridden" and fields["TimeLimit"] == "00:05:00"
        assert "kind=moldable;min=1;max=3;speedup=downey:4:0.5" in fields["Comment"]
    finally:
        cli("cancel", str(job))
    bad = shared_tmp / "bad.yaml"
    bad.write_text("program: [/bin/true]\nnodez: 3\n")
    res = cli("submit", str(bad), cwd=shared_tmp, check=False)
    assert res.returncode == 255 and f"{bad}: nodez: Extra inputs are not permitted" in res.stderr


def test_rigid_jobs_and_other_users_jobs_are_not_resized(slurm, shared_tmp):
    job = int(
        cli("submit", "--parsable", "-N", "1", "--", "/bin/sleep", "60", cwd=shared_tmp).stdout
    )
    try:
        wait(lambda: job_state(job) == "RUNNING", 30, "the job to start")
        res = cli("resize", str(job), "--nodes", "2", check=False)
        assert res.returncode == 2 and "is rigid: only malleable and evolving" in res.stderr
        with pytest.raises(InvalidRequest, match="belongs to root, not to you \\(alice\\)"):
            jobs.resize(slurm, job, 2, user="alice")
        with pytest.raises(InvalidRequest, match="belongs to root"):
            jobs.cancel(slurm, job, user="alice")
        assert getpass.getuser() == "root" and job_state(job) == "RUNNING"
    finally:
        slurm.cancel(job)
