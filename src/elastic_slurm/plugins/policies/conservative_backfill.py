"""Conservative backfilling: every queued job gets a reservation, in arrival order.

A. W. Mu'alem and D. G. Feitelson, "Utilization, Predictability, Workloads, and User Runtime
Estimates in Scheduling the IBM SP2 with Backfilling", IEEE TPDS 12(6), 2001, section 2
(conservative backfilling, after Feitelson and Weil 1998): a job may start early only if it
delays no job ahead of it in the queue, not just the first.
"""

from __future__ import annotations

import math
from typing import ClassVar

from elastic_slurm.model.decisions import Decision, Start
from elastic_slurm.model.snapshot import ClusterSnapshot
from elastic_slurm.model.triggers import Trigger
from elastic_slurm.plugins.kit.backfill import (
    BackfillOptions,
    FreeProfile,
    estimate_s,
    estimated_end_s,
    estimates_for,
)
from elastic_slurm.plugins.kit.kept_plan import KeptPlan
from elastic_slurm.plugins.kit.queue import INFINITY, start_size, without_started
from elastic_slurm.plugins.policy import Policy


class ConservativeBackfill(Policy):
    """Conservative backfilling (Mu'alem and Feitelson 2001, section 2).

    Each cycle builds the profile of free nodes over time from the idle nodes and the running
    jobs' estimated ends (a job past its estimate is expected to end just after now, so its
    nodes are never promised for the present), then gives each pending job, in submission
    order, the earliest reservation where it fits for its whole estimated run (its time
    limit) without touching earlier reservations. Jobs whose reservation is now start.

    Choices, where the paper leaves room:

    * Reservations are recomputed from scratch every cycle, in queue order, instead of being
      kept and only moved earlier ("compression"), so that the policy stays a function of the
      snapshot. Recomputing can, rarely, give a job a later reservation than in the previous
      cycle (an earlier job moving into a hole it had); it never starts a job that delays an
      earlier one by the estimates. The policy keeps the last cycle's reservations only to
      skip recomputing those that the recomputation provably gives again (see
      :mod:`~elastic_slurm.plugins.kit.kept_plan`): the decisions are the recomputation's.
    * A job without a time limit reserves its nodes for ever once started or reserved.

    Jobs start at :func:`~elastic_slurm.plugins.policies.fcfs.start_size`; running jobs are
    never resized. Ignores the trigger.
    """

    name: ClassVar[str] = "conservative_backfill"
    summary: ClassVar[str] = (
        "Conservative backfilling: every queued job gets a reservation in order; a job starts"
        " early only if it delays none. Never resizes elastic jobs."
    )
    paper: ClassVar[str] = "A. W. Mu'alem and D. G. Feitelson, IEEE TPDS 12(6), 2001"
    section: ClassVar[str] = "section 2"
    job_kinds: ClassVar[tuple[str, ...]] = ("rigid",)
    resizes: ClassVar[bool] = False

    Config: ClassVar[type] = BackfillOptions

    def __init__(self, config: BackfillOptions | None = None) -> None:
        super().__init__(config)
        self._plan: KeptPlan[FreeProfile] | None = None  # last cycle's reservations

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        """Start the jobs whose reservation, made in queue order, is now."""
        pending = snapshot.pending()
        idle = len(snapshot.idle_nodes())
        if not pending or idle == 0:
            return []
        now = snapshot.time_s
        est = estimates_for(snapshot, self.config.estimates)
        after_now = math.nextafter(now, INFINITY)
        releases = []
        for job in snapshot.running():
            end = estimated_end_s(job, now, est)
            releases.append((end if end > now else after_now, len(job.nodes)))  # its size
        profile = FreeProfile(now, idle, releases)
        plan = self._plan
        if plan is not None and plan.follows(now, est, profile, pending):
            work, places = plan.final.after(now), plan.places
            due = min(places, default=INFINITY) == now  # reservations that are now start
            starts = [k for k, t in enumerate(places) if t == now] if due else []
        else:
            work, places, starts = profile.after(now), [], []  # a copy of profile
        for position in range(len(places), len(pending)):
            if work.free[0] == 0:
                break  # nothing else can start now; later reservations change nothing now
            job = pending[position]
            size = start_size(job)
            duration = max(estimate_s(job, size, est), 0.0)
            i = work.earliest(size, duration)
            if i == len(work.times):
                places.append(INFINITY)
                continue  # can never fit: reserves nothing
            if i == 0:
                starts.append(position)
            places.append(work.times[i])
            work.reserve(i, size, duration)
        decisions: list[Decision] = []
        for position in starts:
            job = pending[position]
            why = "its reservation is now" if position else "first come, first served"
            size = start_size(job)
            decisions.append(Start(job.job_id, size, f"conservative backfilling: {why}"))
            profile.reserve(0, size, max(estimate_s(job, size, est), 0.0))
        queue = without_started(pending, places, starts)
        self._plan = KeptPlan.of(now, est, profile, work, queue, places)
        return decisions
