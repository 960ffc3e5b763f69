"""The site soak, short: 8 nodes, 3 minutes of arrivals, every fault (``docs/soak.md``).

It runs on a soak cluster of its own (``soak/site.yaml``: its own directories, ports,
bridge and names), not on the shared local cluster, and takes it down at the end. Nothing may
be lost or leaked, and every scheduled fault must really have been injected.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from elastic_slurm.soak.schedule import FAULTS

pytestmark = pytest.mark.slurm


@pytest.mark.timeout(2400)
def test_soak_8_nodes_3_minutes(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("the soak cluster needs root")
    out = tmp_path / "soak"
    run = subprocess.run(
        [sys.executable, "-m", "elastic_slurm.soak", "--nodes", "8", "--minutes", "3"]
        + ["--jobs", "30", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=2300,
    )
    (out / "table.md").write_text(run.stdout)
    assert (out / "soak.json").exists(), f"no result; stderr:\n{run.stderr[-4000:]}"
    result = json.loads((out / "soak.json").read_text())
    detail = f"{run.stdout}\nstderr:\n{run.stderr[-3000:]}"
    assert [f["name"] for f in result["faults"]] == list(FAULTS)
    assert all(f["injected"] for f in result["faults"]), detail
    assert result["jobs"]["completed"] > 0, detail
    assert result["jobs"]["lost"] == {}, detail
    assert result["resizes"]["lost"] == [], detail
    assert result["leaked"] == {}, detail
    assert result["resizes"]["done"] > 0, detail
    assert run.returncode == (1 if result["failures"] else 0), detail
    assert result["failures"] == [], detail
