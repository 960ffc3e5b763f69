"""Queue order and sizes: which job is served first, and at how many nodes.

Every function is pure and reads only a :class:`~elastic_slurm.model.snapshot.JobView`.
"""

from __future__ import annotations

from collections.abc import Sequence

from elastic_slurm.model.request import JobKind
from elastic_slurm.model.snapshot import JobView

INFINITY = float("inf")

SIZEABLE = (JobKind.MOLDABLE, JobKind.MALLEABLE)
"""Kinds whose start size a policy may choose within ``[nodes_min, nodes_max]``."""


def submit_order(job: JobView) -> tuple[float, int]:
    """Sort key of first come, first served: submission time, then job id."""
    return (job.submit_time_s, job.job_id)


def start_order(job: JobView) -> tuple[float, float, int]:
    """Sort key of running jobs: earliest start first (unknown start last), then submission."""
    start = job.start_time_s if job.start_time_s is not None else INFINITY
    return (start, job.submit_time_s, job.job_id)


def start_size(job: JobView) -> int:
    """The size a baseline policy starts a pending job at: its request, kept within its range.

    Moldable and malleable jobs start at their requested size here; only elastic policies
    choose other sizes.

    >>> from elastic_slurm.model import JobKind, JobState, JobView
    >>> start_size(JobView(1, JobKind.MOLDABLE, JobState.PENDING, (), 9, 2, 8, 0.0))
    8
    """
    n = job.nodes_requested
    if 1 <= job.nodes_min <= n <= job.nodes_max:
        return n
    return min(max(n, job.nodes_min, 1), max(job.nodes_max, 1))


def start_range(job: JobView) -> tuple[int, int]:
    """The sizes (nodes) a pending job may start at, ``(low, high)`` with ``low >= 1``.

    Moldable and malleable jobs: ``nodes_min`` to ``nodes_max``; rigid and evolving jobs:
    their requested size, twice.
    """
    if job.kind in SIZEABLE:
        low = max(1, job.nodes_min)
        return low, max(low, job.nodes_max)
    size = max(1, job.nodes_requested)
    return size, size


def releasable(job: JobView) -> int:
    """Nodes a running job can give back without going below its minimum (at least one)."""
    return max(0, job.size - max(1, job.nodes_min))


def growable(job: JobView) -> int:
    """Nodes a running job can take without going above its maximum."""
    return max(0, job.nodes_max - job.size)


__all__ = [
    "INFINITY",
    "SIZEABLE",
    "growable",
    "releasable",
    "start_order",
    "start_range",
    "start_size",
    "submit_order",
]


def without_started(
    pending: Sequence[JobView], places: list[float], started: Sequence[int]
) -> Sequence[JobView]:
    """The queue left after a cycle: ``pending`` without the positions in ``started``.

    ``places`` (the reservations of a prefix of ``pending``) loses the same positions, in
    place. ``started`` is ascending and usually short, so the queue is copied only when a job
    started; otherwise ``pending`` itself is returned.

    >>> places = [1.0, 2.0]
    >>> [j for j in without_started(["a", "b", "c"], places, [0])], places
    (['b', 'c'], [2.0])
    """
    if not started:
        return pending
    queue = list(pending)
    for k in reversed(started):
        del queue[k]
        if k < len(places):
            del places[k]
    return queue
