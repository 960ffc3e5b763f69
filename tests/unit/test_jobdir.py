"""The controller-job channel on the shared filesystem: ``jobdir.py`` (in a tmp directory)."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elastic_slurm.errors import JobInputError
from elastic_slurm.model.offer import Offer
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
    request = {"seq": 1, "action": "shrink", "nodes": ["n1"], "launch": 0, "handover": False}
    jobdir.request_restart(request)
    assert jobdir.restart_path.exists()
    assert jobdir.take_restart() == request
    assert not jobdir.restart_path.exists()
    assert jobdir.take_restart() is None


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"seq": "1"}, "seq must be an integer"),
        ({"seq": 0}, "seq must be an integer"),
        ({"action": "grow"}, "action must be expand or shrink"),
        ({"nodes": []}, "nodes must name at least one node"),
        ({"nodes": "n1"}, "nodes must be a list"),
        ({"nodes": [1]}, "nodes must hold non-empty strings"),
        ({"launch": None}, "launch must be an integer"),
        ({"handover": "yes"}, "handover must be true or false"),
        ({"token": 7}, "token must be a text"),
    ],
)
def test_an_unusable_restart_request_is_refused_by_name_and_removed(
    jobdir: JobDir, change: dict, named: str
) -> None:
    request = {"seq": 1, "action": "shrink", "nodes": ["n1"], "launch": 0, **change}
    jobdir.request_restart(request)
    with pytest.raises(JobInputError, match=f"restart.json: {named}"):
        jobdir.take_restart()
    assert not jobdir.restart_path.exists()  # read once: the launcher is not asked again


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


# ---------------------------------------------------------------------- hostile job directories
# A user owns the job directory; the controller (root) reads and writes it. Each test below is
# one thing today's main let such a user do.

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
OTHER_UID = 4242  # a user that owns nothing on this machine


def returns_within(seconds: float, call):  # noqa: ANN001, ANN201
    """Run ``call`` in a thread; fail if it has not returned after ``seconds``."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    t0 = time.monotonic()
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds} s"
    assert time.monotonic() - t0 < seconds
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("value")


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """A file outside the job directory that an attacker wants overwritten."""
    path = tmp_path / "outside" / "precious"
    path.parent.mkdir()
    path.write_text("untouched\n")
    return path


def test_predictable_temporary_name_cannot_redirect_a_write(jobdir: JobDir, target: Path) -> None:
    orders = jobdir.path / "orders"
    orders.mkdir(parents=True)
    # today's names: .<name>.<pid>.tmp, and .secret.<pid>.tmp
    (orders / f".000001.json.{os.getpid()}.tmp").symlink_to(target)
    (jobdir.path / f".secret.{os.getpid()}.tmp").symlink_to(target)
    jobdir.write_order(ResizeOrder(1, ResizeAction.EXPAND, ("n1",), 1.0))
    jobdir.write_secret("s3cret")
    assert target.read_text() == "untouched\n"
    assert jobdir.read_order(1) == ResizeOrder(1, ResizeAction.EXPAND, ("n1",), 1.0)
    assert jobdir.read_secret() == "s3cret"
    assert stat.S_IMODE(jobdir.secret_path.stat().st_mode) == 0o600
    left = sorted(p.name for p in orders.iterdir())
    assert left == [f".000001.json.{os.getpid()}.tmp", "000001.json"]  # only the planted link


def test_symlinked_file_is_neither_read_nor_written_through(jobdir: JobDir, target: Path) -> None:
    jobdir.path.mkdir(parents=True)
    jobdir.secret_path.symlink_to(target)
    with pytest.raises(JobInputError, match="secret: a symlink"):
        jobdir.read_secret()
    jobdir.registration_path.symlink_to(target)
    with pytest.raises(JobInputError, match="registered.json: a symlink"):
        jobdir.registration()
    (jobdir.path / "events.jsonl").symlink_to(target)
    with pytest.raises(JobInputError, match="events.jsonl"):
        jobdir.log_event("x")
    jobdir.write_registration({"job_id": 4})  # replaces the link itself
    assert target.read_text() == "untouched\n"
    assert not jobdir.registration_path.is_symlink()


