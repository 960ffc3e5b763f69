"""Redistribution between 2-D process grids (and grids and rows) under real ``mpirun``.

Each test starts ``mpirun -n K python test_grid_redistribute.py <mode> <cases.json>``; every
rank builds the same global array (:func:`conftest.make_global`), takes its part under the
source distribution, calls :func:`~elastic_slurm.mpi_runtime.redistribute.redistribute_grid` or
:func:`~elastic_slurm.mpi_runtime.redistribute.move_array`, and compares what it got with its
part of the global array under the destination distribution (the gathered NumPy reference).
A rank prints every mismatch and exits 1.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

WORKER = str(Path(__file__).resolve())

SHAPES = ([7, 9], [12, 10, 2], [3, 8], [5, 1], [0, 4], [16, 16])


def dists_for(parts: int) -> list[dict[str, Any]]:
    """JSON specs of the distributions over exactly ``parts`` ranks that the tests use."""
    from elastic_slurm.mpi_runtime.distribution import grid_shape

    p, q = grid_shape(parts)
    specs: list[dict[str, Any]] = [
        {"kind": "rows", "parts": parts},
        {"kind": "rows_cyclic", "parts": parts, "block": 2},
        {"kind": "grid_block", "grid": [p, q]},
        {"kind": "grid_cyclic", "grid": [p, q], "block": [2, 3]},
        {"kind": "grid_cyclic", "grid": [q, p], "block": [1, 1]},
    ]
    if p > 1:
        specs.append({"kind": "grid_block", "grid": [parts, 1]})
        specs.append({"kind": "grid_cyclic", "grid": [1, parts], "block": [4, 2]})
    return specs


def grid_cases(nprocs: int, dtypes: tuple[str, ...]) -> list[dict[str, Any]]:
    """Cases with max(src parts, dst parts) == nprocs (rows to rows included)."""
    cases = []
    salt = 0
    pairs = sorted(
        {(k, nprocs) for k in range(1, nprocs + 1)} | {(nprocs, k) for k in range(1, nprocs)}
    )
    for k, m in pairs:  # grow to nprocs, shrink from it, and stay
        for src, dst in itertools.product(dists_for(k), dists_for(m)):
            shapes = SHAPES[salt % 2 :: 2] if k + m > 6 else SHAPES
            if src["kind"].startswith("rows") and dst["kind"].startswith("rows"):
                shapes = [[11], [6, 3, 2], [2, 5]]  # 1-D arrays too
            for shape in shapes:
                salt += 1
                dtype = dtypes[salt % len(dtypes)]
                cases.append({"shape": shape, "dtype": dtype, "src": src, "dst": dst, "salt": salt})
    return cases


@pytest.mark.parametrize(
    ("nprocs", "direct", "min_run", "rows_engine", "datatype_max"),
    [(1, "1", 0, "0", ""), (2, "1", 0, "0", ""), (3, "1", 0, "1", "")]
    + [(4, "1", 0, "0", ""), (6, "1", 0, "0", ""), (3, "0", 0, "0", "")]
    + [(4, "0", 0, "1", ""), (5, "1", 64, "0", ""), (4, "0", 0, "0", "0"), (5, "0", 0, "0", "64")],
)
def test_grid_redistribution_matches_global_array(
    mpirun,
    mpi_data,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    nprocs: int,
    direct: str,
    min_run: int,
    rows_engine: str,
    datatype_max: str,
) -> None:
    # direct "1": tiles copied between processes with process_vm_readv/writev (every tile when
    # min_run is 0, those of long runs only with 64), "0" (the default): all by MPI messages.
    # rows_engine "1": rows to rows through the grid engine too, not redistribute()'s Alltoallv.
    # datatype_max: the largest tile sent with an MPI derived datatype ("": the default; "0":
    # every tile that is not whole rows is packed into a buffer instead; "64": both ways).
    monkeypatch.setenv("ELASTIC_SLURM_DIRECT_COPY", direct)
    monkeypatch.setenv("ELASTIC_SLURM_DIRECT_MIN_RUN", str(min_run))
    monkeypatch.setenv("GRID_TEST_ROWS_ENGINE", rows_engine)
    if datatype_max:
        monkeypatch.setenv("ELASTIC_SLURM_DATATYPE_MAX_BYTES", datatype_max)
    cases = grid_cases(nprocs, mpi_data.dtypes)
    spec = tmp_path / "cases.json"
    spec.write_text(json.dumps(cases))
    result = mpirun(nprocs, [WORKER, "cases", str(spec)], timeout_s=120)
    assert result.returncode == 0, result.describe()
    assert f"OK {len(cases)} grid cases on {nprocs} ranks" in result.stdout, result.describe()


def test_cases_cover_the_issue(mpi_data) -> None:
    # 2x2 -> 2x3 and 2x2 -> 1x3 (the issue's examples), 2x3 -> 2x2, grid -> rows and back.
    cases = grid_cases(6, mpi_data.dtypes) + grid_cases(4, mpi_data.dtypes)
    pairs = {
        (tuple(c["src"].get("grid", ())), tuple(c["dst"].get("grid", ())), c["dst"]["kind"])
        for c in cases
    }
    assert ((2, 2), (2, 3), "grid_cyclic") in pairs
    assert ((2, 2), (1, 3), "grid_block") in pairs and ((2, 3), (2, 2), "grid_cyclic") in pairs
    kinds = {(c["src"]["kind"], c["dst"]["kind"]) for c in cases}
    assert ("grid_cyclic", "rows") in kinds and ("rows", "grid_cyclic") in kinds
    assert len(cases) > 300


@pytest.mark.parametrize("nprocs", [3, 4])
def test_move_array_for_every_registered_distribution(mpirun, nprocs: int) -> None:
    # The runtime's entry point: grow and shrink between 2 and nprocs ranks, grid <-> rows.
    result = mpirun(nprocs, [WORKER, "move_array", "-"], timeout_s=90)
    assert result.returncode == 0, result.describe()
    assert f"OK move_array on {nprocs} ranks" in result.stdout, result.describe()


def test_failed_direct_copies_fall_back_to_messages(
    mpirun, mpi_data, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every direct copy that rank 1 makes raises: those tiles go by message between the two
    # ranks of each, every result is still right, and no rank waits forever.
    monkeypatch.setenv("ELASTIC_SLURM_DIRECT_COPY", "1")
    monkeypatch.setenv("ELASTIC_SLURM_DIRECT_MIN_RUN", "0")
    monkeypatch.setenv("GRID_TEST_FAIL_DIRECT", "1")
    cases = grid_cases(4, mpi_data.dtypes)[::3]
    spec = tmp_path / "cases.json"
    spec.write_text(json.dumps(cases))
    result = mpirun(4, [WORKER, "cases", str(spec)], timeout_s=120)
    assert result.returncode == 0, result.describe()
    assert f"OK {len(cases)} grid cases on 4 ranks" in result.stdout, result.describe()


def test_some_failed_direct_copies_between_two_ranks_are_told_apart(
    mpirun, mpi_data, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rank 1's direct copies fail every other time, in every case: where it copies two tiles
    # with one peer (one each way) and only one fails, the peer must resend that one only.
    monkeypatch.setenv("ELASTIC_SLURM_DIRECT_COPY", "1")
    monkeypatch.setenv("ELASTIC_SLURM_DIRECT_MIN_RUN", "0")
    monkeypatch.setenv("GRID_TEST_FAIL_DIRECT", "every-other")
    cases = grid_cases(4, mpi_data.dtypes)
    spec = tmp_path / "cases.json"
    spec.write_text(json.dumps(cases))
    result = mpirun(4, [WORKER, "cases", str(spec)], timeout_s=180)
    assert result.returncode == 0, result.describe()
    assert f"OK {len(cases)} grid cases on 4 ranks" in result.stdout, result.describe()


def test_direct_copy_cuts_long_run_lists() -> None:
    # process_vm_readv/writev on this very process: tiles of more than 1024 runs on each side,
    # with run boundaries that differ between the sides, copied both ways like copy_local.
    from elastic_slurm.mpi_runtime import cma, tiles

    rng = np.random.default_rng(3)
    src = rng.integers(0, 255, size=(3000, 96), dtype=np.uint8)
    for rows, cols, dst_row in (
        ([[5, 0, 2500]], [[8, 0, 40], [60, 40, 20]], 60),  # 2500 x 2 runs -> whole rows
        ([[0, 7, 1200], [1300, 1207, 1500]], [[0, 3, 50], [70, 53, 26]], 90),  # both cut
        ([[0, 0, 3000]], [[0, 0, 96]], 96),  # one run each side
    ):
        tile = (np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64), dst_row)
        n_dst = int(tile[0][:, 1].max() + tile[0][:, 2].max())
        want = np.zeros((n_dst, dst_row), dtype=np.uint8)
        tiles.copy_local(src, tile, want)
        for side in (0, 1):
            row_bytes = src.shape[1] if side == 0 else dst_row
            assert cma._count(tile, side, row_bytes) == len(cma.segments(tile, side, row_bytes)[0])
        pulled = np.zeros_like(want)
        pull_view = (tile[0], tile[1], src.shape[1])  # as the receiver sees it
        try:
            cma.copy(pulled, os.getpid(), src.ctypes.data, pull_view, read=True)
        except OSError as exc:  # pragma: no cover (no cross-memory attach here)
            pytest.skip(f"process_vm_readv is not allowed here: {exc}")
        assert np.array_equal(pulled, want)
        pushed = np.zeros_like(want)
        cma.copy(src, os.getpid(), pushed.ctypes.data, tile, read=False)
        assert np.array_equal(pushed, want)


def test_mismatch_raises_on_all_ranks_without_hanging(mpirun) -> None:
    result = mpirun(4, [WORKER, "errors", "-"], timeout_s=60)
    assert result.returncode == 0, result.describe()
    assert "OK errors on 4 ranks" in result.stdout, result.describe()


# ----------------------------------------------------------------------------------------------
# MPI worker (runs under mpirun; imports mpi4py only here)


def make(spec: dict[str, Any], shape: list[int]) -> Any:
    """Build a distribution from its JSON spec."""
    from elastic_slurm.mpi_runtime.distribution import (
        BlockCyclicRows,
        BlockRows,
        block_2d,
        block_cyclic_2d,
    )

    if spec["kind"] == "rows":
        return BlockRows(shape[0], spec["parts"])
    if spec["kind"] == "rows_cyclic":
        return BlockCyclicRows(shape[0], spec["parts"], spec["block"])
    if spec["kind"] == "grid_block":
        return block_2d((shape[0], shape[1]), tuple(spec["grid"]))
    return block_cyclic_2d((shape[0], shape[1]), tuple(spec["grid"]), tuple(spec["block"]))


def part_of(g: np.ndarray, dist: Any, rank: int) -> np.ndarray | None:
    """The reference: ``rank``'s part of the global array ``g`` under ``dist`` (None if none)."""
    from elastic_slurm.mpi_runtime.distribution import Grid2D

    if rank >= dist.parts:
        return None
    if isinstance(dist, Grid2D):
        p, q = dist.coords(rank)
        return np.ascontiguousarray(g[np.ix_(dist.rows.indices(p), dist.cols.indices(q))])
    return np.ascontiguousarray(g[dist.indices(rank)])


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    return got.size == 0 or np.array_equal(
        np.ascontiguousarray(got).view(np.uint8), np.ascontiguousarray(want).view(np.uint8)
    )


