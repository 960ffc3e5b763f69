"""``elastic-slurm try`` without MPI: the array checksum, the plan, the comparison of results."""

from __future__ import annotations

import numpy as np
import pytest

from elastic_slurm.errors import InvalidRequest
from elastic_slurm.mpi_runtime.data import Block, Block2D, BlockCyclic, BlockCyclic2D, DistArray
from elastic_slurm.mpi_runtime.local import (
    LocalCheckFailed,
    local_checksum,
    parse_plan,
    virtual_nodes,
)
from elastic_slurm.mpi_runtime.local_launcher import local_env
from elastic_slurm.mpi_runtime.local_try import compare, explain_failure, pick, plan_sizes

MASK = (1 << 64) - 1
DISTS = [Block(), BlockCyclic(3), Block2D(), BlockCyclic2D(2, 3)]


def _share(dist, glob: np.ndarray, rank: int, size: int) -> tuple[dict, np.ndarray]:
    arr = DistArray("u", glob.shape, glob.dtype, dist, np.empty(0), rank, size)
    if isinstance(dist, Block2D | BlockCyclic2D):
        rows, cols = arr.grid_indices()
        local = glob[np.ix_(rows, cols)]
    else:
        local = glob[arr.indices()]
    return arr.meta(), np.ascontiguousarray(local)


def _sum(dist, glob: np.ndarray, size: int) -> int:
    total = 0
    for rank in range(size):
        meta, local = _share(dist, glob, rank, size)
        total += local_checksum(meta, local, rank, size)
    return total & MASK


@pytest.mark.parametrize("dtype", ["float64", "int32", "complex128", "S5", "float16"])
@pytest.mark.parametrize("dist", DISTS, ids=lambda d: type(d).__name__)
def test_the_checksum_is_the_same_at_every_rank_count(dist, dtype: str) -> None:
    rng = np.random.default_rng(7)
    glob = (rng.random((13, 10, 2)) * 1000).astype(dtype)
    sums = {size: _sum(dist, glob, size) for size in (1, 2, 3, 4, 6)}
    assert len(set(sums.values())) == 1, sums


@pytest.mark.parametrize("dist", DISTS, ids=lambda d: type(d).__name__)
def test_the_checksum_sees_one_changed_element_and_two_swapped_rows(dist) -> None:
    glob = np.arange(13 * 10, dtype=np.float64).reshape(13, 10)
    base = _sum(dist, glob, 4)
    changed = glob.copy()
    changed[7, 3] = np.nextafter(changed[7, 3], np.inf)  # one bit
    assert _sum(dist, changed, 4) != base
    swapped = glob.copy()
    swapped[[2, 9]] = swapped[[9, 2]]  # the same values, in the wrong rows
    assert _sum(dist, swapped, 4) != base


def test_a_local_part_of_the_wrong_shape_is_named() -> None:
    glob = np.zeros((12, 4))
    meta, local = _share(Block(), glob, 0, 2)
    with pytest.raises(LocalCheckFailed, match=r"rank 0 of 4 holds shape \(6, 4\), its share is"):
        local_checksum(meta, local, 0, 4)


def test_the_plan_and_the_nodes() -> None:
    assert parse_plan('{"plan": [4, 1], "every": 2}') == {"plan": [4, 1], "every": 2}
    for bad in ("[4]", '{"plan": [0]}', '{"plan": [2], "every": 0}', "nope"):
        with pytest.raises(ValueError, match="ELASTIC_SLURM_LOCAL_TRY"):
            parse_plan(bad)
    assert virtual_nodes(2) == ["local1", "local2"]
    assert plan_sizes(2, 4, 1) == [4, 1]
    assert plan_sizes(3, None, 2) == [2]
    for grow, shrink in ((2, None), (None, 3), (None, None), (4, 4)):
        with pytest.raises(InvalidRequest):
            plan_sizes(2 if grow != 4 else 2, grow, shrink)


def test_results_are_compared_number_by_number_within_the_tolerance() -> None:
    assert (
        compare("sum 1.000000000000e+02 after 30", "sum 1.000000000001e+02 after 30", 1e-9) is None
    )
    assert compare("sum 100 after 30", "sum 100 after 31", 1e-9) == (
        "number 2 differs: 30 (unresized) vs 31"
    )
    assert compare("sum 1.0", "total 1.0", 1e-9).startswith("line 1 differs")
    assert compare("a\nb", "a", 1e-9) == "2 line(s) (unresized) vs 1"
    assert pick("x 1\ny 2\n", "all") == "x 1\ny 2\n"


