"""The restart join strategy: checkpoint, end, and go on in the next generation.

Followed for every shrink, and for a grow where :func:`~.probe.choose_join` does not allow
spawning. While the ranks compute, rank 0's watcher thread has the launcher start the next
generation on the new node set, where it waits (:meth:`RestartJoin.prepare`,
:mod:`.handover`). At the resize point the ranks save arrays and state (to node-local memory
that both generations see, else to the job directory), write the manifest and end
(:class:`~.session.ResizeExit`); the waiting generation's ``init()`` restores them
(:meth:`RestartJoin.arrive`). On the sequential path the launcher starts the next generation
only after the old one ended.
"""

from __future__ import annotations

import json
import logging
import math
import os
import pickle
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from mpi4py import MPI

from elastic_slurm import envvars
from elastic_slurm.errors import JobInputError
from elastic_slurm.model.resize_order import AckStatus, ResizeOrder
from elastic_slurm.mpi_runtime import handover
from elastic_slurm.mpi_runtime.checkpoint import (
    CheckpointError,
    load_rows,
    load_state,
    on_rank0,
    save_rows,
    save_state,
)
from elastic_slurm.mpi_runtime.data import Block, distribution_from_json
from elastic_slurm.mpi_runtime.probe import RESTART
from elastic_slurm.mpi_runtime.redistribute import move_array
from elastic_slurm.mpi_runtime.resize_paths import SEQUENTIAL
from elastic_slurm.mpi_runtime.say import say
from elastic_slurm.mpi_runtime.state import ResizeState
from elastic_slurm.protocol.jobdir import write_bytes_atomic, write_json_atomic
from elastic_slurm.waiting import DeadlineExceeded, wait_for

if TYPE_CHECKING:
    from elastic_slurm.mpi_runtime.session import ElasticComm

log = logging.getLogger("elastic_slurm.mpi_runtime")

#: In the checkpoint directory: what every rank's ``pack`` returned (``ec.on_resize``).
HOOKS_FILE = "hooks.pickle"


