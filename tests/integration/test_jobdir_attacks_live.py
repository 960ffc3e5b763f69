"""A second, unprivileged user attacks the controller through its job directories.

The attacks are built by a real unprivileged account (``esattacker``, created if missing) in
its own home, with its own tools (``runuser``): symlinks to root's files and directories,
predictable temporary names, FIFOs, absurd numbers, malformed, oversized and deeply nested
JSON. Then the controller's side of :class:`~elastic_slurm.protocol.jobdir.JobDir` runs as
root against them, told the job's owner as the controller is. Nothing outside the job
directories may change, nothing may block, every bad file must be a
:class:`~elastic_slurm.errors.JobInputError`, and everything root creates in the user's home
must belong to the user. No Slurm is needed; it needs root (to be root, and to add the user).
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from elastic_slurm.errors import JobInputError
from elastic_slurm.jobs import resize_history
from elastic_slurm.model.offer import Offer
from elastic_slurm.model.resize_order import AckStatus, ResizeAck, ResizeAction, ResizeOrder
from elastic_slurm.protocol.jobdir import JobDir

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (the controller's view)")

ATTACKER = "esattacker"


@pytest.fixture(scope="module")
def attacker() -> pwd.struct_passwd:
    """The unprivileged account (created with ``useradd -m`` when missing)."""
    try:
        return pwd.getpwnam(ATTACKER)
    except KeyError:
        subprocess.run(["useradd", "-m", ATTACKER], check=True, capture_output=True, timeout=60)
        return pwd.getpwnam(ATTACKER)


@pytest.fixture
def targets() -> Iterator[tuple[Path, Path]]:
    """Root's file and directory the attacker wants overwritten or filled."""
    folder = Path("/var/tmp") / f"es-attack-target-{secrets.token_hex(4)}"
    folder.mkdir(mode=0o755)
    precious = folder / "precious"
    precious.write_text("root's, untouched\n")
    precious.chmod(0o644)
    yield precious, folder
    shutil.rmtree(folder)


@pytest.fixture
def workdir(attacker: pwd.struct_passwd) -> Iterator[Path]:
    """A working directory the attacker made in its home."""
    path = Path(attacker.pw_dir) / f"es-attack-{secrets.token_hex(4)}"
    as_attacker(f"mkdir -m 755 {path}")
    yield path
    shutil.rmtree(path)


def as_attacker(script: str) -> None:
    """Run a shell script as the unprivileged user (``set -e``)."""
    subprocess.run(
        ["runuser", "-u", ATTACKER, "--", "sh", "-ec", script],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )


def snapshot(folder: Path) -> dict[str, tuple[int, int, int, int, bytes]]:
    """Every entry below ``folder``: mode, owner, size, mtime (ns) and content."""
    out = {}
    for p in [folder, *folder.rglob("*")]:
        st = p.lstat()
        body = p.read_bytes() if p.is_file() and not p.is_symlink() else b""
        out[str(p)] = (st.st_mode, st.st_uid, st.st_size, st.st_mtime_ns, body)
    return out