def test_the_explanation_of_a_failed_run_is_its_error_line() -> None:
    err = (
        "Traceback (most recent call last):\n  File x\n"
        "elastic_slurm.mpi_runtime.orders.MissingRanks: resize point vote 4: rank(s) [1] ...\n"
        "--------\nmpirun noticed that process rank 0 ...\nExit code:    1\n"
    )
    assert explain_failure(err).startswith("elastic_slurm.mpi_runtime.orders.MissingRanks: ")
    assert explain_failure("nothing useful\n") == "nothing useful"
    err = "elastic-slurm: layout ...\n/usr/bin/python3: No module named mpi4py\n-----\nExit code: 1"
    assert explain_failure(err) == "/usr/bin/python3: No module named mpi4py"


def test_a_local_run_drops_the_variables_of_a_job_and_of_an_mpi_runtime() -> None:
    base = {
        "SLURM_JOB_ID": "5",
        "OMPI_COMM_WORLD_RANK": "0",
        "ELASTIC_SLURM_CONTROLLER": "http://x",
        "ELASTIC_SLURM_JOB_DIR": "/j",
        "OMPI_MCA_ess": "singleton",  # a singleton's own: mpirun would exit at once
        "OMPI_MCA_btl_tcp_if_include": "lo",  # the user's own setting stays
        "HOME": "/h",
    }
    env = local_env(base, point_timeout_s=7, as_root=True)
    assert env["OMPI_MCA_btl_tcp_if_include"] == "lo" and "OMPI_MCA_ess" not in env
    assert env["OMPI_MCA_rmaps_base_oversubscribe"] == "1"
    assert "SLURM_JOB_ID" not in env and "ELASTIC_SLURM_CONTROLLER" not in env
    assert "ELASTIC_SLURM_JOB_DIR" not in env and "OMPI_COMM_WORLD_RANK" not in env
    assert env["ELASTIC_SLURM_RESIZE_POINT_TIMEOUT_S"] == "7"
    assert env["OMPI_ALLOW_RUN_AS_ROOT"] == "1" and env["HOME"] == "/h"


def test_notes_name_unchanged_arrays_and_a_spawn_run_that_never_spawned() -> None:
    from elastic_slurm.mpi_runtime.local_try import RunResult, unchanged_notes

    def run(label: str, records: list[dict]) -> RunResult:
        return RunResult(label, 0, 1.0, [2, 4], 1, 1, records, "", "", "")

    restarted = [{"event": "checked", "seq": 1, "strategy": "restart", "unchanged": []}]
    assert unchanged_notes(run("restart", restarted)) == []
    (note,) = unchanged_notes(run("spawn", restarted))
    assert note.startswith("spawn: no grow spawned")
    stale = [{"event": "checked", "seq": 2, "strategy": "spawn", "unchanged": ["u"]}]
    (note,) = unchanged_notes(run("spawn", stale))
    assert "array(s) u held the same data at order 2" in note


def test_an_order_rank_0_cannot_write_ends_the_run_at_once(tmp_path, capsys) -> None:
    """Rank 0 writes ``try``'s orders alone; if it cannot, the others would wait for it at
    the next vote until their timeout: it says why and aborts the run instead."""
    from types import SimpleNamespace

    from elastic_slurm.mpi_runtime.local import RECORD, LocalTry
    from elastic_slurm.protocol.jobdir import JobDir

    jobdir = JobDir(tmp_path / "job")
    jobdir.create()
    (jobdir.path / "orders").write_text("not a directory")
    aborted: list[int] = []
    ec = SimpleNamespace(
        _arrays={},
        rank=0,
        size=2,
        generation=0,
        next_seq=1,
        _spawn=SimpleNamespace(pending=None),
        _watcher=None,
        comm=SimpleNamespace(Abort=aborted.append),
    )
    with pytest.raises(LocalCheckFailed, match="could not write order 1 into .*job"):
        LocalTry([4], 1, jobdir).tick(ec)
    assert aborted == [3]
    assert "could not write order 1" in capsys.readouterr().err
    assert "could not write order 1" in (jobdir.path / RECORD).read_text()
