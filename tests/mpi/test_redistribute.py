"""redistribute_rows and redistribute (any pair of distributions) under real Open MPI.

This file is both the pytest module and the MPI worker: pytest runs
``mpirun -n K python test_redistribute.py <mode> <cases.json>``, and the ``__main__`` part below
builds each source part from a deterministic global array, redistributes it, and compares the
destination part with the global array element by element (as bytes, so every dtype is exact).
A rank prints every mismatch and exits 1; mpirun then exits non-zero. Many cases run in one
``mpirun`` (starting one costs about a second here).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
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
# redistribute(): any pair of distributions

# Distribution specs as JSON: block, block-cyclic with blocks that divide the row counts used
# here or not (1, 2, 3, 7, 64), and a custom protocol implementation (explicit owner per row).
KINDS: list[dict[str, Any]] = [
    {"kind": "block"},
    {"kind": "cyclic", "block": 1},
    {"kind": "cyclic", "block": 2},
    {"kind": "cyclic", "block": 3},
    {"kind": "cyclic", "block": 7},
    {"kind": "cyclic", "block": 64},
    {"kind": "explicit"},
]
KIND_PAIRS = list(product(range(len(KINDS)), repeat=2))
GENERAL_TRAILING = [(), (3,), (2, 3), (4, 0), (1,)]


def general_cases(nprocs: int, dtypes: Sequence[str]) -> list[dict[str, Any]]:
    """Cases for one mpirun of ``nprocs`` ranks: each (src, dst) part pair with max == nprocs
    gets 8 cases, rotating through every pair of distribution kinds, row counts (fewer rows
    than parts, multiples of the block sizes and not), trailing shapes and dtypes.
    """
    pairs = [(s, d) for s, d in product(range(1, nprocs + 1), repeat=2) if max(s, d) == nprocs]
    if nprocs == 5:
        pairs += [(1, 1), (2, 3), (3, 2), (1, 3)]  # idle ranks on both sides
    rows_choices = [0, 1, 2, max(nprocs - 1, 1), 7, 13, 24, 48, 100, 128]
    cases = []
    for i, ((src, dst), j) in enumerate(product(pairs, range(8))):
        src_kind, dst_kind = KIND_PAIRS[(i * 11) % len(KIND_PAIRS)]  # 11 is coprime with 49
        cases.append(
            {"rows": rows_choices[i % len(rows_choices)],
             "trailing": list(GENERAL_TRAILING[(i + j) % len(GENERAL_TRAILING)]),
             "dtype": dtypes[(i * 7) % len(dtypes)],
             "src": src, "dst": dst, "src_kind": KINDS[src_kind], "dst_kind": KINDS[dst_kind],
             "salt": 1000 * nprocs + i}
        )  # fmt: skip
    return cases


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4, 5])
def test_any_distribution_pair_matches_global_array(
    mpirun, mpi_data, tmp_path: Path, nprocs: int
) -> None:
    cases = general_cases(nprocs, mpi_data.dtypes)
    spec = tmp_path / "cases.json"
    spec.write_text(json.dumps(cases))
    result = mpirun(nprocs, [WORKER, "general", str(spec)])
    assert result.returncode == 0, result.describe()
    assert f"OK {len(cases)} general cases on {nprocs} ranks" in result.stdout, result.describe()
    assert f"OK resize chain on {nprocs} ranks" in result.stdout, result.describe()


def test_piece_threshold_default_is_the_workers() -> None:
    from elastic_slurm.mpi_runtime import redistribute as module

    assert module._MIN_PIECE_BYTES == PIECE_BYTES_DEFAULT


def test_general_cases_cover_the_brief(mpi_data) -> None:
    all_cases = [c for k in (1, 2, 3, 4, 5) for c in general_cases(k, mpi_data.dtypes)]
    kinds = {(json.dumps(c["src_kind"]), json.dumps(c["dst_kind"])) for c in all_cases}
    assert len(kinds) == len(KINDS) ** 2  # every pair of kinds, both ways
    assert {(c["src"], c["dst"]) for c in all_cases} >= {
        (s, d) for s in range(1, 6) for d in range(1, 6)
    }
    assert {c["dtype"] for c in all_cases} == set(mpi_data.dtypes)
    assert {tuple(c["trailing"]) for c in all_cases} == set(GENERAL_TRAILING)
    assert any(0 < c["rows"] < max(c["src"], c["dst"]) for c in all_cases)
    assert any(c["rows"] % 64 == 0 and c["rows"] for c in all_cases)  # grains > 1 happen


def hypothesis_cases(dtypes: Sequence[str], n: int) -> list[dict[str, Any]]:
    """Draw ``n`` random cases with hypothesis, derandomized (the same list on every run)."""
    # imported here, not at the top: the MPI workers (this file under mpirun) don't need it
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    kind = st.one_of(
        st.just({"kind": "block"}),
        st.builds(
            lambda b: {"kind": "cyclic", "block": b},
            st.one_of(st.integers(1, 40), st.sampled_from([1, 8, 16, 64])),
        ),
        st.just({"kind": "explicit"}),
    )
    case = st.fixed_dictionaries(
        {
            "rows": st.one_of(st.integers(0, 300), st.integers(0, 8).map(lambda k: 32 * k)),
            "trailing": st.lists(st.integers(0, 4), max_size=2),
            "dtype": st.sampled_from(list(dtypes)),
            "src": st.integers(1, 5),
            "dst": st.integers(1, 5),
            "src_kind": kind,
            "dst_kind": kind,
            "salt": st.integers(0, 10**6),
        }
    )
    drawn: list[dict[str, Any]] = []

    @settings(
        max_examples=n,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case)
    def collect(c: dict[str, Any]) -> None:
        drawn.append(c)

    collect()
    return drawn


def test_hypothesis_drawn_cases_on_five_ranks(mpirun, mpi_data, tmp_path: Path) -> None:
    # Hypothesis draws the cases here (derandomized: deterministic); one mpirun checks them all.
    # A failure prints the exact case; rerun it with the "general" worker mode to debug.
    cases = hypothesis_cases(mpi_data.dtypes, 80)
    assert len(cases) == 80
    spec = tmp_path / "cases.json"
    spec.write_text(json.dumps(cases))
    result = mpirun(5, [WORKER, "general", str(spec)])
    assert result.returncode == 0, result.describe()
    assert f"OK {len(cases)} general cases on 5 ranks" in result.stdout, result.describe()


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


@dataclass(frozen=True)
class ExplicitRows:
    """A custom RowDistribution (an explicit owner per row), so the generic paths run too."""

    owner: tuple[int, ...]
    parts: int

    @property
    def global_rows(self) -> int:
        return len(self.owner)

    def count(self, part: int) -> int:
        return self.owner.count(part)

    def counts(self) -> tuple[int, ...]:
        return tuple(self.owner.count(p) for p in range(self.parts))

    def indices(self, part: int) -> np.ndarray:
        return np.flatnonzero(np.array(self.owner, dtype=np.int64) == part).astype(np.int64)

    def runs(self, part: int) -> np.ndarray:
        idx = self.indices(part)
        if idx.size == 0:
            return np.zeros((0, 2), dtype=np.int64)
        breaks = np.flatnonzero(np.diff(idx) != 1) + 1
        starts = idx[np.r_[0, breaks]]
        return np.stack([starts, idx[np.r_[breaks - 1, idx.size - 1]] + 1], axis=1)

    def owners(self, rows: np.ndarray) -> np.ndarray:
        return np.array(self.owner, dtype=np.int64)[np.asarray(rows, dtype=np.int64)]


def make_dist(spec: dict[str, Any], rows: int, parts: int, salt: int) -> Any:
    """Build a distribution from a JSON spec (the same on every rank)."""
    from elastic_slurm.mpi_runtime.distribution import BlockCyclicRows, BlockRows

    if spec["kind"] == "block":
        return BlockRows(rows, parts)
    if spec["kind"] == "cyclic":
        return BlockCyclicRows(rows, parts, spec["block"])
    owner = np.random.default_rng(salt).integers(0, parts, size=rows)
    return ExplicitRows(tuple(owner.tolist()), parts)


def _part(g: np.ndarray, dist: Any, rank: int, salt: int) -> np.ndarray | None:
    """This rank's part of ``g`` under ``dist``; idle ranks alternate None and 0 rows; some
    parts are passed non-contiguous (a strided view), which must be copied first."""
    if rank >= dist.parts:
        return None if rank % 2 else g[:0].copy()
    part = g[dist.indices(rank)]
    if salt % 4 == 0 and part.ndim >= 2 and part.shape[-1] > 1:
        n = part.shape[-1]
        wide = np.zeros((*part.shape[:-1], 2 * n), dtype=part.dtype)  # keeps the byte order
        wide[..., :n] = part
        return wide[..., :n]  # a non-contiguous view with the same values
    return part


def _compare(where: str, got: np.ndarray, want: np.ndarray, dt: Any, local: Any) -> list[str]:
    """Compare a result with the expected rows as bytes; return problem descriptions."""
    if got.shape != want.shape or got.dtype != dt:
        return [f"{where}: got shape {got.shape} dtype {got.dtype}, want {want.shape} {dt}"]
    if not got.flags.c_contiguous:
        return [f"{where}: result is not C-contiguous"]
    if local is not None and got.size and np.shares_memory(got, local):
        return [f"{where}: result shares memory with the input"]
    if got.size:
        got_b = got.reshape(len(got), -1).view(np.uint8)
        want_b = np.ascontiguousarray(want).reshape(len(want), -1).view(np.uint8)
        if not np.array_equal(got_b, want_b):
            bad = [i for i in range(len(got)) if not np.array_equal(got_b[i], want_b[i])]
            return [f"{where}: {len(bad)} wrong rows, first local row {bad[0]}"]
    return []


def _check_general(comm: Any, case: dict[str, Any]) -> list[str]:
    """Run one redistribute() case on ``comm``; return this rank's mismatch descriptions."""
    from conftest import make_global, parse_dtype
    from elastic_slurm.mpi_runtime import redistribute as module
    from elastic_slurm.mpi_runtime.redistribute import redistribute

    # Odd salts force the piece-by-piece path (one message per run of rows); even salts keep
    # the default, which packs rows this small into one Alltoallv.
    module._MIN_PIECE_BYTES = 1 if case["salt"] % 2 else PIECE_BYTES_DEFAULT
    rank = comm.Get_rank()
    dt = parse_dtype(case["dtype"])
    shape = (case["rows"], *case["trailing"])
    g = make_global(shape, dt, case["salt"])
    src = make_dist(case["src_kind"], shape[0], case["src"], case["salt"])
    dst = make_dist(case["dst_kind"], shape[0], case["dst"], case["salt"] + 1)
    local = _part(g, src, rank, case["salt"])
    want = g[dst.indices(rank)] if rank < dst.parts else g[:0]
    where = f"rank {rank} case {case} ({src} -> {dst})"
    if case["salt"] % 3 == 0:  # into a preallocated result full of junk bytes
        out = np.empty_like(want)
        out.reshape(-1).view(np.uint8)[...] = 0xA5
        got = redistribute(comm, local, shape, dt, src, dst, out=out)
        if got is not out:
            return [f"{where}: out= was not returned"]
    else:
        got = redistribute(comm, local, shape, dt, src, dst)
    return _compare(where, got, want, dt, local)


