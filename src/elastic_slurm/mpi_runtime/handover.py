"""The restart join strategy with a waiting successor: the next generation starts early.

Restarting the MPI step at the new size is the portable way to resize with Open MPI 4.1 when
ranks live on several nodes (SLURM-FACTS.md: no spawn, and no connect/accept between two
``mpirun`` spanning nodes). Done in sequence, the application stops for the whole relaunch:
``mpirun``, its daemons, the interpreters, the imports, ``MPI_Init`` (1.2-2.7 s here). With a
successor, that time overlaps the running generation's computation:

1. rank 0's order watcher (:mod:`.orders`), having checked the added nodes, asks the launcher
   for a successor (:func:`request_successor`, a file in the job directory) and keeps
   computing;
2. the launcher starts the next generation at once on the order's nodes (for a shrink: the
   nodes kept, while the old generation still runs on all of them);
3. the successor starts, registers, says it is ready (:func:`signal_ready`) and waits, blocked
   in ``sleep`` (rank 0 on the checkpoint's manifest, the others in a non-blocking barrier
   tested every few milliseconds: not spinning) (:func:`await_manifest`);
4. the watcher sees it ready; at the next agreed resize point the old generation writes its
   checkpoint and exits; the successor restores it and computes.

While the successor starts (step 3), the old generation's ranks run at a lower priority
(:func:`yield_cpu`, voted at a resize point so that all ranks do it): where they share cores
with it (the nodes a shrink keeps, the nodes a grow keeps) its start goes first, and the
handover comes sooner. The ranks compute on meanwhile, and end at the handover.

The checkpoint goes through memory (``/dev/shm``) when every rank of both generations sees the
same ``/dev/shm`` (one machine, or nodes that share it): rank 0 leaves a random token there
(:func:`make_token`), each rank of the successor and of the old generation looks for it
(:func:`sees_token`), and only if all of them find it (and there is room) is it used. Otherwise
it goes to the job directory's shared filesystem.

If the successor cannot start (its ``mpirun`` ends, or it is not ready within the timeout:
then the watcher asks the launcher to stop it, :func:`cancel`), the launcher stops it and only
then acknowledges the order as failed: the old generation computes on at
its size, and the controller gives a grant back. Nodes leave the job only once the old
generation has left them (the launcher checks, then acknowledges them ``vacated``).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from elastic_slurm import envvars
from elastic_slurm.errors import ElasticSlurmError, JobInputError
from elastic_slurm.protocol.jobdir import JobDir, write_json_atomic

log = logging.getLogger(__name__)

#: The checkpoint's manifest (in the job directory's ``checkpoint/``), written last.
MANIFEST = "manifest.json"


class HandoverError(ElasticSlurmError):
    """The generation before never handed over: this one has nothing to resume."""


#: In the job directory: the application's request for a successor (rank 0 writes it).
REQUEST = "successor.json"
#: ``successor-ready-<seq>.json``: the successor of order ``seq`` waits for the handover.
READY = "successor-ready-{seq}.json"
#: ``successor-cancel-<seq>.json``: the application gave up waiting for it.
CANCEL = "successor-cancel-{seq}.json"
#: ``took-<seq>``, beside the checkpoint: the successor has read the checkpoint of ``seq``.
TOOK = "took-{seq}"
#: How long (seconds) the old generation's ranks wait, asleep, for the successor to read the
#: checkpoint before they end anyway, plus one second per :data:`LINGER_BYTES_PER_S` bytes.
LINGER_S = 5.0
LINGER_BYTES_PER_S = 100 * 2**20


#: How much the old generation's ranks lower their priority while the successor starts.
SUCCESSOR_NICE = 10


def yield_cpu(env: Any = None) -> int:
    """Lower the calling thread's priority to nice ``ELASTIC_SLURM_SUCCESSOR_NICE`` (10).

    Called by every rank of the old generation once its successor is starting: the ranks
    keep computing, but where they share cores with the successor's processes those start
    first. A user cannot raise a priority again (``RLIMIT_NICE`` is 0 by default), so this
    is for ranks that end at the handover; if the successor fails, they compute on at the
    lower priority, which costs nothing on nodes the job has to itself once nothing else
    wants the cores. On Linux the nice value is per thread: only the calling (computing)
    thread changes. ``0`` turns it off. Returns the thread's nice value afterwards.

    Raises
    ------
    ValueError
        The variable is set but is not an integer from 0 to 19.
    """
    nice = envvars.get_int("SUCCESSOR_NICE", SUCCESSOR_NICE, env)
    if not 0 <= nice <= 19:
        raise ValueError(f"ELASTIC_SLURM_SUCCESSOR_NICE={nice}: use 0 (off) to 19")
    now = os.getpriority(os.PRIO_PROCESS, 0)
    if nice > now:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        except OSError:
            return now
        return nice
    return now


def memory_dir(job_id: int, seq: int, root: str = "/dev/shm") -> Path:
    """Where order ``seq``'s checkpoint goes when both generations share ``root``."""
    return Path(root) / f"elastic-slurm-{os.getuid()}-{job_id}-{seq}"


