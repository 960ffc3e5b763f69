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

If the successor cannot start (its ``mpirun`` ends, or it is not ready within the timeout),
the launcher or the watcher acknowledges the order as failed: the old generation computes on at
its size, and the controller gives a grant back. Nodes leave the job only once the old
generation has left them (the launcher checks, then acknowledges them ``vacated``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from elastic_slurm.protocol.jobdir import JobDir, write_json_atomic

#: In the job directory: the application's request for a successor (rank 0 writes it).
REQUEST = "successor.json"
#: ``successor-ready-<seq>.json``: the successor of order ``seq`` waits for the handover.
READY = "successor-ready-{seq}.json"


def request_successor(jobdir: JobDir, seq: int, action: str, nodes: list[str], launch: int) -> None:
    """Ask the launcher to start the generation after ``launch`` on ``nodes`` (order ``seq``)."""
    write_json_atomic(
        jobdir.path / REQUEST,
        {"seq": seq, "action": action, "nodes": nodes, "launch": launch, "at": time.time()},
    )


def take_request(jobdir: JobDir) -> dict[str, Any] | None:
    """The launcher's side: read and remove the successor request, if there is one."""
    path = jobdir.path / REQUEST
    try:
        data = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None
    path.unlink(missing_ok=True)
    return data if isinstance(data, dict) else None


def ready_path(jobdir: JobDir, seq: int) -> Path:
    """The file the successor of order ``seq`` writes once it waits."""
    return jobdir.path / READY.format(seq=seq)


def signal_ready(jobdir: JobDir, seq: int, launch: int) -> None:
    """The successor's rank 0: it runs, and waits for the handover."""
    write_json_atomic(ready_path(jobdir, seq), {"seq": seq, "launch": launch, "at": time.time()})


def wait_ready(
    jobdir: JobDir, seq: int, timeout_s: float, failed: Callable[[], bool], poll_s: float = 0.02
) -> str | None:
    """Wait (rank 0's watcher thread) until the successor of order ``seq`` is ready.

    Returns ``None`` when it is, else why not: ``failed()`` became true (the launcher gave up
    on it and acknowledged the order as failed), or ``timeout_s`` seconds passed.
    """
    path = ready_path(jobdir, seq)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists():
            return None
        if failed():
            return "the next generation could not start"
        time.sleep(poll_s)
    return f"the next generation was not ready within {timeout_s:g} s"


def await_manifest(
    comm: Any, manifest: Path, launch: int, seq: int, poll_s: float = 0.005
) -> dict[str, Any]:
    """The successor's ranks: wait, blocked, for generation ``launch``'s checkpoint of ``seq``.

    Rank 0 reads ``manifest`` every ``poll_s`` seconds; the other ranks wait in a non-blocking
    barrier tested every ``poll_s`` (an MPI blocking call would spin a core per rank). Returns
    the manifest on every rank.
    """
    found = None
    if comm.rank == 0:
        while found is None:
            try:
                data = json.loads(manifest.read_text())
            except (FileNotFoundError, ValueError):
                data = None
            if (
                isinstance(data, dict)
                and int(data.get("launch", -1)) == launch
                and int(data.get("seq", -1)) == seq
            ):
                found = data
            else:
                time.sleep(poll_s)
    barrier = comm.Ibarrier()
    while not barrier.Test():
        time.sleep(poll_s)
    return comm.bcast(found, root=0)
