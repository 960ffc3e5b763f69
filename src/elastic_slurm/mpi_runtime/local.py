"""The runtime's side of ``elastic-slurm try``: forced resizes and checks on one machine.

``elastic-slurm try`` (:mod:`.local_try`) runs an application under plain ``mpirun`` with
``ELASTIC_SLURM_LOCAL_TRY`` set to a JSON plan, e.g. ``{"plan": [4, 1], "every": 3}``: grow
to 4 ranks, then shrink to 1, each resize ordered ``every`` resize points after the start or
after the last resize. :class:`LocalTry` (one per process, made by :func:`from_env`) then

* plays the controller: rank 0 writes order ``k`` of the plan into the job directory when its
  count of resize points since the last resize reaches ``every`` (the order then goes the real
  way: watcher thread, vote, join strategy);
* gives the ranks *virtual nodes*: rank ``r`` is on node ``local<r + 1>`` (one rank per node),
  so that orders name nodes as on a cluster while every rank runs on this machine; spawns go
  to this machine's hostname (:meth:`physical`);
* checks every registered array across every resize: an exact, order-independent checksum of
  each array (every element's bytes mixed with its global index, summed modulo 2**64; the
  same for any distribution and rank count) before the data moves and after it arrived; a
  difference raises :class:`LocalCheckFailed` on every rank. An array unchanged since the last
  resize is reported (``unchanged``): a program computing on a copy of ``local`` leaves it so.
  At every resize point each rank also checks that each array's ``local`` has the shape and
  dtype of its share (an array kept from before a resize has not);
* records what it saw, one JSON object a line, in ``local-try.jsonl`` in the job directory.

Nodes are positional: a shrink keeps the first nodes, a grow adds nodes at the end, so the
merged communicator of a spawn (old ranks first) matches the order's node list.
"""

from __future__ import annotations

import hashlib
import json
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from elastic_slurm import envvars
from elastic_slurm.errors import JobInputError
from elastic_slurm.mpi_runtime.checkpoint import on_rank0
from elastic_slurm.waiting import DeadlineExceeded, wait_for

#: The job directory file the checks are recorded in (one JSON object a line).
RECORD = "local-try.jsonl"
#: Prefix of the virtual node names.
NODE_PREFIX = "local"

_MASK = (1 << 64) - 1


class LocalCheckFailed(RuntimeError):
    """A check of ``elastic-slurm try`` failed (an array changed across a resize, a stale array)."""


def virtual_nodes(count: int) -> list[str]:
    """The virtual node names of ``count`` ranks.

    >>> virtual_nodes(3)
    ['local1', 'local2', 'local3']
    """
    if count < 1:
        raise ValueError(f"a run needs at least one rank, got {count}")
    return [f"{NODE_PREFIX}{i + 1}" for i in range(count)]