def _check_case(comm: Any, case: dict[str, Any], use_out: bool) -> list[str]:
    from conftest import make_global, parse_dtype
    from elastic_slurm.mpi_runtime.redistribute import redistribute_grid

    rank = comm.Get_rank()
    dt = parse_dtype(case["dtype"])
    shape = case["shape"]
    g = make_global(tuple(shape), dt, case["salt"])
    src, dst = make(case["src"], shape), make(case["dst"], shape)
    local = part_of(g, src, rank)
    want = part_of(g, dst, rank)
    out = None
    if use_out and want is not None:
        out = np.zeros_like(want)
    got = redistribute_grid(comm, local, tuple(shape), dt, src, dst, out=out)
    where = f"rank {rank} case {case} out={use_out}"
    if want is None:
        return [] if got.size == 0 else [f"{where}: got {got.shape}, want nothing"]
    if out is not None and got is not out:
        return [f"{where}: the result is not out"]
    if not _same(got, want):
        return [f"{where}: got {got!r}, want {want!r}"]
    if local is not None and local.size and np.shares_memory(got, local):
        return [f"{where}: the result shares memory with local"]
    return []


def _worker_cases(spec: str) -> int:
    from mpi4py import MPI

    from elastic_slurm.mpi_runtime import cma, redistribute

    comm = MPI.COMM_WORLD
    cases = json.loads(Path(spec).read_text())
    errors: list[str] = []
    redistribute._ROWS_BY_ALLTOALLV = os.environ.get("GRID_TEST_ROWS_ENGINE") != "1"
    failing = os.environ.get("GRID_TEST_FAIL_DIRECT") in ("1", "every-other")
    alternate = os.environ.get("GRID_TEST_FAIL_DIRECT") == "every-other"
    if failing and comm.Get_rank() == 1:
        copy, calls = cma.copy, [0]

        def refuse(*args: object, **kwargs: object) -> None:
            calls[0] += 1
            if alternate and calls[0] % 2:
                return copy(*args, **kwargs)  # type: ignore[arg-type]
            raise OSError("refused by the test")

        cma.copy = refuse  # type: ignore[assignment]
    logged = False
    for i, case in enumerate(cases):
        errors += _check_case(comm, case, use_out=bool(i % 2))
        logged = logged or bool(cma.warned)
        if alternate:
            cma.warned.clear()  # direct copies on again: some of the next case's fail too
    if failing and comm.Get_rank() == 1 and not logged:
        errors.append("rank 1: its direct copies failed but nothing was logged")
    if logged and os.environ.get("ELASTIC_SLURM_DIRECT_COPY") == "1" and not failing:
        errors.append(f"rank {comm.Get_rank()}: direct copies fell back: {cma.warned}")
    for line in errors[:10]:
        print("MISMATCH", line, flush=True)
    total = comm.allreduce(len(errors))
    if comm.Get_rank() == 0 and total == 0:
        print(f"OK {len(cases)} grid cases on {comm.Get_size()} ranks")
    return 1 if errors else 0