@pytest.mark.parametrize("which", ["orders", "acks", "offers", "requests"])
def test_symlinked_subdirectory_sends_no_write_anywhere(
    jobdir: JobDir, target: Path, which: str
) -> None:
    jobdir.path.mkdir(parents=True)
    (jobdir.path / which).symlink_to(target.parent, target_is_directory=True)
    write = {
        "orders": lambda: jobdir.write_order(ResizeOrder(1, ResizeAction.EXPAND, ("n1",), 1.0)),
        "acks": lambda: jobdir.write_ack(ResizeAck(1, AckStatus.DONE, ("n1",), 1.0)),
        "offers": lambda: jobdir.write_offer(_offer(1)),
        "requests": lambda: jobdir.answer_request(1, True, 1, "served"),
    }[which]
    with pytest.raises(JobInputError, match=f"{which}: a symlink"):
        write()
    with pytest.raises(JobInputError, match=f"{which}: a symlink"):
        {
            "orders": jobdir.last_order_seq,
            "acks": lambda: jobdir.final_ack(1),
            "offers": jobdir.open_offer,
            "requests": jobdir.requests,
        }[which]()
    assert sorted(p.name for p in target.parent.iterdir()) == ["precious"]


@pytest.mark.parametrize("level", ["top", "job"])
def test_symlinked_job_directory_is_refused(tmp_path: Path, target: Path, level: str) -> None:
    if level == "top":
        (tmp_path / SUBDIR).symlink_to(target.parent, target_is_directory=True)
    else:
        (tmp_path / SUBDIR).mkdir()
        (tmp_path / SUBDIR / "job-4").symlink_to(target.parent, target_is_directory=True)
    jobdir = JobDir.for_job(tmp_path, 4)
    with pytest.raises(JobInputError, match="a symlink"):
        jobdir.write_order(ResizeOrder(1, ResizeAction.EXPAND, ("n1",), 1.0))
    assert sorted(p.name for p in target.parent.iterdir()) == ["precious"]


def _fifo_then_unblock(path: Path):  # noqa: ANN202
    os.mkfifo(path)

    def unblock() -> None:  # lets a reader stuck in open() (today's code) go
        with contextlib.suppress(OSError):
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))

    return unblock


def test_fifo_secret_does_not_block(jobdir: JobDir) -> None:
    jobdir.path.mkdir(parents=True)
    unblock = _fifo_then_unblock(jobdir.secret_path)
    try:
        with pytest.raises(JobInputError, match="secret: not a regular file"):
            returns_within(1.0, jobdir.read_secret)
    finally:
        unblock()


def test_fifo_request_does_not_block(jobdir: JobDir) -> None:
    jobdir.request_path(1).parent.mkdir(parents=True)
    unblock = _fifo_then_unblock(jobdir.request_path(1))
    try:
        with pytest.raises(JobInputError, match="requests/000001.json: not a regular file"):
            returns_within(1.0, jobdir.requests)
    finally:
        unblock()


@pytest.mark.parametrize("name", ["999999999999.json", "001000001.json", "000500.json"])
def test_huge_order_number_is_refused_fast(jobdir: JobDir, name: str) -> None:
    from elastic_slurm.jobs import resize_history

    jobdir.write_order(ResizeOrder(1, ResizeAction.EXPAND, ("n1",), 1.0))
    (jobdir.path / "orders" / name).write_text("{}")
    with pytest.raises(JobInputError, match=r"orders/0*\d+\.json: (number beyond|numbers leap)"):
        returns_within(1.0, lambda: resize_history(jobdir))


