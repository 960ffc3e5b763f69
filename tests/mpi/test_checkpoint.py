"""save_rows/load_rows and save_state/load_state under real Open MPI.

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


def _worker_errors(directory: str) -> int:
    from mpi4py import MPI

    from conftest import make_global
    from elastic_slurm.mpi_runtime.checkpoint import (
        CheckpointError,
        load_rows,
        load_state,
        save_rows,
        save_state,
    )
    from elastic_slurm.mpi_runtime.distribution import BlockRows

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
    sys.exit(_worker_errors(directory))