def _worker_move_array() -> int:
    from mpi4py import MPI

    from conftest import make_global
    from elastic_slurm.mpi_runtime.data import (
        Block,
        Block2D,
        BlockCyclic,
        BlockCyclic2D,
        DistArray,
    )
    from elastic_slurm.mpi_runtime.redistribute import move_array

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    errors = []
    shape = (13, 11, 2)
    g = make_global(shape, np.float64, 5)
    dists = [Block(), BlockCyclic(3), Block2D(), BlockCyclic2D(2, 3), BlockCyclic2D(1, 4)]
    for dist, other in itertools.product(dists, dists):
        for k, m in ((2, size), (size, 2), (size, size)):
            arr = DistArray("a", shape, np.dtype(np.float64), dist, np.empty(0), rank, k)
            meta = arr.meta()
            local = None
            if rank < k:
                local = part_of(g, dist.layout_of(shape, k), rank)
            got = move_array(comm, local, meta, k, m, dist, other)
            want = part_of(g, other.layout_of(shape, m), rank)
            if want is None:
                ok = got.size == 0
            else:
                after = DistArray("a", shape, np.dtype(np.float64), other, got, rank, m)
                ok = _same(got, want) and got.shape == after.local_shape()
            if not ok:
                errors.append(f"rank {rank}: {dist} over {k} -> {other} over {m}: wrong")
    # On a sub-communicator numbered backwards, freed afterwards (with the duplicate cached on
    # it for the messages): world ranks are not comm ranks.
    sub = comm.Split(0, size - rank)
    for _ in range(2):
        src_d, dst_d = BlockCyclic2D(2, 3), Block2D()
        local = part_of(g, src_d.layout_of(shape, sub.size), sub.rank)
        meta = DistArray("a", shape, np.dtype(np.float64), src_d, local, sub.rank, sub.size).meta()
        got = move_array(sub, local, meta, sub.size, 2, src_d, dst_d)
        want = part_of(g, dst_d.layout_of(shape, 2), sub.rank)
        if not (_same(got, want) if want is not None else got.size == 0):
            errors.append(f"rank {rank}: on a sub-communicator: wrong")
    sub.Free()
    for line in errors[:10]:
        print("MISMATCH", line, flush=True)
    if comm.allreduce(len(errors)) == 0 and rank == 0:
        print(f"OK move_array on {size} ranks")
    return 1 if errors else 0


