"""The hostile-input file primitives: ``protocol/files.py`` (in tmp directories)."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from elastic_slurm.errors import JobInputError
from elastic_slurm.protocol.files import (
    MAX_ENTRIES,
    MAX_SEQ,
    JobFiles,
    Owner,
    decode_json,
)

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")


@pytest.fixture
def files(tmp_path: Path) -> JobFiles:
    return JobFiles(tmp_path, (".elastic-slurm", "job-7"), job_id=7)


def test_nothing_exists_until_written(files: JobFiles, tmp_path: Path) -> None:
    assert files.read_bytes(("orders",), "000001.json") is None
    assert files.read_json((), "registered.json") is None
    assert files.list_numbered(("orders",)) == []
    assert not files.exists((), "secret")
    files.unlink((), "restart.json")  # nothing to remove: no error
    assert list(tmp_path.iterdir()) == []


def test_write_read_round_trip_leaves_no_temporary_file(files: JobFiles, tmp_path: Path) -> None:
    files.write_json(("orders",), "000001.json", {"a": [1, 2.5, "x"]})
    files.write_json(("orders",), "000001.json", {"a": "replaced"})
    assert files.read_json(("orders",), "000001.json") == {"a": "replaced"}
    folder = tmp_path / ".elastic-slurm" / "job-7" / "orders"
    assert [p.name for p in folder.iterdir()] == ["000001.json"]
    assert stat.S_IMODE(folder.stat().st_mode) & 0o022 == 0
    files.write_bytes((), "secret", b"s", mode=0o600)
    assert stat.S_IMODE((folder.parent / "secret").stat().st_mode) == 0o600
    assert files.exists((), "secret")


def test_size_cap_is_exact(files: JobFiles) -> None:
    files.write_bytes((), "blob", b"x" * 100)
    assert files.read_bytes((), "blob", cap=100) == b"x" * 100
    with pytest.raises(JobInputError, match="job 7: blob: larger than 99 bytes"):
        files.read_bytes((), "blob", cap=99)


def test_append_creates_then_appends(files: JobFiles) -> None:
    files.append_bytes((), "events.jsonl", b"a\n")
    files.append_bytes((), "events.jsonl", b"b\n")
    assert files.read_bytes((), "events.jsonl") == b"a\nb\n"


def test_write_over_a_directory_is_refused(files: JobFiles) -> None:
    files.makedirs(("orders", "000001.json"))
    with pytest.raises(JobInputError, match="orders/000001.json: Is a directory"):
        files.write_json(("orders",), "000001.json", {})
    with pytest.raises(JobInputError, match="not a regular file"):
        files.read_bytes(("orders",), "000001.json")


def test_a_file_where_a_directory_should_be(files: JobFiles) -> None:
    files.write_bytes((), "orders", b"")
    with pytest.raises(JobInputError, match="orders: a symlink or not a directory"):
        files.list_numbered(("orders",))


def test_unlink_removes_a_link_not_its_target(files: JobFiles, tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.write_text("keep")
    files.makedirs()
    (tmp_path / ".elastic-slurm" / "job-7" / "restart.json").symlink_to(precious)
    assert files.exists((), "restart.json")
    files.unlink((), "restart.json")
    assert not files.exists((), "restart.json")
    assert precious.read_text() == "keep"


def test_listing_parses_names_strictly(files: JobFiles, tmp_path: Path) -> None:
    for name in ["000003.json", "000001.json", "000002.answer.json", ".000004.json.ab12.tmp"]:
        files.write_bytes(("offers",), name, b"{}")
    for name in ["notes.json", "000009.txt", "12.json.bak"]:
        files.write_bytes(("offers",), name, b"")
    assert files.list_numbered(("offers",)) == [1, 3]
    assert files.list_numbered(("offers",), ".answer") == [2]
    folder = tmp_path / ".elastic-slurm" / "job-7" / "offers"
    (folder / "12.json").touch()
    with pytest.raises(JobInputError, match="offers/12.json: not a canonical number"):
        files.list_numbered(("offers",))
    (folder / "12.json").unlink()
    (folder / f"{MAX_SEQ + 1:06d}.json").touch()
    with pytest.raises(JobInputError, match=f"number beyond {MAX_SEQ} refused"):
        files.list_numbered(("offers",))
    (folder / f"{MAX_SEQ + 1:06d}.json").unlink()
    (folder / "000000.json").touch()
    with pytest.raises(JobInputError, match="number beyond"):
        files.list_numbered(("offers",))


def test_listing_stops_after_max_entries(files: JobFiles, tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    from elastic_slurm.protocol import files as module

    assert MAX_ENTRIES == 4096
    monkeypatch.setattr(module, "MAX_ENTRIES", 40)  # creating 4096 files is slow
    files.makedirs(("acks",))
    folder = tmp_path / ".elastic-slurm" / "job-7" / "acks"
    for i in range(40):
        (folder / f"x{i}").touch()
    assert files.list_numbered(("acks",)) == []
    (folder / "one-more").touch()
    with pytest.raises(JobInputError, match="more than 40 entries"):
        files.list_numbered(("acks",))


def test_group_writable_only_for_the_jobs_group(tmp_path: Path) -> None:
    own = JobFiles(tmp_path, ("d",), owner=Owner(os.geteuid(), os.getegid()))
    own.write_bytes((), "f", b"1")
    (tmp_path / "d").chmod(0o775)
    assert own.read_bytes((), "f") == b"1"  # the job's own group may write
    other = JobFiles(tmp_path, ("d",), owner=Owner(os.geteuid(), os.getegid() + 1))
    with pytest.raises(JobInputError, match="writable by group"):
        other.read_bytes((), "f")


def test_names_are_plain(files: JobFiles) -> None:
    for bad in ["", ".", "..", "a/b", "a\0b"]:
        with pytest.raises(ValueError, match="not a plain file name"):
            files.read_bytes((), bad)
    with pytest.raises(ValueError, match="not a plain file name"):
        files.read_bytes(("..",), "x")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"NaN", "NaN is not a number"),
        (b"-Infinity", "-Infinity is not a number"),
        (b"1e400", "out of range"),
        (b"\xc3\x28", "utf-8"),
        (b"[" * 100_000, "nested too deep"),
        (b"{", "not JSON"),
    ],
)
def test_decode_json_is_strict(data: bytes, reason: str) -> None:
    with pytest.raises(JobInputError, match=f"job 3: f: .*{reason}"):
        decode_json(data, 3, "f")
    assert decode_json(b'{"a": [1, 2.5e3, null]}', 3, "f") == {"a": [1, 2500.0, None]}


def test_missing_anchor_is_made_only_for_oneself(tmp_path: Path) -> None:
    JobFiles(tmp_path / "a" / "b", ("c",)).write_bytes((), "f", b"1")
    assert (tmp_path / "a" / "b" / "c" / "f").read_bytes() == b"1"
    someone = JobFiles(tmp_path / "x", ("c",), job_id=2, owner=Owner(os.geteuid() + 1))
    with pytest.raises(JobInputError, match="does not exist"):
        someone.write_bytes((), "f", b"1")
    assert not (tmp_path / "x").exists()


@needs_root
def test_hard_link_to_a_root_file_is_refused(tmp_path: Path) -> None:
    uid = 4243
    tmp_path.chmod(0o755)
    os.chown(tmp_path, uid, uid)
    files = JobFiles(tmp_path, ("d",), job_id=1, owner=Owner(uid, uid))
    files.makedirs()
    secret = tmp_path.parent / f"{tmp_path.name}-rootfile"
    secret.write_text("root's")
    try:
        os.link(secret, tmp_path / "d" / "f")  # root can; protected_hardlinks stops a user
        with pytest.raises(JobInputError, match="f: owned by uid 0, not the job's user 4243"):
            files.read_bytes((), "f")
        with pytest.raises(JobInputError, match="owned by uid 0"):
            files.append_bytes((), "f", b"x")
        assert secret.read_text() == "root's"
    finally:
        secret.unlink()


@needs_root
def test_root_owned_directory_and_single_link_file_are_trusted(tmp_path: Path) -> None:
    """What an older controller left (root-owned ``orders/``) is read; no user can make it."""
    uid = 4243
    tmp_path.chmod(0o755)
    os.chown(tmp_path, uid, uid)
    (tmp_path / "d").mkdir()
    os.chown(tmp_path / "d", uid, uid)
    (tmp_path / "d" / "orders").mkdir()
    (tmp_path / "d" / "orders" / "000001.json").write_text("{}")
    files = JobFiles(tmp_path, ("d",), owner=Owner(uid, uid))
    assert files.read_json(("orders",), "000001.json") == {}
    # but root writes for the user only into the user's directories
    with pytest.raises(JobInputError, match="d/orders: owned by uid 0: not written for the job"):
        files.write_json(("orders",), "000002.json", {})
    with pytest.raises(JobInputError, match="not written for the job"):
        files.makedirs(("orders", "sub"))
    assert [p.name for p in (tmp_path / "d" / "orders").iterdir()] == ["000001.json"]
    files.write_json((), "f.json", {})
    assert (tmp_path / "d" / "f.json").stat().st_uid == uid


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A temporary directory another user can reach (pytest's own are root's, mode 0700)."""
    path = Path(tempfile.mkdtemp(prefix="es-files-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_unprivileged_reader_defaults_to_its_own_user(open_tmp: Path) -> None:
    """Run as another user (when root): a directory of the reader's own user is accepted."""
    if os.geteuid() != 0:
        pytest.skip("needs root to become another user")
    uid, tmp_path = 4244, open_tmp
    os.chown(tmp_path, uid, uid)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child becomes the job's user, with everything already imported
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            f = JobFiles(tmp_path, (".elastic-slurm", "job-1"), job_id=1)
            f.write_json(("orders",), "000001.json", {"x": 1})
            os.write(write, repr(f.read_json(("orders",), "000001.json")).encode())
        except BaseException as exc:  # noqa: BLE001 - reported through the pipe
            os.write(write, repr(exc).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as fh:
        said = fh.read()
    os.waitpid(pid, 0)
    assert said == "{'x': 1}"
    assert (tmp_path / ".elastic-slurm" / "job-1" / "orders").stat().st_uid == uid