def parse_plan(text: str) -> dict[str, Any]:
    """Read ``ELASTIC_SLURM_LOCAL_TRY``: ``{"plan": [sizes...], "every": N}``.

    Raises
    ------
    ValueError
        Not that shape: a size below 1, ``every`` below 1 (the message names the variable).

    >>> parse_plan('{"plan": [4, 1], "every": 2}')
    {'plan': [4, 1], 'every': 2}
    """
    where = f"{envvars.PREFIX}LOCAL_TRY"
    try:
        data = json.loads(text)
        plan = [int(n) for n in data.get("plan", [])]
        every = int(data.get("every", 3))
    except (ValueError, TypeError, AttributeError) as exc:
        raise ValueError(f"{where}={text!r}: expected {{'plan': [sizes], 'every': N}}") from exc
    if any(n < 1 for n in plan) or every < 1:
        raise ValueError(f"{where}={text!r}: sizes and 'every' must be at least 1")
    return {"plan": plan, "every": every}


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on a uint64 array (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def local_checksum(meta: Mapping[str, Any], local: np.ndarray | None, rank: int, size: int) -> int:
    """One rank's part of an array's checksum (add the parts modulo 2**64 over the ranks).

    Every cell (a row for a row distribution, an entry (i, j) for a 2-D one, with its
    trailing axes) contributes a mix of the hash of its bytes and its global index; the sum
    does not depend on which rank holds the cell.

    Parameters
    ----------
    meta
        :meth:`~.data.DistArray.meta` of the array.
    local
        This rank's part, shape ``local_shape()`` for ``rank`` of ``size``; ``None`` or empty
        for a rank holding nothing.

    Raises
    ------
    LocalCheckFailed
        ``local`` does not have the shape this rank's share has.
    """
    from elastic_slurm.mpi_runtime.data import DistArray, distribution_from_json

    if local is None or local.size == 0:
        return 0
    shape = tuple(int(n) for n in meta["global_shape"])
    arr = DistArray(
        str(meta["name"]),
        shape,
        np.dtype(meta["dtype"]),
        distribution_from_json(meta["dist"]),
        local,
        rank,
        size,
    )
    want = arr.local_shape()
    if tuple(local.shape) != tuple(want):
        raise LocalCheckFailed(
            f"array {arr.name!r}: rank {rank} of {size} holds shape {tuple(local.shape)}, its "
            f"share is {tuple(want)}"
        )
    if len(shape) >= 2 and arr.dist.to_json()["kind"] in ("block_2d", "block_cyclic_2d"):
        rows, cols = arr.grid_indices()
        index = (rows[:, None] * shape[1] + cols[None, :]).reshape(-1)
        cells = local.reshape(len(rows) * len(cols), -1)
    else:
        index = arr.indices()
        cells = local.reshape(len(index), -1)
    raw = np.ascontiguousarray(cells).view(np.uint8).reshape(len(index), -1)
    width = raw.shape[1]
    pad = (-width) % 8
    if pad:
        raw = np.concatenate([raw, np.zeros((len(index), pad), np.uint8)], axis=1)
    words = raw.view("<u8").astype(np.uint64)
    with np.errstate(over="ignore"):
        weights = _mix(np.arange(1, words.shape[1] + 1, dtype=np.uint64))
        h = (words * weights[None, :]).sum(axis=1, dtype=np.uint64)
        h = _mix(h ^ _mix(index.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)))
        return int(h.sum(dtype=np.uint64))


def checksums(
    comm: Any, items: Sequence[tuple[Mapping[str, Any], np.ndarray | None]], rank: int, size: int
) -> dict[str, int]:
    """Global checksums (collective over ``comm``) of ``items``: ``(meta, local)`` pairs.

    ``rank``/``size`` say which share ``local`` is (a rank of ``comm`` that holds nothing
    passes ``None``). Returns ``{name: checksum}``, the same on every rank.
    """
    parts = [local_checksum(meta, local, rank, size) for meta, local in items]
    gathered = comm.allgather(parts)
    names = [str(meta["name"]) for meta, _ in items]
    return {name: sum(int(p[i]) for p in gathered) & _MASK for i, name in enumerate(names)}


def _digest(sums: Mapping[str, int]) -> str:
    return hashlib.sha256(json.dumps(sorted(sums.items())).encode()).hexdigest()[:12]


