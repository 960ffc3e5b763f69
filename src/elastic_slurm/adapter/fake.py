"""An in-memory Slurm: the backend contract without a cluster, for tests of what drives Slurm.

:class:`FakeSlurm` implements every primitive of
:class:`~elastic_slurm.adapter.backend.SlurmBackend` on a small model of slurmctld (nodes, jobs
and their states, a first-fit scheduler, expander and sibling allocations, job arrays), so the
shared elastic operations (``grow`` by merge or sibling, ``shrink`` to a node list,
``cancel_job``...) run on it unchanged. It passes the same contract tests as the real backends
(``tests/integration/test_backend_contract.py``), which is what keeps it honest.

What a real Slurm does on its own, the fake does only when told, so tests decide when:

* jobs never end by themselves: :meth:`FakeSlurm.finish` ends one (``COMPLETED``,
  ``FAILED``...), as its program exiting would; time limits are reported, never enforced;
* scheduling happens at once, after every call that changes something: a pending job starts
  on the lowest idle nodes as soon as it fits (held jobs, jobs whose ``--begin`` lies ahead and
  jobs requeued less than :attr:`FakeSlurm.requeue_delay_s` ago wait), moldable jobs at the
  largest size that fits;
* an allocation (``salloc --immediate``) is granted at once or refused at once.

Faults, for tests of what rides them out:

* :attr:`FakeSlurm.down`: slurmctld does not answer; every call raises
  :class:`~elastic_slurm.errors.SlurmUnavailableError`, and nothing changes;
* :meth:`FakeSlurm.fail`: the next call(s) of one primitive raise an error of the test's
  choosing (default: Slurm refuses, :class:`~elastic_slurm.errors.SlurmCommandError`);
* :meth:`FakeSlurm.set_node_state`: a node goes down, or comes back.

Every primitive call is recorded in :attr:`FakeSlurm.calls` (name and arguments), so a test can
check that something was never sent to Slurm.
"""

from __future__ import annotations

import dataclasses
import getpass
import math
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from elastic_slurm.adapter import render
from elastic_slurm.adapter.backend import EXPANDER_PREFIX, SlurmBackend
from elastic_slurm.adapter.parse import AllocationRecord, SlurmJob, SlurmNode
from elastic_slurm.adapter.tags import SizedBy
from elastic_slurm.adapter.transport.local import LocalTransport
from elastic_slurm.errors import ResizeError, SlurmCommandError, SlurmUnavailableError
from elastic_slurm.model.request import ElasticRequest

#: States of a job that holds nodes, and of one that is over.
RUNNING_STATES = ("RUNNING",)
ENDED_STATES = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")

_INVALID_JOB = "slurm_load_jobs error: Invalid job id specified"
_DOWN = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"


@dataclass
class FakeJob:
    """One job as the fake slurmctld keeps it (mutable; times in seconds since the epoch)."""

    job_id: int
    name: str
    nodes_min: int
    nodes_max: int
    submit_time_s: float
    state: str = "PENDING"
    nodes: list[str] = field(default_factory=list)
    comment: str = ""
    time_limit_s: float | None = None
    workdir: str = ""
    stdout: str = ""
    user: str = ""
    partition: str = "debug"
    account: str = ""
    qos: str = "normal"
    reason: str = "None"
    held: bool = False
    begin_s: float | None = None
    dependency: str | None = None
    srun_step: bool = False  # its script runs an ``srun`` step (step ``<id>.0``)
    batch: bool = True  # a batch job (an allocation made by ``allocate`` is not)
    range_given: bool = False  # its node count was given as a range (``NumNodes=2-2``)
    start_time_s: float | None = None
    end_time_s: float | None = None
    batch_host: str | None = None
    array_job_id: int | None = None
    array_task_id: int | None = None
    history: list[AllocationRecord] = field(default_factory=list)
    absorbable: list[str] = field(default_factory=list)  # nodes its expanders released to it

    @property
    def running(self) -> bool:
        """True while it holds nodes."""
        return self.state in RUNNING_STATES


@dataclass
class _Array:
    array_id: int
    throttle: int  # 0: no limit
    reserved: list[int]  # job ids the tasks that start take, in order (the last: the array's)