def _worker_errors() -> int:
    from mpi4py import MPI

    from elastic_slurm.mpi_runtime.distribution import block_2d, block_cyclic_2d
    from elastic_slurm.mpi_runtime.redistribute import redistribute_grid

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    shape = (8, 6)
    src, dst = block_2d(shape, (2, 2)), block_cyclic_2d(shape, (1, 3), (2, 2))
    local = np.zeros(src.local_shape(rank))
    if rank == 2:
        local = np.zeros((1, 1))  # wrong shape on one rank only
    messages = []
    for bad_local in (local, np.zeros(src.local_shape(rank))):
        try:
            redistribute_grid(comm, bad_local, shape, np.float64, src, dst)
            messages.append("no error")
        except ValueError as exc:
            messages.append(str(exc))
        if bad_local is not local:
            break
    # the second call (all right) must go through after the failed one
    ok = "rank 2:" in messages[0] and "expected (4, 3)" in messages[0] and messages[1] == "no error"
    bad_grid = block_2d((9, 6), (2, 2))
    try:
        redistribute_grid(comm, np.zeros(src.local_shape(rank)), shape, np.float64, bad_grid, dst)
        ok = False
    except ValueError as exc:
        ok = ok and "9 x 6" in str(exc)
    if not comm.allreduce(0 if ok else 1) and rank == 0:
        print(f"OK errors on {comm.Get_size()} ranks")
    elif not ok:
        print("BAD", rank, messages, flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    mode = sys.argv[1]
    if mode == "cases":
        sys.exit(_worker_cases(sys.argv[2]))
    if mode == "move_array":
        sys.exit(_worker_move_array())
    sys.exit(_worker_errors())
