"""The main job end to end, as a user runs it: ``elastic-slurm demo --json``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from elastic_slurm.adapter.hostlist import expand

from .helpers import all_idle, sacct_sizes, wait

pytestmark = pytest.mark.slurm


def test_demo_grows_shrinks_and_matches_the_rigid_run(local_cluster, shared_tmp: Path):
    wait(all_idle, 60, "all nodes idle before the demo")
    res = subprocess.run(
        [sys.executable, "-m", "elastic_slurm", "demo", "--json", "--workdir", str(shared_tmp)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    job, rigid = summary["job_id"], summary["rigid_job_id"]

    assert summary["result_matches_rigid"] is True
    assert summary["max_abs_error"] == 0.0  # same expression at any size: bitwise equal
    assert summary["leaked_nodes"] == 0 and all_idle()
    assert summary["node_counts"][:3] == [2, 4, 2]
    assert len(summary["resize_seconds"]) == len(summary["node_counts"]) - 1
    assert all(s > 0 for s in summary["resize_seconds"])
    # the application's pause is measured for every resize, and is well below its total
    pauses = summary["resize_pause_seconds"]
    assert len(pauses) == len(summary["resize_seconds"]) and all(p is not None for p in pauses)
    assert all(0 < p < s for p, s in zip(pauses, summary["resize_seconds"], strict=True))

    # Slurm's own accounting agrees: 2 nodes, then 4, then 2, and the job completed
    records = sacct_sizes(job)
    assert [nn for _s, nn, _nl in records][:3] == [2, 4, 2], records
    assert records[-1][0] == "COMPLETED"
    grown, shrunk = set(expand(records[1][2])), set(expand(records[2][2]))
    released = grown - shrunk
    # the rigid reference job ran on exactly the nodes the malleable job gave back
    (rigid_record,) = sacct_sizes(rigid)
    assert rigid_record[0] == "COMPLETED" and set(expand(rigid_record[2])) == released
    # the human-readable timeline went to the terminal too
    assert "sizes as Slurm reported" in res.stdout