PIECE_BYTES_DEFAULT = 32 * 1024  # redistribute._MIN_PIECE_BYTES, checked by a test below


def _resize_chain(comm: Any) -> list[str]:
    """Carry one array through a sequence of sizes and distributions, checking every step."""
    from conftest import make_global
    from elastic_slurm.mpi_runtime import redistribute as module
    from elastic_slurm.mpi_runtime.distribution import BlockCyclicRows, BlockRows
    from elastic_slurm.mpi_runtime.redistribute import redistribute

    rank, size = comm.Get_rank(), comm.Get_size()
    shape = (97, 5)
    g = make_global(shape, np.float64, 7)
    steps = [BlockRows(97, 1)]
    for i, parts in enumerate([2, 4, 3, 1, 5, 2, 4]):
        parts = min(parts, size)
        steps.append(BlockCyclicRows(97, parts, 1 + 3 * i) if i % 2 else BlockRows(97, parts))
    errors: list[str] = []
    for min_piece_bytes in (1, PIECE_BYTES_DEFAULT):  # by pieces, then packed
        module._MIN_PIECE_BYTES = min_piece_bytes
        local = g[steps[0].indices(rank)] if rank < steps[0].parts else None
        for before, after in zip(steps, steps[1:], strict=False):
            local = redistribute(comm, local, shape, np.float64, before, after)
            want = g[after.indices(rank)] if rank < after.parts else g[:0]
            where = f"rank {rank} chain {before} -> {after} ({min_piece_bytes})"
            errors += _compare(where, local, want, g.dtype, None)
    return errors