class FakeSlurm(SlurmBackend):
    """An in-memory Slurm with ``nodes`` nodes (see the module docstring).

    Parameters
    ----------
    nodes
        Node names (default ``n1`` to ``n4``).
    cpus
        CPUs per node.
    version
        The Slurm version it claims to be.
    permit_job_expansion
        Whether ``SchedulerParameters=permit_job_expansion`` is set: without it, an expander
        allocation (the merge grow path) is refused, as Slurm refuses it.
    clock
        Where the time comes from (seconds since the epoch; default :func:`time.time`).
    first_job_id
        The first job id handed out.
    """

    name = "fake"

    def __init__(
        self,
        nodes: Sequence[str] = ("n1", "n2", "n3", "n4"),
        *,
        cpus: int = 2,
        version: tuple[int, int, int] = (22, 5, 8),
        permit_job_expansion: bool = True,
        clock: Callable[[], float] = time.time,
        first_job_id: int = 1000,
    ) -> None:
        self.transport = LocalTransport()
        self.node_names = list(nodes)
        self.node_states = dict.fromkeys(self.node_names, "idle")
        self.cpus = cpus
        self._version = version
        self.permit_job_expansion = permit_job_expansion
        self.clock = clock
        self.store: dict[int, FakeJob] = {}
        self.arrays: dict[int, _Array] = {}
        self._next_id = first_job_id
        #: Seconds a requeued job waits before it may start again (Slurm delays it too).
        self.requeue_delay_s = 120.0
        #: True while slurmctld "does not answer" (every call raises).
        self.down = False
        #: Every primitive called: ``(name, args)``.
        self.calls: list[tuple[str, tuple[object, ...]]] = []
        self.reconfigures = 0
        self._faults: dict[str, list[BaseException]] = {}

    # ------------------------------------------------------------------ faults and driving
    def fail(self, operation: str, error: BaseException | None = None, times: int = 1) -> None:
        """Make the next ``times`` calls of primitive ``operation`` raise ``error``.

        ``operation`` is a primitive's name (``jobs``, ``allocate``, ``update_nodelist``...).
        The default error is Slurm refusing (a :class:`SlurmCommandError` that is not
        transient). A failing call changes nothing.
        """
        exc = error or SlurmCommandError(
            [f"fake-{operation}"], 1, "", f"{operation}: injected failure"
        )
        self._faults.setdefault(operation, []).extend([exc] * times)

    def finish(self, job_id: int, state: str = "COMPLETED") -> None:
        """End a running or pending job as its program would (``COMPLETED``, ``FAILED``...)."""
        job = self.store[job_id]
        if job.state not in ENDED_STATES:
            self._end(job, state)
            self._schedule()

    def set_node_state(self, node: str, state: str) -> None:
        """Set a node's state as ``sinfo`` shows it (``down``, ``drained``, ``idle``...).

        A node taken out of service ends the jobs running on it (``NODE_FAIL``).
        """
        if state != "idle":
            for job in list(self.store.values()):
                if job.running and node in job.nodes:
                    self._end(job, "NODE_FAIL")
        self.node_states[node] = state
        self._schedule()

    def _call(self, operation: str, *args: object) -> None:
        self.calls.append((operation, args))
        if self.down:
            raise SlurmUnavailableError([f"fake-{operation}"], 1, "", _DOWN)
        pending = self._faults.get(operation)
        if pending:
            raise pending.pop(0)

    # ------------------------------------------------------------------ queries
    def version(self) -> tuple[int, int, int]:
        """The version it claims (``(22, 5, 8)`` by default)."""
        self._call("version")
        return self._version

    def jobs(self, job_ids: Sequence[int] = ()) -> list[SlurmJob]:
        """Every job it knows (ended ones too), or at least ``job_ids``.

        A job array's pending tasks are one record (the array's id), as ``squeue --json``
        shows them.
        """
        self._call("jobs", tuple(job_ids))
        self._schedule()
        wanted = set(job_ids)
        out = []
        for job in sorted(self.store.values(), key=lambda j: j.job_id):
            if wanted and job.job_id not in wanted and job.array_job_id not in wanted:
                continue
            if job.array_job_id is not None and job.state == "PENDING":
                continue  # shown on the array's own record below
            out.append(self._as_slurm_job(job))
        for array in self.arrays.values():
            if wanted and array.array_id not in wanted:
                continue
            pending = self._pending_tasks(array.array_id)
            if pending:
                out.append(
                    dataclasses.replace(
                        self._as_slurm_job(pending[0]),
                        job_id=array.array_id,
                        array_pending=_ranges([t.array_task_id or 0 for t in pending]),
                    )
                )
        return out

    def nodes(self) -> list[SlurmNode]:
        """Every node: ``allocated`` when a running job holds it, else its set state."""
        self._call("nodes")
        self._schedule()
        busy = self._busy()
        return [
            SlurmNode(n, "allocated" if n in busy else self.node_states[n], self.cpus)
            for n in self.node_names
        ]

    def steps(self, job_id: int) -> dict[str, tuple[str, ...]]:
        """A running job's batch step (on its batch host) and its ``srun`` step (all nodes)."""
        self._call("steps", job_id)
        job = self.store.get(job_id)
        if job is None or not job.running:
            return {}
        steps = {f"{job_id}.batch": (job.batch_host,)} if job.batch_host else {}
        if job.srun_step:
            steps[f"{job_id}.0"] = tuple(job.nodes)
        return steps

    def allocation_history(self, job_id: int) -> list[AllocationRecord]:
        """Every size the job had, in order (as accounting would say)."""
        self._call("allocation_history", job_id)
        job = self.store.get(job_id)
        return list(job.history) if job is not None else []

    def select_type(self) -> str:
        """``select/linear``, as the local cluster's."""
        self._call("select_type")
        return "select/linear"

    def reconfigure(self) -> None:
        """Counted (:attr:`reconfigures`); changes nothing."""
        self._call("reconfigure")
        self.reconfigures += 1

    # ------------------------------------------------------------------ submit / cancel
    def submit(
        self,
        req: ElasticRequest,
        *,
        python: str,
        chdir: str | None = None,
        output: str | None = None,
        env: dict[str, str] | None = None,
        hold: bool = False,
        sized_by: SizedBy = "slurm",
    ) -> int:
        """Submit ``req`` as ``sbatch`` would receive it (see :meth:`SlurmBackend.submit`).

        Raises
        ------
        InvalidRequest, ValueError
            ``sized_by`` does not fit the job or ``hold`` (as for the real backends).
        SlurmCommandError
            An option the fake does not know; nothing was queued.
        """
        argv = render.sbatch_argv(req, output=output, chdir=chdir, hold=hold, sized_by=sized_by)
        script = render.batch_script(req, python=python, env=env)
        self._call("submit", tuple(argv))
        return self.sbatch(argv[1:], script)

    def sbatch(self, options: Sequence[str], script: str = "#!/bin/sh\nsleep 300\n") -> int:
        """Queue a job from ``sbatch`` options and a batch script, as ``sbatch`` does.

        Known options: ``--nodes``, ``--time``, ``--job-name``, ``--comment``, ``--output``,
        ``--chdir``, ``--partition``, ``--account``, ``--qos``, ``--hold``, ``--array``,
        ``--begin=now+N<unit>``; ``--parsable``, ``--ntasks-per-node`` and ``--exclusive`` are
        accepted and ignored.

        Raises
        ------
        SlurmCommandError
            An unknown option or value; nothing was queued.
        """
        now = self.clock()
        opts: dict[str, str] = {}
        for word in options:
            key, _, value = word.partition("=")
            if key not in _SBATCH_OPTIONS:
                raise SlurmCommandError(
                    ["sbatch", *options], 1, "", f"sbatch: unrecognized option '{word}'"
                )
            opts[key] = value
        lo, _, hi = opts.get("--nodes", "1").partition("-")
        try:
            nodes_min, nodes_max = int(lo), int(hi or lo)
            limit = _parse_time(opts["--time"]) if "--time" in opts else None
            begin = _parse_begin(opts["--begin"], now) if "--begin" in opts else None
        except ValueError as exc:
            raise SlurmCommandError(["sbatch", *options], 1, "", f"sbatch: error: {exc}") from exc
        if not 1 <= nodes_min <= nodes_max or nodes_min > len(self.node_names):
            raise SlurmCommandError(
                ["sbatch", *options],
                1,
                "",
                "sbatch: error: Batch job submission failed: Requested node configuration is "
                "not available",
            )
        workdir = opts.get("--chdir") or os.getcwd()
        base = dict(
            name=opts.get("--job-name") or "sbatch",
            nodes_min=nodes_min,
            nodes_max=nodes_max,
            submit_time_s=now,
            comment=opts.get("--comment", ""),
            time_limit_s=limit,
            workdir=workdir,
            user=getpass.getuser(),
            partition=opts.get("--partition", "debug"),
            account=opts.get("--account", ""),
            qos=opts.get("--qos", "normal"),
            held="--hold" in opts,
            range_given="-" in opts.get("--nodes", ""),
            begin_s=begin,
            srun_step=any(_runs_srun(line) for line in script.splitlines()),
        )
        output = opts.get("--output") or "slurm-%j.out"
        if "--array" in opts:
            return self._submit_array(opts["--array"], base, output, workdir, options)
        job_id = self._new_id()
        self.store[job_id] = FakeJob(job_id, stdout=_stdout(output, job_id, workdir), **base)
        self._schedule()
        return job_id

    def _submit_array(
        self, spec: str, base: dict, output: str, workdir: str, options: Sequence[str]
    ) -> int:
        tasks_text, _, throttle = spec.partition("%")
        try:
            tasks = _expand_ranges(tasks_text)
            limit = int(throttle or 0)
        except ValueError as exc:
            raise SlurmCommandError(
                ["sbatch", *options], 1, "", f"sbatch: error: invalid --array={spec}"
            ) from exc
        array_id = self._new_id()
        reserved = [self._new_id() for _ in tasks[1:]] + [array_id]
        self.arrays[array_id] = _Array(array_id, limit, reserved)
        for i, task in enumerate(tasks):
            key = -(array_id * 100_000 + i + 1)  # pending tasks have no job id of their own yet
            self.store[key] = FakeJob(
                key,
                stdout=_stdout(output, array_id, workdir),
                array_job_id=array_id,
                array_task_id=task,
                **base,
            )
        self._schedule()
        return array_id

    def release(self, job_id: int) -> None:
        """Let a held job be scheduled; a job that is not held is left as it is.

        Raises
        ------
        SlurmCommandError
            Unknown job (``Invalid job id specified``).
        """
        self._call("release", job_id)
        job = self._known(job_id, "release")
        if job.held:
            job.held = False
            job.reason = "None"
        self._schedule()

    def cancel(self, *job_ids: int) -> None:
        """Cancel jobs (ended or unknown ones are fine; an array's id cancels every task)."""
        self._call("cancel", *job_ids)
        for job_id in job_ids:
            for job in list(self.store.values()):
                if (job.job_id == job_id or job.array_job_id == job_id) and (
                    job.state not in ENDED_STATES
                ):
                    self._end(job, "CANCELLED")
        self._schedule()

    def requeue(self, job_id: int) -> None:
        """Put a running job back in the queue (it may start again after a delay).

        Raises
        ------
        SlurmCommandError
            Unknown job, or one that is not running.
        """
        self._call("requeue", job_id)
        job = self._known(job_id, "requeue")
        if not job.running:
            raise SlurmCommandError(
                ["scontrol", "requeue", str(job_id)],
                1,
                "",
                f"Requested operation is presently disabled for job {job_id}",
            )
        self._free(job, "REQUEUED")
        job.state, job.reason = "PENDING", "BeginTime"
        job.begin_s = self.clock() + self.requeue_delay_s
        job.start_time_s = job.end_time_s = job.batch_host = None
        self._schedule()

    # ------------------------------------------------------------------ updates
    def update_nodelist(self, job_id: int, nodes: Sequence[str]) -> None:
        """Shrink a running job to ``nodes`` (a non-empty subset that keeps its batch host).

        Raises
        ------
        SlurmCommandError
            Unknown or not running job, or nodes it does not hold, or no batch host.
        """
        self._call("update_nodelist", job_id, tuple(nodes))
        job = self._known(job_id, "update")
        keep = list(dict.fromkeys(nodes))
        if not job.running or not keep or not set(keep) <= set(job.nodes):
            raise self._refused(job_id, "Requested node configuration is not available")
        if job.batch_host is not None and job.batch_host not in keep:
            raise self._refused(job_id, "Job's batch host can not be removed")
        self._resize(job, [n for n in job.nodes if n in keep])
        self._schedule()

    def update_numnodes(self, job_id: int, value: int | Literal["ALL"]) -> None:
        """``NumNodes``: a pending job's exact size; 0 on an expander; ``ALL`` to absorb.

        Raises
        ------
        SlurmCommandError
            Unknown job, or a value Slurm refuses for its state.
        """
        self._call("update_numnodes", job_id, value)
        job = self._known(job_id, "update")
        if value == "ALL":
            if not job.running:
                raise self._refused(job_id, "Job is no longer pending execution")
            if job.absorbable:
                self._resize(job, [*job.nodes, *job.absorbable])
                job.absorbable = []
        elif job.state == "PENDING":
            if int(value) < 1:
                raise self._refused(job_id, "Invalid node count specified")
            job.nodes_min = job.nodes_max = int(value)
            job.range_given = True
        elif value == 0 and job.running and (parent := _expands(job)) is not None:
            target = self.store.get(parent)
            if target is None or not target.running:
                raise self._refused(job_id, "Invalid job id specified")
            target.absorbable.extend(job.nodes)
            self._free(job, "COMPLETED", release=False)
            job.state = "COMPLETED"
        elif job.running and 1 <= int(value) <= len(job.nodes):
            self._resize(job, job.nodes[: int(value)])
        else:
            raise self._refused(job_id, "Invalid node count specified")
        self._schedule()

    def set_time_limit(self, job_id: int, minutes: int) -> None:
        """A job's time limit, minutes from its start; a running job's end moves with it.

        Raises
        ------
        ValueError
            ``minutes`` is less than 1.
        SlurmCommandError
            Unknown job, or one that has ended.
        """
        if minutes < 1:
            raise ValueError(f"a time limit is at least 1 minute, got {minutes}")
        self._call("set_time_limit", job_id, minutes)
        job = self._known(job_id, "update")
        if not (job.running or job.state == "PENDING"):
            raise self._refused(job_id, "Job/step already completing or completed")
        job.time_limit_s = minutes * 60.0
        if job.running and job.start_time_s is not None:
            job.end_time_s = job.start_time_s + job.time_limit_s

    def set_array_throttle(self, array_job_id: int, max_running: int) -> None:
        """How many tasks of an array may run at once (0: no limit); running ones go on.

        Raises
        ------
        SlurmCommandError
            Not an array this fake knows.
        """
        self._call("set_array_throttle", array_job_id, max_running)
        array = self.arrays.get(array_job_id)
        if array is None:
            raise self._refused(array_job_id, "Invalid job id specified")
        array.throttle = max_running
        self._schedule()

    def allocate(
        self,
        count: int,
        *,
        name: str,
        immediate_s: int,
        dependency: str | None = None,
        time_limit_min: int | None = None,
        partition: str | None = None,
        account: str | None = None,
        qos: str | None = None,
        exclude: Sequence[str] = (),
    ) -> int:
        """Grant ``count`` idle nodes at once, or refuse at once (:meth:`SlurmBackend.allocate`).

        Raises
        ------
        ResizeError
            Not enough idle nodes, an expander without ``permit_job_expansion``, or an
            expander for a job that is not running; nothing is left queued.
        """
        self._call("allocate", count, name, dependency, tuple(exclude))
        why = ""
        if dependency is not None:
            parent = self.store.get(int(dependency.split(":", 1)[1]))
            if not self.permit_job_expansion:
                why = "job expansion is not permitted (permit_job_expansion is not set)"
            elif parent is None or not parent.running:
                why = f"dependency {dependency} names no running job"
        idle = [n for n in self._idle() if n not in set(exclude)]
        if not why and len(idle) < count:
            why = f"only {len(idle)} node(s) are idle"
        if why:
            raise ResizeError(f"no {count} node(s) granted to {name} within {immediate_s} s: {why}")
        job_id = self._new_id()
        now = self.clock()
        job = FakeJob(
            job_id,
            name,
            count,
            count,
            now,
            time_limit_s=time_limit_min * 60.0 if time_limit_min else None,
            user=getpass.getuser(),
            partition=partition or "debug",
            account=account or "",
            qos=qos or "normal",
            dependency=dependency,
            workdir=os.getcwd(),
            batch=False,
        )
        self.store[job_id] = job
        self._start(job, idle[:count])
        return job_id

    # ------------------------------------------------------------------ the model
    def _new_id(self) -> int:
        job_id = self._next_id
        self._next_id += 1
        return job_id

    def _known(self, job_id: int, what: str) -> FakeJob:
        job = self.store.get(job_id)
        if job is None:
            raise SlurmCommandError(["scontrol", what, str(job_id)], 1, "", _INVALID_JOB)
        return job

    @staticmethod
    def _refused(job_id: int, message: str) -> SlurmCommandError:
        return SlurmCommandError(
            ["scontrol", "update", f"JobId={job_id}"], 1, "", f"slurm_update error: {message}"
        )

    def _busy(self) -> set[str]:
        return {n for j in self.store.values() if j.running for n in j.nodes} | {
            n for j in self.store.values() if j.running for n in j.absorbable
        }

    def _idle(self) -> list[str]:
        busy = self._busy()
        return [n for n in self.node_names if n not in busy and self.node_states[n] == "idle"]

    def _pending_tasks(self, array_id: int) -> list[FakeJob]:
        return sorted(
            (j for j in self.store.values() if j.array_job_id == array_id and j.state == "PENDING"),
            key=lambda j: j.array_task_id or 0,
        )

    def _schedule(self) -> None:
        """Start every pending job that may start and fits, in submission order (first fit)."""
        now = self.clock()
        for job in sorted(self.store.values(), key=lambda j: (j.submit_time_s, abs(j.job_id))):
            if job.state != "PENDING":
                continue
            if job.held:
                job.reason = "JobHeldUser"
                continue
            if job.begin_s is not None and job.begin_s > now:
                job.reason = "BeginTime"
                continue
            array = self.arrays.get(job.array_job_id) if job.array_job_id else None
            if array is not None and array.throttle:
                running = sum(
                    1
                    for j in self.store.values()
                    if j.array_job_id == job.array_job_id and j.running
                )
                if running >= array.throttle:
                    job.reason = "JobArrayTaskLimit"
                    continue
            idle = self._idle()
            if len(idle) < job.nodes_min:
                job.reason = "Resources"
                continue
            if array is not None:
                del self.store[job.job_id]
                job.job_id = array.reserved.pop(0)
                self.store[job.job_id] = job
            self._start(job, idle[: min(job.nodes_max, len(idle))])

    def _start(self, job: FakeJob, nodes: list[str]) -> None:
        now = self.clock()
        job.state, job.reason, job.nodes = "RUNNING", "None", list(nodes)
        job.start_time_s, job.batch_host = now, nodes[0] if job.batch else None
        job.end_time_s = now + job.time_limit_s if job.time_limit_s else None
        job.history.append(AllocationRecord("RUNNING", tuple(nodes), now, None))

    def _resize(self, job: FakeJob, nodes: list[str]) -> None:
        now = self.clock()
        if job.history:
            last = job.history[-1]
            job.history[-1] = AllocationRecord("RESIZING", last.nodes, last.start_s, now)
        job.nodes = list(nodes)
        job.history.append(AllocationRecord("RUNNING", tuple(nodes), now, None))

    def _free(self, job: FakeJob, state: str, *, release: bool = True) -> None:
        now = self.clock()
        if job.history and job.history[-1].end_s is None:
            last = job.history[-1]
            job.history[-1] = AllocationRecord(state, last.nodes, last.start_s, now)
        job.nodes = []
        if release:
            job.absorbable = []

    def _end(self, job: FakeJob, state: str) -> None:
        was_running = job.running
        self._free(job, state)
        job.state = state
        job.reason = "None"
        if was_running:
            job.end_time_s = self.clock()

    def _as_slurm_job(self, job: FakeJob) -> SlurmJob:
        array = self.arrays.get(job.array_job_id) if job.array_job_id else None
        return SlurmJob(
            job_id=job.job_id,
            name=job.name,
            state=job.state,
            nodes=tuple(job.nodes),
            node_count=len(job.nodes) if job.running else job.nodes_min,
            comment=job.comment,
            submit_time_s=job.submit_time_s,
            start_time_s=job.start_time_s,
            batch_host=job.batch_host if job.running else None,
            workdir=job.workdir,
            user=job.user,
            partition=job.partition,
            account=job.account,
            qos=job.qos,
            reason=job.reason,
            end_time_s=job.end_time_s,
            time_limit_s=job.time_limit_s,
            array_job_id=job.array_job_id,
            array_throttle=array.throttle or None if array is not None else None,
        )


