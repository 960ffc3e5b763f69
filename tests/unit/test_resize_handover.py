"""The files by which the application, the launcher and a waiting successor hand over."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import pytest

from elastic_slurm.mpi_runtime import handover
from elastic_slurm.protocol.jobdir import JobDir


def _jobdir(tmp_path: Path) -> JobDir:
    jobdir = JobDir(tmp_path / "job")
    jobdir.create()
    return jobdir


def test_a_request_is_taken_once_with_its_nodes_and_memory_token(tmp_path: Path) -> None:
    jobdir = _jobdir(tmp_path)
    assert handover.take_request(jobdir) is None
    where = tmp_path / "shm"
    where.mkdir()
    token = handover.make_token(where)
    handover.request_successor(jobdir, 3, "shrink", ["n1", "n2"], 1, (where, token))
    got = handover.take_request(jobdir)
    assert got is not None
    assert (got["seq"], got["action"], got["nodes"], got["launch"]) == (
        3,
        "shrink",
        ["n1", "n2"],
        1,
    )
    assert handover.sees_token(got["memory_dir"], got["token"])
    assert not handover.sees_token(got["memory_dir"], "another")
    assert not handover.sees_token(None, None)
    assert handover.take_request(jobdir) is None  # taken


def test_wait_ready_returns_once_the_successor_says_so_with_its_memory_verdict(
    tmp_path: Path,
) -> None:
    jobdir = _jobdir(tmp_path)
    threading.Timer(0.1, handover.signal_ready, (jobdir, 2, 1, True)).start()
    t0 = time.monotonic()
    assert handover.wait_ready(jobdir, 2, 10.0, failed=lambda: False) == (None, True)
    assert time.monotonic() - t0 < 5


def test_wait_ready_gives_up_when_the_launcher_failed_it_or_on_timeout(tmp_path: Path) -> None:
    jobdir = _jobdir(tmp_path)
    why, memory = handover.wait_ready(jobdir, 2, 10.0, failed=lambda: True)
    assert why == "the next generation could not start" and memory is False
    why, _ = handover.wait_ready(jobdir, 2, 0.1, failed=lambda: False)
    assert why == "the next generation was not ready within 0.1 s"


def test_a_cancel_reaches_the_launcher_with_its_reason(tmp_path: Path) -> None:
    jobdir = _jobdir(tmp_path)
    assert handover.cancelled(jobdir, 4) is None
    handover.cancel(jobdir, 4, "the next generation was not ready within 0.3 s")
    assert handover.cancelled(jobdir, 4) == "the next generation was not ready within 0.3 s"
    assert handover.cancelled(jobdir, 5) is None


def test_room_and_drop(tmp_path: Path) -> None:
    where = tmp_path / "shm"
    where.mkdir()
    handover.make_token(where)
    assert handover.has_room(where, 1024)
    assert not handover.has_room(where, 10**18)
    handover.drop(where)
    assert not where.exists()


def test_drop_all_removes_only_this_job_s_memory_directories(tmp_path: Path) -> None:
    mine = handover.memory_dir(7, 1, root=str(tmp_path))
    other = handover.memory_dir(71, 1, root=str(tmp_path))
    for d in (mine, other):
        d.mkdir()
        handover.make_token(d)
    handover.drop_all(7, root=str(tmp_path))
    assert not mine.exists() and other.exists()


class _Solo:
    """A one-rank communicator: what :func:`handover.linger` and ``await_manifest`` use."""

    class _Done:
        def Test(self) -> bool:  # noqa: N802 (mpi4py's name)
            return True

    rank = 0  # await_manifest reads the attribute

    def Get_rank(self) -> int:  # noqa: N802
        return 0

    def Ibarrier(self) -> _Solo._Done:  # noqa: N802
        return self._Done()

    def bcast(self, value: object, root: int = 0) -> object:
        return value


def test_the_old_ranks_linger_until_the_successor_took_the_checkpoint(tmp_path: Path) -> None:
    where = tmp_path / "shm"
    where.mkdir()
    threading.Timer(0.2, handover.signal_took, (where, 3)).start()
    took, waited_s = handover.linger(_Solo(), where, 3, nbytes=0)
    assert took is True
    assert 0.15 <= waited_s < 4.0  # asleep until then, not a moment longer
    assert handover.took_path(where, 3).exists()
    handover.signal_took(where, 3)  # said twice (a retried restore): still fine
    assert handover.linger(_Solo(), where, 3, nbytes=0)[0] is True


def test_linger_gives_up_after_its_deadline_which_grows_with_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handover, "LINGER_S", 0.1)
    monkeypatch.setattr(handover, "LINGER_BYTES_PER_S", 1000)
    took, waited_s = handover.linger(_Solo(), tmp_path, 4, nbytes=0)
    assert took is False and waited_s < 2.0  # no successor took it
    took, waited_s = handover.linger(_Solo(), tmp_path, 4, nbytes=300)
    assert took is False and waited_s >= 0.35  # 0.1 s + 300 B at 1000 B/s
    handover.signal_took(tmp_path, 5)
    assert handover.linger(_Solo(), tmp_path, 4, nbytes=0)[0] is False  # another order's


def test_await_manifest_passes_over_a_malformed_manifest_until_the_right_one(
    tmp_path: Path,
) -> None:
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"seq": [7], "launch": "one"}))  # int() would raise

    def written() -> None:
        manifest.write_text(json.dumps({"seq": 7, "launch": 1, "arrays": []}))

    threading.Timer(0.2, written).start()
    found = handover.await_manifest(_Solo(), manifest, 1, 7, timeout_s=30.0, poll_s=0.01)
    assert found == {"seq": 7, "launch": 1, "arrays": []}
    manifest.write_text(json.dumps({"seq": 7, "launch": {"a": 1}}))
    with pytest.raises(handover.HandoverError, match="did not hand over order 7"):
        handover.await_manifest(_Solo(), manifest, 1, 7, timeout_s=0.1, poll_s=0.01)


def test_a_took_marker_that_cannot_be_made_is_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gone = tmp_path / "gone"  # the memory directory was removed meanwhile
    with caplog.at_level(logging.WARNING, logger=handover.__name__):
        handover.signal_took(gone, 3)
    assert "could not tell the old generation it may end" in caplog.text
    assert not handover.took_path(gone, 3).exists()


def test_a_successor_request_that_cannot_be_written_refuses_the_order_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    from elastic_slurm.model.resize_order import ResizeAction, ResizeOrder
    from elastic_slurm.mpi_runtime.join_restart import RestartJoin

    jobdir = _jobdir(tmp_path)
    (jobdir.path / handover.REQUEST).mkdir()  # where the request goes: the write fails
    monkeypatch.setenv("ELASTIC_SLURM_HANDOVER_MEMORY", "0")
    join = RestartJoin(SimpleNamespace(jobdir=jobdir, launch=0))  # type: ignore[arg-type]
    order = ResizeOrder(2, ResizeAction.EXPAND, ("n1", "n2"), time.time())
    t0 = time.monotonic()
    why = join.prepare(order)
    assert why is not None and why.startswith("the next generation could not be asked for")
    assert "successor.json" in why
    assert time.monotonic() - t0 < 5.0  # no successor to stop: no wait for the launcher
    assert not handover.cancel_path(jobdir, 2).exists()
