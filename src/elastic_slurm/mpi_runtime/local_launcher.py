"""The job launcher of :mod:`.launcher` on one machine, for ``elastic-slurm try``.

No Slurm: the ranks sit on virtual nodes ``local1..localN`` (:mod:`.local`) and every
generation is a plain ``mpirun`` on this machine, oversubscribed. Restarts go through the same
waiting successor and checkpoint as in a Slurm job, spawns through the same
``MPI_Comm_spawn``; each generation's standard output and error go to files in the run's
job directory.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from elastic_slurm import envvars
from elastic_slurm.model.resize_order import AckStatus, ResizeAck
from elastic_slurm.mpi_runtime import handover
from elastic_slurm.mpi_runtime.channel import FileChannel
from elastic_slurm.mpi_runtime.launcher import (
    Launcher,
    _Generation,
    program_argv,
    without_mpi_env,
)
from elastic_slurm.mpi_runtime.local import virtual_nodes
from elastic_slurm.protocol.jobdir import JobDir

#: Open MPI settings for many ranks on one small machine (each unless the user set it).
LOCAL_MPI_ENV = {
    "OMPI_MCA_rmaps_base_oversubscribe": "1",
    "OMPI_MCA_mpi_yield_when_idle": "1",
    "OMPI_MCA_btl_vader_single_copy_mechanism": "none",  # CMA is often refused in containers
}
#: ``ELASTIC_SLURM_*`` variables of a job or controller that must not reach a local run.
_JOB_VARS = (
    "CONTROLLER",
    "JOB_SECRET",
    "JOB_ID",
    "JOB_DIR",
    "LAUNCH",
    "LAUNCH_HOST",
    "SUCCESSOR",
    "HANDOVER_DIR",
    "HANDOVER_TOKEN",
    "LOCAL_TRY",
    "JOIN",
)


def local_env(
    base: Mapping[str, str], *, point_timeout_s: float, as_root: bool | None = None
) -> dict[str, str]:
    """The environment of a local run: ``base`` without any job's or MPI runtime's variables.

    >>> env = local_env({"SLURM_JOB_ID": "7", "HOME": "/h"}, point_timeout_s=5, as_root=False)
    >>> sorted(k for k in env if not k.startswith("OMPI_"))
    ['ELASTIC_SLURM_ORDER_POLL_S', 'ELASTIC_SLURM_RESIZE_POINT_TIMEOUT_S', 'HOME']
    """
    # the user's Open MPI settings stay (OMPI_MCA_btl_tcp_if_include...), not a runtime's own
    mca = {
        k: v
        for k, v in base.items()
        if k.startswith(("OMPI_MCA_", "OMPI_ALLOW_"))
        and not k.startswith(("OMPI_MCA_ess", "OMPI_MCA_orte_", "OMPI_MCA_pmix"))
    }
    env = {
        k: v
        for k, v in {**without_mpi_env(base), **mca}.items()
        if not k.startswith("SLURM_") and not any(k == envvars.PREFIX + name for name in _JOB_VARS)
    }
    for key, value in LOCAL_MPI_ENV.items():
        env.setdefault(key, value)
    if as_root if as_root is not None else os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    env.update(envvars.names(resize_point_timeout_s=point_timeout_s, order_poll_s=0.01))
    return env


class LocalLauncher(Launcher):
    """The job launcher on this machine alone: virtual nodes, plain ``mpirun``.

    Parameters
    ----------
    program
        The application and its arguments (``.py`` scripts run with this Python).
    ranks
        The starting size.
    jobdir
        A fresh directory for this run (orders, checkpoints, records, outputs).
    env
        The environment for ``mpirun`` (:func:`local_env` plus the run's variables).
    timeout_s
        Seconds after which every ``mpirun`` of the run is killed (its process group).
    """

    command = "elastic-slurm try"

    def __init__(
        self,
        program: Sequence[str],
        *,
        ranks: int,
        jobdir: JobDir,
        env: Mapping[str, str],
        timeout_s: float,
    ) -> None:
        # Launcher.__init__ needs a Slurm job; set up what its loop uses instead
        self.env = dict(env)
        # a job id of its own (not Slurm's): the restart handover's /dev/shm directory is
        # named after it, so that local runs side by side do not meet there
        self.job_id = 10**9 + secrets.randbelow(10**9)
        self.program = program_argv(program)  # python -m mpi4py: one rank's error ends the run
        self.ntasks_per_node = 1
        self.resize_timeout_s = 30.0
        self.jobdir = jobdir
        self.channel = FileChannel(jobdir)
        self.host = socket.gethostname()
        self.cpus_per_node = 1
        self.mpirun = shutil.which("mpirun", path=self.env.get("PATH")) or "mpirun"
        self._nodes = tuple(virtual_nodes(ranks))
        self.outputs: list[tuple[int, Path, Path]] = []
        self._procs: list[subprocess.Popen[bytes]] = []
        self._timeout_s = timeout_s
        self.timed_out = False

    def current_nodes(self) -> tuple[str, ...]:
        """The virtual nodes of the running generation."""
        return self._nodes

    def _argv(self, nodes: Sequence[str]) -> list[str]:
        """``mpirun`` with a generation's ranks all on this machine (oversubscribed)."""
        count = len(nodes) * self.ntasks_per_node
        return [
            self.mpirun,
            "-n",
            str(count),
            "--host",
            f"{self.host}:{count}",
            "--oversubscribe",
            "--bind-to",
            "none",
            *self.program,
        ]

    def _launch_env(self, nodes: Sequence[str], generation: int) -> dict[str, str]:
        """The run's environment as given (:func:`local_env`): no job to resize it for."""
        return dict(self.env)

    def _popen(
        self, argv: list[str], env: dict[str, str], generation: int
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` with its output in the run's directory, in a session of its own."""
        out = self.jobdir.path / f"generation-{generation}.out"
        err = self.jobdir.path / f"generation-{generation}.err"
        with open(out, "wb") as fo, open(err, "wb") as fe:
            proc = subprocess.Popen(argv, env=env, stdout=fo, stderr=fe, start_new_session=True)
        self.outputs.append((generation, out, err))
        self._procs.append(proc)
        return proc

    def _relaunch_after_outage(self, gen: _Generation, rc: int) -> bool:
        """Never: no Slurm here, so no outage to start a generation again after."""
        return False

    def _wait_vacated(self, leaving: Sequence[str]) -> None:
        """Nothing to wait for: an ``mpirun`` that ended has left this machine's "nodes"."""

    def _hand_over(self, request: Mapping[str, object], nodes: Sequence[str]) -> None:
        super()._hand_over(request, nodes)
        self._nodes = tuple(str(n) for n in request["nodes"])  # type: ignore[attr-defined]

    def _follow(self, request: Mapping[str, object], nodes: Sequence[str]) -> tuple[str, ...]:
        seq = int(str(request["seq"]))
        target = tuple(str(n) for n in request["nodes"])  # type: ignore[attr-defined]
        leaving = [n for n in self._nodes if n not in target]
        if str(request["action"]) == "shrink" and leaving:
            self.channel.ack(
                ResizeAck(seq, AckStatus.VACATED, tuple(leaving), time.time(), strategy="restart")
            )
        self._nodes = target
        return target

    def _kill_all(self) -> None:
        self.timed_out = True
        for proc in self._procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def run(self) -> int:
        """Run every generation to the end (or the timeout); the last ``mpirun``'s status."""
        timer = threading.Timer(self._timeout_s, self._kill_all)
        timer.daemon = True
        timer.start()
        try:
            return self._run()
        finally:
            timer.cancel()
            self._kill_all_quietly()
            handover.drop_all(self.job_id)

    def _kill_all_quietly(self) -> None:
        flag = self.timed_out
        self._kill_all()
        self.timed_out = flag
