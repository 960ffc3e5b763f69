"""redistribute_rows under real Open MPI.

This file is both the pytest module and the MPI worker: pytest runs
``mpirun -n K python test_redistribute.py <mode> <cases.json>``, and the ``__main__`` part below
builds each source block from a deterministic global array, redistributes it, and compares the
destination block with the global array element by element (as bytes, so every dtype is exact).
A rank prints every mismatch and exits 1; mpirun then exits non-zero.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from itertools import product
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(180)]

WORKER = str(Path(__file__).resolve())

TRAILING = [(), (3,), (2, 3), (4, 0)]


def redistribution_cases(nprocs: int, dtypes: Sequence[str]) -> list[dict[str, Any]]:
    """Cases for one mpirun of ``nprocs`` ranks: every pair with max(src, dst) == nprocs.

    With 5 ranks it adds pairs that leave ranks idle on both sides.
    """
    pairs = [(s, d) for s, d in product(range(1, nprocs + 1), repeat=2) if max(s, d) == nprocs]
    if nprocs == 5:
        pairs += [(1, 1), (2, 3), (3, 2), (1, 3)]
    rows_choices = sorted({0, 1, 2, nprocs - 1, 7, 13, 100})
    combos: list[tuple[int, str, tuple[int, ...]]] = []
    for i, rows in enumerate(rows_choices):
        # every trailing shape (one dtype), plus one dtype in rotation with a 2-D trailing shape
        combos += [(rows, "float64", tr) for tr in TRAILING]
        combos.append((rows, dtypes[i % len(dtypes)], (2, 3)))
    combos += [(13, dt, (3,)) for dt in dtypes]  # every dtype, 13 rows (uneven for 2..5 parts)
    cases = []
    for salt, ((src, dst), (rows, dtype, trailing)) in enumerate(product(pairs, combos)):
        cases.append(
            {"rows": rows, "trailing": list(trailing), "dtype": dtype, "src": src, "dst": dst,
             "salt": salt + 1}
        )  # fmt: skip
    return cases


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4, 5])
def test_redistribute_matches_global_array(mpirun, mpi_data, tmp_path: Path, nprocs: int):
    cases = redistribution_cases(nprocs, mpi_data.dtypes)
    spec = tmp_path / "cases.json"
    spec.write_text(json.dumps(cases))
    result = mpirun(nprocs, [WORKER, "cases", str(spec)])
    assert result.returncode == 0, result.describe()
    assert f"OK {len(cases)} cases on {nprocs} ranks" in result.stdout, result.describe()


@pytest.mark.parametrize("nprocs", [3, 4])
def test_local_mismatch_raises_on_all_ranks_without_hanging(mpirun, nprocs: int) -> None:
    result = mpirun(nprocs, [WORKER, "errors", "-"], timeout_s=60)
    assert result.returncode == 0, result.describe()
    assert f"OK error cases on {nprocs} ranks" in result.stdout, result.describe()


def test_cases_cover_the_brief(mpi_data) -> None:
    # Pure check of the generator, so a change to it cannot silently drop coverage.
    all_cases = [c for k in (1, 2, 3, 4, 5) for c in redistribution_cases(k, mpi_data.dtypes)]
    pairs = {(c["src"], c["dst"]) for c in all_cases}
    assert {(1, 5), (5, 1), (2, 3), (3, 5), (5, 3), (1, 1), (4, 4)} <= pairs
    assert {c["dtype"] for c in all_cases} == set(mpi_data.dtypes)
    assert {tuple(c["trailing"]) for c in all_cases} == set(TRAILING)
    assert any(c["rows"] < max(c["src"], c["dst"]) for c in all_cases)  # some parts empty
    assert any(c["rows"] == 0 for c in all_cases)


# ----------------------------------------------------------------------------------------------
# MPI worker (runs under mpirun; imports mpi4py only here)


def _block(g: np.ndarray, parts: int, rank: int) -> np.ndarray | None:
    """This rank's block of ``g`` in a ``parts``-way distribution (None or 0 rows if none)."""
    from elastic_slurm.mpi_runtime.distribution import BlockRows

    if rank >= parts:
        return None if rank % 2 else g[:0].copy()  # both spellings of "no rows"
    start, stop = BlockRows(g.shape[0], parts).rows_of(rank)
    return np.ascontiguousarray(g[start:stop])


def _check_case(comm: Any, case: dict[str, Any]) -> list[str]:
    """Run one case on ``comm``; return this rank's mismatch descriptions."""
    from conftest import make_global, parse_dtype
    from elastic_slurm.mpi_runtime.distribution import BlockRows
    from elastic_slurm.mpi_runtime.redistribute import redistribute_rows

    rank = comm.Get_rank()
    dt = parse_dtype(case["dtype"])
    shape = (case["rows"], *case["trailing"])
    g = make_global(shape, dt, case["salt"])
    local = _block(g, case["src"], rank)
    got = redistribute_rows(comm, local, shape, dt, case["src"], case["dst"])
    if rank < case["dst"]:
        start, stop = BlockRows(shape[0], case["dst"]).rows_of(rank)
    else:
        start = stop = 0
    want = g[start:stop]
    where = f"rank {rank} case {case}"
    if got.shape != want.shape or got.dtype != dt:
        return [f"{where}: got shape {got.shape} dtype {got.dtype}, want {want.shape} {dt}"]
    if not got.flags.c_contiguous:
        return [f"{where}: result is not C-contiguous"]
    if local is not None and got.size and np.shares_memory(got, local):
        return [f"{where}: result shares memory with the input block"]
    got_b = got.reshape(len(got), -1).view(np.uint8) if got.size else got
    want_b = np.ascontiguousarray(want).reshape(len(want), -1).view(np.uint8) if want.size else want
    if got.size and not np.array_equal(got_b, want_b):
        bad = [i for i in range(len(got)) if not np.array_equal(got_b[i], want_b[i])]
        r = bad[0]
        return [
            f"{where}: {len(bad)} wrong rows, first local row {r} (global {start + r}): "
            f"got {got[r]!r}, want {want[r]!r}"
        ]
    return []


