"""save_rows/load_rows, save_array/load_array and save_state/load_state under real Open MPI.

Like ``test_redistribute.py``, this file is also the MPI worker: pytest runs
``mpirun -n K python test_checkpoint.py <mode> <directory> [cases.json]``. Saving and loading
with different part counts is the restart path (save at the old size, load at the new size).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(180)]

WORKER = str(Path(__file__).resolve())


def checkpoint_cases(nprocs: int, dtypes: Sequence[str]) -> list[dict[str, Any]]:
    """Save with ``save`` parts and load with ``load`` parts, max(save, load) == nprocs."""
    pairs = [(s, nprocs) for s in range(1, nprocs + 1)] + [(nprocs, d) for d in range(1, nprocs)]
    cases = []
    for i, (save, load) in enumerate(pairs):
        for j, (rows, trailing, dtype) in enumerate(
            [
                (13, (3,), dtypes[i % len(dtypes)]),
                (nprocs - 1, (2, 2), "float64"),  # fewer rows than parts
                (0, (4,), "int32"),
                (50, (), "complex128"),  # 1-D
                (7, (2, 0), "float32"),  # rows of zero bytes
                (9, (5,), dtypes[(i + 5) % len(dtypes)]),
            ]
        ):
            cases.append(
                {"name": f"arr{i}_{j}", "rows": rows, "trailing": list(trailing),
                 "dtype": dtype, "save": save, "load": load, "salt": 100 * i + j}
            )  # fmt: skip
    return cases


@pytest.mark.parametrize("nprocs", [1, 2, 3, 4])
def test_save_then_load_at_another_size(mpirun, mpi_data, tmp_path: Path, nprocs: int) -> None:
    cases = checkpoint_cases(nprocs, mpi_data.dtypes)
    spec = tmp_path / "cases.json"
    spec.write_text(json.dumps(cases))
    store = tmp_path / "store"
    result = mpirun(nprocs, [WORKER, "roundtrip", str(store), str(spec)])
    assert result.returncode == 0, result.describe()
    assert f"OK {len(cases)} cases on {nprocs} ranks" in result.stdout, result.describe()
    # The files are plain .npy files, complete, with no temporary files left behind.
    names = sorted(p.name for p in store.iterdir())
    assert not [n for n in names if n.startswith(".")], names
    for case in cases:
        got = np.load(store / f"{case['name']}.npy")
        shape = (case["rows"], *case["trailing"])
        # the worker saves a second version (salt) over the first; this must be the second
        want = mpi_data.make_global(shape, mpi_data.parse_dtype(case["dtype"]), case["salt"])
        assert got.shape == want.shape and got.dtype == want.dtype
        assert got.tobytes() == want.tobytes(), case
    assert json.loads((store / "state.json").read_text())["state"]["iteration"] == 42


@pytest.mark.parametrize("nprocs", [1, 3])
def test_errors_are_raised_on_all_ranks(mpirun, tmp_path: Path, nprocs: int) -> None:
    store = tmp_path / "store"
    result = mpirun(nprocs, [WORKER, "errors", str(store)], timeout_s=60)
    assert result.returncode == 0, result.describe()
    assert f"OK error cases on {nprocs} ranks" in result.stdout, result.describe()
    assert not [p.name for p in store.iterdir() if p.name.startswith(".")]


# Distributions as JSON specs: block, and block-cyclic with small (staged by io="auto") and
# large blocks.
ARRAY_KINDS: list[dict[str, Any]] = [
    {"kind": "block"},
    {"kind": "cyclic", "block": 1},
    {"kind": "cyclic", "block": 3},
    {"kind": "cyclic", "block": 16},
]
IO_MODES = ["auto", "direct", "staged"]


def array_cases(nprocs: int, dtypes: Sequence[str]) -> list[dict[str, Any]]:
    """Save with (kind, parts) and load with another (kind, parts); all part counts up to
    ``nprocs`` on both sides, every pair of kinds, each io mode on both sides."""
    pairs = [(s, d) for s in range(1, nprocs + 1) for d in range(1, nprocs + 1)]
    shapes = [(13, (3,)), (40, ()), (2, (2, 2)), (0, (4,)), (7, (2, 0)), (33, (5,))]
    cases = []
    for i, (save, load) in enumerate(pairs):
        for j in range(3):
            k = 3 * i + j
            rows, trailing = shapes[k % len(shapes)]
            cases.append(
                {"name": f"a{k}", "rows": rows, "trailing": list(trailing),
                 "dtype": dtypes[(5 * k) % len(dtypes)], "save": save, "load": load,
                 "save_kind": ARRAY_KINDS[k % 4], "load_kind": ARRAY_KINDS[(k // 4) % 4],
                 "save_io": IO_MODES[k % 3], "load_io": IO_MODES[(k // 3) % 3], "salt": k + 1}
            )  # fmt: skip
    # Rows of 16 KiB: blocks of 16 rows (256 KiB runs) are written directly by io="auto",
    # blocks of 3 rows (48 KiB runs) are staged through a block layout.
    cases.append(
        {"name": "big", "rows": 48, "trailing": [2048], "dtype": "float64", "save": nprocs,
         "load": max(nprocs - 1, 1), "save_kind": ARRAY_KINDS[3], "load_kind": ARRAY_KINDS[2],
         "save_io": "auto", "load_io": "auto", "salt": 99}
    )  # fmt: skip
    return cases


def test_array_cases_cover_every_kind_and_io_pair(mpi_data) -> None:
    cases = array_cases(5, mpi_data.dtypes)
    kinds = {(str(c["save_kind"]), str(c["load_kind"])) for c in cases}
    assert len(kinds) == len(ARRAY_KINDS) ** 2
    assert {(c["save_io"], c["load_io"]) for c in cases} == {
        (a, b) for a in IO_MODES for b in IO_MODES
    }
    assert {(c["save"], c["load"]) for c in cases} == {
        (a, b) for a in range(1, 6) for b in range(1, 6)
    }


@pytest.mark.parametrize("nprocs", [2, 5])
def test_save_and_load_any_distribution(mpirun, mpi_data, tmp_path: Path, nprocs: int) -> None:
    cases = array_cases(nprocs, mpi_data.dtypes)
    spec = tmp_path / "cases.json"
    spec.write_text(json.dumps(cases))
    store = tmp_path / "store"
    result = mpirun(nprocs, [WORKER, "arrays", str(store), str(spec)])
    assert result.returncode == 0, result.describe()
    assert f"OK {len(cases)} array cases on {nprocs} ranks" in result.stdout, result.describe()
    assert not [p.name for p in store.iterdir() if p.name.startswith(".")]
    for case in cases:  # the file is the global array in row order, whatever the distribution
        got = np.load(store / f"{case['name']}.npy")
        shape = (case["rows"], *case["trailing"])
        want = mpi_data.make_global(shape, mpi_data.parse_dtype(case["dtype"]), case["salt"])
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), case


# ----------------------------------------------------------------------------------------------
# MPI worker


def _worker_roundtrip(directory: str, spec: str) -> int:
    from mpi4py import MPI

    from conftest import make_global, parse_dtype
    from elastic_slurm.mpi_runtime.checkpoint import load_rows, load_state, save_rows, save_state
    from elastic_slurm.mpi_runtime.distribution import BlockRows

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    errors: list[str] = []
    for case in json.loads(Path(spec).read_text()):
        dt = parse_dtype(case["dtype"])
        shape = (case["rows"], *case["trailing"])
        for salt in (0, case["salt"]):  # the second save replaces the first
            g = make_global(shape, dt, salt)
            if rank < case["save"]:
                start, stop = BlockRows(shape[0], case["save"]).rows_of(rank)
                local = g[start:stop]
            else:
                local = None
            fsync = case["salt"] % 3 == 0  # fsync costs ~ms per file; exercise both paths
            path = save_rows(
                directory, case["name"], comm, local, shape, dt, case["save"], fsync=fsync
            )
            if not path.is_file():
                errors.append(f"rank {rank} {case}: {path} missing right after save_rows")
            got = load_rows(
                directory, case["name"], comm, case["load"], global_shape=shape, dtype=dt
            )
            if rank < case["load"]:
                start, stop = BlockRows(shape[0], case["load"]).rows_of(rank)
            else:
                start = stop = 0
            want = g[start:stop]
            if got.shape != want.shape or got.dtype != dt:
                errors.append(f"rank {rank} {case}: got {got.shape} {got.dtype}, want {want.shape}")
            elif got.tobytes() != want.tobytes():
                errors.append(f"rank {rank} {case} salt {salt}: data differs: {got!r} vs {want!r}")
    state = {"iteration": 42, "time_s": 1.5, "label": "run-a", "done": False, "none": None}
    state["residual"] = np.float32(0.25)  # NumPy scalars are converted
    save_state(directory, "state", comm, state if rank == 0 else None)
    loaded = load_state(directory, "state", comm)
    if loaded != {**state, "residual": 0.25}:
        errors.append(f"rank {rank}: state {loaded!r}")
    for line in errors[:20]:
        print("MISMATCH", line, flush=True)
    if comm.allreduce(len(errors)) == 0 and rank == 0:
        print(f"OK {len(json.loads(Path(spec).read_text()))} cases on {size} ranks")
    return 1 if errors else 0


def _dist(spec: dict[str, Any], rows: int, parts: int) -> Any:
    from elastic_slurm.mpi_runtime.distribution import BlockCyclicRows, BlockRows

    if spec["kind"] == "block":
        return BlockRows(rows, parts)
    return BlockCyclicRows(rows, parts, spec["block"])


def _worker_arrays(directory: str, spec: str) -> int:
    from mpi4py import MPI

    from conftest import make_global, parse_dtype
    from elastic_slurm.mpi_runtime.checkpoint import load_array, load_rows, save_array
    from elastic_slurm.mpi_runtime.distribution import BlockRows

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    errors: list[str] = []
    cases = json.loads(Path(spec).read_text())
    for case in cases:
        dt = parse_dtype(case["dtype"])
        shape = (case["rows"], *case["trailing"])
        g = make_global(shape, dt, case["salt"])
        saved = _dist(case["save_kind"], shape[0], case["save"])
        local = g[saved.indices(rank)] if rank < saved.parts else None
        save_array(
            directory, case["name"], comm, local, shape, dt, saved, fsync=False, io=case["save_io"]
        )
        target = _dist(case["load_kind"], shape[0], case["load"])
        got = load_array(
            directory, case["name"], comm, target, global_shape=shape, io=case["load_io"]
        )
        want = g[target.indices(rank)] if rank < target.parts else g[:0]
        if got.shape != want.shape or got.dtype != dt or got.tobytes() != want.tobytes():
            errors.append(f"rank {rank} {case}: got {got.shape} {got.dtype}, want {want.shape}")
        # load_rows reads any saved distribution back as blocks
        blocks = load_rows(directory, case["name"], comm, case["save"])
        b = BlockRows(shape[0], case["save"])
        want_b = g[b.indices(rank)] if rank < b.parts else g[:0]
        if blocks.tobytes() != want_b.tobytes() or blocks.shape != want_b.shape:
            errors.append(f"rank {rank} {case}: load_rows after save_array differs")
    for line in errors[:20]:
        print("MISMATCH", line, flush=True)
    if comm.allreduce(len(errors)) == 0 and rank == 0:
        print(f"OK {len(cases)} array cases on {size} ranks")
    return 1 if errors else 0


def _worker_errors(directory: str) -> int:
    from mpi4py import MPI

    from conftest import make_global
    from elastic_slurm.mpi_runtime.checkpoint import (
        CheckpointError,
        load_array,
        load_rows,
        load_state,
        save_array,
        save_rows,
        save_state,
    )
    from elastic_slurm.mpi_runtime.distribution import BlockCyclicRows, BlockRows

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    root = Path(directory)
    shape = (10, 3)
    g = make_global(shape, np.float64, 0)

    def block(parts: int) -> np.ndarray | None:
        if rank >= parts:
            return None
        start, stop = BlockRows(shape[0], parts).rows_of(rank)
        return g[start:stop]

    save_rows(root, "good", comm, block(size), shape, np.float64, size)
    save_state(root, "state", comm, {"iteration": 1})
    cyc = BlockCyclicRows(shape[0], size, 2)

    def cyc_part(short_on_last: bool = False) -> np.ndarray:
        part = g[cyc.indices(rank)]
        return part[:-1] if short_on_last and rank == size - 1 else part

    def truncate(name: str, keep: int) -> None:
        if rank == 0:
            with open(root / name, "r+b") as f:
                f.truncate(keep)
        comm.Barrier()

    def write_text(name: str, text: str) -> None:
        if rank == 0:
            (root / name).write_text(text)
        comm.Barrier()

    def bad_last_block() -> np.ndarray | None:
        b = block(size)
        return b[:-1] if rank == size - 1 else b

    cases: list[tuple[str, Any, type[BaseException], str]] = [
        ("missing array", lambda: load_rows(root, "nope", comm, size), FileNotFoundError,
         "nope.npy does not exist"),
        ("missing state", lambda: load_state(root, "nope", comm), FileNotFoundError,
         "nope.json does not exist"),
        ("wrong expected shape", lambda: load_rows(root, "good", comm, size, global_shape=(10, 4)),
         CheckpointError, "holds shape (10, 3), expected (10, 4)"),
        ("wrong expected dtype", lambda: load_rows(root, "good", comm, 1, dtype=np.float32),
         CheckpointError, "holds dtype float64, expected float32"),
        ("parts > size", lambda: load_rows(root, "good", comm, size + 1), ValueError,
         f"fewer than parts={size + 1}"),
        ("bad name", lambda: load_rows(root, "../good", comm, size), ValueError,
         "must be a plain file stem"),
        ("local shape on last rank", lambda: save_rows(root, "good", comm, bad_last_block(), shape,
         np.float64, size), ValueError, f"rank {size - 1}: local block has shape"),
        ("directory is a file", lambda: save_rows(root / "good.npy", "x", comm, block(size),
         shape, np.float64, size), OSError, "cannot create"),
        ("state not scalar", lambda: save_state(root, "state", comm, {"a": [1, 2]}), ValueError,
         "state['a'] is a list"),
        # save_array / load_array
        ("load_array: other rows", lambda: load_array(root, "good", comm,
         BlockCyclicRows(11, size, 2)), CheckpointError,
         "good.npy holds 10 rows (shape (10, 3)), but the distribution covers 11"),
        ("load_array: an int", lambda: load_array(root, "good", comm, size), ValueError,
         "dist must be a RowDistribution"),
        ("load_array: bad io", lambda: load_array(root, "good", comm, cyc, io="mmap"), ValueError,
         "io must be one of 'auto', 'direct', 'staged'; got 'mmap'"),
        ("save_array: cyclic part short", lambda: save_array(root, "good", comm, cyc_part(True),
         shape, np.float64, cyc), ValueError, f"for part {size - 1} of {cyc!r}"),
        ("save_array: dist of other rows", lambda: save_array(root, "good", comm, cyc_part(),
         shape, np.float64, BlockCyclicRows(9, size, 2)), ValueError,
         "dist distributes 9 rows but global_shape[0] is 10"),
        ("load_array: missing", lambda: load_array(root, "nope", comm, cyc), FileNotFoundError,
         "nope.npy does not exist"),
    ]  # fmt: skip
    failures: list[str] = []

    def expect(label: str, call: Any, exc_type: type[BaseException], needle: str) -> None:
        try:
            call()
        except exc_type as exc:
            if needle not in str(exc):
                failures.append(f"rank {rank} [{label}]: {needle!r} not in {exc}")
            elif rank == 0 and "--show" in sys.argv:
                print(f"[{label}] {type(exc).__name__}: {exc}", flush=True)
        except Exception as exc:
            failures.append(f"rank {rank} [{label}]: {type(exc).__name__} {exc}")
        else:
            failures.append(f"rank {rank} [{label}]: no {exc_type.__name__}")

    for label, call, exc_type, needle in cases:
        expect(label, call, exc_type, needle)
    # A failed save leaves the previous file intact.
    if not np.array_equal(np.load(root / "good.npy"), g):
        failures.append(f"rank {rank}: good.npy changed by a failed save")
    if load_state(root, "state", comm) != {"iteration": 1}:
        failures.append(f"rank {rank}: state.json changed by a failed save")

    # Damaged files: truncated data, truncated header, not a .npy at all, bad JSON.
    save_rows(root, "cut", comm, block(size), shape, np.float64, size)
    truncate("cut.npy", os.path.getsize(root / "cut.npy") - 8)
    expect("truncated data", lambda: load_rows(root, "cut", comm, size), CheckpointError,
           "cut.npy is truncated: 360 bytes on disk, 368 expected")  # fmt: skip
    truncate("cut.npy", 20)
    expect("truncated header", lambda: load_rows(root, "cut", comm, size), CheckpointError,
           "has no valid .npy header")  # fmt: skip
    write_text("junk.npy", "hello, not numpy\n")
    expect("not npy", lambda: load_rows(root, "junk", comm, size), CheckpointError,
           "junk.npy has no valid .npy header")  # fmt: skip
    write_text("cut.json", '{"format": "elastic-slurm-state", "vers')
    expect("truncated state", lambda: load_state(root, "cut", comm), CheckpointError,
           "cut.json is not valid JSON")  # fmt: skip
    write_text("other.json", '{"hello": 1}')
    expect("foreign json", lambda: load_state(root, "other", comm), CheckpointError,
           "not an elastic-slurm state file")  # fmt: skip
    if rank == 0:
        np.save(root / "fortran.npy", np.asfortranarray(g))
    comm.Barrier()
    expect("fortran order", lambda: load_rows(root, "fortran", comm, size), CheckpointError,
           "Fortran order")  # fmt: skip
    # A file written by plain numpy loads fine at any size.
    if rank == 0:
        np.save(root / "plain.npy", g.astype(np.int16))
    comm.Barrier()
    got = load_rows(root, "plain", comm, size)
    want = block(size)
    if not np.array_equal(got, (want if want is not None else g[:0]).astype(np.int16)):
        failures.append(f"rank {rank}: plain numpy file read wrongly")

    for line in failures:
        print("FAIL", line, flush=True)
    if comm.allreduce(len(failures)) == 0 and rank == 0:
        print(f"OK error cases on {size} ranks")
    return 1 if failures else 0


if __name__ == "__main__":
    mode, directory = sys.argv[1], sys.argv[2]
    if mode == "roundtrip":
        sys.exit(_worker_roundtrip(directory, sys.argv[3]))
    if mode == "arrays":
        sys.exit(_worker_arrays(directory, sys.argv[3]))
    sys.exit(_worker_errors(directory))
