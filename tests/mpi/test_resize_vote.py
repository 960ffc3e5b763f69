"""Every rank acts on an order at the same resize point, without a blocking collective per point.

Like ``test_checkpoint.py``, this file is also the MPI worker:
``mpirun -n K python test_resize_vote.py <mode> <directory>``.

* ``vote``: ranks run at different speeds (rank r sleeps r ms per point, plus jitter); rank 0
  raises its flag from a chosen point on; every rank must see it at the same point.
* ``missing``: rank 1 never calls ``resize_point()``; the others must fail, naming rank 1.
* ``badorder``: the sequential path (rank 0 looks for orders itself) meets an order file that
  is not an order; rank 0 warns and every rank goes on.
* ``outcome``: ``init()`` in a restarted generation whose manifest is damaged; every rank must
  raise the same error (rank 0 reads it alone).
* ``register``: rank 0's registration with the controller fails in a way the channel does not
  expect; every rank must raise the same error from ``init()`` (none waits for rank 0).
* ``order``: the real runtime (``init()``, a job directory, rank 0's watcher thread) with an
  order written while the ranks run; the order names the nodes the job already has, so every
  rank takes the "already running there" branch, which is collective (a rank acting at another
  point would hang the run), and the acknowledgement is written.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(180)]

WORKER = str(Path(__file__).resolve())


def worker_vote() -> None:
    from mpi4py import MPI

    from elastic_slurm.mpi_runtime.orders import Vote

    comm = MPI.COMM_WORLD
    seen = []
    for period_s in (0.0, 0.005, 0.05):
        vote = Vote(comm, period_s=period_s)
        rng = random.Random(comm.rank * 7 + 1)
        for point in range(400):
            time.sleep(comm.rank * 0.0005 + rng.random() * 0.001)
            if vote.exchange(1 if comm.rank == 0 and point >= 150 else 0):
                seen.append(point)
                break
        else:
            seen.append(-1)
        vote.close()
    everyone = comm.gather(seen, root=0)
    if comm.rank == 0:
        print(json.dumps({"seen": everyone}), flush=True)


def worker_order(directory: str) -> None:
    from mpi4py import MPI

    from elastic_slurm.model.resize_order import ResizeAction, ResizeOrder
    from elastic_slurm.mpi_runtime import init
    from elastic_slurm.protocol.jobdir import JobDir

    jobdir = JobDir(Path(directory))
    ec = init()
    if ec.rank == 0:
        hosts = [MPI.Get_processor_name()]

        def later() -> None:
            time.sleep(0.3)
            jobdir.write_order(ResizeOrder(1, ResizeAction.SHRINK, tuple(hosts), time.time()))

        threading.Thread(target=later, daemon=True).start()
    rng = random.Random(ec.rank)
    for _ in range(300):
        time.sleep(rng.random() * 0.004)
        ec.resize_point()
    ec.comm.Barrier()
    if ec.rank == 0:
        print(json.dumps({"next_seq": ec.next_seq}), flush=True)


def worker_missing(directory: str) -> None:
    """Rank 1 never calls resize_point (a call inside ``if rank != 1``)."""
    from mpi4py import MPI

    from elastic_slurm.model.resize_order import ResizeAction, ResizeOrder
    from elastic_slurm.mpi_runtime import init
    from elastic_slurm.protocol.jobdir import JobDir

    ec = init()
    if ec.rank == 0:
        host = MPI.Get_processor_name()
        JobDir(Path(directory)).write_order(
            ResizeOrder(1, ResizeAction.SHRINK, (host,), time.time())
        )
    for _ in range(200):
        time.sleep(0.005)
        if ec.rank != 1:
            ec.resize_point()
    time.sleep(5)  # rank 1 is still "elsewhere" while the others time out


def _write_outcome(directory: str, rank: int, call: Callable[[], object]) -> None:
    """Run ``call``; write what it raised (or None) into ``directory/rank-R.json``."""
    outcome: dict[str, object] = {"rank": rank, "raised": None}
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - written for the test
        outcome.update(raised=type(exc).__name__, text=str(exc))
    Path(directory, f"rank-{rank}.json").write_text(json.dumps(outcome))


def worker_outcome(directory: str) -> None:
    from mpi4py import MPI

    from elastic_slurm.mpi_runtime import init

    _write_outcome(directory, MPI.COMM_WORLD.rank, init)


def worker_damaged_ack(directory: str) -> None:
    """A restart checkpoint of order 1 with no arrays, and a damaged ``failed`` acknowledgement
    of that order; then each rank writes what ``init()`` raised."""
    from mpi4py import MPI

    from elastic_slurm.mpi_runtime import init
    from elastic_slurm.mpi_runtime.checkpoint import save_state

    comm = MPI.COMM_WORLD
    checkpoint = Path(directory, "job", "checkpoint")
    save_state(checkpoint, "state", comm, {"step": 3})
    if comm.rank == 0:
        manifest = {"seq": 1, "launch": 0, "generation": 0, "arrays": [], "checkpoint_s": 0.0}
        manifest["requested_at"] = time.time()
        (checkpoint / "manifest.json").write_text(json.dumps(manifest))
        acks = Path(directory, "job", "acks")
        acks.mkdir(exist_ok=True)
        (acks / "000001.failed.json").write_text("{not an acknowledgement")
    comm.Barrier()
    _write_outcome(directory, comm.rank, init)


def worker_local_checks(directory: str) -> None:
    """``elastic-slurm try``'s checks, where rank 0 alone reads or writes: ``local-try-1.json``
    is a directory (so the checksums before order 1 cannot be written) and
    ``local-try-2.json`` is damaged (those before order 2 cannot be read). Each rank writes
    what ``before`` and ``after`` raised into ``directory/before`` and ``directory/after``."""
    from mpi4py import MPI

    from elastic_slurm.mpi_runtime.local import LocalTry
    from elastic_slurm.protocol.jobdir import JobDir

    comm = MPI.COMM_WORLD
    checks = LocalTry([4, 2], 1, JobDir(Path(directory, "job")))
    if comm.rank == 0:
        Path(directory, "job", "local-try-1.json").mkdir()
        Path(directory, "job", "local-try-2.json").write_text("{not checksums")
        for name in ("before", "after"):
            Path(directory, name).mkdir()
    comm.Barrier()
    _write_outcome(str(Path(directory, "before")), comm.rank, lambda: checks.before(comm, [], 1))
    _write_outcome(
        str(Path(directory, "after")), comm.rank, lambda: checks.after(comm, [], 2, "restart")
    )


def _outcomes(directory: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(directory.glob("rank-*.json"))]


def worker_register(directory: str) -> None:
    """Rank 0's registration raises what the channel does not catch; each rank writes what
    ``init()`` raised into ``directory/rank-R.json``."""
    from mpi4py import MPI

    from elastic_slurm.mpi_runtime import channel, init

    def broken(self: object, ranks: int, hosts: list[str]) -> None:
        raise ValueError("a bug in the registration")

    channel.HttpChannel.register = broken  # type: ignore[method-assign]
    _write_outcome(directory, MPI.COMM_WORLD.rank, init)


def worker_badorder() -> None:
    from mpi4py import MPI

    from elastic_slurm.mpi_runtime import init

    ec = init()
    for _ in range(50):
        ec.resize_point()
    ec.comm.Barrier()
    if MPI.COMM_WORLD.rank == 0:
        print(json.dumps({"next_seq": ec.next_seq}), flush=True)


def _last_json(stdout: str) -> dict:
    return json.loads([ln for ln in stdout.splitlines() if ln.startswith("{")][-1])


def test_every_rank_sees_the_vote_at_the_same_point(mpirun) -> None:
    res = mpirun(4, [WORKER, "vote"])
    assert res.returncode == 0, res.describe()
    seen = _last_json(res.stdout)["seen"]
    for case in range(3):
        points = {ranks[case] for ranks in seen}
        assert len(points) == 1, f"period case {case}: ranks saw the flag at {seen}"
        assert points.pop() >= 150


@pytest.mark.parametrize("events_unwritable", [False, True])
def test_an_order_is_taken_at_one_point_by_every_rank(
    mpirun, tmp_path: Path, events_unwritable: bool
) -> None:
    from elastic_slurm.model.resize_order import AckStatus
    from elastic_slurm.protocol.jobdir import JobDir

    jobdir = JobDir(tmp_path / "job")
    jobdir.create()
    if events_unwritable:  # rank 0 cannot log the order: a warning, not a hang
        (jobdir.path / "events.jsonl").mkdir()
    os.environ["ELASTIC_SLURM_JOB_DIR"] = str(jobdir.path)
    try:
        res = mpirun(3, [WORKER, "order", str(jobdir.path)])
    finally:
        del os.environ["ELASTIC_SLURM_JOB_DIR"]
    assert res.returncode == 0, res.describe()
    assert _last_json(res.stdout)["next_seq"] == 2
    ack = jobdir.read_ack(1, AckStatus.DONE)
    assert ack is not None and ack.strategy == "none"
    assert ("not logged in the job directory: events.jsonl" in res.stderr) is events_unwritable
    if not events_unwritable:  # for the launcher: this generation's ranks ran
        started = [e for e in jobdir.events() if e["event"] == "started"]
        assert [(e["generation"], e["ranks"]) for e in started] == [(0, 3)]


def test_a_resize_point_some_ranks_skip_fails_naming_them(mpirun, tmp_path: Path) -> None:
    from elastic_slurm.protocol.jobdir import JobDir

    jobdir = JobDir(tmp_path / "job")
    jobdir.create()
    os.environ["ELASTIC_SLURM_JOB_DIR"] = str(jobdir.path)
    os.environ["ELASTIC_SLURM_RESIZE_POINT_TIMEOUT_S"] = "2"
    try:
        res = mpirun(3, [WORKER, "missing", str(jobdir.path)])
    finally:
        del os.environ["ELASTIC_SLURM_JOB_DIR"], os.environ["ELASTIC_SLURM_RESIZE_POINT_TIMEOUT_S"]
    assert res.returncode != 0, res.describe()
    assert "rank(s) [1] of 3 did not reach it within 2 s (ranks [0, 2] wait there)" in res.stderr


def test_the_sequential_path_goes_on_past_an_order_file_that_is_not_one(
    mpirun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from elastic_slurm.protocol.jobdir import JobDir

    jobdir = JobDir(tmp_path / "job")
    jobdir.create()
    jobdir.order_path(1).parent.mkdir(parents=True, exist_ok=True)
    jobdir.order_path(1).write_text("{not an order")
    monkeypatch.setenv("ELASTIC_SLURM_JOB_DIR", str(jobdir.path))
    monkeypatch.setenv("ELASTIC_SLURM_RESIZE_PATH", "sequential")
    res = mpirun(3, [WORKER, "badorder"])
    assert res.returncode == 0, res.describe()
    assert _last_json(res.stdout)["next_seq"] == 1  # not followed, not skipped
    assert res.stderr.count("looking for order 1 failed") == 1, res.describe()  # not per point


def _outcomes_of(mpirun, tmp_path: Path, mode: str, env: dict[str, str], monkeypatch) -> list:
    """Run worker ``mode`` on 3 ranks in a job directory, with ``env``; each rank's outcome."""
    from elastic_slurm.protocol.jobdir import JobDir

    jobdir = JobDir(tmp_path / "job")
    jobdir.create()
    monkeypatch.setenv("ELASTIC_SLURM_JOB_DIR", str(jobdir.path))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    res = mpirun(3, [WORKER, mode, str(tmp_path)])
    assert res.returncode == 0, res.describe()
    outcomes = _outcomes(tmp_path)
    assert sorted(o["rank"] for o in outcomes) == [0, 1, 2], res.describe()
    return outcomes


