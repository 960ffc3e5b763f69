"""One batched observation of Slurm, turned into an immutable snapshot for the policy.

Two commands per cycle (``squeue --json`` and ``sinfo``), whatever the number of jobs. Jobs
whose comment carries the elastic tag get their kind and range from it; all others are rigid at
their requested size. A job's helper allocations are not jobs of their own: an expander
(``expand:<job>``) is part of a resize under way and is left out (its nodes show as
allocated); a sibling's (``sibling:<job>``) nodes are counted as the job's.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence

from elastic_slurm.adapter.backend import SIBLING_PREFIX, helper_parent
from elastic_slurm.adapter.parse import SlurmJob, SlurmNode
from elastic_slurm.adapter.tags import decode
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.snapshot import ClusterSnapshot, JobState, JobView, NodeView


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


def job_view(
    job: SlurmJob, resizing: bool = False, nodes: tuple[str, ...] | None = None
) -> JobView:
    """The model's view of one Slurm job (``nodes``: all it holds, siblings included)."""
    tag = decode(job.comment)
    state = job.model_state
    held = job.nodes if nodes is None else nodes
    size = len(held) if state is JobState.RUNNING and held else job.node_count
    if tag is None:
        kind, lo, hi = JobKind.RIGID, size, size
    else:
        kind, lo, hi = tag.kind, tag.nodes_min, tag.nodes_max
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
    )


def snapshot(
    jobs: Sequence[SlurmJob],
    nodes: Sequence[SlurmNode],
    resizing: Collection[int] = (),
    now_s: float | None = None,
) -> ClusterSnapshot:
    """The snapshot of a poll: pending and running jobs, and every node.

    Parameters
    ----------
    jobs, nodes
        What Slurm reported.
    resizing
        Ids of jobs with a resize under way (the policy must leave them alone).
    now_s
        The time of the observation (seconds since the epoch; default now).
    """
    held = held_nodes(jobs)
    views = [
        job_view(j, j.job_id in resizing, held.get(j.job_id))
        for j in jobs
        if helper_parent(j.name) is None and j.model_state in (JobState.PENDING, JobState.RUNNING)
    ]
    views.sort(key=lambda v: (v.submit_time_s, v.job_id))
    node_views = tuple(NodeView(n.name, n.model_state, n.cpus) for n in nodes)
    return ClusterSnapshot(time.time() if now_s is None else now_s, tuple(views), node_views)
