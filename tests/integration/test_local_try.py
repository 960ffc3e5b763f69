"""``elastic-slurm try`` on this machine: plain ``mpirun``, no Slurm, no controller.

The fixture program (``apps/try_jacobi.py``) is a row-block Jacobi sweep with ghost rows, in a
right port and in wrong ones; each test runs the command as a user would and reads its table
and the records it leaves. Marked ``mpi``: they need Open MPI and mpi4py, not the cluster.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]
APP = str(Path(__file__).resolve().parent / "apps" / "try_jacobi.py")


@functools.cache
def _why_not() -> str | None:
    if importlib.util.find_spec("mpi4py") is None:
        return f"mpi4py is not installed for {sys.executable}"
    if shutil.which("mpirun") is None:
        return "no mpirun on PATH (install Open MPI)"
    return None


def run_try(
    tmp_path: Path,
    mode: str,
    *options: str,
    iterations: int | None = None,
    sizes: tuple[str, ...] = ("--grow-to", "4", "--shrink-to", "1"),
) -> subprocess.CompletedProcess[str]:
    """``elastic-slurm try --np 2 --grow-to 4 --shrink-to 1 OPTIONS -- APP MODE [ITERATIONS]``."""
    argv = [
        sys.executable,
        "-m",
        "elastic_slurm",
        "try",
        "--np",
        "2",
        *sizes,
        "--every",
        "3",
        "--point-timeout",
        "10",
        "--timeout",
        "50",
        "--workdir",
        str(tmp_path / "try"),
        *options,
        "--",
        APP,
        mode,
        *([str(iterations)] if iterations is not None else []),
    ]
    return try_command(argv, tmp_path)


def try_command(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (an ``elastic-slurm try`` command) with this checkout's package."""
    why = _why_not()
    if why:
        pytest.skip(why)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    return subprocess.run(argv, capture_output=True, text=True, timeout=110, env=env, cwd=cwd)


def row(stdout: str, label: str) -> list[str]:
    """The table row of run ``label``, split into its cells."""
    (line,) = [ln for ln in stdout.splitlines() if ln.split()[:1] == [label]]
    return line.split()


def checked(tmp_path: Path, label: str) -> list[dict]:
    path = tmp_path / "try" / label / "local-try.jsonl"
    records = [json.loads(ln) for ln in path.read_text().splitlines()]
    return [r for r in records if r["event"] == "checked"]


def test_a_right_port_passes_with_both_join_strategies(tmp_path: Path) -> None:
    res = run_try(tmp_path, "right")
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert row(res.stdout, "unresized")[-1] == "PASS", out
    for label in ("spawn", "restart"):
        cells = row(res.stdout, label)
        assert cells[1:4] == ["2->4->1", "2/2", "ok"], out
        assert cells[-1] == "PASS", out
    # each resize went the way its strategy says, and the arrays were checked after each
    assert [(r["strategy"], r["ranks"]) for r in checked(tmp_path, "spawn")] == [
        ("spawn", 4),
        ("restart", 1),
    ]
    assert [(r["strategy"], r["ranks"]) for r in checked(tmp_path, "restart")] == [
        ("restart", 4),
        ("restart", 1),
    ]
    assert all(not r["changed"] for r in checked(tmp_path, "spawn") + checked(tmp_path, "restart"))
    # each restart's waiting successor said it had read the checkpoint: the old ranks waited
    # for that (asleep) before ending, so their exit did not slow its restore
    events = [
        json.loads(ln)
        for ln in (tmp_path / "try" / "restart" / "events.jsonl").read_text().splitlines()
    ]
    handed = [(e["seq"], e["took"]) for e in events if e["event"] == "handed_over"]
    assert handed == [(1, True), (2, True)], out
    # after a grow by spawn the old ranks are two MPI worlds: one of them speaks for both
    # (before they disconnect), else the other waits in vain for the marker already removed
    events = [
        json.loads(ln)
        for ln in (tmp_path / "try" / "spawn" / "events.jsonl").read_text().splitlines()
    ]
    handed = [(e["seq"], e["took"]) for e in events if e["event"] == "handed_over"]
    assert handed == [(2, True)], out