def _every_rank_raised(outcomes: list, raised: str, what: str, *parts: str) -> None:
    """Each rank raised ``raised``, its message starting with ``what``'s verdict, naming
    ``parts``: rank 0 alone failed, and no other rank waited for it."""
    for o in outcomes:
        assert o["raised"] == raised, o
        assert o["text"].startswith(f"{what}: 1 of 3 ranks failed;"), o
        assert all(part in o["text"] for part in parts), o


def test_a_failed_registration_raises_on_every_rank(
    mpirun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {
        "ELASTIC_SLURM_CONTROLLER": "http://127.0.0.1:9",
        "ELASTIC_SLURM_JOB_SECRET": "s",
        "ELASTIC_SLURM_JOB_ID": "77",
    }
    outcomes = _outcomes_of(mpirun, tmp_path, "register", env, monkeypatch)
    _every_rank_raised(
        outcomes,
        "RuntimeError",
        "registering with the controller",
        "rank 0: ValueError: a bug in the registration",
    )


def test_a_damaged_restart_manifest_raises_on_every_rank(
    mpirun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint = tmp_path / "job" / "checkpoint"
    checkpoint.mkdir(parents=True)
    (checkpoint / "manifest.json").write_text('{"launch": 0, "seq"')  # cut short
    outcomes = _outcomes_of(mpirun, tmp_path, "outcome", {"ELASTIC_SLURM_LAUNCH": "1"}, monkeypatch)
    _every_rank_raised(
        outcomes, "CheckpointError", "the restart manifest", "manifest.json: not a manifest"
    )


def test_a_damaged_acknowledgement_read_at_a_restart_raises_on_every_rank(
    mpirun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"ELASTIC_SLURM_LAUNCH": "1"}
    outcomes = _outcomes_of(mpirun, tmp_path, "damaged_ack", env, monkeypatch)
    _every_rank_raised(
        outcomes, "RuntimeError", "order 1's acknowledgement", "JobInputError", "000001.failed.json"
    )


def test_a_successor_that_cannot_say_it_is_ready_raises_on_every_rank(
    mpirun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from elastic_slurm.mpi_runtime import handover
    from elastic_slurm.protocol.jobdir import JobDir

    ready = handover.ready_path(JobDir(tmp_path / "job"), 4)
    ready.mkdir(parents=True)  # a directory where the file goes: rank 0's write fails
    env = {"ELASTIC_SLURM_LAUNCH": "1", "ELASTIC_SLURM_SUCCESSOR": "4"}
    outcomes = _outcomes_of(mpirun, tmp_path, "outcome", env, monkeypatch)
    _every_rank_raised(
        outcomes, "RuntimeError", "the successor's ready signal", "successor-ready-4.json"
    )


def test_the_local_checks_fail_on_every_rank_when_rank_0_cannot_record(
    mpirun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from elastic_slurm.protocol.jobdir import JobDir

    JobDir(tmp_path / "job").create()
    res = mpirun(3, [WORKER, "local_checks", str(tmp_path)])
    assert res.returncode == 0, res.describe()
    before, after = _outcomes(tmp_path / "before"), _outcomes(tmp_path / "after")
    assert len(before) == len(after) == 3, res.describe()
    _every_rank_raised(before, "OSError", "recording order 1's checksums", "Is a directory")
    _every_rank_raised(after, "ValueError", "reading order 2's checksums", "rank 0")


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "vote":
        worker_vote()
    elif mode == "order":
        worker_order(sys.argv[2])
    elif mode == "missing":
        worker_missing(sys.argv[2])
    elif mode == "badorder":
        worker_badorder()
    elif mode == "outcome":
        worker_outcome(sys.argv[2])
    elif mode == "damaged_ack":
        worker_damaged_ack(sys.argv[2])
    elif mode == "register":
        worker_register(sys.argv[2])
    elif mode == "local_checks":
        worker_local_checks(sys.argv[2])
    else:
        raise SystemExit(f"unknown mode {mode!r}")
