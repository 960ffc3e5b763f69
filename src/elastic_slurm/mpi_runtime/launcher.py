"""``elastic-slurm run APP [ARGS]``: run an elastic MPI application inside its Slurm job.

The launcher runs in the job's batch step, on the batch host. It starts the application with
Open MPI's ``mpirun`` on the job's current nodes, set up so that the application can spawn ranks
onto nodes Slurm adds later (our :mod:`.rsh_agent`, no tree spawn, daemons kept in Slurm steps;
SLURM-FACTS.md). When the application leaves for a restart at another size (it checkpointed
and wrote ``restart.json``), the launcher:

* for a shrink, checks that no step of the job runs on the leaving nodes any more, reports them
  vacated, and waits until Slurm shows the job on the nodes it keeps (the controller gives the
  others back meanwhile);
* for an expansion, reads the job's nodes from Slurm (already grown);

then refreshes the job's Slurm environment and starts the next generation, which resumes from
the checkpoint. If Slurm does not shrink the job within the resize timeout, the application is
restarted on the nodes it still has and the order is reported failed: nothing is lost.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from elastic_slurm import envvars, mca
from elastic_slurm.adapter import commands
from elastic_slurm.adapter.backend import SlurmBackend
from elastic_slurm.adapter.parse import slurmctld_up
from elastic_slurm.errors import ElasticSlurmError, JobInputError, ResizeError, SlurmCommandError
from elastic_slurm.model.resize_order import AckStatus, ResizeAck
from elastic_slurm.model.snapshot import NodeState
from elastic_slurm.mpi_runtime import handover
from elastic_slurm.mpi_runtime.channel import channel_for
from elastic_slurm.mpi_runtime.preflight import check_hosts
from elastic_slurm.mpi_runtime.resize_paths import OVERLAP, resize_path
from elastic_slurm.mpi_runtime.slurm_env import (
    holders_text,
    job_slurm,
    resized_env,
)
from elastic_slurm.protocol.jobdir import JobDir
from elastic_slurm.waiting import DeadlineExceeded, wait_for

log = logging.getLogger(__name__)


def program_argv(program: Sequence[str], python: str = sys.executable) -> list[str]:
    """The command for the ranks: a Python script runs under ``python -m mpi4py``.

    Anything else runs as it is.

    Under ``-m mpi4py`` an exception no rank catches ends the whole run (``MPI_Abort``):
    otherwise the other ranks wait for the failed one in their next collective, and the job
    holds its nodes until its time limit (mpi4py's documentation, "Command line").

    >>> program_argv(["app.py", "-n", "3"], python="/venv/bin/python")
    ['/venv/bin/python', '-m', 'mpi4py', 'app.py', '-n', '3']
    >>> program_argv(["python3", "app.py"])
    ['python3', '-m', 'mpi4py', 'app.py']
    """
    if not program:
        raise ValueError("no application given: elastic-slurm run APP [ARGS]")
    if program[0].endswith(".py"):
        return [python, "-m", "mpi4py", *program]
    if os.path.basename(program[0]).startswith("python") and program[1:2]:
        if program[1].endswith(".py"):
            return [program[0], "-m", "mpi4py", *program[1:]]
    return list(program)


def mpirun_argv(nodes: Sequence[str], ntasks_per_node: int, program: Sequence[str]) -> list[str]:
    """``mpirun`` with ``ntasks_per_node`` ranks on each of ``nodes``, in node order.

    >>> mpirun_argv(["n1", "n2"], 1, ["python", "app.py"])
    ['mpirun', '-n', '2', '--host', 'n1:1,n2:1', '--bind-to', 'none', 'python', 'app.py']
    """
    if not nodes or ntasks_per_node < 1:
        raise ValueError(
            f"mpirun needs nodes and ranks per node, got {list(nodes)} x {ntasks_per_node}"
        )
    hosts = ",".join(f"{n}:{ntasks_per_node}" for n in nodes)
    return [
        "mpirun",
        "-n",
        str(len(nodes) * ntasks_per_node),
        "--host",
        hosts,
        "--bind-to",
        "none",
        *program,
    ]


def mpirun_env(python: str = sys.executable, as_root: bool | None = None) -> dict[str, str]:
    """Open MPI settings that make spawning onto nodes added to the job work.

    The agent starts each daemon in a Slurm step on its node (so the daemon lands on the right
    node even for nodes added after mpirun started); no tree spawn (each daemon is started from
    mpirun's node); daemons stay attached to their step, so Slurm tracks and ends them.

    Open MPI 4.1 (ORTE) reads the ``OMPI_MCA_`` variables; 5 and 6 (PRRTE) read the ``PRTE_MCA_``
    ones, and ignore each other's. For PRRTE the same agent is plm ``ssh``'s; besides,
    ``ras=^slurm`` makes the ``--host`` list (not Slurm's) the daemons' allocation and
    ``prte_elastic_mode`` lets a spawn add hosts to it: PRRTE 5 (forky) refuses ``PMIX_ADD_HOST``
    otherwise ("this DVM's allocation is owned by a resource manager"), and PRRTE 3's own
    Slurm launcher (trixie) failed to start daemons on added nodes (seen here).
    """
    env = {
        "OMPI_MCA_plm": "rsh",
        "OMPI_MCA_plm_rsh_agent": f"{python} -m elastic_slurm.mpi_runtime.rsh_agent",
        "OMPI_MCA_plm_rsh_no_tree_spawn": "1",
        "OMPI_MCA_orte_leave_session_attached": "1",
        "PRTE_MCA_plm": "ssh",
        "PRTE_MCA_plm_ssh_agent": f"{python} -m elastic_slurm.mpi_runtime.rsh_agent",
        "PRTE_MCA_plm_ssh_no_tree_spawn": "1",
        "PRTE_MCA_prte_elastic_mode": "1",
        "PRTE_MCA_ras": "^slurm",
    }
    if as_root if as_root is not None else os.geteuid() == 0:
        env["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
        env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    return env


#: Variables an MPI process sets for itself (an Open MPI singleton started by the process that
#: submitted the job sets ``OMPI_MCA_ess=singleton`` and ``PMIX_*``). Inherited by ``mpirun``
#: through sbatch's ``--export=ALL``, they make it exit at once with status 1 and no message
#: (seen here), so the launcher never passes them on.
MPI_ENV_PREFIXES = ("OMPI_", "PMIX_", "PMI_", "OPAL_", "ORTE_", "PRTE_")

#: How many times in a job a generation that failed before any of its ranks started, while
#: slurmctld did not answer, is launched again (see :meth:`Launcher._relaunch_after_outage`).
MAX_RELAUNCHES = 2

#: Only a generation that failed this soon after its launch (seconds) is launched again: srun
#: gives up on an unreachable slurmctld within a minute or so (seen: mpirun failed after 34 s).
RELAUNCH_WITHIN_S = 180.0

#: How old (seconds) Slurm's last answer on the job's nodes may be to tell a launch's agents
#: which allocation holds each node (:meth:`Launcher.holders`); older, it is asked again.
HOLDERS_FRESH_S = 5.0


def without_mpi_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without variables of an MPI runtime the job's submitter may have been part of.

    >>> without_mpi_env({"OMPI_MCA_ess": "singleton", "PMIX_RANK": "0", "HOME": "/root"})
    {'HOME': '/root'}
    """
    return {k: v for k, v in env.items() if not k.startswith(MPI_ENV_PREFIXES)}


class _Terminated(Exception):
    """SIGTERM arrived (the job is being cancelled or reached its time limit)."""


def _terminated(signum: int, frame: object) -> None:
    raise _Terminated(signum)


@dataclass(frozen=True)
class _Generation:
    proc: subprocess.Popen[bytes]
    nodes: tuple[str, ...]
    generation: int
    argv: list[str]
    t0: float
    successor: int = 0  # the order whose handover it waits for (0: started after one)
    by_job: bool = False  # that order is a service controller's: the job gives nodes back


STOP_GRACE_S = 5.0
"""Seconds a generation has to end after SIGTERM before SIGKILL (Slurm's ``KillWait`` here)."""


def _session(sid: int) -> list[int]:
    """The processes of session ``sid`` that have not ended (zombies left out), from ``/proc``."""
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read(4096)  # one line, kernel-written (its name at most 64 bytes)
        except OSError:  # it ended meanwhile
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # state ppid pgrp session ... (proc(5))
        if len(fields) > 3 and fields[0] != b"Z" and fields[3] == str(sid).encode():
            pids.append(int(entry.name))
    return pids


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End a generation: its ``mpirun`` and what it started, its daemons' ``srun`` included.

    SIGTERM to every process of ``mpirun``'s session (see ``Launcher._popen``), SIGKILL after
    :data:`STOP_GRACE_S` seconds; returns when none is left (at most about two grace
    periods). ``mpirun`` can end on SIGTERM before the ``srun`` it just started for a daemon
    (:mod:`.rsh_agent`, in a process group of its own) has created its step: that ``srun``
    would create it afterwards, on a node the job may already have given back (Slurm then
    kills the step there, and can drain the node).
    """

    def ended() -> bool:
        return proc.poll() is not None and not _session(proc.pid)

    for signum in (signal.SIGTERM, signal.SIGKILL):
        if ended():
            return
        members = _session(proc.pid)
        for pid in members:
            try:
                os.kill(pid, signum)
            except (ProcessLookupError, PermissionError):
                pass
        if proc.pid not in members and proc.poll() is None:  # not leading a session: alone
            proc.send_signal(signum)
        try:
            wait_for(
                ended,
                timeout_s=STOP_GRACE_S,
                what="mpirun to end",
                interval_s=0.02,
                max_interval_s=0.1,
            )
            return
        except DeadlineExceeded:
            continue
    log.error("processes of the stopped mpirun (session %d) stay: %s", proc.pid, _session(proc.pid))


class Launcher:
    """Runs generations of an application in a job until it ends.

    Parameters
    ----------
    program
        The application and its arguments.
    ntasks_per_node
        Ranks per node.
    env
        The job's environment (``SLURM_JOB_ID`` is required).
    slurm
        Slurm access from inside the job.
    resize_timeout_s
        How long (seconds) to wait for Slurm to shrink the job after it vacated nodes.
    """

    #: The command its messages are signed with.
    command = "elastic-slurm run"

    def __init__(
        self,
        program: Sequence[str],
        *,
        ntasks_per_node: int = 1,
        env: Mapping[str, str] | None = None,
        slurm: SlurmBackend | None = None,
        resize_timeout_s: float | None = None,
    ) -> None:
        self.env = dict(os.environ if env is None else env)
        job_id = self.env.get("SLURM_JOB_ID")
        if not job_id:
            raise ElasticSlurmError(
                "elastic-slurm run must run inside a Slurm job (SLURM_JOB_ID is not set): "
                "submit it with sbatch, or start it from salloc"
            )
        if shutil.which("mpirun", path=self.env.get("PATH")) is None:
            raise ElasticSlurmError("mpirun is not installed: install Open MPI (openmpi-bin)")
        self.job_id = int(job_id)
        self.program = program_argv(program)
        self.ntasks_per_node = ntasks_per_node
        self.slurm = slurm or job_slurm(self.env)
        self.resize_timeout_s = resize_timeout_s or envvars.get_float(
            "RESIZE_TIMEOUT_S", 120.0, self.env
        )
        path = envvars.get_str("JOB_DIR", None, self.env)
        self.jobdir = JobDir(Path(path)) if path else JobDir.for_job(os.getcwd(), self.job_id)
        secret = envvars.get_str("JOB_SECRET", None, self.env)
        stored = self.jobdir.read_secret() if secret else None
        if stored is not None and stored != secret:
            # an earlier job's, with the same id (Slurm numbers from 1 again after a reset of
            # its state): its orders and checkpoint are not this job's (a requeued job keeps
            # its secret, and its directory)
            moved = self.jobdir.retire()
            print(
                f"{self.command}: {self.jobdir.path} belonged to an earlier job with id "
                f"{self.job_id}; moved it to {moved}",
                file=sys.stderr,
                flush=True,
            )
        if secret and stored != secret:
            # what the controller checks messages against (mode 0600: only the job's user)
            self.jobdir.write_secret(secret)
        self.channel = channel_for(self.jobdir, self.env)
        self.host = os.uname().nodename
        self.cpus_per_node = max(1, int(self.env.get("SLURM_CPUS_ON_NODE", "1")))
        self._helpers_cancelled = False  # ``_cancel_helpers`` has run (the job is ending)
        self._relaunches = 0  # generations launched again after a slurmctld outage
        self._held: tuple[float, dict[str, int]] = (-math.inf, {})  # Slurm's last answer

    def current_nodes(self) -> tuple[str, ...]:
        """The job's nodes as Slurm reports them now (siblings' included), batch host first.

        Right after a node-list shrink the controller makes slurmctld reconfigure (a Slurm
        22.05 workaround, docs/slurm-findings.md), and for a moment the job may not be listed
        (seen once in CI); so an empty answer is asked again for up to 10 s.

        Raises
        ------
        ElasticSlurmError
            Slurm still does not list the job as running after 10 s.
        """
        try:
            held = wait_for(
                lambda: self.slurm.elastic_nodes(self.job_id),
                timeout_s=10.0,
                what=f"Slurm to list job {self.job_id}",
                interval_s=0.2,
                max_interval_s=1.0,
            )
        except DeadlineExceeded as exc:
            raise ElasticSlurmError(
                f"Slurm no longer reports job {self.job_id} as running"
            ) from exc
        self._held = (time.monotonic(), dict(held))
        return (self.host, *[n for n in held if n != self.host])

    def holders(self, nodes: Sequence[str]) -> dict[str, int]:
        """The allocation (job id) holding each of ``nodes``, for the launch agents.

        Slurm's answer to the last :meth:`current_nodes` if it is younger than
        :data:`HOLDERS_FRESH_S` and names every node; else Slurm is asked once here (one
        query for the launch instead of one per daemon). Nodes Slurm does not list are left
        out, and an outage gives an empty map: the agents then ask Slurm themselves.
        """
        at, held = self._held
        if time.monotonic() - at > HOLDERS_FRESH_S or not set(nodes) <= set(held):
            try:
                held = self.slurm.elastic_nodes(self.job_id)
            except ElasticSlurmError as exc:
                log.warning("could not ask Slurm which allocation holds %s: %s", nodes, exc)
                return {}
            self._held = (time.monotonic(), dict(held))
        return {n: held[n] for n in nodes if n in held}

    def _launch_env(self, nodes: Sequence[str], generation: int) -> dict[str, str]:
        """The job's environment for ``mpirun`` on ``nodes`` (before the runtime's variables)."""
        env = resized_env(
            without_mpi_env(self.env), nodes, self.cpus_per_node, self.ntasks_per_node
        )
        env.update(mca.passed_on(self.env))  # the site's and the job spec's MPI parameters
        env.update(mpirun_env())
        env.update(envvars.names(node_holders=holders_text(self.holders(nodes))))
        return env

    def _argv(self, nodes: Sequence[str]) -> list[str]:
        """The ``mpirun`` command of a generation on ``nodes``."""
        return mpirun_argv(nodes, self.ntasks_per_node, self.program)

    def _popen(
        self, argv: list[str], env: dict[str, str], generation: int
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` (its output goes to the job's) in a session of its own.

        :func:`_stop` then stops what it started too. Under a terminal (an interactive
        allocation) it stays in the terminal's session, where Ctrl-C and input reach it.
        """
        return subprocess.Popen(argv, env=env, start_new_session=not os.isatty(0))

    def run(self) -> int:
        """Run the application to its end, through any number of restarts; its exit status.

        When it ends, the job's sibling allocations are cancelled: they never outlive it, also
        when the job is cancelled (SIGTERM, which Slurm sends first, is caught for this).
        """
        previous = signal.signal(signal.SIGTERM, _terminated)
        try:
            return self._run()
        except _Terminated:
            return 128 + signal.SIGTERM
        finally:
            # Slurm sends SIGKILL KillWait seconds after SIGTERM: nothing here may be cut short
            # by a second SIGTERM, and the helpers go first (``_run`` stops the generations
            # only after ``_cancel_helpers``, when it was terminated)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            try:
                self._cancel_helpers()
            except ElasticSlurmError as exc:
                # the program's own outcome stands: a cleanup Slurm could not do is no reason
                # to fail a job whose program ended well (the controller cancels helpers of
                # ended jobs)
                print(
                    f"{self.command}: warning: could not cancel the job's helper allocations "
                    f"({exc}); the controller cancels them once it sees the job ended",
                    file=sys.stderr,
                    flush=True,
                )
            finally:
                handover.drop_all(self.job_id)  # a handover the job's end cut short
                signal.signal(signal.SIGTERM, previous)

    def _cancel_helpers(self) -> None:
        """Cancel the job's pending or running expander and sibling allocations (once)."""
        if self._helpers_cancelled:
            return
        self._helpers_cancelled = True
        helpers = [h.job_id for h in self.slurm.helpers(self.job_id)]
        if helpers:
            self.slurm.cancel(*helpers)
            self.jobdir.log_event("helpers_cancelled", jobs=helpers)

    def _start(
        self,
        nodes: Sequence[str],
        generation: int,
        successor: int = 0,
        extra: Mapping[str, str] | None = None,
    ) -> _Generation:
        """Start generation ``generation`` on ``nodes``.

        With ``successor`` (an order's number), it waits for that order's handover.
        """
        argv = self._argv(nodes)
        self.jobdir.log_event(
            "launch",
            generation=generation,
            nodes=list(nodes),
            ranks=len(nodes) * self.ntasks_per_node,
            **({"successor_of": successor} if successor else {}),
        )
        log.info("generation %d: %s", generation, " ".join(argv))
        env = self._launch_env(nodes, generation)
        env.update(
            envvars.names(
                job_id=self.job_id,
                job_dir=self.jobdir.path,
                launch=generation,
                launch_host=self.host,
                ntasks_per_node=self.ntasks_per_node,
            )
        )
        if successor:
            env.update(envvars.names(successor=successor))
            env.update(extra or {})
        proc = self._popen(argv, env, generation)
        return _Generation(proc, tuple(nodes), generation, argv, time.monotonic(), successor)

    def _run(self) -> int:
        nodes = self.current_nodes()
        self.jobdir.create()
        current = self._start(nodes, 0)
        waiting: _Generation | None = None  # a successor waiting for the handover
        overlap = resize_path(self.env) == OVERLAP
        resend_at = 0.0
        try:
            while True:
                rc = current.proc.poll()
                if rc is None:
                    if overlap:
                        waiting = self._tend_successor(current, waiting)
                    if time.monotonic() >= resend_at:  # what a service controller missed
                        resend_at = time.monotonic() + 1.0
                        self.channel.resend()
                    time.sleep(0.05)
                    continue
                elapsed = time.monotonic() - current.t0
                self.jobdir.log_event(
                    "exit",
                    generation=current.generation,
                    returncode=rc,
                    seconds=round(elapsed, 3),
                )
                try:
                    request = self.jobdir.take_restart()
                except JobInputError as exc:  # the application's own file, damaged
                    print(
                        f"{self.command}: the application's restart request is unusable "
                        f"({exc}); stopping (its checkpoint stays in {self.jobdir.checkpoint})",
                        file=sys.stderr,
                        flush=True,
                    )
                    return rc or 1
                if (
                    request is None
                    and rc != 0
                    and elapsed < RELAUNCH_WITHIN_S
                    and self._relaunch_after_outage(current, rc)
                ):
                    current = self._start(current.nodes, current.generation)
                    continue
                if request is None or rc != 0:
                    if request is None and rc != 0:
                        print(
                            f"{self.command}: mpirun exited with status {rc} after "
                            f"{elapsed:.2f} s (generation {current.generation}): "
                            f"{' '.join(current.argv)}",
                            file=sys.stderr,
                            flush=True,
                        )
                    elif request is not None:
                        print(
                            f"{self.command}: the application asked for a restart but mpirun "
                            f"exited with status {rc}; stopping",
                            file=sys.stderr,
                        )
                    return rc
                if waiting is not None and request.get("handover"):
                    self._hand_over(request, current.nodes)
                    current, waiting = waiting, None
                    continue
                nodes = self._follow(request, current.nodes)
                current = self._start(nodes, current.generation + 1)
        except _Terminated:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            self._cancel_helpers()  # first: stopping the generations may take until SIGKILL
            for gen in (current, waiting):
                if gen is not None:
                    _stop(gen.proc)
            raise
        finally:
            if waiting is not None and waiting.proc.poll() is None:
                _stop(waiting.proc)  # its predecessor ended without handing over

    def _relaunch_after_outage(self, gen: _Generation, rc: int) -> bool:
        """Whether ``gen`` failed to start for want of slurmctld, which answers again now.

        ``mpirun`` starts its daemons with ``srun`` (:mod:`.rsh_agent`), and ``srun`` cannot
        start a step while slurmctld is down ("Unable to confirm allocation ... connect
        failure"): a generation launched then fails before any rank runs, and the job with
        it (a soak lost a job that started as slurmctld stopped). Such a generation (it
        failed within :data:`RELAUNCH_WITHIN_S` of its launch, none of its ranks logged
        ``started``, it waited for no handover, and slurmctld does not answer now) is
        launched again once slurmctld answers and the generation's nodes have registered
        with it again, waiting up to the job's Slurm retry window;
        at most :data:`MAX_RELAUNCHES` times per job. Says why on the job's standard error.
        """
        if gen.successor or self._relaunches >= MAX_RELAUNCHES or self._started(gen.generation):
            return False
        if self._slurmctld_answers():
            return False  # not for want of Slurm: the program's own failure stands
        print(
            f"{self.command}: mpirun exited with status {rc} before generation "
            f"{gen.generation} started, while slurmctld did not answer; it is started again "
            "once slurmctld answers",
            file=sys.stderr,
            flush=True,
        )
        try:
            # and its nodes registered: a restarted slurmctld refuses steps on a node until
            # its slurmd registers again ("Memory required by task is not available", seen
            # here for about 4 s)
            wait_for(
                lambda: self._slurmctld_answers() and self._registered(gen.nodes),
                timeout_s=getattr(self.slurm, "retry_s", 300.0),
                what=f"slurmctld to answer, with nodes {', '.join(gen.nodes)} registered",
                interval_s=0.5,
                max_interval_s=5.0,
            )
        except DeadlineExceeded:
            return False
        self._relaunches += 1
        self.jobdir.log_event("relaunch", generation=gen.generation, exit=rc)
        return True

    def _registered(self, nodes: Sequence[str]) -> bool:
        """Whether Slurm lists every one of ``nodes`` as allocated and responding.

        After a restart slurmctld lists a node as ``unknown`` until the node's slurmd
        registers again, and a node that does not answer has a ``*`` appended.
        """
        try:
            listed = {n.name: n for n in self.slurm.nodes()}
        except ElasticSlurmError:
            return False
        return all(
            n in listed
            and listed[n].model_state is NodeState.ALLOCATED
            and not listed[n].state.endswith("*")
            for n in nodes
        )

    def _started(self, generation: int) -> bool:
        """Whether a rank of ``generation`` logged that it started (:func:`.session.init`).

        Only what follows the generation's last ``launch`` event counts: a requeued job (or a
        job given the id of an earlier one in the same directory) finds the events of its
        earlier run in ``events.jsonl``.
        """
        try:
            events = self.jobdir.events()
        except JobInputError:
            return True  # unknown: as if it had (never run a program twice on a doubt)
        for e in reversed(events):  # back to the generation's last launch
            if e.get("generation") == generation:
                if e.get("event") == "started":
                    return True
                if e.get("event") == "launch":
                    return False
        return False

    def _slurmctld_answers(self) -> bool:
        """``scontrol ping`` says slurmctld is up (at once: no retry).

        True for a backend that cannot run it (no transport): the failure then stands.
        """
        transport = getattr(self.slurm, "transport", None)
        if transport is None:
            return True
        try:
            out = transport.run(commands.ping(), timeout_s=10.0).stdout
        except (SlurmCommandError, OSError):
            return False
        return slurmctld_up(out)

    def _tend_successor(
        self, current: _Generation, waiting: _Generation | None
    ) -> _Generation | None:
        """While ``current`` computes: start a successor when asked, drop it when it fails."""
        if waiting is None:
            request = handover.take_request(self.jobdir)
            if request is None:
                return None
            seq = int(request["seq"])
            if int(request.get("launch", -1)) != current.generation:
                log.warning("ignored a successor request from generation %s", request.get("launch"))
                return None
            nodes = tuple(str(n) for n in request["nodes"])
            if self.host in nodes:  # the batch host first, as for every launch
                nodes = (self.host, *[n for n in nodes if n != self.host])
            waiting = self._start(
                nodes,
                current.generation + 1,
                successor=seq,
                extra=envvars.names(
                    handover_dir=request.get("memory_dir", ""),
                    handover_token=request.get("token", ""),
                ),
            )
            return replace(waiting, by_job=request.get("by_job") is True)
        rc = waiting.proc.poll()
        if rc is not None and handover.handed_over(
            self.jobdir, waiting.successor, current.generation
        ):
            return waiting  # it took over and ended already: its predecessor is leaving
        if rc is not None:
            self.jobdir.log_event(
                "exit", generation=waiting.generation, returncode=rc, successor_of=waiting.successor
            )
            self._give_back_taken(waiting, current)
            self._fail(
                waiting.successor,
                current.nodes,
                f"the next generation ended (status {rc}) before the handover",
            )
            return None
        why = handover.cancelled(self.jobdir, waiting.successor)
        if why is not None:  # the application gave up on it: stop it, then fail the order
            _stop(waiting.proc)
            try:  # its daemons have left the nodes the old generation does not use
                self._wait_vacated([n for n in waiting.nodes if n not in current.nodes])
            except DeadlineExceeded as exc:
                log.error("the discarded generation's steps stay: %s", exc)
            self.jobdir.log_event(
                "exit",
                generation=waiting.generation,
                returncode=None,
                successor_of=waiting.successor,
            )
            self._give_back_taken(waiting, current)
            self._fail(waiting.successor, current.nodes, why)
            return None
        return waiting

    def _give_back_taken(self, waiting: _Generation, current: _Generation) -> None:
        """Under a service controller: the nodes taken for a failed expansion go back to Slurm.

        The job took them itself (:func:`.grant.take_nodes`), and the controller cannot
        shrink another user's job, so the launcher does, as the job's user, once the failed
        generation's steps have left them (before that, Slurm would kill its daemons there).
        The running generation keeps its nodes. Nothing for a shrink, or when the controller
        does the Slurm side; a refusal is logged (the job keeps the nodes until it ends).
        """
        self._give_back(waiting.successor, waiting.nodes, current.nodes, by_job=waiting.by_job)

    def _give_back(
        self, seq: int, taken: Sequence[str], keep: Sequence[str], *, by_job: bool
    ) -> None:
        """Under a service controller: shrink the job back to ``keep`` once ``taken`` is vacated.

        ``by_job``: the order's; ``ELASTIC_SLURM_SLURM_SIDE=job`` also says so. Nothing when
        no node of ``taken`` is outside ``keep``. A refusal is logged (the job keeps the
        nodes until it ends).
        """
        taken = [n for n in taken if n not in keep]
        if not taken or not (
            by_job or envvars.get_str("SLURM_SIDE", "controller", self.env) == "job"
        ):
            return
        from elastic_slurm.mpi_runtime.grant import give_back

        try:
            self._wait_vacated(taken)
            give_back(self.slurm, self.job_id, tuple(keep))
        except (DeadlineExceeded, ResizeError, SlurmCommandError) as exc:
            log.error("order %d: could not give back %s: %s", seq, taken, exc)
            return
        self.jobdir.log_event("released", seq=seq, nodes=list(keep))

    def _hand_over(self, request: Mapping[str, object], nodes: Sequence[str]) -> None:
        """The old generation left for a waiting successor: report the nodes it vacated."""
        seq = int(str(request["seq"]))
        if str(request["action"]) != "shrink":
            return
        target = {str(n) for n in request["nodes"]}  # type: ignore[attr-defined]
        leaving = [n for n in self.current_nodes() if n not in target]
        try:
            self._wait_vacated(leaving)
        except DeadlineExceeded as exc:
            log.error("order %d: the old generation did not leave %s: %s", seq, leaving, exc)
            return
        kept = tuple(sorted(target))
        if not self._release(request, kept, kept + tuple(leaving)):
            return
        self.channel.ack(
            ResizeAck(
                seq, AckStatus.VACATED, tuple(leaving), time.time(), strategy="restart", ranks=0
            )
        )
        self.jobdir.log_event("vacated", seq=seq, nodes=leaving)

    def _follow(self, request: Mapping[str, object], nodes: Sequence[str]) -> tuple[str, ...]:
        """Carry out the Slurm side of a restart request; return the next generation's nodes."""
        seq = int(str(request["seq"]))
        action = str(request["action"])
        target = tuple(str(n) for n in request["nodes"])  # type: ignore[attr-defined]
        if action == "shrink":
            # the allocation, not the last launch: spawned ranks may have added nodes since
            leaving = [n for n in self.current_nodes() if n not in target]
            try:
                self._wait_vacated(leaving)
            except DeadlineExceeded as exc:
                self._fail(seq, nodes, f"steps still run on the leaving nodes: {exc}")
                return tuple(nodes)
            if not self._release(request, target, nodes):
                return tuple(nodes)
            self.channel.ack(
                ResizeAck(
                    seq, AckStatus.VACATED, tuple(leaving), time.time(), strategy="restart", ranks=0
                )
            )
            self.jobdir.log_event("vacated", seq=seq, nodes=leaving)
            try:
                wait_for(
                    lambda: set(self.current_nodes()) == set(target),
                    timeout_s=self.resize_timeout_s,
                    what=f"Slurm to shrink job {self.job_id} to {list(target)}",
                    interval_s=0.05,
                    max_interval_s=0.5,
                )
            except DeadlineExceeded as exc:
                now = self.current_nodes()
                self._fail(seq, now, str(exc))
                return now
            return self.current_nodes()
        # expansion: check the added nodes before restarting on them (a dead node would take
        # the whole step down); on failure go on at the old size without them
        now = self.current_nodes()
        added = [n for n in now if n not in nodes]
        timeout = envvars.get_float("PREFLIGHT_TIMEOUT_S", 20.0, self.env)
        bad = check_hosts(added, self.job_id, timeout) if added else {}
        if bad:
            reason = "; ".join(f"{h}: {why}" for h, why in sorted(bad.items()))
            # a service controller cannot give them back: the job does (by_job)
            self._give_back(seq, now, nodes, by_job=bool(request.get("by_job")))
            self._fail(seq, tuple(nodes), f"added nodes unusable: {reason}")
            return tuple(nodes)
        return now

    def _release(
        self, request: Mapping[str, object], target: Sequence[str], nodes: Sequence[str]
    ) -> bool:
        """Under a service controller, give the vacated nodes back to Slurm as the job's user.

        The order says so (``by_job`` in the restart ``request``; or
        ``ELASTIC_SLURM_SLURM_SIDE=job``, the site's ``controller.privilege: service``): the
        controller cannot change another user's job, so the launcher shrinks the job to
        ``target`` itself (:func:`.grant.give_back`) before it says the nodes are vacated.
        Otherwise nothing (the controller gives them back on the acknowledgement). Returns
        whether the order goes on; if Slurm refused, the order is acknowledged as failed on
        ``nodes``.
        """
        seq = int(str(request["seq"]))
        by_job = bool(request.get("by_job"))
        if not by_job and envvars.get_str("SLURM_SIDE", "controller", self.env) != "job":
            return True
        self.channel.own_state = True  # what the controller misses is sent again
        from elastic_slurm.mpi_runtime.grant import give_back

        try:
            give_back(self.slurm, self.job_id, target)
        except (ResizeError, SlurmCommandError) as exc:
            self._fail(seq, nodes, f"Slurm did not shrink the job to {list(target)}: {exc}")
            return False
        self.jobdir.log_event("released", seq=seq, nodes=list(target))
        return True

    def _wait_vacated(self, leaving: Sequence[str]) -> None:
        if not leaving:
            return

        def vacated() -> bool:
            steps = self.slurm.steps(self.job_id)
            busy = {
                s: n
                for s, n in steps.items()
                if not s.endswith((".batch", ".extern")) and set(n) & set(leaving)
            }
            return not busy

        wait_for(
            vacated,
            timeout_s=30.0,
            what=f"the job's steps to leave {list(leaving)}",
            interval_s=0.05,
            max_interval_s=0.5,
        )

    def _fail(self, seq: int, nodes: Sequence[str], reason: str) -> None:
        log.error("order %d failed: %s", seq, reason)
        self.channel.ack(
            ResizeAck(
                seq, AckStatus.FAILED, tuple(nodes), time.time(), strategy="restart", reason=reason
            )
        )
        self.jobdir.log_event("failed", seq=seq, reason=reason)


def run(program: Sequence[str], ntasks_per_node: int = 1) -> int:
    """Entry point of ``elastic-slurm run``; returns the application's exit status.

    Raises
    ------
    ElasticSlurmError
        Not inside a Slurm job, mpirun is missing, or Slurm no longer reports the job.
    """
    return Launcher(program, ntasks_per_node=ntasks_per_node).run()
