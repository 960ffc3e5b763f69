"""The spawn join strategy: new ranks are spawned on the added nodes and merged in.

Followed for a grow where :func:`~.probe.choose_join` allows spawning. With
``MPI_THREAD_MULTIPLE`` the spawn and the merge run in helper threads while the ranks compute
(:class:`~.spawn.BackgroundSpawn`), and a later resize point, agreed by the vote, completes the
resize: only the redistribution of the arrays remains there. Without it (or on the sequential
path) everything happens at the resize point.

The new ranks run the same program from the start; their ``init()`` joins the merged
communicator here (:meth:`SpawnJoin.arrive`) and receives their rows and the state. At exit,
both sides disconnect before ``MPI_Finalize`` (:meth:`SpawnJoin.finalize`), and a program that
ends while a background spawn is still under way lets the new ranks go.
"""

from __future__ import annotations

import atexit
import logging
import time
from typing import TYPE_CHECKING, Any

from mpi4py import MPI

from elastic_slurm.model.resize_order import ResizeOrder
from elastic_slurm.mpi_runtime.probe import ENDED_BEFORE_JOIN, SPAWN
from elastic_slurm.mpi_runtime.redistribute import move_array
from elastic_slurm.mpi_runtime.resize_paths import SEQUENTIAL
from elastic_slurm.mpi_runtime.say import say
from elastic_slurm.mpi_runtime.spawn import (
    BackgroundSpawn,
    ResizeFailed,
    spawn_and_merge,
    thread_support,
)
from elastic_slurm.mpi_runtime.state import ResizeState

if TYPE_CHECKING:
    from elastic_slurm.mpi_runtime.session import ElasticComm

log = logging.getLogger("elastic_slurm.mpi_runtime")