def _worker_general(spec: str) -> int:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    cases = json.loads(Path(spec).read_text())
    errors: list[str] = []
    for case in cases:
        errors += _check_general(comm, case)
    chain = _resize_chain(comm)
    # A reversed sub-communicator without world rank 0 (with 4 or more ranks), as above.
    sub_size = size - 1 if size >= 4 else size
    sub_cases = [
        {**c, "src": min(c["src"], sub_size), "dst": min(c["dst"], sub_size)} for c in cases[::6]
    ]
    sub = comm.Split(MPI.UNDEFINED if size >= 4 and rank == 0 else 0, key=size - rank)
    if sub != MPI.COMM_NULL:
        for case in sub_cases:
            errors += _check_general(sub, case)
        sub.Free()
    for line in (errors + chain)[:20]:
        print("MISMATCH", line, flush=True)
    totals = comm.allreduce(np.array([len(errors), len(chain)]))
    if rank == 0 and totals[0] == 0:
        print(f"OK {len(cases)} general cases on {size} ranks (+{len(sub_cases)} on a sub-comm)")
    if rank == 0 and totals[1] == 0:
        print(f"OK resize chain on {size} ranks")
    return 1 if errors or chain else 0


def _worker_errors() -> int:
    """Each bad call must raise ValueError on every rank; afterwards a good call must work."""
    from mpi4py import MPI

    from conftest import make_global
    from elastic_slurm.mpi_runtime.distribution import BlockCyclicRows, BlockRows
    from elastic_slurm.mpi_runtime.redistribute import redistribute, redistribute_rows

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
    cyc = BlockCyclicRows(shape[0], size, 2)

    def cyclic_part(short_rank: int = -1) -> np.ndarray:
        part = g[cyc.indices(rank)]
        return part[:-1] if rank == short_rank else part

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
        # redistribute(): the same guarantees with distribution objects
        "cyclic part one row short on rank 1": (
            lambda: redistribute(comm, cyclic_part(short_rank=1), shape, np.float64, cyc, 2),
            [
                f"rank 1: local block has shape ({cyc.count(1) - 1}, 3), expected "
                f"({cyc.count(1)}, 3) for part 1 of {cyc!r}",
                "redistribute: 1 of",
            ],
        ),
        "distribution of other rows": (
            lambda: redistribute(
                comm, cyclic_part(), shape, np.float64, cyc, BlockCyclicRows(12, size, 2)
            ),
            ["dst distributes 12 rows but global_shape[0] is 11"],
        ),
        "not a distribution": (
            lambda: redistribute(comm, cyclic_part(), shape, np.float64, cyc, "block"),
            ["dst must be a RowDistribution (BlockRows, BlockCyclicRows, ...)", f"{size} of"],
        ),
        "block size differs on the last rank": (
            lambda: redistribute(
                comm,
                cyclic_part(),
                shape,
                np.float64,
                cyc,
                BlockCyclicRows(11, 2, 3 if rank == size - 1 else 2),
            ),
            ["arguments (global_shape, dtype, src, dst)", "differ from rank 0's"],
        ),
        "out of the wrong shape on rank 0": (
            lambda: redistribute(
                comm,
                cyclic_part(),
                shape,
                np.float64,
                cyc,
                2,
                out=np.empty((1, 3)) if rank == 0 else None,
            ),
            ["rank 0: out has shape (1, 3) and dtype float64, expected (6, 3) and float64"],
        ),
        "more parts than ranks": (
            lambda: redistribute(
                comm, cyclic_part(), shape, np.float64, cyc, BlockCyclicRows(11, size + 1, 1)
            ),
            [f"the communicator has {size} ranks but src_parts={size} and dst_parts={size + 1}"],
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
    workers = {"cases": _worker_cases, "general": _worker_general}
    sys.exit(workers[mode](spec) if mode in workers else _worker_errors())