def make_token(directory: Path) -> str:
    """Create ``directory`` (mode 0700) with a random token in it; return the token."""
    directory.mkdir(mode=0o700, parents=False, exist_ok=True)
    token = secrets.token_hex(16)
    (directory / "token").write_text(token)
    return token


def sees_token(directory: Path | str | None, token: str | None) -> bool:
    """Whether this process sees ``token`` in ``directory`` (the same memory as rank 0)."""
    if not directory or not token:
        return False
    try:
        return (Path(directory) / "token").read_text() == token
    except OSError:
        return False


def has_room(directory: Path, nbytes: int) -> bool:
    """Whether ``directory``'s filesystem has twice ``nbytes`` free."""
    try:
        return shutil.disk_usage(directory).free >= 2 * nbytes
    except OSError:
        return False


def drop(directory: Path | str | None) -> None:
    """Remove a memory checkpoint directory (once restored, or given up)."""
    if directory:
        shutil.rmtree(directory, ignore_errors=True)


def drop_all(job_id: int, root: str = "/dev/shm") -> None:
    """Remove every memory checkpoint directory of job ``job_id`` on this node (at its end)."""
    for directory in Path(root).glob(f"elastic-slurm-{os.getuid()}-{job_id}-*"):
        drop(directory)


def request_successor(
    jobdir: JobDir,
    seq: int,
    action: str,
    nodes: list[str],
    launch: int,
    memory: tuple[Path, str] | None = None,
    by_job: bool = False,
) -> None:
    """Ask the launcher to start the generation after ``launch`` on ``nodes`` (order ``seq``).

    ``memory``: the memory checkpoint directory and its token, for the successor to look for.
    ``by_job``: the order's (a service controller's): the job gives back the nodes it took
    if the successor fails.
    """
    request: dict[str, Any] = {
        "seq": seq,
        "action": action,
        "nodes": nodes,
        "launch": launch,
        "at": time.time(),
        "by_job": by_job,
    }
    if memory is not None:
        request.update(memory_dir=str(memory[0]), token=memory[1])
    write_json_atomic(jobdir.path / REQUEST, request)


def take_request(jobdir: JobDir) -> dict[str, Any] | None:
    """The launcher's side: read and remove the successor request, if there is one.

    Checked as a restart request (:func:`~elastic_slurm.protocol.jobdir.restart_request`).
    An unusable one, or one that cannot be removed (read once only: a request left behind is
    not taken), is ignored with a warning, said once per reason: no successor starts, and the
    application fails the order when its wait for one times out (:func:`wait_ready`).
    """
    try:
        return jobdir.take_restart(REQUEST)
    except JobInputError as exc:
        if str(exc) not in _ignored and len(_ignored) < 64:
            _ignored.add(str(exc))
            log.warning("ignored the successor request: %s", exc)
        return None


_ignored: set[str] = set()  # the reasons take_request warned of (at most 64 kept)


def ready_path(jobdir: JobDir, seq: int) -> Path:
    """The file the successor of order ``seq`` writes once it waits."""
    return jobdir.path / READY.format(seq=seq)


def cancel_path(jobdir: JobDir, seq: int) -> Path:
    """The file by which the application gives up on order ``seq``'s successor."""
    return jobdir.path / CANCEL.format(seq=seq)


