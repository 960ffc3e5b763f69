"""The controller-job channel on the shared filesystem: ``jobdir.py`` (in a tmp directory)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from elastic_slurm.errors import JobInputError
from elastic_slurm.model.resize_order import AckStatus, ResizeAck, ResizeAction, ResizeOrder
from elastic_slurm.protocol.jobdir import SUBDIR, JobDir, write_json_atomic


@pytest.fixture
def jobdir(tmp_path: Path) -> JobDir:
    return JobDir.for_job(tmp_path, 4)


def test_for_job(tmp_path: Path) -> None:
    jd = JobDir.for_job(str(tmp_path), 12)
    assert jd.path == tmp_path / ".elastic-slurm" / "job-12"
    assert SUBDIR == ".elastic-slurm"
    assert jd.checkpoint == jd.path / "checkpoint"
    assert jd.restart_path == jd.path / "restart.json"
    assert repr(jd) == f"JobDir({str(jd.path)!r})"
    assert not jd.path.exists()  # nothing is created until something is written


def test_paths(jobdir: JobDir) -> None:
    assert jobdir.order_path(3) == jobdir.path / "orders" / "000003.json"
    assert jobdir.ack_path(12, AckStatus.VACATED) == jobdir.path / "acks" / "000012.vacated.json"
    assert jobdir.ack_path(1, AckStatus.FAILED).name == "000001.failed.json"


def test_orders_round_trip(jobdir: JobDir) -> None:
    assert jobdir.last_order_seq() == 0
    assert jobdir.read_order(1) is None
    first = ResizeOrder(1, ResizeAction.EXPAND, ("n1", "n2", "n3"), 100.0)
    third = ResizeOrder(3, ResizeAction.SHRINK, ("n1",), 300.0)
    jobdir.write_order(first)
    jobdir.write_order(third)
    assert (jobdir.read_order(1), jobdir.read_order(2), jobdir.read_order(3)) == (
        first,
        None,
        third,
    )
    assert jobdir.last_order_seq() == 3
    assert json.loads(jobdir.order_path(1).read_text()) == first.to_json()


def test_open_order_is_the_last_one_not_yet_finished(jobdir: JobDir) -> None:
    assert jobdir.open_order() is None
    first = ResizeOrder(1, ResizeAction.EXPAND, ("n1", "n2"), 1.0)
    jobdir.write_order(first)
    assert jobdir.open_order() == first
    jobdir.write_ack(ResizeAck(1, AckStatus.VACATED, ("n3",), 2.0))
    assert jobdir.open_order() == first  # vacating is not finishing
    jobdir.write_ack(ResizeAck(1, AckStatus.FAILED, ("n1",), 3.0))
    assert jobdir.open_order() is None


def test_last_order_seq_ignores_other_files(jobdir: JobDir) -> None:
    orders = jobdir.path / "orders"
    orders.mkdir(parents=True)
    (orders / "notes.json").write_text("{}")
    (orders / "000009.txt").write_text("")
    (orders / ".000007.json.123.tmp").write_text("")
    assert jobdir.last_order_seq() == 0
    jobdir.write_order(ResizeOrder(2, ResizeAction.EXPAND, ("n1",), 1.0))
    assert jobdir.last_order_seq() == 2


def test_acks_round_trip(jobdir: JobDir) -> None:
    vacated = ResizeAck(1, AckStatus.VACATED, ("n3",), 10.0, strategy="restart")
    jobdir.write_ack(vacated)
    assert jobdir.read_ack(1, AckStatus.VACATED) == vacated
    assert jobdir.read_ack(1, AckStatus.DONE) is None
    assert jobdir.final_ack(1) is None  # vacated is not final


def test_final_ack_prefers_done(jobdir: JobDir) -> None:
    failed = ResizeAck(2, AckStatus.FAILED, ("n1", "n2"), 20.0, reason="timeout")
    done = ResizeAck(2, AckStatus.DONE, ("n1",), 21.0, strategy="restart", phases_s={"a": 1.0})
    jobdir.write_ack(failed)
    assert jobdir.final_ack(2) == failed
    jobdir.write_ack(done)
    assert jobdir.final_ack(2) == done
    assert jobdir.final_ack(3) is None


def test_restart_request_is_taken_once(jobdir: JobDir) -> None:
    assert jobdir.take_restart() is None
    request = {"seq": 1, "action": "shrink", "nodes": ["n1"]}
    jobdir.request_restart(request)
    assert jobdir.restart_path.exists()
    assert jobdir.take_restart() == request
    assert not jobdir.restart_path.exists()
    assert jobdir.take_restart() is None


def test_events(jobdir: JobDir) -> None:
    assert jobdir.events() == []
    before = time.time()
    jobdir.log_event("launch", generation=0, nodes=["n1", "n2"], ranks=2)
    jobdir.log_event("exit", generation=0, returncode=0)
    events = jobdir.events()
    assert [{k: v for k, v in e.items() if k != "t"} for e in events] == [
        {"event": "launch", "generation": 0, "nodes": ["n1", "n2"], "ranks": 2},
        {"event": "exit", "generation": 0, "returncode": 0},
    ]
    assert before <= events[0]["t"] <= events[1]["t"] <= time.time()
    assert (jobdir.path / "events.jsonl").read_text().count("\n") == 2


def test_write_json_atomic_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b.json"
    write_json_atomic(path, {"x": [1, 2]})
    write_json_atomic(path, {"x": "replaced"})
    assert json.loads(path.read_text()) == {"x": "replaced"}
    assert sorted(p.name for p in path.parent.iterdir()) == ["b.json"]


def test_malformed_order_file_raises(jobdir: JobDir) -> None:
    jobdir.order_path(1).parent.mkdir(parents=True)
    jobdir.order_path(1).write_text('{"seq": 1}')
    with pytest.raises(JobInputError, match=r"job 4: orders/000001.json: "):
        jobdir.read_order(1)
    jobdir.order_path(2).write_text("{not json")
    with pytest.raises(JobInputError, match=r"orders/000002.json: not JSON"):
        jobdir.read_order(2)