def test_too_many_entries_are_not_scanned(jobdir: JobDir, monkeypatch) -> None:  # noqa: ANN001
    from elastic_slurm.protocol import files

    assert files.MAX_ENTRIES == 4096
    monkeypatch.setattr(files, "MAX_ENTRIES", MAX_ENTRIES := 40)  # creating 4096 files is slow
    orders = jobdir.path / "orders"
    orders.mkdir(parents=True)
    for i in range(MAX_ENTRIES + 1):
        (orders / f"junk{i}").touch()
    with pytest.raises(JobInputError, match=f"more than {MAX_ENTRIES} entries"):
        jobdir.last_order_seq()


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"{not json", "not JSON"),
        (b'{"number": 1, "delta": NaN, "ranks": 1}', "not JSON"),
        (b'{"number": 1, "delta": 1, "ranks": 1, "at": 1e999}', "not JSON"),
        (b"\xff\xfe", "not JSON"),
        (b"[" * 200_000, "nested too deep|larger than"),
        (b"[" * 2000 + b"]" * 2000, "nested|not a JSON object"),
        (b'{"number": 1}', "delta must be"),
        (b'{"number": 1, "delta": 0, "ranks": 1}', "delta must not be 0"),
        (b'{"number": 1, "delta": 99999999, "ranks": 1}', "delta must be"),
        (b'{"number": 2, "delta": 1, "ranks": 1}', "another number"),
        (b'{"number": 1, "delta": true, "ranks": 1}', "delta must be"),
        (b'["a list"]', "not a JSON object"),
        (b'{"number": 1, "delta": 1, "ranks": 1, "x": "' + b"y" * 300_000 + b'"}', "larger"),
    ],
)
def test_malformed_request_is_a_job_input_error(
    jobdir: JobDir, content: bytes, reason: str
) -> None:
    jobdir.request_path(1).parent.mkdir(parents=True)
    jobdir.request_path(1).write_bytes(content)
    with pytest.raises(JobInputError, match=rf"job 4: requests/000001.json: .*({reason})"):
        jobdir.requests()


@pytest.mark.parametrize(
    "order",
    [
        {"seq": 1, "action": "grow", "nodes": ["n1"], "issued_at": 1.0},
        {"seq": 1, "action": "expand", "nodes": "n1", "issued_at": 1.0},
        {"seq": 1, "action": "expand", "nodes": ["n"] * 20_000, "issued_at": 1.0},
        {"seq": 1, "action": "expand", "nodes": ["x" * 5000], "issued_at": 1.0},
        {"seq": 1, "action": "expand", "nodes": [""], "issued_at": 1.0},
        {"seq": 1, "action": "expand", "nodes": [1], "issued_at": 1.0},
        {"seq": 7, "action": "expand", "nodes": ["n1"], "issued_at": 1.0},
        {"seq": 1, "action": "expand", "nodes": ["n1"], "issued_at": "now"},
        {"seq": 1, "action": "expand", "nodes": ["n1"], "issued_at": 1.0, "phases_s": [1]},
        {"seq": 1, "action": "expand", "nodes": ["n1"], "issued_at": 1.0, "phases_s": {"a": -1}},
    ],
)
def test_malformed_order_is_a_job_input_error(jobdir: JobDir, order: dict) -> None:
    jobdir.order_path(1).parent.mkdir(parents=True)
    jobdir.order_path(1).write_text(json.dumps(order))
    with pytest.raises(JobInputError, match=r"job 4: orders/000001.json: "):
        jobdir.read_order(1)