def cancel(jobdir: JobDir, seq: int, why: str) -> None:
    """Rank 0's watcher: the launcher is to stop the successor, then fail the order."""
    write_json_atomic(cancel_path(jobdir, seq), {"seq": seq, "reason": why, "at": time.time()})


def cancelled(jobdir: JobDir, seq: int) -> str | None:
    """The launcher's side: why the successor of ``seq`` was given up on, if it was."""
    data = _read_object(jobdir, CANCEL.format(seq=seq))
    return None if data is None else str(data.get("reason", "given up"))


def took_path(directory: Path | str, seq: int) -> Path:
    """The successor's marker: it read the checkpoint of order ``seq`` in ``directory``.

    ``directory`` is the memory directory, or the job directory's ``checkpoint/``.
    """
    return Path(directory) / TOOK.format(seq=seq)


def signal_took(directory: Path | str, seq: int) -> None:
    """The successor's rank 0, once every rank read the checkpoint: the old ranks may end.

    An empty file beside the checkpoint, created exclusively and not synced: only its
    existence counts, it is written on the application's critical path, and a crash makes it
    moot.

    Best-effort: if the file cannot be made (the directory is gone, the disk full), this
    generation goes on with a warning and the old ranks end when :func:`linger` gives up;
    raising here would fail the restored generation on rank 0 alone.
    """
    path = took_path(directory, seq)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW))
    except FileExistsError:
        pass
    except OSError as exc:
        log.warning("could not tell the old generation it may end (%s): %s", path, exc)


def linger(
    comm: Any, directory: Path | str, seq: int, nbytes: int, poll_s: float = 0.002
) -> tuple[bool, float]:
    """The old generation's ranks, after the handover: sleep until the successor read it.

    Collective. Rank 0 looks for :func:`took_path` every ``poll_s`` seconds; the other ranks
    wait in a non-blocking barrier tested as often (not spinning, and not asking a shared
    filesystem each). Ending at once would make the old generation's exit (interpreter
    teardown, ``MPI_Finalize``, its daemons) compete for the cores with the successor's
    restore, which the application waits for; an ended process computes nothing either, so
    waiting costs nothing. The caller's rank 0 then removes the memory checkpoint, which is
    also slow (freeing its pages) and so kept off the successor's path.

    Gives up after :data:`LINGER_S` seconds plus the time to read the checkpoint's ``nbytes``
    bytes at :data:`LINGER_BYTES_PER_S` (a successor that died or is very slow): a memory
    checkpoint is then left to the launcher, which removes every one at the job's end
    (:func:`drop_all`). Returns, on every rank, whether the successor took the checkpoint
    and how long rank 0 waited (seconds).
    """
    t0 = time.monotonic()
    found = False
    if comm.Get_rank() == 0:
        path = took_path(directory, seq)
        deadline = t0 + LINGER_S + nbytes / LINGER_BYTES_PER_S
        while not (found := _exists(path)) and time.monotonic() < deadline:
            time.sleep(poll_s)
    barrier = comm.Ibarrier()
    while not barrier.Test():
        time.sleep(poll_s)
    return comm.bcast((found, time.monotonic() - t0), root=0)


def signal_ready(jobdir: JobDir, seq: int, launch: int, memory: bool) -> None:
    """The successor's rank 0: it runs and waits for the handover.

    ``memory``: every one of its ranks sees the memory checkpoint directory.
    """
    write_json_atomic(
        ready_path(jobdir, seq),
        {
            "seq": seq,
            "launch": launch,
            "memory": memory,
            "at": time.time(),
            "process_started": process_started(),
        },
    )


