"""One batched observation of Slurm, turned into an immutable snapshot for the policy.

Two commands per cycle (``squeue --json`` and ``sinfo``), whatever the number of jobs. Jobs
whose comment carries the elastic tag get their kind and range from it; all others are rigid at
their requested size. Expander allocations (``expand:<job>``) are part of a resize under way
and are left out: their nodes show as allocated.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence

from elastic_slurm.adapter.parse import SlurmJob, SlurmNode
from elastic_slurm.adapter.tags import decode
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.snapshot import ClusterSnapshot, JobState, JobView, NodeView

EXPANDER_PREFIX = "expand:"


def job_view(job: SlurmJob, resizing: bool = False) -> JobView:
    """The model's view of one Slurm job."""
    tag = decode(job.comment)
    state = job.model_state
    size = len(job.nodes) if state is JobState.RUNNING and job.nodes else job.node_count
    if tag is None:
        kind, lo, hi = JobKind.RIGID, size, size
    else:
        kind, lo, hi = tag.kind, tag.nodes_min, tag.nodes_max
    return JobView(
        job_id=job.job_id,
        kind=kind,
        state=state,
        nodes=job.nodes if state is JobState.RUNNING else (),
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
    views = [
        job_view(j, j.job_id in resizing)
        for j in jobs
        if not j.name.startswith(EXPANDER_PREFIX)
        and j.model_state in (JobState.PENDING, JobState.RUNNING)
    ]
    views.sort(key=lambda v: (v.submit_time_s, v.job_id))
    node_views = tuple(NodeView(n.name, n.model_state, n.cpus) for n in nodes)
    return ClusterSnapshot(time.time() if now_s is None else now_s, tuple(views), node_views)