def test_malformed_acks_offers_answers_registration(jobdir: JobDir) -> None:
    jobdir.path.mkdir(parents=True)
    for sub in ("acks", "offers", "requests"):
        (jobdir.path / sub).mkdir()
    jobdir.ack_path(1, AckStatus.DONE).write_text('{"seq": 1, "status": "failed", "nodes": []}')
    with pytest.raises(JobInputError, match="acks/000001.done.json"):
        jobdir.final_ack(1)
    jobdir.offer_path(1).write_text('{"number": 1, "seq": 1, "action": "expand"}')
    with pytest.raises(JobInputError, match="offers/000001.json"):
        jobdir.open_offer()
    jobdir.answer_offer_path(2).write_text('{"number": 2, "answer": "counter"}')
    with pytest.raises(JobInputError, match="offers/000002.answer.json"):
        jobdir.read_answer(2)
    jobdir.answer_path(1).write_text('{"number": 1, "granted": "yes"}')
    with pytest.raises(JobInputError, match="requests/000001.answer.json"):
        jobdir.request_answer(1)
    jobdir.registration_path.write_text("[1, 2]")
    with pytest.raises(JobInputError, match="registered.json: not a JSON object"):
        jobdir.registration()
    (jobdir.path / "events.jsonl").write_text('{"event": "x"}\n{oops\n')
    with pytest.raises(JobInputError, match="events.jsonl: not JSON"):
        jobdir.events()


def test_out_of_range_numbers_are_never_files(jobdir: JobDir) -> None:
    assert jobdir.read_order(0) is None
    assert jobdir.read_order(10**15) is None
    assert jobdir.read_ack(-1, AckStatus.DONE) is None
    with pytest.raises(JobInputError, match="order number 10000000"):
        jobdir.write_order(ResizeOrder(10_000_000, ResizeAction.EXPAND, ("n1",), 1.0))


def test_writable_by_others_is_refused(jobdir: JobDir) -> None:
    jobdir.write_order(ResizeOrder(1, ResizeAction.EXPAND, ("n1",), 1.0))
    (jobdir.path / "orders").chmod(0o777)
    with pytest.raises(JobInputError, match="orders: writable by other users"):
        jobdir.read_order(1)
    (jobdir.path / "orders").chmod(0o755)
    jobdir.order_path(1).chmod(0o666)
    with pytest.raises(JobInputError, match="000001.json: writable by other users"):
        jobdir.read_order(1)


@needs_root
def test_file_of_another_user_is_refused(jobdir: JobDir) -> None:
    jobdir.write_order(ResizeOrder(1, ResizeAction.EXPAND, ("n1",), 1.0))
    os.chown(jobdir.order_path(1), OTHER_UID, OTHER_UID)
    with pytest.raises(JobInputError, match=f"owned by uid {OTHER_UID}, not the job's user 0"):
        jobdir.read_order(1)


@needs_root
def test_controller_refuses_what_the_job_user_does_not_own(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)
    os.chown(tmp_path, OTHER_UID, OTHER_UID)
    jobdir = JobDir.for_job(tmp_path, 4, uid=OTHER_UID, gid=OTHER_UID)
    jobdir.write_order(ResizeOrder(1, ResizeAction.EXPAND, ("n1",), 1.0))
    # a file of a third user (hard-linked in, or left by someone else) is not the job's
    os.chown(jobdir.order_path(1), OTHER_UID + 1, OTHER_UID + 1)
    with pytest.raises(JobInputError, match=f"not the job's user {OTHER_UID}"):
        jobdir.read_order(1)
    # a workdir of another user: root does not create the job's directory in it
    other = tmp_path / "other"
    other.mkdir()
    os.chown(other, OTHER_UID + 1, OTHER_UID + 1)
    with pytest.raises(JobInputError, match="not created there"):
        JobDir.for_job(other, 5, uid=OTHER_UID).write_secret("x")
    assert list(other.iterdir()) == []


