"""First come, first served: start queued jobs in arrival order until one does not fit.

The baseline of every paper in ``shared/papers`` (for example Lina et al. section 5.3, the
"rigid" line, and Ghafoor's thesis chapter 6). No job ever overtakes an earlier one, so a wide
job at the head of the queue leaves nodes idle until enough are free.

This module also holds the helpers the backfilling policies share: :func:`start_size` and
:func:`estimate_s`.
"""

from __future__ import annotations

from typing import ClassVar

from elastic_slurm.model.decisions import Decision, Start
from elastic_slurm.model.snapshot import ClusterSnapshot, JobView
from elastic_slurm.model.triggers import Trigger
from elastic_slurm.plugins.policy import Policy

INFINITY = float("inf")


def start_size(job: JobView) -> int:
    """The size a baseline policy starts a pending job at: its request, kept within its range.

    Moldable and malleable jobs start at their requested size here; only elastic policies
    choose other sizes.
    """
    n = job.nodes_requested
    if 1 <= job.nodes_min <= n <= job.nodes_max:
        return n
    return min(max(n, job.nodes_min, 1), max(job.nodes_max, 1))


def estimate_s(job: JobView, nodes: int) -> float:
    """The estimated run time (seconds) of a pending job on ``nodes`` nodes: its time limit.

    Scaled by the job's speedup model when ``nodes`` is not its requested size; infinite
    when the time limit is unknown (such a job cannot be fitted before a reservation).
    """
    est = job.walltime_at_s(nodes)
    return INFINITY if est is None else est


def estimated_end_s(job: JobView, now_s: float) -> float:
    """When a running job is expected to end (seconds): its estimated end, not before now.

    A job that has overrun its time limit is expected to end now (it holds its nodes until it
    really ends); one without an estimate never ends, as far as reservations go.
    """
    end = job.estimated_end_s
    if end is None:
        return INFINITY
    return end if end > now_s else now_s


class FCFS(Policy):
    """First come, first served, without backfilling.

    Each cycle starts pending jobs in submission order at :func:`start_size`, while they fit
    in the idle nodes, and stops at the first that does not fit. Running jobs are never
    resized. Ignores the trigger.
    """

    name: ClassVar[str] = "fcfs"
    summary: ClassVar[str] = (
        "First come, first served: start queued jobs in order until one does not fit; no "
        "backfilling."
    )
    paper: ClassVar[str] = ""
    section: ClassVar[str] = "the baseline of Lina et al. (section 5.3) and Ghafoor (chapter 6)"
    job_kinds: ClassVar[tuple[str, ...]] = ("rigid",)
    resizes: ClassVar[bool] = False

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        """Start the longest prefix of the queue that fits in the idle nodes."""
        pending = snapshot.pending()
        if not pending:
            return []
        free = len(snapshot.idle_nodes())
        decisions: list[Decision] = []
        for job in pending:
            size = start_size(job)
            if size > free:
                break
            decisions.append(Start(job.job_id, size, "first come, first served"))
            free -= size
        return decisions
