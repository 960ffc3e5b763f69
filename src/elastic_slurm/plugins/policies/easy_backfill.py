"""EASY backfilling: first come, first served, with a reservation for the first blocked job.

A. W. Mu'alem and D. G. Feitelson, "Utilization, Predictability, Workloads, and User Runtime
Estimates in Scheduling the IBM SP2 with Backfilling", IEEE TPDS 12(6), 2001, section 2
(EASY: Lifka's Extensible Argonne Scheduling sYstem). Lina et al. use it for their initial
allocation (Algorithm 3).

Unlike AccaSim's "EASY backfilling" (see ``shared/docs/PEERS.md``), the blocked head job gets a
real reservation: a later job starts early only if it cannot delay it.
"""

from __future__ import annotations

from typing import ClassVar

from elastic_slurm.model.decisions import Decision, Start
from elastic_slurm.model.snapshot import ClusterSnapshot, JobView
from elastic_slurm.model.triggers import Trigger
from elastic_slurm.plugins.kit.backfill import (
    BackfillOptions,
    estimate_s,
    estimated_end_s,
    estimates_for,
    shadow,
)
from elastic_slurm.plugins.kit.queue import start_size
from elastic_slurm.plugins.policy import Policy


class EasyBackfill(Policy):
    """EASY backfilling (Mu'alem and Feitelson 2001, section 2).

    Each cycle, with the jobs' time limits as run-time estimates:

    1. Start pending jobs in submission order while they fit in the idle nodes. A job wider
       than the machine is passed over: it can never start, so it reserves nothing (as in
       conservative backfilling and ``lina_elastic``).
    2. For the first job that does not fit (the head), find the *shadow time*: running jobs
       are taken by estimated end (earliest first; a job past its estimate is expected to end
       now) until the nodes they free plus the idle nodes cover the head. The *extra* nodes
       are those left over at that time.
    3. Go through the rest of the queue in order and start every job that fits in the idle
       nodes now and either ends (by its estimate) by the shadow time, or uses no more than
       the extra nodes (which it then uses up).

    The head job is therefore never delayed by a backfilled job, if estimates hold; other
    queued jobs may be (that is the difference from conservative backfilling). Jobs start at
    :func:`~elastic_slurm.plugins.policies.fcfs.start_size`; running jobs are never resized.
    A job without a time limit is never backfilled into the shadow window, and a running job
    without one never ends for the reservation. The reservation is recomputed every cycle from
    the snapshot (the policy keeps no state). Ignores the trigger.
    """

    name: ClassVar[str] = "easy_backfill"
    summary: ClassVar[str] = (
        "EASY backfilling: FCFS with a reservation for the first blocked job; later jobs "
        "start early if they cannot delay it. Never resizes elastic jobs."
    )
    paper: ClassVar[str] = "A. W. Mu'alem and D. G. Feitelson, IEEE TPDS 12(6), 2001"
    section: ClassVar[str] = "section 2"
    job_kinds: ClassVar[tuple[str, ...]] = ("rigid",)
    resizes: ClassVar[bool] = False

    Config: ClassVar[type] = BackfillOptions

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        """Start the queue's fitting prefix, then backfill around the head's reservation."""
        pending = snapshot.pending()
        if not pending:
            return []
        free = len(snapshot.idle_nodes())
        now = snapshot.time_s
        est = estimates_for(snapshot, self.config.estimates)
        decisions: list[Decision] = []
        # this cycle's starts, (job, nodes): their estimated ends are needed only for a
        # reservation, which most cycles do not make
        started: list[tuple[JobView, int]] = []
        head_index = len(pending)
        machine = snapshot.node_count
        for i, job in enumerate(pending):
            size = start_size(job)
            if size > machine:
                continue  # wider than the machine: it can never start, so it reserves nothing
            if size > free:
                head_index = i
                break
            decisions.append(Start(job.job_id, size, "first come, first served"))
            started.append((job, size))
            free -= size
        if head_index >= len(pending) - 1 or free == 0:
            return decisions  # nobody blocked, nothing behind the head, or no idle node

        head = pending[head_index]
        shadow_s = -1.0  # computed when the first candidate that fits now is found
        extra = 0
        for job in pending[head_index + 1 :]:
            if job.nodes_min > free:
                continue  # cheap test first: the queue can be long
            size = start_size(job)
            if size > free:
                continue
            if shadow_s < 0.0:
                ends = [(now + estimate_s(j, n, est), n) for j, n in started]
                ends += [(estimated_end_s(j, now, est), len(j.nodes)) for j in snapshot.running()]
                shadow_s, extra = shadow(ends, free, start_size(head))
            if now + estimate_s(job, size, est) <= shadow_s:
                reason = (
                    f"backfilled: ends before job {head.job_id}'s reservation at {shadow_s:g} s"
                )
            elif size <= extra:
                extra -= size
                reason = f"backfilled: uses {size} of the nodes job {head.job_id} leaves spare"
            else:
                continue
            decisions.append(Start(job.job_id, size, reason))
            free -= size
            if free == 0:
                break
        return decisions