def test_a_port_that_keeps_computing_on_its_old_copy_is_caught(tmp_path: Path) -> None:
    """It never takes the redistributed rows back: a spawn grow breaks it (a restart re-runs
    the top of the program, which takes them, so that run passes: both strategies matter)."""
    res = run_try(tmp_path, "stale")
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert row(res.stdout, "spawn")[-1] == "FAIL", out
    assert "a copy kept from before the resize is stale" in res.stdout, out
    assert "holds float64(24, 16) at a resize point, its share is float64(12, 16)" in res.stdout
    assert row(res.stdout, "restart")[-1] == "PASS", out


def test_initial_values_written_over_resumed_rows_change_the_results(tmp_path: Path) -> None:
    res = run_try(tmp_path, "noguard", "--strategy", "restart")
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert row(res.stdout, "restart")[-1] == "FAIL", out
    assert "restart: results differ from the unresized run: number 1 differs:" in res.stdout, out
    # the runtime moved the data right: the program overwrote it afterwards
    assert all(not r["changed"] for r in checked(tmp_path, "restart"))


def test_a_resize_point_one_rank_skips_names_that_rank(tmp_path: Path) -> None:
    res = run_try(tmp_path, "missing", "--strategy", "spawn", "--point-timeout", "5")
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert row(res.stdout, "spawn")[-1] == "FAIL", out
    assert "MissingRanks: resize point vote" in res.stdout, out
    assert "rank(s) [1] of 2 did not reach it within 5 s" in res.stdout, out


def test_a_program_that_ends_while_new_ranks_are_spawned_ends_with_the_order_failed(
    tmp_path: Path,
) -> None:
    """The grow is ordered at point 3 and spawned in the background; the program ends at point
    4, before any resize point takes the new ranks in. They leave, MPI_Finalize returns (it
    used to hang until the timeout), and the order is reported failed with what to change."""
    res = run_try(tmp_path, "right", "--strategy", "spawn", iterations=4, sizes=("--grow-to", "4"))
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert row(res.stdout, "spawn")[-1] == "FAIL", out
    assert "timed out" not in res.stdout, out
    assert (
        "order 1 failed: the application ended before a resize point took in the new ranks; "
        "give it more resize points after the order (lower --every)"
    ) in res.stdout, out


def test_state_that_cannot_survive_a_resize_is_refused_where_it_is_set(tmp_path: Path) -> None:
    res = run_try(tmp_path, "badstate")
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert row(res.stdout, "unresized")[-1] == "FAIL", out
    assert "ValueError: state['history'] is a list" in res.stdout, out
    assert "no resized run was tried" in res.stdout
    # the traceback points at the line that set it, before any resize
    err = (tmp_path / "try" / "unresized" / "generation-0.err").read_text()
    assert 'ec.state["history"] = [0.0]' in err, err


def test_a_fast_2d_block_cyclic_example_passes_compared_by_its_checksum(tmp_path: Path) -> None:
    """``examples/jacobi2d_grid.py`` on a 2-D block-cyclic grid, iterations of about 1 ms.

    Rank 0 holds at the resize point where an order is forced until the runtime is ready, so
    even this fast program is resized (2 -> 4 -> 1 grids); its successor may end before the old
    generation's ``mpirun`` has (the launcher must not take that for a failed handover).
    """
    example = str(ROOT / "examples" / "jacobi2d_grid.py")
    argv = [
        *(sys.executable, "-m", "elastic_slurm", "try", "--every", "20", "--point-timeout", "10"),
        *("--timeout", "50", "--workdir", str(tmp_path / "try")),
        *("--match", '"checksum": [^,}]+'),
        *("--", example, "--n", "60", "--iterations", "400", "--block", "4"),
    ]
    res = try_command(argv, tmp_path)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    for label in ("spawn", "restart"):
        assert row(res.stdout, label)[1:4] == ["2->4->1", "2/2", "ok"], out
