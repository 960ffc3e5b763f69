"""One batched observation of Slurm, turned into an immutable snapshot for the policy.

Two commands per cycle (``squeue --json`` and ``sinfo``), whatever the number of jobs. Jobs
whose comment carries the elastic tag get their kind and range from it; all others are rigid at
their requested size. A job's helper allocations are not jobs of their own: an expander
(``expand:<job>``) is part of a resize under way and is left out (its nodes show as
allocated); a sibling's (``sibling:<job>``) nodes are counted as the job's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from elastic_slurm.adapter.backend import SIBLING_PREFIX, helper_parent
from elastic_slurm.adapter.parse import SlurmJob, SlurmNode, array_task_count
from elastic_slurm.adapter.tags import ElasticTag, decode
from elastic_slurm.controller.starts import awaits_controller as awaits
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.resize_order import AckStatus, ResizeAction
from elastic_slurm.model.snapshot import ClusterSnapshot, JobState, JobView, NodeState, NodeView
from elastic_slurm.model.speedup import SpeedupModel, from_spec
from elastic_slurm.protocol.jobdir import JobDirs


def held_nodes(jobs: Sequence[SlurmJob]) -> dict[int, tuple[str, ...]]:
    """Every running job's nodes, its siblings' included (helpers themselves are not keys)."""
    held = {
        j.job_id: j.nodes
        for j in jobs
        if j.model_state is JobState.RUNNING and helper_parent(j.name) is None
    }
    for j in jobs:
        parent = helper_parent(j.name)
        if (
            parent in held
            and j.name.startswith(SIBLING_PREFIX)
            and j.model_state is JobState.RUNNING
        ):
            held[parent] = (*held[parent], *j.nodes)
    return held


def torn_nodes(jobs: Sequence[SlurmJob], nodes: Sequence[SlurmNode]) -> list[str]:
    """Nodes reported idle that a job listed as running holds: a torn view.

    Jobs and nodes are two queries; a job that ends between them is listed running on nodes
    already idle (and one that starts between them, the other way round).
    """
    held = {name for names in held_nodes(jobs).values() for name in names}
    return [n.name for n in nodes if n.model_state is NodeState.IDLE and n.name in held]


def orphan_helpers(jobs: Sequence[SlurmJob]) -> list[int]:
    """Expander and sibling allocations whose job is no longer running (to be cancelled)."""
    running = {j.job_id for j in jobs if j.model_state is JobState.RUNNING}
    return [
        j.job_id
        for j in jobs
        if (parent := helper_parent(j.name)) is not None
        and parent not in running
        and j.model_state in (JobState.PENDING, JobState.RUNNING)
    ]


def stale_helpers(
    jobs: Sequence[SlurmJob],
    in_flight: Collection[int],
    now_s: float,
    min_age_s: float,
    on_error: Callable[[int, Exception], None] | None = None,
    jobdirs: JobDirs | None = None,
) -> list[int]:
    """Helper allocations of running jobs that no resize will ever use (to be cancelled).

    Such a helper is left when a controller is killed while ``salloc`` waits for a grant: the
    ``salloc`` outlives it and may be granted after the next controller has settled the
    journal. A helper is stale when it has been running for at least ``min_age_s`` seconds,
    its job has no resize under way (``in_flight``, and no unacknowledged order in the job's
    directory), and it is an expander (merged at once when granted, so never running for
    long) or a sibling none of whose nodes the job runs on (its last order's nodes).

    A job whose directory cannot be read raises, or, with ``on_error``, is reported to
    ``on_error(job_id, error)`` and its helpers are kept (nothing is cancelled on a guess).
    """
    running = {j.job_id: j for j in jobs if j.model_state is JobState.RUNNING}
    stale = []
    for h in jobs:
        parent = helper_parent(h.name)
        job = running.get(parent) if parent is not None else None
        if job is None or parent in in_flight or h.model_state is not JobState.RUNNING:
            continue
        if now_s - (h.start_time_s or now_s) < min_age_s:
            continue
        used: set[str] = set(job.nodes)
        if job.workdir:
            try:
                jobdir = (jobdirs or JobDirs()).of(job.workdir, job.job_id, user=job.user)
                seq = jobdir.last_order_seq()
                ack = jobdir.final_ack(seq) if seq else None
            except Exception as exc:
                if on_error is None:
                    raise
                on_error(job.job_id, exc)
                continue
            if seq:
                if ack is None:
                    continue  # an order is being followed: its nodes are in use
                used = set(ack.nodes)
        if not h.name.startswith(SIBLING_PREFIX) or not used & set(h.nodes):
            stale.append(h.job_id)
    return stale


def bounded_grace(job: SlurmJob, max_grace_s: float) -> tuple[SlurmJob, str]:
    """``job`` with the grace period of its elastic tag made finite and at most ``max_grace_s``.

    The grace period (seconds) comes from the job's comment, which its user wrote: one that is
    not a finite, non-negative number (``inf``, ``nan``, ``-5``) is dropped (the site's
    default, ``controller.resize_timeout_s``, applies), one longer than ``max_grace_s`` is cut
    to it. Returns the job (unchanged, or with its comment rewritten) and what was changed
    (``""``: nothing).

    >>> from elastic_slurm.adapter.parse import SlurmJob
    >>> def job(grace):
    ...     tag = f"elastic-slurm:kind=malleable;min=1;max=4;grace={grace}"
    ...     return SlurmJob(1, "j", "RUNNING", ("n1",), 1, tag, 0.0, 0.0, "n1", "/w", "u", "p",
    ...                     "a", "q", "None")
    >>> fixed, why = bounded_grace(job("1e6"), 600.0)
    >>> decode(fixed.comment).grace_s, why
    (600.0, 'grace period 1e+06 s is longer than the site allows: 600 s applies')
    >>> bounded_grace(job("inf"), 600.0)[1]  # no tag at all: decode refuses it (not elastic)
    ''
    >>> bounded_grace(job("30"), 600.0)[1]
    ''
    """
    tag = decode(job.comment)
    if tag is None or tag.grace_s is None:
        return job, ""
    grace = tag.grace_s
    if not math.isfinite(grace) or grace < 0:
        why = (
            f"grace period {grace:g} s is not a finite, non-negative number: "
            "the site's default applies"
        )
        bounded = None
    elif grace > max_grace_s:
        why = f"grace period {grace:g} s is longer than the site allows: {max_grace_s:g} s applies"
        bounded = max_grace_s
    else:
        return job, ""
    return replace(job, comment=replace(tag, grace_s=bounded).encode()), why


def size_changes(
    before: Mapping[int, tuple[str, ...]],
    after: Mapping[int, tuple[str, ...]],
    ignore: Collection[int] = (),
) -> list[tuple[int, tuple[str, ...], tuple[str, ...]]]:
    """Running jobs whose nodes changed between two observations: ``(job, before, after)``.

    ``before`` and ``after`` are :func:`held_nodes` of two cycles; a job in only one of them
    (started, ended) did not change size, and jobs in ``ignore`` (resized by the controller
    meanwhile) are left out. In job id order.

    >>> size_changes({1: ("a",), 2: ("b",), 3: ("c",)}, {1: ("a", "d"), 2: ("b",), 3: ()}, [3])
    [(1, ('a',), ('a', 'd'))]
    """
    return [
        (job_id, before[job_id], nodes)
        for job_id, nodes in sorted(after.items())
        if job_id in before and job_id not in ignore and set(before[job_id]) != set(nodes)
    ]


@dataclass(frozen=True)
class Progress:
    """What a running elastic job's directory says: its open evolving request and resizes."""

    evolving_request: int = 0
    request_number: int = 0
    expansions: int = 0
    shrinks: int = 0


def job_progress(job: SlurmJob, jobdirs: JobDirs | None = None) -> Progress:
    """Read the job's open evolving request (if any) and resize counts from its directory.

    A request is open until the controller answers it (``requests/N.answer.json``).
    ``jobdirs``: where the job's protocol files are (default: its own directory).
    """
    if not job.workdir:
        return Progress()
    jobdir = (jobdirs or JobDirs()).of(job.workdir, job.job_id, user=job.user)
    open_request = next(
        (r for r in reversed(jobdir.requests()) if not jobdir.answered(int(r["number"]))),
        None,
    )
    expansions = shrinks = 0
    for seq in range(1, jobdir.last_order_seq() + 1):
        order, ack = jobdir.read_order(seq), jobdir.read_ack(seq, AckStatus.DONE)
        if order is None or ack is None:
            continue
        if order.action is ResizeAction.EXPAND:
            expansions += 1
        else:
            shrinks += 1
    if open_request is None:
        return Progress(0, 0, expansions, shrinks)
    return Progress(int(open_request["delta"]), int(open_request["number"]), expansions, shrinks)


@dataclass(frozen=True)
class Sweep:
    """An elastic sweep: a job array tagged malleable, seen by policies as one malleable job.

    Its size is the nodes its running tasks hold; it grows and shrinks by changing how many
    tasks may run at once (``ArrayTaskThrottle``), in steps of one task's nodes. Running tasks
    are never stopped: a shrink takes effect as they finish.
    """

    array_id: int
    tag: ElasticTag
    running: tuple[SlurmJob, ...]
    pending_tasks: int
    throttle: int | None
    submit_time_s: float

    @property
    def task_nodes(self) -> int:
        """Nodes of one task."""
        return self.tag.nodes_min

    @property
    def nodes(self) -> tuple[str, ...]:
        """Nodes of the running tasks."""
        return tuple(n for t in self.running for n in t.nodes)

    def view(self, resizing: bool = False) -> JobView:
        """The sweep as one malleable job."""
        running = bool(self.running)
        tasks = len(self.running) + self.pending_tasks
        return JobView(
            job_id=self.array_id,
            kind=JobKind.MALLEABLE,
            state=JobState.RUNNING if running else JobState.PENDING,
            nodes=self.nodes,
            nodes_requested=len(self.nodes) if running else self.task_nodes,
            nodes_min=self.task_nodes,
            nodes_max=max(tasks, 1) * self.task_nodes,
            submit_time_s=self.submit_time_s,
            start_time_s=min((t.start_time_s or 0.0) for t in self.running) if running else None,
            resizing=resizing,
            name=f"sweep {self.array_id}",
        )

    def throttle_for(self, nodes: int) -> int:
        """The throttle that lets the sweep hold about ``nodes`` nodes (at least one task)."""
        return max(1, nodes // self.task_nodes)


def sweeps(jobs: Sequence[SlurmJob]) -> dict[int, Sweep]:
    """Job arrays tagged malleable, by array id."""
    groups: dict[int, list[SlurmJob]] = {}
    for j in jobs:
        tag = decode(j.comment)
        if j.array_job_id and tag is not None and tag.kind is JobKind.MALLEABLE:
            groups.setdefault(j.array_job_id, []).append(j)
    out = {}
    for array_id, tasks in groups.items():
        live = [t for t in tasks if t.model_state in (JobState.PENDING, JobState.RUNNING)]
        if not live:
            continue
        tag = decode(live[0].comment)
        assert tag is not None
        pending = sum(
            array_task_count(t.array_pending) if t.array_pending else 1
            for t in live
            if t.model_state is JobState.PENDING
        )
        out[array_id] = Sweep(
            array_id=array_id,
            tag=tag,
            running=tuple(t for t in live if t.model_state is JobState.RUNNING),
            pending_tasks=pending,
            throttle=next((t.array_throttle for t in live if t.array_throttle), None),
            submit_time_s=min(t.submit_time_s for t in tasks),
        )
    return out


def job_view(
    job: SlurmJob,
    resizing: bool = False,
    nodes: tuple[str, ...] | None = None,
    progress: Progress | None = None,
) -> JobView:
    """The model's view of one Slurm job.

    ``nodes`` is all it holds, siblings included; ``progress`` its evolving request and resize
    counts (see :func:`job_progress`). The time limit, speedup model, evolution profile and
    estimated end come from Slurm and the job's elastic tag.
    """
    tag = decode(job.comment)
    progress = progress or Progress()
    state = job.model_state
    held = job.nodes if nodes is None else nodes
    size = len(held) if state is JobState.RUNNING and held else job.node_count
    if tag is None:
        kind, lo, hi = JobKind.RIGID, size, size
    else:
        kind, lo, hi = tag.kind, tag.nodes_min, tag.nodes_max
        if tag.sized_by == "controller" and state is JobState.PENDING and not awaits(job):
            lo = hi = job.node_count  # sized and released: Slurm starts it at that size
    return JobView(
        job_id=job.job_id,
        kind=kind,
        state=state,
        nodes=held if state is JobState.RUNNING else (),
        nodes_requested=size,
        nodes_min=lo,
        nodes_max=hi,
        submit_time_s=job.submit_time_s,
        start_time_s=job.start_time_s,
        resizing=resizing,
        batch_host=job.batch_host,
        name=job.name,
        walltime_s=job.time_limit_s,
        estimated_end_s=job.end_time_s if state is JobState.RUNNING else None,
        speedup=_speedup(tag.speedup) if tag else None,
        evolving_request=progress.evolving_request if kind is JobKind.EVOLVING else 0,
        expansions=progress.expansions,
        shrinks=progress.shrinks,
        evolution_profile=tag.evolution_profile if tag is not None else None,
    )


def _speedup(spec: str | None) -> SpeedupModel | None:
    if not spec:
        return None
    try:
        return from_spec(spec)
    except ValueError:
        return None  # a tag written by hand: the policy does without a model


def _held_by_someone(job: SlurmJob) -> bool:
    """A pending job its user or an operator holds: it starts only when they release it.

    Jobs held for the controller to size (:func:`~.starts.awaits_controller`) are not: the
    policy decides their start.
    """
    return (
        job.model_state is JobState.PENDING
        and job.reason in ("JobHeldUser", "JobHeldAdmin")
        and not awaits(job)
    )


def snapshot(
    jobs: Sequence[SlurmJob],
    nodes: Sequence[SlurmNode],
    resizing: Collection[int] = (),
    now_s: float | None = None,
    progress: Mapping[int, Progress] | None = None,
) -> ClusterSnapshot:
    """The snapshot of a poll: pending and running jobs, and every node.

    Jobs held by their user or an operator are left out (no policy may plan nodes for a job
    that cannot start); jobs held for the controller to size are in.

    Parameters
    ----------
    jobs, nodes
        What Slurm reported.
    resizing
        Ids of jobs with a resize under way (the policy must leave them alone).
    now_s
        The time of the observation (seconds since the epoch; default now).
    progress
        Running elastic jobs' evolving requests and resize counts, by job id.
    """
    held = held_nodes(jobs)
    progress = progress or {}
    arrays = sweeps(jobs)
    views = [
        job_view(j, j.job_id in resizing, held.get(j.job_id), progress.get(j.job_id))
        for j in jobs
        if helper_parent(j.name) is None
        and j.model_state in (JobState.PENDING, JobState.RUNNING)
        and j.array_job_id not in arrays
        and not _held_by_someone(j)
    ]
    views += [s.view(s.array_id in resizing) for s in arrays.values()]
    views.sort(key=lambda v: (v.submit_time_s, v.job_id))
    node_views = tuple(NodeView(n.name, n.model_state, n.cpus) for n in nodes)
    return ClusterSnapshot(time.time() if now_s is None else now_s, tuple(views), node_views)