_SBATCH_OPTIONS = {
    "--parsable",
    "--nodes",
    "--ntasks-per-node",
    "--time",
    "--job-name",
    "--comment",
    "--output",
    "--partition",
    "--chdir",
    "--array",
    "--account",
    "--qos",
    "--hold",
    "--begin",
    "--exclusive",
}


def _expands(job: FakeJob) -> int | None:
    if job.name.startswith(EXPANDER_PREFIX) and job.dependency:
        return int(job.dependency.split(":", 1)[1])
    return None


def _runs_srun(line: str) -> bool:
    words = line.split()
    if words[:1] == ["exec"]:
        words = words[1:]
    return words[:1] == ["srun"] or words[:1] == ["'srun'"]


def _stdout(pattern: str, job_id: int, workdir: str) -> str:
    path = pattern.replace("%j", str(job_id))
    return path if path.startswith("/") else os.path.join(workdir, path)


def _parse_time(text: str) -> float:
    """Slurm's time formats (``M``, ``M:S``, ``H:M:S``, ``D-H``, ``D-H:M``, ``D-H:M:S``), seconds.

    >>> _parse_time("5"), _parse_time("1-01:03:07"), _parse_time("0-00:07:00")
    (300.0, 90187.0, 420.0)
    """
    days, _, rest = text.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if days:
        h, m, s = (parts + [0, 0])[:3]
        return float(int(days) * 86400 + h * 3600 + m * 60 + s)
    if len(parts) == 1:
        return parts[0] * 60.0
    if len(parts) == 2:
        return parts[0] * 60.0 + parts[1]
    if len(parts) == 3:
        return parts[0] * 3600.0 + parts[1] * 60 + parts[2]
    raise ValueError(f"invalid time limit {text!r}")


_UNITS = {"seconds": 1, "minutes": 60, "hours": 3600, "hour": 3600, "days": 86400, "": 1}


def _parse_begin(text: str, now: float) -> float:
    """``now+N[unit]`` (``now+1hour``, ``now+30minutes``) as seconds since the epoch."""
    m = re.fullmatch(r"now\+(\d+)([a-z]*)", text)
    if m is None or m.group(2) not in _UNITS:
        raise ValueError(f"invalid --begin {text!r}")
    return now + int(m.group(1)) * _UNITS[m.group(2)]


def _expand_ranges(text: str) -> list[int]:
    """``0-5`` or ``1,3,7-9`` as a list of task ids."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    if not out:
        raise ValueError(text)
    return out


def _ranges(ids: Sequence[int]) -> str:
    """Task ids in Slurm's compact form (``2-5,7``)."""
    out, ids = [], sorted(ids)
    start = prev = ids[0]
    for i in [*ids[1:], math.inf]:
        if i != prev + 1:
            out.append(str(start) if start == prev else f"{start}-{prev}")
            start = i  # type: ignore[assignment]
        prev = i  # type: ignore[assignment]
    return ",".join(out)


__all__ = ["ENDED_STATES", "FakeJob", "FakeSlurm"]