def within(seconds: float, call: Callable[[], Any]) -> Any:
    """``call()``'s result or exception, or a failure if it is still running after ``seconds``."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - returned to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"blocked for more than {seconds} s"
    if "error" in box:
        return box["error"]
    return box.get("value")


def hostile_dirs(workdir: Path, precious: Path, folder: Path, pid: int) -> str:
    """The attacker's script: one job directory per attack."""
    top = f"{workdir}/.elastic-slurm"
    return f"""
umask 022
mkdir -p {top}
# 101: symlinked sub-directories and files into root's directory and file
d={top}/job-101; mkdir -p $d
for sub in orders offers acks requests; do ln -s {folder} $d/$sub; done
ln -s {precious} $d/secret
ln -s {precious} $d/registered.json
ln -s {precious} $d/events.jsonl
# 102: the temporary names today's controller would use (it runs as pid {pid})
d={top}/job-102; mkdir -p $d/orders $d/offers $d/acks $d/requests
ln -s {precious} $d/orders/.000001.json.{pid}.tmp
ln -s {precious} $d/offers/.000001.json.{pid}.tmp
ln -s {precious} $d/acks/.000001.done.json.{pid}.tmp
ln -s {precious} $d/requests/.000001.answer.json.{pid}.tmp
ln -s {precious} $d/.registered.json.{pid}.tmp
ln -s {precious} $d/.secret.{pid}.tmp
# 103: FIFOs where the secret and a request should be
d={top}/job-103; mkdir -p $d/requests
mkfifo $d/secret $d/requests/000001.json $d/registered.json
# 104: an order numbered 999999999999, and one numbered far past the others
d={top}/job-104; mkdir -p $d/orders $d/offers
echo '{{}}' > $d/orders/999999999999.json
echo '{{}}' > $d/offers/000900.json
# 105: malformed, deeply nested and oversized messages
d={top}/job-105; mkdir -p $d/requests $d/orders $d/acks
echo '{{not json' > $d/requests/000001.json
head -c 100000 /dev/zero | tr '\\0' '[' > $d/orders/000003.json
head -c 400000 /dev/zero | tr '\\0' ' ' > $d/acks/000001.done.json
echo '{{"seq": 2, "action": "expand", "nodes": ["n1"], "issued_at": NaN}}' \\
  > $d/orders/000002.json
printf '\\377\\376' > $d/registered.json
# 106: the job directory itself is a symlink to root's directory
ln -s {folder} {top}/job-106
# 107: a well-behaved job directory (the controller writes into it)
mkdir -p {top}/job-107
echo s3cret > {top}/job-107/secret; chmod 600 {top}/job-107/secret
# 108: another user's file hard-linked in (protected_hardlinks usually forbids it)
mkdir -p {top}/job-108
ln {precious} {top}/job-108/registered.json 2>/dev/null || true
# 109: a directory other users may write to
mkdir -p {top}/job-109/orders; chmod 777 {top}/job-109/orders
echo '{{"seq": 1, "action": "expand", "nodes": ["n1"], "issued_at": 1.0}}' \\
  > {top}/job-109/orders/000001.json
"""


def controller_side(jobdir: JobDir) -> dict[str, Any]:
    """What the controller and its server do with a job's directory, each outcome kept."""
    now = time.time()
    offer = Offer(
        number=1, seq=1, action="expand", count=1, hosts=("n2",), issued_at=now, deadline_at=now
    )
    calls: dict[str, Callable[[], Any]] = {
        "read_secret": jobdir.read_secret,
        "registration": jobdir.registration,
        "last_order_seq": jobdir.last_order_seq,
        "open_order": jobdir.open_order,
        "open_offer": jobdir.open_offer,
        "requests": jobdir.requests,
        "resize_history": lambda: resize_history(jobdir),
        "final_ack": lambda: jobdir.final_ack(1),
        "write_order": lambda: jobdir.write_order(
            ResizeOrder(1, ResizeAction.EXPAND, ("n1", "n2"), now)
        ),
        "write_offer": lambda: jobdir.write_offer(offer),
        "write_ack": lambda: jobdir.write_ack(ResizeAck(1, AckStatus.DONE, ("n1",), now)),
        "answer_request": lambda: jobdir.answer_request(1, False, None, "refused"),
        "write_registration": lambda: jobdir.write_registration({"job_id": 0, "at": now}),
    }
    return {name: within(2.0, call) for name, call in calls.items()}