class LocalTry:
    """One process's part of ``elastic-slurm try`` (see the module docstring).

    Parameters
    ----------
    plan
        The sizes to resize to, in order (order ``k`` goes to ``plan[k - 1]`` ranks).
    every
        Resize points (counted on rank 0) from the start or the last resize to the next order.
    jobdir
        The job directory (orders go there; :data:`RECORD` too).
    """

    def __init__(self, plan: Sequence[int], every: int, jobdir: Any) -> None:
        self.plan = [int(n) for n in plan]
        self.every = int(every)
        self.jobdir = jobdir
        self.host = socket.gethostname()
        self._points = 0
        self._generation = -1
        self._written: set[int] = set()
        self._holding = 0  # the order rank 0 waits at resize points for (0: none)
        self._after: dict[str, int] = {}  # checksums after the last resize (or restore)
        self._pending: dict[str, Any] | None = None

    # ---------------------------------------------------------------- nodes
    def hosts(self, size: int) -> list[str]:
        """The virtual node of every rank of a communicator of ``size`` ranks."""
        return virtual_nodes(size)

    def placement(self, hosts: Sequence[str]) -> list[str]:
        """Where ranks really run, for the join strategy's placement rule: this machine."""
        return [self.host for _ in hosts]

    def physical(self, hosts: Sequence[str]) -> list[str]:
        """The hosts to spawn on for virtual ``hosts``: this machine, once per node."""
        return [self.host for _ in hosts]

    # ---------------------------------------------------------------- resize points
    def tick(self, ec: Any) -> None:
        """At every resize point: check the arrays' shapes; rank 0 writes the due order.

        Raises
        ------
        LocalCheckFailed
            After ``MPI_Abort`` of the whole run: an array's local part has the wrong shape
            on this rank, or rank 0 could not write the order (the other ranks would wait for
            it at the vote until their timeout).
        """
        for arr in ec._arrays.values():
            want = arr.local_shape()
            if tuple(arr.local.shape) != tuple(want) or arr.local.dtype != arr.dtype:
                self._fail(
                    ec,
                    f"array {arr.name!r}: rank {ec.rank} of {ec.size} holds "
                    f"{arr.local.dtype}{tuple(arr.local.shape)} at a resize point, its share is "
                    f"{arr.dtype}{tuple(want)}: after a resize read the new rows from "
                    f"{arr.name}.local (a copy kept from before the resize is stale)",
                    abort=True,
                )
        if ec.rank != 0:
            return
        if self._holding and ec.next_seq <= self._holding:
            self._hold(ec)
            return
        if ec.generation != self._generation:
            self._generation, self._points = ec.generation, 0
        self._points += 1
        seq = ec.next_seq
        if self._points < self.every or seq > len(self.plan) or seq in self._written:
            return
        if ec._spawn.pending is not None:
            return
        from elastic_slurm.model.resize_order import ResizeAction, ResizeOrder

        target = self.plan[seq - 1]
        action = ResizeAction.EXPAND if target > ec.size else ResizeAction.SHRINK
        self._written.add(seq)
        order = ResizeOrder(seq, action, tuple(virtual_nodes(target)), time.time())
        try:
            self.jobdir.write_order(order)
            self.record("order", seq=seq, action=action.value, ranks=ec.size, to=target)
        except (OSError, JobInputError) as exc:  # rank 0 alone: the others would wait at the vote
            self._fail(ec, f"could not write order {seq} into {self.jobdir.path}: {exc}", True)
        if ec._watcher is not None:
            ec._watcher._wake.set()  # look now rather than at the next poll
            self._holding = seq
            self._hold(ec)

    def _hold(self, ec: Any) -> None:
        """Rank 0: wait here until the runtime can act on the order at once.

        That is, until the watcher has the order ready (a restart's successor started and
        waiting) or refused it, or the background spawn is done. So a program with fast
        iterations is resized here rather than some seconds of iterations later (or never,
        if it ends first); on a cluster it computes meanwhile. The other ranks wait at the next
        vote, so the wait is kept under half of their timeout
        (``ELASTIC_SLURM_RESIZE_POINT_TIMEOUT_S``).
        """
        watcher = ec._watcher
        limit = 0.5 * (ec._vote.timeout_s if ec._vote is not None else 60.0)

        def can_act() -> bool:
            if ec._spawn.pending is not None:
                return ec._spawn.pending.done()
            return (
                watcher is None
                or watcher.ready() is not None
                or bool(watcher._refused)
                or ec.next_seq > self._holding
            )

        try:
            wait_for(
                can_act,
                timeout_s=limit,
                what=f"order {self._holding} to be ready",
                interval_s=0.005,
                max_interval_s=0.005,
            )
        except DeadlineExceeded:
            pass  # the ranks go on; the order is acted on at a later resize point

    # ---------------------------------------------------------------- checks
    def before(self, comm: Any, arrays: Any, seq: int) -> None:
        """Before the data of order ``seq`` moves (collective over the old ranks)."""
        items = [(a.meta(), a.local) for a in arrays]
        sums = checksums(comm, items, comm.rank, comm.size)
        unchanged = sorted(n for n, s in sums.items() if self._after.get(n) == s)
        pending = self._pending = {"seq": seq, "before": sums, "unchanged": unchanged}
        path = self.jobdir.path / f"local-try-{seq}.json"  # for a restarted generation
        on_rank0(
            comm, f"recording order {seq}'s checksums", lambda: path.write_text(json.dumps(pending))
        )

    def after(
        self,
        comm: Any,
        items: Sequence[tuple[Mapping[str, Any], np.ndarray | None]],
        seq: int,
        strategy: str,
    ) -> None:
        """After the data of order ``seq`` arrived (collective over the new ranks).

        Raises
        ------
        LocalCheckFailed
            On every rank, when an array's checksum changed (the record names the arrays).
        """

        def recorded() -> dict[str, Any] | None:
            """The old ranks' own record, else (a restart) the file they left."""
            pending = self._pending
            path = self.jobdir.path / f"local-try-{seq}.json"
            if (pending is None or pending.get("seq") != seq) and path.exists():
                pending = json.loads(path.read_text())
            return pending

        pending = on_rank0(comm, f"reading order {seq}'s checksums", recorded)
        self._pending = None
        try:
            sums = checksums(comm, items, comm.rank, comm.size)
        except LocalCheckFailed as exc:
            self._fail_all(comm, seq, str(exc))
            raise
        if pending is None:
            self._fail_all(comm, seq, f"no checksums were recorded before order {seq}")
        before = {str(k): int(v) for k, v in pending["before"].items()}
        changed = sorted(n for n in set(before) | set(sums) if before.get(n) != sums.get(n))
        self._after = sums
        fields = {
            "seq": seq,
            "strategy": strategy,
            "ranks": comm.size,
            "arrays": sorted(sums),
            "changed": changed,
            "unchanged": list(pending.get("unchanged", [])),
            "digest": _digest(sums),
        }
        on_rank0(comm, f"recording order {seq}'s check", lambda: self.record("checked", **fields))
        if changed:
            raise LocalCheckFailed(
                f"order {seq} ({strategy}): array(s) {', '.join(changed)} differ after the "
                "resize from what the ranks held before it"
            )

    def restored(self, comm: Any, restored: Mapping[str, tuple[Any, np.ndarray]], seq: int) -> None:
        """In a restarted generation: check the arrays read back (collective)."""
        items = [(meta, local) for meta, local in restored.values()]
        self.after(comm, items, seq, "restart")

    def _fail_all(self, comm: Any, seq: int, why: str) -> None:
        if comm.rank == 0:
            self.record("failed", seq=seq, reason=why)
        raise LocalCheckFailed(why)

    def _fail(self, ec: Any, why: str, abort: bool) -> None:
        """A check failed on this rank only: record it, say it, end the whole run."""
        try:
            self.record("failed", rank=ec.rank, reason=why)
        except OSError:
            pass  # said below all the same
        print(f"elastic-slurm try: check failed: {why}", file=sys.stderr, flush=True)
        if abort:
            ec.comm.Abort(3)
        raise LocalCheckFailed(why)

    def record(self, event: str, **fields: Any) -> None:
        """Append one JSON line to :data:`RECORD` (small writes: whole lines)."""
        line = json.dumps({"event": event, "at": time.time(), **fields}) + "\n"
        with open(Path(self.jobdir.path) / RECORD, "a", encoding="utf-8") as fh:
            fh.write(line)


def from_env(jobdir: Any, env: Mapping[str, str] | None = None) -> LocalTry | None:
    """The :class:`LocalTry` of this process if ``ELASTIC_SLURM_LOCAL_TRY`` is set, else ``None``.

    Raises
    ------
    ValueError
        The variable is malformed, or set without a job directory.
    """
    text = envvars.get_str("LOCAL_TRY", None, env)
    if text is None:
        return None
    if jobdir is None:
        raise ValueError(f"{envvars.PREFIX}LOCAL_TRY needs {envvars.PREFIX}JOB_DIR")
    plan = parse_plan(text)
    return LocalTry(plan["plan"], plan["every"], jobdir)