def _worker_cases(spec: str) -> int:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    cases = json.loads(Path(spec).read_text())
    errors: list[str] = []
    for case in cases:
        errors += _check_case(comm, case)
    # The same cases on a communicator whose ranks are numbered backwards (and, with 4 or more
    # ranks, leaves world rank 0 out), so the code must use comm ranks, not world ranks.
    size = comm.Get_size()
    sub_size = size - 1 if size >= 4 else size
    sub_cases = [
        {**c, "src": min(c["src"], sub_size), "dst": min(c["dst"], sub_size)} for c in cases[::5]
    ]
    color = MPI.UNDEFINED if size >= 4 and comm.Get_rank() == 0 else 0
    sub = comm.Split(color, key=size - comm.Get_rank())
    if sub != MPI.COMM_NULL:
        for case in sub_cases:
            errors += _check_case(sub, case)
        sub.Free()
    for line in errors[:20]:
        print("MISMATCH", line, flush=True)
    total = comm.allreduce(len(errors))
    if comm.Get_rank() == 0 and total == 0:
        print(f"OK {len(cases)} cases on {size} ranks (+{len(sub_cases)} on a sub-communicator)")
    return 1 if errors else 0


def _worker_errors() -> int:
    """Each bad call must raise ValueError on every rank; afterwards a good call must work."""
    from mpi4py import MPI

    from conftest import make_global
    from elastic_slurm.mpi_runtime.distribution import BlockRows
    from elastic_slurm.mpi_runtime.redistribute import redistribute_rows

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    shape = (11, 3)
    g = make_global(shape, np.float64, 1)

    def good(src: int, dst: int) -> bool:
        got = redistribute_rows(comm, _block(g, src, rank), shape, np.float64, src, dst)
        want = _block(g, dst, rank)
        return np.array_equal(got, want if want is not None else g[:0])

    def one_extra_row_on_rank_1() -> np.ndarray:
        local = _block(g, size, rank)
        return np.vstack([local, local[:1]]) if rank == 1 else local

    def wrong_dtype_on_last_rank() -> np.ndarray:
        local = _block(g, size, rank)
        return local.astype(np.float32) if rank == size - 1 else local

    n1 = BlockRows(shape[0], size).counts()[1] if size > 1 else 0
    bad_calls = {
        "extra row on rank 1": (
            lambda: redistribute_rows(comm, one_extra_row_on_rank_1(), shape, np.float64, size, 2),
            [f"rank 1: local block has shape ({n1 + 1}, 3), expected ({n1}, 3) for part 1"],
        ),
        "dtype on last rank": (
            lambda: redistribute_rows(comm, wrong_dtype_on_last_rank(), shape, np.float64, size, 1),
            [f"rank {size - 1}: local block has dtype float32, expected float64"],
        ),
        "rows on a non-source rank": (
            lambda: redistribute_rows(
                comm, _block(g, 2, rank) if rank < 2 else g[:1], shape, np.float64, 2, size
            ),
            [
                f"{size - 1}: this rank holds no part of the 2-way distribution",
                f"{size - 2} of {size} ranks rejected",
            ],
        ),
        "dst_parts differs on rank 0": (
            lambda: redistribute_rows(
                comm, _block(g, 2, rank), shape, np.float64, 2, 1 if rank == 0 else 2
            ),
            ["differ from rank 0's"],
        ),
        "communicator too small": (
            lambda: redistribute_rows(comm, _block(g, 2, rank), shape, np.float64, 2, size + 1),
            [f"the communicator has {size} ranks"],
        ),
        # The MPI count limit is checked from the arguments alone, so no big buffers are needed.
        "part above 2**31 - 1 rows": (
            lambda: redistribute_rows(comm, None, (2**31, 2), np.float64, 1, 1),
            ["a part of 2147483648 rows exceeds the MPI count limit of 2147483647 rows"],
        ),
        "row above 2**31 - 1 bytes": (
            lambda: redistribute_rows(comm, None, (4, 2**28), ">f8", 1, 1),
            ["is 2147483648 bytes (sent as MPI.BYTE), beyond the MPI count limit"],
        ),
        "1-D shape with trailing data": (
            lambda: redistribute_rows(comm, _block(g, 1, rank), (11,), np.float64, 1, size),
            ["rank 0: local block has shape (11, 3), expected (11,)"],
        ),
    }
    failures = []
    for label, (call, needles) in bad_calls.items():
        try:
            call()
        except ValueError as exc:
            text = str(exc)
            if rank == 0 and "--show" in sys.argv:
                print(f"[{label}] {type(exc).__name__}: {text}", flush=True)
            missing = [n for n in needles if n not in text]
            if missing:
                failures.append(f"rank {rank} [{label}]: message lacks {missing}: {text}")
        else:
            failures.append(f"rank {rank} [{label}]: no ValueError")
        if not good(2, size):  # the communicator must still work after the error
            failures.append(f"rank {rank} [{label}]: the following good call gave wrong data")
    for line in failures:
        print("FAIL", line, flush=True)
    if comm.allreduce(len(failures)) == 0 and rank == 0:
        print(f"OK error cases on {size} ranks")
    return 1 if failures else 0


if __name__ == "__main__":
    mode, spec = sys.argv[1], sys.argv[2]
    sys.exit(_worker_cases(spec) if mode == "cases" else _worker_errors())