class RestartJoin:
    """Resize ``ec`` by restarting it on the new node set (the :class:`~.probe.Join` interface)."""

    strategy = RESTART

    def __init__(self, ec: ElasticComm) -> None:
        self.ec = ec
        self._successor_s: float | None = None  # how long the successor took to be ready
        self._launch_s: float | None = None  # of which: until its rank 0 process ran
        self._memory: tuple[Path, str] | None = None  # where the successor sees rank 0's token

    # ------------------------------------------------------------------ while computing
    def prepare(self, order: ResizeOrder) -> str | None:
        """Rank 0's watcher thread: have the launcher start the next generation; why not.

        Waits until the successor is ready (it then waits for the handover) while the ranks
        go on computing. ``None`` when it is ready; otherwise the reason, and the order is
        failed (by the launcher, after it stopped the successor).
        """
        ec = self.ec
        jobdir = ec.jobdir
        assert jobdir is not None
        t0 = time.monotonic()
        memory: tuple[Path, str] | None = None
        if envvars.get_str("HANDOVER_MEMORY", "1") != "0":
            job_id = envvars.get_int("JOB_ID", 0) or int(os.environ.get("SLURM_JOB_ID", "0"))
            where = handover.memory_dir(job_id, order.seq)
            try:
                memory = (where, handover.make_token(where))
            except OSError as exc:
                log.info("no memory checkpoint (%s): the shared filesystem is used", exc)

        def launcher_failed() -> bool:
            return ec._launcher_failed(order.seq)

        timeout = envvars.get_float("SUCCESSOR_TIMEOUT_S", 120.0)
        asked = False  # the launcher may have started a successor: stop it if not followed
        try:
            handover.request_successor(
                jobdir,
                order.seq,
                order.action.value,
                list(order.nodes),
                ec.launch,
                memory,
                by_job=order.by_job,
            )
            asked = True
            why, shared = handover.wait_ready(jobdir, order.seq, timeout, failed=launcher_failed)
        except (OSError, JobInputError) as exc:  # the request not written (a full disk)
            why, shared = f"the next generation could not be asked for: {exc}", False
        self._successor_s = time.monotonic() - t0
        started = handover.ready_info(jobdir, order.seq).get("process_started")
        self._launch_s = (
            max(0.0, float(started) - (time.time() - self._successor_s))
            if isinstance(started, (int, float)) and why is None
            else None
        )
        if why is not None and asked and not launcher_failed():
            # the launcher stops the successor, then fails the order: the added nodes are
            # vacated before the controller (or, by_job, the launcher) gives them back. Its
            # wait for the steps to leave takes up to 30 s: wait longer, or rank 0 would give
            # them back too
            try:
                handover.cancel(jobdir, order.seq, why)
                wait_for(
                    launcher_failed,
                    timeout_s=60.0,
                    what=f"the launcher to fail order {order.seq}",
                    interval_s=0.05,
                    max_interval_s=0.05,
                )
            except (DeadlineExceeded, JobInputError):
                pass  # no launcher answering (or no cancel written): refused from here
        self._memory = memory if shared and why is None else None
        if self._memory is None and memory is not None:
            handover.drop(memory[0])
        return why

    # ------------------------------------------------------------------ old generation
    def follow(self, order: ResizeOrder, hosts: list[str], reason: str) -> bool:
        """Save arrays and state, tell the launcher, end the process (collective).

        Raises
        ------
        elastic_slurm.mpi_runtime.session.ResizeExit
            Always: let it end the process (the next generation goes on).
        """
        ec = self.ec
        packed = ec._pack()
        self._checkpoint_and_exit(order, packed, reason, successor=ec._path != SEQUENTIAL)
        raise AssertionError("unreachable")  # pragma: no cover

    def _checkpoint_and_exit(
        self, order: ResizeOrder, packed: list[Any] | None, reason: str, successor: bool
    ) -> None:
        """Save, write the manifest, ask for the restart, end (``ResizeExit``).

        With ``successor``, the next generation already waits (:mod:`.handover`) and starts
        computing as soon as the manifest is written.
        """
        from elastic_slurm.mpi_runtime.session import ResizeExit

        ec = self.ec
        assert ec.jobdir is not None
        directory = ec.jobdir.checkpoint
        if ec._local is not None:
            ec._local.before(ec.comm, ec._arrays.values(), order.seq)
        t0 = time.monotonic()
        # a waiting successor reads the files at once: visible is enough, durable is not needed
        durable = not successor
        if successor:
            directory = self._handover_dir(directory)
        metas = []
        for arr in ec._arrays.values():
            meta = arr.meta()
            rows = arr.local
            if not isinstance(arr.dist, Block):  # files hold block rows
                rows = move_array(ec.comm, rows, meta, ec.size, ec.size, arr.dist, Block())
            save_rows(
                directory,
                arr.name,
                ec.comm,
                rows,
                arr.global_shape,
                arr.dtype,
                ec.size,
                fsync=durable,
            )
            metas.append(meta)
        save_state(directory, "state", ec.comm, ec.state if ec.rank == 0 else None, fsync=durable)
        checkpoint_s = time.monotonic() - t0
        jobdir = ec.jobdir

        def publish() -> None:  # rank 0: what the next generation and the launcher read
            if packed is not None:
                write_bytes_atomic(directory / HOOKS_FILE, pickle.dumps(packed))
            else:
                (directory / HOOKS_FILE).unlink(missing_ok=True)
            write_json_atomic(
                jobdir.checkpoint / handover.MANIFEST,
                {
                    "seq": order.seq,
                    "launch": ec.launch,
                    "generation": ec.generation,
                    "arrays": metas,
                    "reason": reason,
                    "phases_s": order.phases_s,
                    "checkpoint_s": checkpoint_s,
                    "requested_at": time.time(),
                    "paused_at": ec._paused_at,
                    "directory": str(directory),
                    "successor_s": self._successor_s,
                    "successor_launch_s": self._launch_s,
                },
            )
            jobdir.request_restart(
                {
                    "seq": order.seq,
                    "action": order.action.value,
                    "nodes": list(order.nodes),
                    "launch": ec.launch,
                    "handover": successor,
                    "by_job": order.by_job,  # the launcher gives a shrink's nodes back
                }
            )

        on_rank0(ec.comm, f"order {order.seq}: the restart manifest", publish)
        where = "" if directory == ec.jobdir.checkpoint else f" to {directory}"
        say(
            ec.comm,
            f"order {order.seq}: checkpointed{where} in {checkpoint_s:.2f} s; "
            + ("the next generation takes over" if successor else "restarting"),
        )
        if successor:
            # end only once the successor has read the checkpoint, not beside its restore;
            # then free the memory it was in (this rank has nothing else to do). Before the
            # disconnect: ranks an earlier spawn added share ec.comm until then, so one rank 0
            # speaks for all the old ranks
            nbytes = sum(
                math.prod(a.global_shape) * np.dtype(a.dtype).itemsize for a in ec._arrays.values()
            )
            took, waited_s = handover.linger(ec.comm, directory, order.seq, nbytes)
            if ec.rank == 0:
                ec._log_event("handed_over", seq=order.seq, took=took, waited_s=round(waited_s, 3))
                if took and directory != ec.jobdir.checkpoint:
                    handover.drop(directory)
        ec._spawn.disconnect()  # from ranks an earlier spawn added, if any
        ec._close_watcher()  # what it still has to send goes before the process ends
        raise ResizeExit()

    def _handover_dir(self, shared: Path) -> Path:
        """Where to checkpoint for a waiting successor (collective).

        Memory if every rank of both generations sees it and it has room, else ``shared``.
        """
        ec = self.ec
        memory = ec.comm.bcast(self._memory if ec.rank == 0 else None, root=0)
        if memory is None:
            return shared
        nbytes = sum(a.local.nbytes for a in ec._arrays.values())
        ok = handover.sees_token(*memory) and handover.has_room(memory[0], nbytes)
        if ec.comm.allreduce(ok, op=MPI.LAND):
            return Path(memory[0])
        if ec.rank == 0:
            handover.drop(memory[0])
        return shared

    # ------------------------------------------------------------------ next generation
    def arrive(self) -> bool:
        """In a generation after the first: restore what the one before saved (collective).

        A successor started early waits here for the handover; a generation started after
        the one before ended reads its manifest. Whether data was restored.

        Raises
        ------
        elastic_slurm.mpi_runtime.checkpoint.CheckpointError
            A damaged checkpoint (the message names the file).
        """
        ec = self.ec
        if ec.jobdir is None or ec.launch <= 0:
            return False
        manifest_path = ec.jobdir.checkpoint / handover.MANIFEST
        successor = envvars.get_int("SUCCESSOR", 0)
        if successor:
            # started early, while the generation before still computes: wait for its handover
            memory = handover.sees_token(
                envvars.get_str("HANDOVER_DIR"), envvars.get_str("HANDOVER_TOKEN")
            )
            memory = ec.comm.allreduce(memory, op=MPI.LAND)
            jobdir = ec.jobdir
            on_rank0(
                ec.comm,
                "the successor's ready signal",
                lambda: handover.signal_ready(jobdir, successor, ec.launch, memory),
            )
            manifest = handover.await_manifest(
                ec.comm,
                manifest_path,
                ec.launch - 1,
                successor,
                timeout_s=envvars.get_float("HANDOVER_TIMEOUT_S", 3600.0),
            )
        else:

            def read() -> dict[str, Any] | None:  # rank 0: the generation before's manifest
                if not manifest_path.exists():
                    return None
                try:
                    found = json.loads(manifest_path.read_text())
                    if int(found.get("launch", -1)) != ec.launch - 1:
                        return None
                except (ValueError, TypeError, AttributeError) as exc:
                    raise CheckpointError(f"{manifest_path}: not a manifest: {exc}") from exc
                return found  # type: ignore[no-any-return]

            manifest = on_rank0(ec.comm, "the restart manifest", read)
            if manifest is None:
                return False
        self._restore(manifest)
        return True

    def _restore(self, manifest: dict[str, Any]) -> None:
        """Read the arrays and state, acknowledge the order."""
        ec = self.ec
        assert ec.jobdir is not None
        t0 = time.monotonic()
        directory = Path(manifest.get("directory") or ec.jobdir.checkpoint)
        for meta in manifest["arrays"]:
            rows = load_rows(directory, meta["name"], ec.comm, ec.size)
            dist = distribution_from_json(meta["dist"])
            if not isinstance(dist, Block):
                rows = move_array(ec.comm, rows, meta, ec.size, ec.size, Block(), dist)
            ec._restored[meta["name"]] = (meta, rows)
        if ec._local is not None:
            ec._local.restored(ec.comm, ec._restored, int(manifest["seq"]))
        ec.state = ResizeState(load_state(directory, "state", ec.comm))

        def hooks() -> Any:  # rank 0: what on_resize hooks packed, if any
            path = directory / HOOKS_FILE
            return pickle.loads(path.read_bytes()) if path.exists() else None

        packed = on_rank0(ec.comm, "the on_resize hooks' state", hooks)
        restore_s = time.monotonic() - t0
        if ec.rank == 0 and envvars.get_int("SUCCESSOR", 0):
            # every rank has read it (the broadcast above): the old ranks end, and the old
            # rank 0 removes the memory checkpoint (off this generation's critical path)
            handover.signal_took(directory, int(manifest["seq"]))
        elif ec.rank == 0 and directory != ec.jobdir.checkpoint:
            handover.drop(directory)
        ec.generation = int(manifest["generation"]) + 1
        seq = int(manifest["seq"])
        ec.next_seq = seq + 1
        ec.resumed = True
        ec.last_resize_s = {
            **dict(manifest.get("phases_s") or {}),
            "checkpoint": float(manifest["checkpoint_s"]),
            "relaunch": max(0.0, time.time() - float(manifest["requested_at"]) - restore_s),
            "restore": restore_s,
        }
        if manifest.get("successor_s") is not None:  # overlapped with computing
            ec.last_resize_s["successor"] = float(manifest["successor_s"])
        if manifest.get("successor_launch_s") is not None:  # of which: mpirun, daemons
            ec.last_resize_s["successor_launch"] = float(manifest["successor_launch_s"])
        ec._packed = packed
        ec._begin_voting()  # before the acknowledgement: it then goes through the watcher
        if manifest.get("paused_at"):  # the new generation computes from here on
            ec.last_resize_s["pause"] = max(0.0, time.time() - float(manifest["paused_at"]))
        jobdir = ec.jobdir
        failed = on_rank0(
            ec.comm,
            f"order {seq}'s acknowledgement",
            lambda: jobdir.read_ack(seq, AckStatus.FAILED) is not None,
        )
        if not failed:
            ec._acknowledge(seq, "restart", str(manifest.get("reason", "")), ec.last_resize_s)
