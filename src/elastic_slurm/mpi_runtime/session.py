"""The application's side of elasticity: :func:`init` and :meth:`ElasticComm.resize_point`.

A malleable mpi4py application uses ``ec.comm`` instead of ``MPI.COMM_WORLD``, keeps its big
arrays distributed by rows (``ec.rows(global_rows)`` gives this rank's rows), and calls
``ec.resize_point(arrays, state)`` once per iteration::

    ec = init()
    if ec.resumed:
        u, it = ec.restored["u"], ec.state["iteration"]
    else:
        start, stop = ec.rows(N)
        u, it = make_rows(start, stop), 0
    while it < iterations:
        ...  # compute on u, communicate on ec.comm
        it += 1
        new = ec.resize_point({"u": u}, {"iteration": it})
        if new is not None:
            u = new["u"]

At a resize point rank 0 looks for the controller's next order in the job directory. To
follow it, the runtime either

* spawns the new ranks on the added nodes, merges them into ``ec.comm`` and redistributes the
  arrays with ``Alltoallv`` (where :mod:`.probe` allows it), and returns the new blocks; or
* checkpoints arrays and state to the job directory and ends the process (``SystemExit(0)``
  through :class:`ResizeExit`); the launcher starts the application again at the new size,
  and there ``init()`` restores the data (``ec.resumed``) and acknowledges the order.

New ranks created by a spawn start the same program; their ``init()`` joins the merged
communicator and receives their rows and the state, so they resume like restarted ranks.
Outside the launcher (no job directory), ``resize_point`` never resizes: the same program
runs at a fixed size.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from mpi4py import MPI

from elastic_slurm import envvars
from elastic_slurm.jobdir import JobDir, write_json_atomic
from elastic_slurm.model.resize_order import AckStatus, ResizeAck, ResizeOrder
from elastic_slurm.mpi_runtime.checkpoint import load_rows, load_state, save_rows, save_state
from elastic_slurm.mpi_runtime.distribution import BlockRows
from elastic_slurm.mpi_runtime.probe import SPAWN, choose_join
from elastic_slurm.mpi_runtime.redistribute import redistribute_rows

log = logging.getLogger("elastic_slurm.mpi_runtime")

MANIFEST = "manifest.json"


class ResizeExit(SystemExit):
    """Raised by :meth:`ElasticComm.resize_point` to end this process for a restart.

    Its exit status is 0. Let it propagate (do not catch ``SystemExit``): the launcher restarts
    the application at the new size, and ``init()`` restores the data there.
    """

    def __init__(self) -> None:
        super().__init__(0)


def _say(comm: MPI.Intracomm, message: str) -> None:
    """One line on rank 0's standard error (the job's output), and the log."""
    if comm.rank == 0:
        print(f"elastic-slurm: {message}", file=sys.stderr, flush=True)
    log.info("%s", message)


class ElasticComm:
    """The application's communicator, which changes at resize points.

    Attributes
    ----------
    comm
        The current intracommunicator; use it instead of ``MPI.COMM_WORLD``.
    generation
        How many resizes this run has gone through (0 at the first start).
    resumed
        True when this process took over data from an earlier size (restarted or spawned).
    restored
        The arrays handed over (this rank's rows), by name; empty unless ``resumed``.
    state
        The scalars handed over with them; empty unless ``resumed``.
    last_resize_s
        Seconds per phase of the last resize this process took part in.
    """

    def __init__(
        self,
        comm: MPI.Intracomm,
        *,
        jobdir: JobDir | None,
        launch: int = 0,
        launch_host: str | None = None,
        ntasks_per_node: int = 1,
        join: str | None = None,
    ) -> None:
        self.comm = comm
        self.jobdir = jobdir
        self.launch = launch
        self.launch_host = launch_host
        self.ntasks_per_node = ntasks_per_node
        self.join = join
        self.generation = 0
        self.next_seq = 1
        self.resumed = False
        self.restored: dict[str, np.ndarray] = {}
        self.state: dict[str, Any] = {}
        self.last_resize_s: dict[str, float] = {}
        self._intercomms: list[MPI.Intercomm] = []

    # ------------------------------------------------------------------ basics
    @property
    def rank(self) -> int:
        """The rank of this process in :attr:`comm`."""
        return int(self.comm.rank)

    @property
    def size(self) -> int:
        """The number of ranks in :attr:`comm`."""
        return int(self.comm.size)

    def rows(self, global_rows: int) -> tuple[int, int]:
        """``(start, stop)``: the rows of a ``global_rows``-row array this rank owns now.

        Block distribution over :attr:`size` ranks; the first ``global_rows % size`` ranks own
        one extra row (:class:`~.distribution.BlockRows`).
        """
        return BlockRows(global_rows, self.size).rows_of(self.rank)

    def hosts(self) -> list[str]:
        """The hostname of every rank, in rank order (collective)."""
        return list(self.comm.allgather(socket.gethostname()))

    # ------------------------------------------------------------------ resize point
    def resize_point(
        self, arrays: Mapping[str, np.ndarray], state: Mapping[str, Any] | None = None
    ) -> dict[str, np.ndarray] | None:
        """Follow the controller's next resize order, if there is one (collective).

        Parameters
        ----------
        arrays
            This rank's rows of each distributed array, by name: shape ``(rows, *trailing)``
            with the rows :meth:`rows` gives, any dtype, the same names on every rank.
        state
            Scalars to carry across the resize (iteration counter...), from rank 0.

        Returns
        -------
        dict or None
            ``None`` when the world did not change. Otherwise this rank's new rows of every
            array (``comm``, ``rank`` and ``size`` have changed too).

        Raises
        ------
        ResizeExit
            The resize is done by restarting: data and state are saved; let it end the process.
        """
        if self.jobdir is None:
            return None
        order_json = None
        if self.rank == 0:
            order_path = self.jobdir.order_path(self.next_seq)
            if order_path.exists():
                order = self.jobdir.read_order(self.next_seq)
                order_json = order.to_json() if order else None
        order_json = self.comm.bcast(order_json, root=0)
        if order_json is None:
            return None
        order = ResizeOrder.from_json(order_json)
        hosts = self.hosts()
        if set(hosts) == set(order.nodes):
            # the launcher started this step on the order's nodes already (Slurm resized the
            # job before the application first started): nothing to move
            self.next_seq = order.seq + 1
            self._acknowledge(order.seq, "none", "already running on these nodes", {})
            return None
        choice = choose_join(
            order.action.value, hosts, self.launch_host, MPI.get_vendor(), self.join
        )
        _say(
            self.comm,
            f"order {order.seq}: {order.action.value} to {len(order.nodes)} node(s) "
            f"{','.join(order.nodes)}; join strategy {choice.strategy}: {choice.reason}",
        )
        if self.rank == 0:
            self.jobdir.log_event(
                "order",
                seq=order.seq,
                action=order.action.value,
                nodes=list(order.nodes),
                strategy=choice.strategy,
                reason=choice.reason,
            )
        if choice.strategy == SPAWN:
            return self._expand_by_spawn(order, hosts, arrays, state or {}, choice.reason)
        self._checkpoint_and_exit(order, arrays, state or {}, choice.reason)
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------------ spawn path
    def _expand_by_spawn(
        self,
        order: ResizeOrder,
        hosts: list[str],
        arrays: Mapping[str, np.ndarray],
        state: Mapping[str, Any],
        reason: str,
    ) -> dict[str, np.ndarray]:
        assert self.jobdir is not None
        new_hosts = [n for n in order.nodes if n not in set(hosts)]
        nprocs = len(new_hosts) * self.ntasks_per_node
        shapes = self._global_shapes(arrays)
        t0 = time.monotonic()
        info = MPI.Info.Create()
        info.Set("add-host", ",".join(new_hosts))
        info.Set("host", ",".join(h for h in new_hosts for _ in range(self.ntasks_per_node)))
        script = os.path.abspath(sys.argv[0])
        inter = self.comm.Spawn(
            sys.executable, [script, *sys.argv[1:]], maxprocs=nprocs, info=info, root=0
        )
        info.Free()
        t1 = time.monotonic()
        merged = inter.Merge(high=False)
        t2 = time.monotonic()
        old_size = self.size
        meta = {
            "seq": order.seq,
            "generation": self.generation,
            "src_parts": old_size,
            "arrays": {n: [list(s), str(np.dtype(arrays[n].dtype).str)] for n, s in shapes.items()},
            "state": dict(state) if self.rank == 0 else None,
            "phases_s": {"spawn": t1 - t0, "merge": t2 - t1},
            "reason": reason,
        }
        merged.bcast(meta, root=0)
        new = {
            name: redistribute_rows(
                merged, arrays[name], shapes[name], arrays[name].dtype, old_size, merged.size
            )
            for name in sorted(shapes)
        }
        t3 = time.monotonic()
        self._intercomms.append(inter)
        self.comm = merged
        self.generation += 1
        self.next_seq = order.seq + 1
        self.last_resize_s = {"spawn": t1 - t0, "merge": t2 - t1, "redistribute": t3 - t2}
        self._acknowledge(order.seq, "spawn", reason, self.last_resize_s)
        return new

    def _join_parent(self, parent: MPI.Intercomm) -> None:
        """In a spawned rank: join the merged communicator and receive rows and state."""
        t0 = time.monotonic()
        merged = parent.Merge(high=True)
        meta = merged.bcast(None, root=0)
        self.restored = {
            name: redistribute_rows(
                merged, None, tuple(shape), np.dtype(dtype), int(meta["src_parts"]), merged.size
            )
            for name, (shape, dtype) in sorted(meta["arrays"].items())
        }
        self._intercomms.append(parent)
        self.comm = merged
        self.state = dict(meta["state"] or {})
        self.generation = int(meta["generation"]) + 1
        self.next_seq = int(meta["seq"]) + 1
        self.resumed = True
        self.last_resize_s = {**meta["phases_s"], "redistribute": time.monotonic() - t0}
        self._acknowledge(int(meta["seq"]), "spawn", str(meta["reason"]), self.last_resize_s)

    # ------------------------------------------------------------------ restart path
    def _global_shapes(self, arrays: Mapping[str, np.ndarray]) -> dict[str, tuple[int, ...]]:
        names = sorted(arrays)
        if self.comm.allgather(names) != [names] * self.size:
            raise ValueError("resize_point: every rank must pass the same array names")
        local_rows = np.array([arrays[n].shape[0] for n in names], dtype=np.int64)
        rows = self.comm.allreduce(local_rows, op=MPI.SUM)
        return {n: (int(r), *arrays[n].shape[1:]) for n, r in zip(names, rows, strict=True)}

    def _checkpoint_and_exit(
        self,
        order: ResizeOrder,
        arrays: Mapping[str, np.ndarray],
        state: Mapping[str, Any],
        reason: str,
    ) -> None:
        assert self.jobdir is not None
        directory = self.jobdir.checkpoint
        t0 = time.monotonic()
        shapes = self._global_shapes(arrays)
        for name in sorted(shapes):
            save_rows(
                directory,
                name,
                self.comm,
                arrays[name],
                shapes[name],
                arrays[name].dtype,
                self.size,
            )
        save_state(directory, "state", self.comm, dict(state) if self.rank == 0 else None)
        checkpoint_s = time.monotonic() - t0
        if self.rank == 0:
            write_json_atomic(
                directory / MANIFEST,
                {
                    "seq": order.seq,
                    "launch": self.launch,
                    "generation": self.generation,
                    "arrays": sorted(shapes),
                    "reason": reason,
                    "checkpoint_s": checkpoint_s,
                    "requested_at": time.time(),
                },
            )
            self.jobdir.request_restart(
                {
                    "seq": order.seq,
                    "action": order.action.value,
                    "nodes": list(order.nodes),
                    "launch": self.launch,
                }
            )
        _say(self.comm, f"order {order.seq}: checkpointed in {checkpoint_s:.2f} s; restarting")
        self._disconnect()
        raise ResizeExit()

    def _disconnect(self) -> None:
        """Leave the merged communicator and disconnect from spawned or parent ranks."""
        self.comm.Barrier()
        if self._intercomms:
            self.comm.Free()
            for inter in self._intercomms:
                inter.Disconnect()
            self._intercomms.clear()
            self.comm = MPI.COMM_WORLD

    def _restore(self, manifest: Mapping[str, Any]) -> None:
        """In a restarted step: read this rank's rows and the state, acknowledge the order."""
        assert self.jobdir is not None
        t0 = time.monotonic()
        directory = self.jobdir.checkpoint
        self.restored = {
            name: load_rows(directory, name, self.comm, self.size) for name in manifest["arrays"]
        }
        self.state = load_state(directory, "state", self.comm)
        restore_s = time.monotonic() - t0
        self.generation = int(manifest["generation"]) + 1
        seq = int(manifest["seq"])
        self.next_seq = seq + 1
        self.resumed = True
        self.last_resize_s = {
            "checkpoint": float(manifest["checkpoint_s"]),
            "relaunch": max(0.0, time.time() - float(manifest["requested_at"]) - restore_s),
            "restore": restore_s,
        }
        failed = self.rank == 0 and self.jobdir.read_ack(seq, AckStatus.FAILED) is not None
        if not self.comm.bcast(failed, root=0):
            self._acknowledge(seq, "restart", str(manifest.get("reason", "")), self.last_resize_s)

    def _acknowledge(self, seq: int, strategy: str, reason: str, phases: dict[str, float]) -> None:
        """Tell the controller the job now runs on its new nodes (collective)."""
        assert self.jobdir is not None
        hosts = self.hosts()
        if self.rank == 0:
            nodes = tuple(dict.fromkeys(hosts))
            self.jobdir.write_ack(
                ResizeAck(
                    seq,
                    AckStatus.DONE,
                    nodes,
                    time.time(),
                    strategy=strategy,
                    reason=reason,
                    ranks=self.size,
                    phases_s=phases,
                )
            )
            self.jobdir.log_event(
                "resized",
                seq=seq,
                nodes=list(nodes),
                ranks=self.size,
                strategy=strategy,
                phases_s=phases,
            )
        timing = ", ".join(f"{k} {v:.2f} s" for k, v in phases.items())
        _say(
            self.comm,
            f"order {seq} done: {self.size} rank(s) on "
            f"{len(set(hosts))} node(s) ({strategy}; {timing})",
        )


def init() -> ElasticComm:
    """Start the elastic runtime in this process (after ``from mpi4py import MPI``).

    Returns an :class:`ElasticComm` whose ``resumed``, ``restored`` and ``state`` say whether
    this process continues an earlier size. Collective over the processes started together.

    Raises
    ------
    elastic_slurm.mpi_runtime.checkpoint.CheckpointError
        A restart found a damaged checkpoint (the message names the file).
    """
    job_dir = envvars.get_str("JOB_DIR")
    ec = ElasticComm(
        MPI.COMM_WORLD,
        jobdir=JobDir(Path(job_dir)) if job_dir else None,
        launch=envvars.get_int("LAUNCH", 0),
        launch_host=envvars.get_str("LAUNCH_HOST"),
        ntasks_per_node=envvars.get_int("NTASKS_PER_NODE", 1),
        join=envvars.get_str("JOIN"),
    )
    parent = MPI.Comm.Get_parent()
    if parent != MPI.COMM_NULL:
        ec._join_parent(parent)
        return ec
    if ec.jobdir is not None and ec.launch > 0:
        manifest = None
        if ec.rank == 0:
            path = ec.jobdir.checkpoint / MANIFEST
            if path.exists():
                manifest = json.loads(path.read_text())
                if int(manifest.get("launch", -1)) != ec.launch - 1:
                    manifest = None
        manifest = ec.comm.bcast(manifest, root=0)
        if manifest is not None:
            ec._restore(manifest)
    return ec
