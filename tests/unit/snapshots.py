"""The one builder of job views and cluster snapshots for policy tests.

``job(...)`` makes a :class:`JobView` from what a test cares about (its id, kind, size, range,
times, request) and fills the rest consistently: a running job gets node names and a start
time, a pending one none. ``snapshot(...)`` puts jobs on a machine of ``total`` nodes of
which ``idle`` are idle (the rest allocated, ``down`` of them unavailable).
"""

from __future__ import annotations

from typing import Any

from elastic_slurm.model import ClusterSnapshot, JobKind, JobState, JobView, NodeState, NodeView
from elastic_slurm.model.estimates import USER_ESTIMATES, RuntimeEstimates

R = JobKind.RIGID
MO = JobKind.MOLDABLE
M = JobKind.MALLEABLE
E = JobKind.EVOLVING


def job(
    job_id: int,
    size: int = 1,
    *,
    kind: JobKind = JobKind.RIGID,
    running: bool = False,
    nodes_min: int | None = None,
    nodes_max: int | None = None,
    requested: int | None = None,
    submit: float | None = None,
    start: float = 0.0,
    walltime: float | None = None,
    end: float | None = None,
    request: int = 0,
    blocking: bool | None = None,
    node_prefix: str | None = None,
    names: tuple[str, ...] | None = None,
    **fields: Any,
) -> JobView:
    """A job view: ``size`` nodes (held while running, asked for while pending).

    Parameters
    ----------
    nodes_min, nodes_max
        The range; ``size`` by default (a rigid job's).
    requested
        ``nodes_requested``; ``size`` by default.
    submit
        Submission time; the job id by default (so ids give the queue order).
    start
        Start time of a running job (ignored while pending).
    walltime
        The time limit (seconds).
    end
        A running job's estimated end (seconds).
    request, blocking
        The evolving request; blocking when nonzero unless told.
    node_prefix
        Names of a running job's nodes: ``f"{prefix}{i}"``; ``f"j{job_id}n"`` by default.
    names
        The running job's node names, instead (``size`` is then their number).
    fields
        Any other :class:`JobView` field (``runtime_s``, ``end_time_s``, ``speedup``...).
    """
    prefix = f"j{job_id}n" if node_prefix is None else node_prefix
    if names is not None:
        size = len(names)
    else:
        names = tuple(f"{prefix}{i}" for i in range(size))
    return JobView(
        job_id=job_id,
        kind=kind,
        state=JobState.RUNNING if running else JobState.PENDING,
        nodes=names if running else (),
        nodes_requested=size if requested is None else requested,
        nodes_min=size if nodes_min is None else nodes_min,
        nodes_max=size if nodes_max is None else nodes_max,
        submit_time_s=float(job_id) if submit is None else submit,
        start_time_s=start if running else None,
        walltime_s=walltime,
        estimated_end_s=end if running else None,
        evolving_request=request,
        evolving_blocking=(request != 0) if blocking is None else blocking,
        **fields,
    )


def nodes(idle: int, total: int, *, down: int = 0, prefix: str = "n") -> tuple[NodeView, ...]:
    """``total`` nodes: the first ``idle`` idle, the last ``down`` unavailable, others allocated."""

    def state(i: int) -> NodeState:
        if i < idle:
            return NodeState.IDLE
        return NodeState.UNAVAILABLE if i >= total - down else NodeState.ALLOCATED

    return tuple(NodeView(f"{prefix}{i}", state(i)) for i in range(total))


def snapshot(
    *jobs: JobView,
    idle: int,
    total: int | None = None,
    time_s: float = 0.0,
    down: int = 0,
    estimates: RuntimeEstimates = USER_ESTIMATES,
    sort: bool = False,
) -> ClusterSnapshot:
    """A snapshot of ``jobs`` at ``time_s`` on ``total`` nodes (idle plus what jobs hold).

    ``sort`` puts the jobs in submission order (the snapshot's invariant); by default they
    stay in the order given.
    """
    if total is None:
        total = idle + sum(len(j.nodes) for j in jobs) + down
    ordered = sorted(jobs, key=lambda j: (j.submit_time_s, j.job_id)) if sort else jobs
    return ClusterSnapshot(
        time_s, tuple(ordered), nodes(idle, total, down=down), estimates=estimates
    )


def held_snapshot(
    *jobs: JobView,
    idle: int | tuple[str, ...],
    time_s: float = 0.0,
    down: int = 0,
    idle_prefix: str = "idle",
    sort_nodes: bool = False,
    estimates: RuntimeEstimates = USER_ESTIMATES,
) -> ClusterSnapshot:
    """A snapshot whose allocated nodes are the ones the running jobs name.

    Nodes: the idle ones (``idle`` names, or that many ``f"{idle_prefix}{i}"``), ``down``
    unavailable ones ``f"down{i}"``, then each running job's nodes, allocated; sorted by name
    with ``sort_nodes``. Jobs are put in submission order.
    """
    names = idle if isinstance(idle, tuple) else tuple(f"{idle_prefix}{i}" for i in range(idle))
    views = [NodeView(n, NodeState.IDLE) for n in names]
    views += [NodeView(f"down{i}", NodeState.UNAVAILABLE) for i in range(down)]
    for j in jobs:
        views += [NodeView(n, NodeState.ALLOCATED) for n in j.nodes]
    if sort_nodes:
        views.sort(key=lambda n: n.name)
    ordered = tuple(sorted(jobs, key=lambda j: (j.submit_time_s, j.job_id)))
    return ClusterSnapshot(time_s, ordered, tuple(views), estimates=estimates)


__all__ = ["E", "M", "MO", "R", "held_snapshot", "job", "nodes", "snapshot"]