def test_attacks_of_an_unprivileged_user(
    attacker: pwd.struct_passwd, targets: tuple[Path, Path], workdir: Path
) -> None:
    precious, folder = targets
    as_attacker(hostile_dirs(workdir, precious, folder, os.getpid()))
    before = snapshot(folder)
    home_before = {p for p in Path(attacker.pw_dir).iterdir()}
    hard_linked = (workdir / ".elastic-slurm" / "job-108" / "registered.json").exists()

    seen = {
        job: controller_side(JobDir.for_job(workdir, job, uid=attacker.pw_uid, gid=attacker.pw_gid))
        for job in range(101, 110)
    }

    # nothing outside the job directories was created or changed
    assert snapshot(folder) == before
    assert precious.read_text() == "root's, untouched\n"
    assert {p for p in Path(attacker.pw_dir).iterdir()} == home_before

    def refused(job: int, *calls: str) -> None:
        for call in calls:
            got = seen[job][call]
            assert isinstance(got, JobInputError), f"job {job}: {call} gave {got!r}"
            assert str(got).startswith(f"job {job}: "), str(got)

    everything = list(seen[101])
    # symlinks: every read and write that meets one is refused; a file written where a link
    # was replaces the link itself
    refused(101, *[c for c in everything if c != "write_registration"])
    assert seen[101]["write_registration"] is None
    assert (workdir / ".elastic-slurm" / "job-101" / "registered.json").is_file()
    assert not (workdir / ".elastic-slurm" / "job-101" / "registered.json").is_symlink()
    refused(106, *everything)
    # predictable temporary names: the writes succeed (other names), the links stay links
    assert all(seen[102][c] is None for c in everything if c.startswith(("write", "answer")))
    assert JobDir.for_job(workdir, 102, uid=attacker.pw_uid).registration()["job_id"] == 0
    assert (
        workdir / ".elastic-slurm" / "job-102" / "orders" / f".000001.json.{os.getpid()}.tmp"
    ).is_symlink()
    # FIFOs: refused, without blocking
    refused(103, "read_secret", "requests", "registration")
    assert "not a regular file" in str(seen[103]["read_secret"])
    # absurd numbers: refused at once, never looped to
    refused(104, "last_order_seq", "open_order", "resize_history", "open_offer")
    assert "number beyond" in str(seen[104]["last_order_seq"])
    assert "leap" in str(seen[104]["open_offer"])
    # malformed, deep, oversized
    refused(105, "requests", "registration", "final_ack")
    assert "not JSON" in str(seen[105]["requests"])
    assert "larger than" in str(seen[105]["final_ack"])
    with pytest.raises(JobInputError, match=r"orders/000003.json: nested too deep"):
        JobDir.for_job(workdir, 105, uid=attacker.pw_uid).read_order(3)
    with pytest.raises(JobInputError, match=r"orders/000002.json: not JSON \(NaN"):
        JobDir.for_job(workdir, 105, uid=attacker.pw_uid).read_order(2)
    # the well-behaved job works as before
    assert seen[107]["read_secret"] == "s3cret"
    assert all(seen[107][c] is None for c in everything if c.startswith(("write", "answer")))
    good = JobDir.for_job(workdir, 107, uid=attacker.pw_uid, gid=attacker.pw_gid)
    assert good.read_order(1).nodes == ("n1", "n2")
    assert [r.status for r in resize_history(good)] == ["done"]
    # a hard link to root's file (if the kernel let the user make one) is not read
    if hard_linked:
        assert isinstance(seen[108]["registration"], JobInputError)
    refused(109, "last_order_seq", "open_order", "write_order")
    assert "writable by other users" in str(seen[109]["last_order_seq"])

    # everything root created in the user's home belongs to the user
    foreign = [
        str(p)
        for p in [workdir, *workdir.rglob("*")]
        if p.lstat().st_uid != attacker.pw_uid or p.lstat().st_gid != attacker.pw_gid
    ]
    assert foreign == []
    made = {
        p.relative_to(workdir / ".elastic-slurm" / "job-107").as_posix()
        for p in (workdir / ".elastic-slurm" / "job-107").rglob("*")
    }
    assert made == {
        "secret",
        "registered.json",
        "orders",
        "orders/000001.json",
        "offers",
        "offers/000001.json",
        "acks",
        "acks/000001.done.json",
        "requests",
        "requests/000001.answer.json",
    }
    # and the user can remove all of it, as the user
    as_attacker(f"rm -r {workdir}/.elastic-slurm")
    assert not (workdir / ".elastic-slurm").exists()