def process_started() -> float | None:
    """When this process started (epoch seconds, to a clock tick), ``None`` if unknown.

    From ``/proc/self/stat`` (start time in clock ticks since boot) against
    ``CLOCK_BOOTTIME`` now: with the launcher's ``launch`` event it splits a successor's start
    into the launch of its processes (``mpirun``, daemons) and what they do before they are
    ready (interpreter, imports, ``MPI_Init``, the runtime's set-up).
    """
    try:
        stat = Path("/proc/self/stat").read_text()
        ticks = int(stat[stat.rindex(")") + 2 :].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
        return time.time() - age
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def ready_info(jobdir: JobDir, seq: int) -> dict[str, Any]:
    """What the successor of order ``seq`` wrote when it became ready (``{}``: nothing)."""
    return _read_ready(jobdir, seq) or {}


def _read_ready(jobdir: JobDir, seq: int) -> dict[str, Any] | None:
    """The successor's ready file (see :func:`_read_object`)."""
    return _read_object(jobdir, READY.format(seq=seq))


def _read_object(jobdir: JobDir, name: str) -> dict[str, Any] | None:
    """A JSON object the launcher and the ranks pass in the job directory.

    Read through the job directory's checks (no symlink followed, a regular file, bounded).

    ``None`` while it is absent, unreadable or not a JSON object.
    """
    try:
        data = jobdir.files.read_json((), name)
    except JobInputError:
        return None
    return data if isinstance(data, dict) else None


def wait_ready(
    jobdir: JobDir, seq: int, timeout_s: float, failed: Callable[[], bool], poll_s: float = 0.02
) -> tuple[str | None, bool]:
    """Wait (rank 0's watcher thread) until the successor of order ``seq`` is ready.

    Returns ``(None, memory)`` when it is (``memory``: its ranks all see the memory
    checkpoint directory), else ``(why not, False)``: ``failed()`` became true (the launcher
    gave up on it and acknowledged the order as failed), or ``timeout_s`` seconds passed.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        data = _read_ready(jobdir, seq)
        if data is not None:
            return None, bool(data.get("memory"))
        if failed():
            return "the next generation could not start", False
        time.sleep(poll_s)
    return f"the next generation was not ready within {timeout_s:g} s", False


def await_manifest(
    comm: Any,
    manifest: Path,
    launch: int,
    seq: int,
    timeout_s: float = 3600.0,
    poll_s: float = 0.002,
) -> dict[str, Any]:
    """The successor's ranks: wait, blocked, for generation ``launch``'s checkpoint of ``seq``.

    Rank 0 reads ``manifest`` every ``poll_s`` seconds; the other ranks wait in a non-blocking
    barrier tested every ``poll_s`` (an MPI blocking call would spin a core per rank). Returns
    the manifest on every rank.

    Raises
    ------
    HandoverError
        No such checkpoint within ``timeout_s`` seconds (on every rank).
    """
    found = None
    deadline = time.monotonic() + timeout_s
    if comm.rank == 0:
        while found is None and time.monotonic() < deadline:
            try:
                data = json.loads(manifest.read_text())
            except (FileNotFoundError, ValueError):
                data = None
            if _manifest_of(data, launch, seq):
                found = data
            else:
                time.sleep(poll_s)
    barrier = comm.Ibarrier()
    while not barrier.Test():
        time.sleep(poll_s)
    found = comm.bcast(found, root=0)
    if found is None:
        raise HandoverError(
            f"generation {launch} did not hand over order {seq} within {timeout_s:g} s "
            f"(no checkpoint manifest at {manifest})"
        )
    return found


def handed_over(jobdir: JobDir, seq: int, launch: int) -> bool:
    """Whether generation ``launch`` wrote its checkpoint of order ``seq`` (the launcher).

    Then the waiting successor has taken over (or is taking over): if it has already ended,
    it ended after the handover (a short remaining run can end before the old generation's
    ``mpirun`` has), not before it.
    """
    try:
        data = json.loads((jobdir.checkpoint / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    return _manifest_of(data, launch, seq)


def _manifest_of(data: object, launch: int, seq: int) -> bool:
    """Whether ``data`` (a parsed manifest) is generation ``launch``'s of order ``seq``.

    False for anything else, malformed values included (a manifest in the job directory is
    read as untrusted input, by rank 0 alone and by the launcher: it must not raise).
    """
    if not isinstance(data, dict):
        return False
    try:
        return int(data.get("launch", -1)) == launch and int(data.get("seq", -1)) == seq
    except (TypeError, ValueError, OverflowError):
        return False


def _exists(path: Path) -> bool:
    """``path.exists()``, False where it cannot be told (no permission): rank 0 alone asks."""
    try:
        return path.exists()
    except OSError:
        return False
