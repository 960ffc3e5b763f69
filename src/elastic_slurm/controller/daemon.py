"""The controller loop: observe, follow resizes under way, decide, act, repeat.

Each cycle makes one batched observation of Slurm, advances the resizes under way (by reading
the jobs' acknowledgements), and, when no resize is under way, asks the policy for decisions
on an immutable snapshot and carries them out. The first cycle first settles what a previous
controller left under way (:meth:`~elastic_slurm.controller.actuate.Actuator.recover`, from the
journal). Running the policy only between resizes keeps
it from deciding twice on nodes that are still moving (for example shrinking a second job for
a pending job whose nodes are already being freed). Events seen since the last cycle (jobs
submitted or ended, resizes done) are coalesced into the cycle's trigger.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from elastic_slurm.adapter.backend import GrowPath, SlurmBackend
from elastic_slurm.adapter.parse import SlurmJob
from elastic_slurm.adapter.tags import decode
from elastic_slurm.controller.actuate import Actuator, ResizeOutcome
from elastic_slurm.controller.journal import Journal
from elastic_slurm.controller.observe import (
    Sweep,
    held_nodes,
    job_progress,
    orphan_helpers,
    snapshot,
    stale_helpers,
    sweeps,
)
from elastic_slurm.errors import SlurmCommandError
from elastic_slurm.model.decisions import Decision, Expand, Shrink
from elastic_slurm.model.snapshot import ClusterSnapshot, JobState
from elastic_slurm.model.triggers import Trigger, TriggerKind
from elastic_slurm.plugins.policy import Policy

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Cycle:
    """What one cycle saw and did."""

    snapshot: ClusterSnapshot
    trigger: Trigger
    decisions: tuple[Decision, ...]
    finished: tuple[ResizeOutcome, ...]


class Controller:
    """Runs ``policy`` against live Slurm.

    Parameters
    ----------
    slurm
        The Slurm backend.
    policy
        The scheduling policy (the same object the simulator can run).
    journal
        Where decisions and outcomes go.
    poll_interval_s
        Seconds between cycles.
    grant_timeout_s, resize_timeout_s, on_overdue
        See :class:`~elastic_slurm.controller.actuate.Actuator`.
    min_resize_interval_s
        A job that started or finished a resize less than this long ago (seconds) is left
        alone by the policy for now (shown to it as resizing).
    grow_path
        ``merge`` or ``sibling`` (see :mod:`elastic_slurm.adapter.capabilities`).
    offer_cooldown_s
        A job that rejected an offer, or let one lapse, is left alone this long (seconds).
    dry_run
        Decide and log, but change nothing in Slurm or in any job.
    """

    def __init__(
        self,
        slurm: SlurmBackend,
        policy: Policy,
        journal: Journal | None = None,
        *,
        poll_interval_s: float = 0.5,
        grant_timeout_s: int = 30,
        resize_timeout_s: float = 120.0,
        min_resize_interval_s: float = 2.0,
        grow_path: GrowPath = "merge",
        on_overdue: str = "keep",
        offer_cooldown_s: float = 30.0,
        dry_run: bool = False,
    ) -> None:
        self.slurm = slurm
        self.policy = policy
        self.journal = journal or Journal()
        self.poll_interval_s = poll_interval_s
        self.dry_run = dry_run
        self.min_resize_interval_s = min_resize_interval_s
        self.offer_cooldown_s = offer_cooldown_s
        self.actuator = Actuator(
            slurm,
            self.journal,
            grant_timeout_s=grant_timeout_s,
            resize_timeout_s=resize_timeout_s,
            grow_path=grow_path,
            on_overdue=on_overdue,
        )
        self._known: set[int] = set()
        self.last: Cycle | None = None
        self._recovered = False
        self._last_sizes: list[tuple[int, str, tuple[str, ...]]] | None = None
        #: What the first cycle did about resizes a previous controller left open.
        self.recovery: list[str] = []

    def step(self) -> Cycle:
        """Run one cycle and return what it saw and did."""
        listed = self.slurm.jobs()
        nodes = self.slurm.nodes()
        orphans = orphan_helpers(listed)
        if orphans and not self.dry_run:
            # a helper allocation must never outlive its job (the launcher also cancels them)
            log.warning("cancelling helper allocations %s: their jobs have ended", orphans)
            self.journal.write("note", message=f"cancelled orphan helpers {orphans}")
            self.slurm.cancel(*orphans)
        stale = (
            []
            if self.dry_run
            else stale_helpers(
                listed, self.actuator.in_flight, time.time(), self.actuator.grant_timeout_s + 10.0
            )
        )
        if stale:
            log.warning("cancelling helper allocations %s: no resize uses them", stale)
            self.journal.write("note", message=f"cancelled stale helpers {stale}")
            self.slurm.cancel(*stale)
        if not self._recovered and not self.dry_run:
            # what a previous controller left under way is settled before anything new
            self._recovered = True
            self.recovery = self.actuator.recover(listed)
            if self.recovery:
                listed = self.slurm.jobs()
        jobs = {j.job_id: j for j in listed}
        held = held_nodes(listed)
        finished = tuple(self.actuator.poll(jobs))
        progress = {
            j.job_id: job_progress(j)
            for j in listed
            if j.model_state is JobState.RUNNING and (t := decode(j.comment)) and t.kind.resizable
        }
        snap = snapshot(list(jobs.values()), nodes, resizing=self._busy(jobs), progress=progress)
        trigger = self._trigger(snap, finished)
        self._journal_sizes(snap)
        decisions: tuple[Decision, ...] = ()
        if all(r.overdue for r in self.actuator.in_flight.values()):
            # a job that ignores an order is left out (it shows as resizing), not everyone
            decisions = tuple(self.policy.decide(snap, trigger))
            if decisions:
                log.info(
                    "policy %s decided: %s",
                    self.policy.name,
                    "; ".join(f"{type(d).__name__} job {d.job_id} ({d.reason})" for d in decisions),
                )
            if self.dry_run:
                for d in decisions:
                    self.journal.write(
                        "decision",
                        decision=type(d).__name__,
                        job_id=d.job_id,
                        dry_run=True,
                        reason=d.reason,
                    )
            else:
                arrays = sweeps(listed)
                self._apply_to_sweeps([d for d in decisions if d.job_id in arrays], arrays)
                self.actuator.apply(
                    [d for d in decisions if d.job_id not in arrays], jobs, held, progress
                )
        self.last = Cycle(snap, trigger, decisions, finished)
        return self.last

    def _journal_sizes(self, snap: ClusterSnapshot) -> None:
        """Journal a ``sizes`` record whenever a job's state or node list changed.

        The record: ``nodes_total`` (the cluster's nodes) and ``jobs``, one dict per pending or
        running job (``job_id``, ``name``, ``kind``, ``state``, ``nodes``: the node names it
        holds, empty while pending). ``elastic-slurm report`` draws jobs and utilisation from
        these records.
        """
        jobs = [
            {
                "job_id": j.job_id,
                "name": j.name,
                "kind": j.kind.value,
                "state": j.state.value,
                "nodes": list(j.nodes) if j.state is JobState.RUNNING else [],
            }
            for j in snap.jobs
        ]
        key = [(j["job_id"], j["state"], tuple(j["nodes"])) for j in jobs]
        if key != self._last_sizes:
            self._last_sizes = key
            self.journal.write("sizes", nodes_total=snap.node_count, jobs=jobs)

    def _apply_to_sweeps(self, decisions: list[Decision], arrays: dict[int, Sweep]) -> None:
        """Grow or shrink elastic sweeps by their throttle (immediate; running tasks go on)."""
        for d in decisions:
            if not isinstance(d, Expand | Shrink):
                continue
            sweep = arrays[d.job_id]
            size = len(sweep.nodes)
            target = size + d.count if isinstance(d, Expand) else size - d.count
            throttle = sweep.throttle_for(target)
            t0 = time.time()
            try:
                self.slurm.set_array_throttle(sweep.array_id, throttle)
                ok, message = True, ""
            except SlurmCommandError as exc:
                ok, message = False, str(exc)
            self.journal.write(
                "outcome",
                job_id=sweep.array_id,
                action=type(d).__name__.lower(),
                ok=ok,
                throttle=throttle,
                message=message,
                reason=d.reason,
            )
            log.info(
                "sweep %d: %s to %d task(s) at once (%s)",
                sweep.array_id,
                type(d).__name__.lower(),
                throttle,
                d.reason,
            )
            self.actuator.outcomes.append(
                ResizeOutcome(
                    job_id=sweep.array_id,
                    seq=0,
                    action=type(d).__name__.lower(),
                    before=sweep.nodes,
                    after=(),
                    ok=ok,
                    seconds=time.time() - t0,
                    strategy="throttle",
                    phases_s={},
                    message=message,
                    finished_at=time.time(),
                )
            )

    def _busy(self, jobs: dict[int, SlurmJob]) -> set[int]:
        """Jobs the policy must leave alone now: resizing, or resized or started too recently."""
        now = time.time()
        recent = {o.job_id: o.finished_at for o in self.actuator.outcomes}
        busy = set(self.actuator.in_flight)
        busy |= {j for j, t in recent.items() if now - t < self.min_resize_interval_s}
        busy |= {
            o.job_id
            for o in self.actuator.outcomes
            if o.declined and now - o.finished_at < self.offer_cooldown_s
        }
        for job_id, job in jobs.items():
            last = max(job.start_time_s or 0.0, recent.get(job_id, 0.0))
            if now - last < self.min_resize_interval_s:
                busy.add(job_id)
        return busy

    def _trigger(self, snap: ClusterSnapshot, finished: tuple[ResizeOutcome, ...]) -> Trigger:
        ids = {j.job_id for j in snap.jobs}
        kinds = set()
        if ids - self._known:
            kinds.add(TriggerKind.JOB_SUBMITTED)
        if self._known - ids:
            kinds.add(TriggerKind.JOB_ENDED)
        if finished:
            kinds.add(TriggerKind.RESIZE_DONE)
        changed = tuple(sorted((ids ^ self._known) | {o.job_id for o in finished}))
        self._known = ids
        return Trigger(frozenset(kinds or {TriggerKind.PERIODIC}), changed)

    def run(self, stop: Callable[[Cycle], bool] | None = None) -> None:
        """Run cycles every ``poll_interval_s`` seconds until ``stop(cycle)`` returns True."""
        while True:
            t0 = time.monotonic()
            cycle = self.step()
            if stop is not None and stop(cycle):
                return
            time.sleep(max(0.0, self.poll_interval_s - (time.monotonic() - t0)))