@needs_root
@pytest.mark.parametrize("given", [True, False])
def test_root_leaves_nothing_root_owned_in_a_users_directory(tmp_path: Path, given: bool) -> None:
    tmp_path.chmod(0o755)
    os.chown(tmp_path, OTHER_UID, OTHER_UID)
    owner = {"uid": OTHER_UID, "gid": OTHER_UID} if given else {}
    jobdir = JobDir.for_job(tmp_path, 4, **owner)
    jobdir.write_order(ResizeOrder(1, ResizeAction.EXPAND, ("n1",), 1.0))
    jobdir.write_offer(_offer(1))
    jobdir.write_ack(ResizeAck(1, AckStatus.DONE, ("n1",), 2.0))
    jobdir.write_registration({"job_id": 4})
    jobdir.answer_request(1, False, None, "no")
    jobdir.write_secret("s")
    jobdir.log_event("x")
    made = [p for p in tmp_path.rglob("*")]
    assert len(made) == 13
    assert {(p.relative_to(tmp_path).as_posix(), p.stat().st_uid) for p in made} == {
        (p.relative_to(tmp_path).as_posix(), OTHER_UID) for p in made
    }
    assert {p.stat().st_gid for p in made} == {OTHER_UID}
    assert jobdir.final_ack(1) == ResizeAck(1, AckStatus.DONE, ("n1",), 2.0)


def _offer(number: int) -> Offer:
    return Offer(
        number=number,
        seq=1,
        action="expand",
        count=1,
        hosts=("n2",),
        issued_at=1.0,
        deadline_at=2.0,
    )


def test_for_job_looks_the_user_up(tmp_path: Path) -> None:
    import pwd

    root = pwd.getpwuid(0)
    assert JobDir.for_job(tmp_path, 4, user=root.pw_name).files.owner.uid == 0
    assert JobDir.for_job(tmp_path, 4, user="0").files.owner.uid == 0
    assert JobDir.for_job(tmp_path, 4, user="4000000").files.owner.uid == 4_000_000
    assert JobDir.for_job(tmp_path, 4, uid=7, user="root").files.owner.uid == 7
    with pytest.raises(JobInputError, match="job 4: user 'no-such-user-x' is not known"):
        JobDir.for_job(tmp_path, 4, user="no-such-user-x")


def test_create_and_answered(jobdir: JobDir, target: Path) -> None:
    jobdir.create()
    jobdir.create()
    assert jobdir.path.is_dir() and stat.S_IMODE(jobdir.path.stat().st_mode) & 0o022 == 0
    assert not jobdir.answered(1)
    jobdir.answer_request(1, True, 2, "served")
    assert jobdir.answered(1) and not jobdir.answered(2) and not jobdir.answered(0)
    jobdir.answer_path(2).symlink_to(target.parent / "missing")
    assert jobdir.answered(2)  # the entry is there, whatever it points to (never followed)
    (jobdir.path / "requests").rename(jobdir.path / "elsewhere")
    (jobdir.path / "requests").symlink_to(jobdir.path / "elsewhere")
    with pytest.raises(JobInputError, match="requests: a symlink"):
        jobdir.answered(1)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)
_fields = st.fixed_dictionaries(
    {},
    optional={
        k: _json | st.integers() | st.sampled_from(["expand", "done", "accept", "n1"])
        for k in ["seq", "number", "action", "status", "nodes", "issued_at", "at", "delta"]
        + ["ranks", "count", "answer", "hosts", "deadline_at", "phases_s", "granted", "order"]
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_json | _fields, raw=st.binary(max_size=64), use_raw=st.booleans())
def test_any_content_is_parsed_or_refused_cleanly(
    tmp_path_factory: pytest.TempPathFactory, value: object, raw: bytes, use_raw: bool
) -> None:
    jobdir = JobDir.for_job(tmp_path_factory.mktemp("w"), 9)
    data = raw if use_raw else json.dumps(value).encode()
    for path in [
        jobdir.order_path(1),
        jobdir.ack_path(1, AckStatus.DONE),
        jobdir.offer_path(1),
        jobdir.answer_offer_path(1),
        jobdir.request_path(1),
        jobdir.answer_path(1),
        jobdir.registration_path,
    ]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    for call in [
        lambda: jobdir.read_order(1),
        lambda: jobdir.final_ack(1),
        jobdir.open_offer,
        lambda: jobdir.read_answer(1),
        jobdir.requests,
        lambda: jobdir.request_answer(1),
        jobdir.registration,
    ]:
        try:
            call()
        except JobInputError as exc:
            assert str(exc).startswith("job 9: ")