class SpawnJoin:
    """Grow ``ec`` by spawning ranks on the added nodes (the :class:`~.probe.Join` interface).

    Attributes
    ----------
    pending
        The background spawn under way on this rank, or ``None``.
    """

    strategy = SPAWN

    def __init__(self, ec: ElasticComm) -> None:
        self.ec = ec
        self.pending: BackgroundSpawn | None = None
        self._intercomms: list[MPI.Intercomm] = []
        self._exit_hook = False  # _at_exit is registered with atexit

    # ------------------------------------------------------------------ old ranks
    def follow(self, order: ResizeOrder, hosts: list[str], reason: str) -> bool:
        """Start following ``order`` at this resize point (collective over ``ec.comm``).

        Returns True when the world changed here (spawned at the resize point), False when
        the spawn goes on in the background (a later resize point completes it).
        """
        ec = self.ec
        new_hosts = [n for n in order.nodes if n not in set(hosts)]
        if ec._local is not None:  # virtual nodes: spawn on this machine
            new_hosts = ec._local.physical(new_hosts)
        why_not = "the sequential path" if ec._path == SEQUENTIAL else thread_support()
        if why_not is None:
            # every rank starts its helper thread here; a later resize point completes it
            self.pending = BackgroundSpawn(
                ec.comm, new_hosts, ec.ntasks_per_node, order=order, reason=reason
            )
            self._register_exit()
            return False
        if ec._path != SEQUENTIAL:
            say(ec.comm, f"order {order.seq}: spawning at the resize point: {why_not}")
        inter, merged, spawn_s, merge_s = spawn_and_merge(ec.comm, new_hosts, ec.ntasks_per_node)
        self._complete(order, inter, merged, spawn_s, merge_s, reason)
        return True

    def finish(self) -> None:
        """Complete the spawn the helper threads ran (collective, at an agreed resize point).

        Raises
        ------
        elastic_slurm.mpi_runtime.spawn.ResizeFailed
            The spawn or the merge failed on some rank (on every rank).
        """
        spawning, self.pending = self.pending, None
        assert spawning is not None
        inter, merged, spawn_s, merge_s = spawning.finish(self.ec.comm)
        order, reason = spawning.about["order"], spawning.about["reason"]
        self._complete(order, inter, merged, spawn_s, merge_s, reason, overlapped=True)

    def _complete(
        self,
        order: ResizeOrder,
        inter: MPI.Intercomm,
        merged: MPI.Intracomm,
        spawn_s: float,
        merge_s: float,
        reason: str,
        overlapped: bool = False,
    ) -> None:
        """Hand the new ranks their rows and the state over ``merged`` (collective)."""
        ec = self.ec
        if ec._local is not None:
            ec._local.before(ec.comm, ec._arrays.values(), order.seq)
        packed = ec._pack()
        t2 = time.monotonic()
        merged.Ibarrier().Wait()  # the new ranks wait in a non-blocking barrier (not spinning)
        old_size = ec.size
        phases = {**order.phases_s, "spawn": spawn_s, "merge": merge_s}
        meta = {
            "seq": order.seq,
            "generation": ec.generation,
            "src_parts": old_size,
            "arrays": [a.meta() for a in ec._arrays.values()],
            "state": dict(ec.state) if ec.rank == 0 else None,
            "packed": packed,
            "phases_s": phases,
            "reason": reason + (" (spawned in the background)" if overlapped else ""),
        }
        meta = merged.bcast(meta, root=0)
        for arr in ec._arrays.values():
            arr.local = move_array(merged, arr.local, arr.meta(), old_size, merged.size)
            arr._rank, arr._size = merged.rank, merged.size
        if ec._local is not None:
            items = [(a.meta(), a.local) for a in ec._arrays.values()]
            ec._local.after(merged, items, order.seq, "spawn")
        t3 = time.monotonic()
        self._connected(inter)
        ec.state = ResizeState(meta["state"] or {})
        ec.generation += 1
        ec._done_with(order.seq)
        ec._new_comm(merged)
        ec.last_resize_s = {
            **meta["phases_s"],
            "redistribute": t3 - t2,
            "pause": time.time() - ec._paused_at,
        }
        ec._acknowledge(order.seq, "spawn", str(meta["reason"]), ec.last_resize_s)
        ec._arrival(meta["packed"])

    def _end_during_spawn(self) -> None:
        """At exit, with a background spawn still under way: let the new ranks go (collective).

        The program ended before a resize point completed the spawn. Without this, the new
        ranks wait for their rows forever and ``MPI_Finalize`` never returns. Here every old
        rank waits for its helper thread; the new ranks are told the job ended and leave
        without running the program; the order is acknowledged as failed; both sides
        disconnect.
        """
        ec = self.ec
        spawning, self.pending = self.pending, None
        if spawning is None:
            return  # completed at a resize point, or already handled
        order = spawning.about["order"]
        why = ENDED_BEFORE_JOIN
        # the order's nodes are reported as still in use: Open MPI's daemons on the added nodes
        # stay until mpirun ends, and a node given back to Slurm before then has its daemon
        # killed, which makes mpirun fail the job (soak run 7, job 279); the job is ending, and
        # Slurm takes every node back at its end
        in_use = [*ec._known_hosts, *order.nodes]
        try:
            inter, merged, _, _ = spawning.finish(ec.comm)
        except ResizeFailed as exc:
            if ec.rank == 0:  # hosts as the vote knows them: hosts() is collective
                ec._refuse(order, in_use, f"{why}; the spawn had failed: {exc}")
            return
        merged.Ibarrier().Wait()
        merged.bcast({"ended": why, "seq": order.seq}, root=0)
        if ec.rank == 0:
            ec._refuse(order, in_use, why)
        self._intercomms.append(inter)
        ec.comm = merged
        self.disconnect()

    # ------------------------------------------------------------------ new ranks
    def arrive(self) -> bool:
        """In a process that starts: whether a spawn added it; if so, join the others.

        Joins the merged communicator and receives its rows and the state (collective with
        the old ranks).

        Raises
        ------
        SystemExit
            (status 0) The program ended before it took this rank in: there is nothing to do.
        """
        parent = MPI.Comm.Get_parent()
        if parent == MPI.COMM_NULL:
            return False
        ec = self.ec
        t0 = time.monotonic()
        merged = parent.Merge(high=True)
        barrier = merged.Ibarrier()  # the parents may compute on for a while: wait, not spin
        while not barrier.Test():
            time.sleep(0.002)
        meta: dict[str, Any] = merged.bcast(None, root=0)
        if "ended" in meta:  # see _end_during_spawn
            log.info("spawned for order %s: %s; leaving", meta["seq"], meta["ended"])
            self._intercomms.append(parent)
            ec.comm = merged
            self.disconnect()
            raise SystemExit(0)
        for info in meta["arrays"]:
            local = move_array(merged, None, info, int(meta["src_parts"]), merged.size)
            ec._restored[info["name"]] = (info, local)
        if ec._local is not None:
            ec._local.after(merged, list(ec._restored.values()), int(meta["seq"]), "spawn")
        self._connected(parent)
        ec.state = ResizeState(meta["state"] or {})
        ec.generation = int(meta["generation"]) + 1
        ec.next_seq = int(meta["seq"]) + 1
        ec._new_comm(merged)
        ec.resumed = True
        ec.last_resize_s = {**meta["phases_s"], "redistribute": time.monotonic() - t0}
        ec._acknowledge(int(meta["seq"]), "spawn", str(meta["reason"]), ec.last_resize_s)
        ec._arrival(meta["packed"])
        return True

    # ------------------------------------------------------------------ leaving
    def finalize(self) -> None:
        """Disconnect from spawned (or parent) ranks before MPI ends (collective).

        Run at exit once a spawn has started (:mod:`atexit`): a world whose ranks were
        spawned can otherwise hang in ``MPI_Finalize`` when its ranks end at different moments
        (seen with Open MPI 4.1: broken pipes, then ``mpirun`` never returns).
        """
        if self._intercomms:
            self.disconnect()

    def _connected(self, inter: MPI.Intercomm) -> None:
        """Keep ``inter`` to disconnect it at the end."""
        self._register_exit()
        self._intercomms.append(inter)

    def _register_exit(self) -> None:
        """Once: at exit, end a pending spawn, then disconnect (before mpi4py's MPI_Finalize).

        One handler, so that the two happen in this order whatever came first.
        """
        if not self._exit_hook:
            atexit.register(self._at_exit)
            self._exit_hook = True

    def _at_exit(self) -> None:
        self._end_during_spawn()
        self.finalize()

    def disconnect(self) -> None:
        """Leave the merged communicator and disconnect from spawned or parent ranks.

        Collective over ``ec.comm``; it is ``MPI.COMM_WORLD`` afterwards if there was a spawn.
        """
        ec = self.ec
        if ec._vote is not None:
            ec._vote.close()
            ec._vote = None
        ec.comm.Barrier()
        if self._intercomms:
            ec.comm.Free()
            for inter in self._intercomms:
                inter.Disconnect()
            self._intercomms.clear()
            ec.comm = MPI.COMM_WORLD
