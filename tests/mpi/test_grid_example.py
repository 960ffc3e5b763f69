"""examples/jacobi2d_grid.py under real ``mpirun``: bitwise the serial result on 2-D grids.

The example registers its array with ``Block2D`` or ``BlockCyclic2D`` and, with ``--regrid-at``,
moves it between process grids of different shapes in mid-run with ``move_array`` (the data
movement of a resize, without a cluster).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "jacobi2d_grid.py")


@pytest.mark.parametrize(
    ("nprocs", "args", "moved"),
    [
        (4, ["--n", "48"], ""),
        (4, ["--n", "48", "--regrid-at", "7", "--to", "3"], "2x2 -> 1x3"),
        (6, ["--n", "45", "--regrid-at", "4", "--to", "4"], "2x3 -> 2x2"),
        (4, ["--n", "30", "--block", "4", "--regrid-at", "5", "--to", "2"], "2x2 -> 1x2"),
    ],
)
def test_example_matches_serial_run(mpirun, nprocs: int, args: list[str], moved: str) -> None:
    result = mpirun(nprocs, [EXAMPLE, "--iterations", "15", "--check", *args], timeout_s=120)
    assert result.returncode == 0, result.describe()
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["matches_serial"] is True and summary["max_abs_error"] == 0.0
    assert summary["moved"] == moved
    assert summary["iterations"] == 15
