"""The user guide's walkthrough runs as written (its sh blocks marked <!-- walkthrough -->)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from elastic_slurm.resources import example

from .helpers import all_idle, wait

pytestmark = pytest.mark.slurm

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "user-guide.md"


def walkthrough() -> str:
    """The marked shell blocks of the guide, in order, as one script."""
    blocks = re.findall(r"<!-- walkthrough -->\n```sh\n(.*?)```", GUIDE.read_text(), re.S)
    assert len(blocks) >= 4, "the guide lost its walkthrough markers"
    return "".join(blocks)


def test_the_walkthrough_runs_as_written(local_cluster, shared_tmp):
    wait(all_idle, 60, "all nodes idle before the test")
    shutil.copy(example("heat2d.py"), shared_tmp / "heat2d.py")
    script = "set -euo pipefail\n" + walkthrough() + 'echo "JOB=$JOB"\n'
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    res = subprocess.run(
        ["bash", "-c", script],
        cwd=shared_tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    job = re.search(r"JOB=(\d+)", res.stdout).group(1)
    out = res.stdout
    assert re.search(rf"{job}\s+heat\s+\S+\s+RUNNING\s+malleable\s+2\s+1\s+4", out), out
    assert f"job {job}: expand 2 -> 4 node(s) done" in out
    assert f"job {job}: shrink 4 -> 2 node(s) done" in out
    assert "Sizes (accounting): 2 -> 4 -> 2" in out
    assert f"cancelled job {job}" in out
    wait(all_idle, 30, "nothing left allocated")
