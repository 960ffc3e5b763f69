"""The virtual cluster: nodes, jobs in virtual time, and how policy decisions are carried out.

This is the simulator's stand-in for Slurm plus the elastic runtime. It holds every job's
state, answers with snapshots (:meth:`VirtualCluster.snapshot`) and carries out decisions
(:meth:`VirtualCluster.apply`) with these semantics, which a policy can rely on:

* **Order.** Decisions are applied in the order returned; nodes a ``Shrink`` gives back can
  be used by a later ``Start`` or ``Expand`` of the same list.
* **Start(job, n).** The job must be pending; ``n`` must be its requested size for rigid and
  evolving jobs, and within ``[nodes_min, nodes_max]`` for moldable and malleable ones; ``n``
  must not exceed the idle nodes plus the nodes that shrinks under way will give back and no
  other decision has claimed. The job starts at once on the lowest-numbered idle nodes, or,
  when it needs nodes still being released, as soon as they are (it holds what it has).
* **Expand(job, k)** / **Shrink(job, k).** The job must be running and not already resizing;
  ``k >= 1``; the new size must stay within ``[nodes_min, nodes_max]``. Malleable jobs can be
  resized at will; an evolving job only to serve its outstanding request (same direction, at
  most the nodes asked). Rigid and moldable jobs cannot be resized. An expansion takes its
  nodes as ``Start`` does.
* **Resize cost.** Once an expansion holds its new nodes, or as soon as a shrink is decided,
  the job stops computing for ``resize_cost.cost_s(old, new)`` seconds (zero without a cost
  model), holding the larger of its two sizes; then it goes on at the new size, a shrink gives
  its last nodes back (the first node, its batch host, is always kept) and a ``RESIZE_DONE``
  event follows (also for a zero cost, at the same instant).
* **Work conservation.** A job's work is 1; at size ``n`` it progresses at ``1 / T(n)`` per
  second, where ``T(n) = runtime_s * S(nodes_requested) / S(n)`` from its speedup model
  (rigid jobs: ``T = runtime_s``). A resize changes the rate of the work still to do, never
  the work.
* **Evolving requests.** When an evolving job reaches an event's ``at_work``, its request
  (clipped to its range) shows as ``JobView.evolving_request`` and an ``EVOLVING_REQUEST``
  trigger follows. A blocking request stops the job until it is fully served; a non-blocking
  one lapses after the first policy cycle that sees it, served or not.
* **Errors.** Any decision that breaks these rules (judged by
  :func:`elastic_slurm.plugins.legality.check`, which the live controller calls too) raises
  :class:`~elastic_slurm.errors.PolicyError` naming the policy, the decision and the reason:
  the simulator never fixes a policy's mistake.

Node-seconds are counted per job: allocated (every node the job holds) and wasted (held while
not computing: resize costs, a blocked evolving request, nodes held before a start or an
expansion can go ahead).
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Iterable, Sequence
from dataclasses import MISSING, dataclass
from dataclasses import fields as dataclass_fields
from functools import partial
from typing import Any

from elastic_slurm.errors import PolicyError
from elastic_slurm.model.decisions import Decision, Expand, Shrink, Start
from elastic_slurm.model.estimates import TRUE_RUNTIMES
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.snapshot import (
    ClusterSnapshot,
    JobState,
    JobView,
)
from elastic_slurm.model.speedup import NoResizeCost
from elastic_slurm.model.triggers import Trigger, TriggerKind
from elastic_slurm.plugins import legality
from elastic_slurm.simulator.engine import EventKind, EventQueue
from elastic_slurm.simulator.workload import SimJob

_PENDING, _STARTING, _RUNNING, _ENDED = 0, 1, 2, 3
_new, _set = object.__new__, object.__setattr__  # for the records, views and triggers made here

# the enum members this module uses on every event, as module constants: reading a member
# from its Enum class goes through the metaclass (about 80 ns more than a global's 15 ns)
_JOB_END, _RESIZE_DONE = EventKind.JOB_END, EventKind.RESIZE_DONE
_EVOLVING_REQUEST = EventKind.EVOLVING_REQUEST
# what happened since the last cycle is kept as one bit per trigger kind; the kinds of every
# mask are made once (a frozenset of enum members per cycle is about 0.2 us)
_TRIGGER_BIT = {kind: 1 << k for k, kind in enumerate(TriggerKind)}
_TRIGGER_KINDS = tuple(
    frozenset(kind for kind, bit in _TRIGGER_BIT.items() if mask & bit)
    for mask in range(1 << len(_TRIGGER_BIT))
)
_SUBMITTED = _TRIGGER_BIT[TriggerKind.JOB_SUBMITTED]
_ENDED_TRIGGER = _TRIGGER_BIT[TriggerKind.JOB_ENDED]
_REQUEST_TRIGGER = _TRIGGER_BIT[TriggerKind.EVOLVING_REQUEST]
_RESIZED_TRIGGER = _TRIGGER_BIT[TriggerKind.RESIZE_DONE]
_PERIODIC_TRIGGER = _TRIGGER_BIT[TriggerKind.PERIODIC]
_VIEW_PENDING, _VIEW_RUNNING = JobState.PENDING, JobState.RUNNING
_EVOLVING = JobKind.EVOLVING
_NO_COST = NoResizeCost()
_NO_FIELDS: dict[str, Any] = {}  # a job's fields before it arrives, after it ends (read only)
_INSORT_MAX = 16  # nodes released at once up to which _release inserts them one by one
# every field of a pending job's view, in field order, with the values common to all pending
# jobs (the others are written over a copy: see VirtualCluster._pending_view)
_PENDING_FIELDS: dict[str, Any] = {
    **dict.fromkeys(f.name for f in dataclass_fields(JobView)),
    **{f.name: f.default for f in dataclass_fields(JobView) if f.default is not MISSING},
    "state": _VIEW_PENDING,
    "nodes": (),
}


class SimulationError(PolicyError):
    """The simulation cannot go on: jobs are stuck, or a policy loops without time advancing.

    A :class:`~elastic_slurm.errors.PolicyError`, because a policy is the usual culprit (it
    left jobs pending for ever, or never served a blocking evolving request).
    """


@dataclass(frozen=True)
class JobRecord:
    """What happened to one job (all times in seconds from the start of the simulation).

    Parameters
    ----------
    job_id, kind
        The job.
    submit_s, start_s, end_s
        Arrival, start and end.
    nodes_requested
        The size asked for.
    nodes_start
        The size it started at.
    nodes_end
        Its size when it ended.
    node_s
        Node-seconds allocated to it (every node held, for as long as held).
    waste_node_s
        Node-seconds it held without computing (resize costs, blocked requests, waiting for
        nodes still being released).
    expansions, shrinks
        Resizes completed.
    requests_refused
        Evolving requests that lapsed unserved (in full or in part).
    """

    job_id: int
    kind: JobKind
    submit_s: float
    start_s: float
    end_s: float
    nodes_requested: int
    nodes_start: int
    nodes_end: int
    node_s: float
    waste_node_s: float
    expansions: int
    shrinks: int
    requests_refused: int = 0

    @classmethod
    def quick(
        cls,
        job_id: int,
        kind: JobKind,
        submit_s: float,
        start_s: float,
        end_s: float,
        nodes_requested: int,
        nodes_start: int,
        nodes_end: int,
        node_s: float,
        waste_node_s: float,
        expansions: int,
        shrinks: int,
        requests_refused: int,
    ) -> JobRecord:
        """The record of these fields, built without the frozen ``__init__``'s cost per field.

        For the simulator's loops, which write one per job; the arguments are taken as they
        are (no checks), in the order of the fields.
        """
        record = _new(cls)
        _set(
            record,
            "__dict__",
            {
                "job_id": job_id,
                "kind": kind,
                "submit_s": submit_s,
                "start_s": start_s,
                "end_s": end_s,
                "nodes_requested": nodes_requested,
                "nodes_start": nodes_start,
                "nodes_end": nodes_end,
                "node_s": node_s,
                "waste_node_s": waste_node_s,
                "expansions": expansions,
                "shrinks": shrinks,
                "requests_refused": requests_refused,
            },
        )
        return record

    @property
    def wait_s(self) -> float:
        """Seconds from submission to start."""
        return self.start_s - self.submit_s

    @property
    def run_s(self) -> float:
        """Seconds from start to end."""
        return self.end_s - self.start_s

    @property
    def turnaround_s(self) -> float:
        """Seconds from submission to end."""
        return self.end_s - self.submit_s


class _Job:
    """A job's mutable state in the simulation (internal)."""

    __slots__ = (
        "spec",
        "order",
        "state",
        "nodes",
        "size",
        "start_s",
        "done",
        "est_done",
        "anchor_s",
        "full_s",
        "est_full_s",
        "computing",
        "version",
        "next_event",
        "request",
        "request_blocking",
        "resize",
        "claim",
        "expansions",
        "shrinks",
        "gain",
        "refused",
        "alloc_node_s",
        "waste_node_s",
        "acct_s",
        "nodes_start",
        "fields",
    )

    def __init__(self, spec: SimJob, order: int) -> None:
        self.spec = spec
        self.order = order
        self.state = _PENDING
        self.nodes: list[str] = []
        self.size = 0
        self.start_s = 0.0
        self.done = 0.0
        self.est_done = 0.0
        self.anchor_s = 0.0
        self.full_s = 0.0
        self.est_full_s: float | None = None
        self.computing = False
        self.version = 0
        self.next_event = 0
        self.request = 0
        self.request_blocking = False
        self.resize = 0  # nodes being added (+) or removed (-) by the resize under way
        self.claim = 0  # nodes still awaited by a start or expansion
        self.expansions = 0
        self.shrinks = 0
        self.gain = 0
        self.refused = 0
        self.alloc_node_s = 0.0
        self.waste_node_s = 0.0
        self.acct_s = 0.0
        self.nodes_start = 0
        # its pending view's fields while it is pending or running (832 bytes: let go at its end)
        self.fields = _NO_FIELDS


_ARRIVAL_KEY = operator.attrgetter("submit_s", "job_id")


class _Live:
    """The simulator's index of current views by job id, and a counter of its changes."""

    __slots__ = ("epoch", "views")

    def __init__(self) -> None:
        self.epoch = 0
        self.views: dict[int, JobView] = {}


def _lookup(live: _Live, epoch: int, job_id: int) -> JobView | None:
    """A snapshot's ``JobLookup``: the simulator's index, until the cluster changes.

    Bound to a snapshot with ``partial(_lookup, live, epoch)`` (cheaper to make than an
    object per snapshot); ``None`` once ``live.epoch`` is no longer the snapshot's.
    """
    if live.epoch != epoch:
        return None
    return live.views[job_id]


def node_names(count: int) -> list[str]:
    """Names of a machine's nodes, in an order where string order is numeric order.

    >>> node_names(3)
    ['n1', 'n2', 'n3']
    >>> node_names(12)[:2]
    ['n01', 'n02']
    """
    width = len(str(count))
    return [f"n{i:0{width}d}" for i in range(1, count + 1)]


class VirtualCluster:
    """Jobs on ``nodes`` nodes in virtual time; carries out decisions (see the module docstring).

    Parameters
    ----------
    jobs
        The jobs to simulate (in any order: they arrive by ``submit_s``, then ``job_id``).
    nodes
        Nodes in the machine.
    queue
        The event queue (and clock) shared with the simulation loop.

    Raises
    ------
    ValueError
        For fewer than one node or duplicate job ids.
    InvalidRequest
        For a job whose minimum size exceeds the machine (it could never start).
    """

    def __init__(self, jobs: Sequence[SimJob], nodes: int, queue: EventQueue) -> None:
        from elastic_slurm.errors import InvalidRequest

        if nodes < 1:
            raise ValueError(f"the machine must have at least 1 node, got {nodes}")
        self.node_count = nodes
        self.names = node_names(nodes)
        self.free: list[str] = list(self.names)
        self.queue = queue
        self.jobs: list[_Job] = []
        self.by_id: dict[int, _Job] = {}
        for i, spec in enumerate(sorted(jobs, key=_ARRIVAL_KEY)):
            if spec.job_id in self.by_id:
                raise ValueError(f"job id {spec.job_id} appears twice in the workload")
            if spec.nodes_min > nodes:
                raise InvalidRequest(
                    f"job {spec.job_id} needs at least {spec.nodes_min} node(s) but the machine "
                    f"has {nodes}: it could never start; leave it out or give more nodes"
                )
            job = _Job(spec, i)
            self.jobs.append(job)
            self.by_id[spec.job_id] = job
        # what snapshots are made of, kept in submission order (by _Job.order) as jobs come
        # and go: parallel lists of orders and views, and the views by job id
        self._pending_order: list[int] = []
        self._pending_views: list[JobView] = []
        self._running_order: list[int] = []
        self._running_views: list[JobView | None] = []  # None: to build at the next snapshot
        self._stale: dict[int, _Job] = {}  # running jobs whose view must be rebuilt
        self._live = _Live()
        self.running: dict[int, _Job] = {}
        self.dynamic: set[int] = set()  # running jobs whose view depends on the time
        self.promised = 0  # nodes that shrinks under way will give back
        self.claimed = 0  # nodes awaited by starts and expansions
        self.claims: list[_Job] = []
        self.in_flight = 0  # resizes under way + starts waiting for nodes
        self.requests: set[int] = set()  # job ids with a non-blocking request to offer
        self.records: list[JobRecord] = []
        self.timeline: list[tuple[float, int, int]] = []  # (time_s, job_id, nodes held)
        self.ended = 0
        self.expansions = 0
        self.shrinks = 0
        self.requests_refused = 0
        self.trigger_mask = 0  # the kinds of what happened since the last cycle (_TRIGGER_BIT)
        self.trigger_ids: set[int] = set()
        self._pending_tuple: tuple[JobView, ...] | None = ()
        self._running_tuple: tuple[JobView, ...] | None = ()
        self._idle: tuple[str, ...] | None = None
        self._names = tuple(self.names)
        # ClusterSnapshot.from_parts(..., self._names, lookup, TRUE_RUNTIMES, starts_known=True)
        # (pending views are made without a start, running ones with)
        self._make_snapshot = ClusterSnapshot.parts_maker(
            self._names, TRUE_RUNTIMES, starts_known=True
        )
        self._last_snapshot: tuple[int, ClusterSnapshot] | None = None  # (epoch, snapshot)

    # ------------------------------------------------------------------ snapshots
    # ------------------------------------------------------------------ the loop's interface
    def arrivals(self) -> list[tuple[float, object]]:
        """``(submit_s, handle)`` per job, in submission order.

        The loop passes each ``handle`` to :meth:`submit` at ``submit_s``.
        """
        return [(job.spec.submit_s, job) for job in self.jobs]

    @property
    def busy(self) -> bool:
        """True while a job is pending or running."""
        return bool(self._pending_views or self.running)

    @property
    def running_count(self) -> int:
        """Jobs running (holding nodes)."""
        return len(self.running)

    @property
    def pending_count(self) -> int:
        """Jobs waiting to start (including those waiting for nodes still being released)."""
        return len(self._pending_views)

    def tick(self) -> None:
        """A periodic tick: the next cycle's trigger includes ``PERIODIC``."""
        self.trigger_mask |= _PERIODIC_TRIGGER

    @property
    def cycle_due(self) -> bool:
        """True when something happened since the last cycle and no resize is under way."""
        return self.in_flight == 0 and self.trigger_mask != 0

    def take_trigger(self) -> Trigger:
        """What happened since the last cycle, coalesced (and forgotten here).

        Built as :meth:`JobRecord` is in :meth:`_end`, without the frozen dataclass's
        ``__init__`` (one ``object.__setattr__`` per field): one per cycle, millions per run.
        """
        ids = self.trigger_ids
        trigger = _new(Trigger)
        _set(
            trigger,
            "__dict__",
            {
                "kinds": _TRIGGER_KINDS[self.trigger_mask],
                "job_ids": tuple(sorted(ids)) if len(ids) > 1 else tuple(ids),
            },
        )
        self.trigger_mask = 0
        ids.clear()
        return trigger

    def records_by_submission(self) -> list[JobRecord]:
        """Records of the jobs that ended, by submission time, then id.

        Placed by their job's rank in that order (``_Job.order``, ids being unique) instead
        of sorted: the same list, in O(n) without comparisons.
        """
        slots: list[JobRecord | None] = [None] * len(self.jobs)
        by_id = self.by_id
        for record in self.records:
            slots[by_id[record.job_id].order] = record
        return [record for record in slots if record is not None]

    def stuck_reason(self) -> str:
        """Why jobs are left with no event to come: what never started, what waits in vain."""
        parts = []
        if self._pending_views:
            views = self._pending_views[:5]
            shown = ", ".join(f"{v.job_id} ({v.kind}, {v.nodes_requested} node(s))" for v in views)
            parts.append(f"{len(self._pending_views)} job(s) never started, first {shown}")
        blocked = [j for j in self.running.values() if j.request]
        if blocked:
            shown = ", ".join(f"{j.spec.job_id} (asks {j.request:+d})" for j in blocked[:5])
            parts.append(
                f"{len(blocked)} job(s) wait for an evolving request never served: {shown}"
            )
        return f"{len(self.free)} of {self.node_count} node(s) idle: {'; '.join(parts)}"

    def snapshot(self, now_s: float) -> ClusterSnapshot:
        """The cluster now, as policies see it (pending and running jobs, every node).

        Made as :meth:`ClusterSnapshot.from_parts` makes it (by
        :meth:`ClusterSnapshot.parts_maker`) from lists kept in submission order as
        jobs come and go: a job's view is built when it arrives, starts or changes (a job
        blocked on its evolving request: at every snapshot, as its expected end moves), and
        the tuples are copied only when something changed. :meth:`ClusterSnapshot.job` is
        answered from the simulator's index of views by id until the cluster next changes.
        """
        live = self._live
        epoch = live.epoch = live.epoch + 1  # the views of blocked jobs change with the time
        if self.dynamic:
            for job_id in self.dynamic:
                job = self.by_id[job_id]
                self._stale[job.order] = job
        if self._stale:
            self._refresh(now_s)
        pending = self._pending_tuple
        if pending is None:
            pending = self._pending_tuple = tuple(self._pending_views)
        running = self._running_tuple
        if running is None:
            running = self._running_tuple = tuple(self._running_views)  # type: ignore[arg-type]
        idle = self._idle
        if idle is None:
            idle = self._idle = tuple(self.free)
        snap = self._make_snapshot(now_s, pending, running, idle, partial(_lookup, live, epoch))
        self._last_snapshot = (epoch, snap)
        return snap

    def _refresh(self, now_s: float) -> None:
        """Build the views of running jobs that changed, in place."""
        order = self._running_order
        views = self._running_views
        by_id = self._live.views
        for job in self._stale.values():
            view = self._running_view(job, now_s)
            views[bisect.bisect_left(order, job.order)] = view
            by_id[job.spec.job_id] = view
        self._stale.clear()
        self._running_tuple = None

    def _dirty(self, job: _Job) -> None:
        """The job's running view must be rebuilt."""
        self._stale[job.order] = job

    def _pending_view(self, job: _Job) -> JobView:
        """A pending job's view, without ``JobView.from_fields``' check of the names.

        Every field is set here: a copy of :data:`_PENDING_FIELDS` (every field, in field
        order, with a pending job's values) with the job's own values written over it
        (``tests/sim/test_sim_speed_views.py`` checks that each view names every field and
        equals ``JobView(**fields)``). A copied dict with values set is about three times
        cheaper than a literal of the 24 fields. The fields are kept as ``job.fields``, the
        base of the job's running views.
        """
        s = job.spec
        fields = job.fields = _PENDING_FIELDS.copy()
        fields["job_id"] = s.job_id
        fields["kind"] = s.kind
        fields["nodes_requested"] = s.nodes_requested
        fields["nodes_min"] = s.nodes_min
        fields["nodes_max"] = s.nodes_max
        fields["submit_time_s"] = s.submit_s
        fields["walltime_s"] = s.walltime_s
        fields["runtime_s"] = s.runtime_s
        fields["speedup"] = s.speedup
        fields["resize_cost"] = s.resize_cost
        fields["evolution_profile"] = s.evolution_profile
        view = _new(JobView)
        _set(view, "__dict__", fields.copy())  # the view's own (frozen, never shared)
        return view

    def _running_view(self, job: _Job, now_s: float) -> JobView:
        """A running job's view at ``now_s`` (seconds).

        Its pending view's fields (``job.fields``: those that never change, copied in one
        step) with the twelve a running job's state sets, written over the copy (keys keep
        their field order).
        """
        base = job.anchor_s if job.computing else now_s
        nodes = job.nodes
        fields = job.fields.copy()
        fields["state"] = _VIEW_RUNNING
        fields["nodes"] = tuple(nodes)
        fields["start_time_s"] = job.start_s
        fields["resizing"] = job.resize != 0 or job.claim != 0
        fields["batch_host"] = nodes[0] if nodes else None
        if job.est_full_s is not None:
            fields["estimated_end_s"] = base + (1.0 - job.est_done) * job.est_full_s
        fields["end_time_s"] = base + (1.0 - job.done) * job.full_s
        fields["evolving_request"] = job.request
        fields["evolving_blocking"] = job.request_blocking
        fields["expansions"] = job.expansions
        fields["shrinks"] = job.shrinks
        fields["gain_nodes"] = job.gain
        view = _new(JobView)
        _set(view, "__dict__", fields)
        return view

    # ------------------------------------------------------------------ events
    def submit(self, job: _Job) -> None:
        """A job arrives: it becomes pending."""
        self._live.epoch += 1
        view = self._pending_view(job)
        order = self._pending_order
        if not order or order[-1] < job.order:  # arrivals come in submission order
            order.append(job.order)
            self._pending_views.append(view)
        else:
            i = bisect.bisect_left(order, job.order)
            order.insert(i, job.order)
            self._pending_views.insert(i, view)
        self._live.views[job.spec.job_id] = view
        self._pending_tuple = None
        self.trigger_mask |= _SUBMITTED
        self.trigger_ids.add(job.spec.job_id)

    def event(self, kind: int, job: _Job, version: int, now_s: float) -> None:
        """Handle a job's end, evolving milestone or finished resize (stale ones are ignored)."""
        if version != job.version or job.state != _RUNNING:
            return
        self._live.epoch += 1
        if kind == _RESIZE_DONE:
            self._finish_resize(job, now_s)
        elif kind == _JOB_END:
            self._end(job, now_s)
        else:
            self._milestone(job, now_s)

    def _account(self, job: _Job, now_s: float) -> None:
        dt = now_s - job.acct_s
        if dt > 0.0:
            held = len(job.nodes)
            job.alloc_node_s += held * dt
            idle = held if not job.computing or job.state != _RUNNING else held - job.size
            if idle:
                job.waste_node_s += idle * dt
        job.acct_s = now_s

    def _advance(self, job: _Job, now_s: float) -> None:
        """Bring the job's work done up to ``now_s``."""
        if job.computing:
            elapsed = now_s - job.anchor_s
            if elapsed > 0.0:
                job.done = min(1.0, job.done + elapsed / job.full_s) if job.full_s > 0 else 1.0
                if job.est_full_s:
                    job.est_done += elapsed / job.est_full_s
        job.anchor_s = now_s

    def _schedule(self, job: _Job, now_s: float) -> None:
        """Schedule the job's next milestone: its next evolving event, or its end.

        Timed from the job's anchor (its start or last change of rate), not from ``now_s``:
        a non-blocking request does not re-anchor the job, so a job never resized ends at
        exactly ``start + T`` (adding the pieces ``at_work * T`` and ``(1 - at_work) * T``
        could be a rounding error off, and reorder its end with other events of that second).
        """
        job.version += 1
        events = job.spec.evolving
        if job.next_event < len(events):
            target = events[job.next_event].at_work
            kind = _EVOLVING_REQUEST
        else:
            target = 1.0
            kind = _JOB_END
        left = target - job.done
        when = job.anchor_s + left * job.full_s if left > 0.0 else now_s
        self.queue.push(when if when > now_s else now_s, kind, (job, job.version))

    def _start(self, job: _Job, now_s: float) -> None:
        spec = job.spec
        size = len(job.nodes)
        job.state = _RUNNING
        job.size = job.nodes_start = size
        job.start_s = job.anchor_s = job.acct_s = now_s
        job.full_s = spec.runtime_at_s(size)
        if spec.walltime_s is None:
            job.est_full_s = None
        elif spec.speedup is None or size == spec.nodes_requested:
            job.est_full_s = spec.walltime_s
        else:
            job.est_full_s = spec.speedup.runtime_s(spec.walltime_s, spec.nodes_requested, size)
        job.computing = True
        self.running[spec.job_id] = job
        order = self._running_order
        i = bisect.bisect_left(order, job.order)
        order.insert(i, job.order)
        self._running_views.insert(i, None)
        self._stale[job.order] = job  # _dirty, inline: once per job
        self.timeline.append((now_s, spec.job_id, size))
        self._schedule(job, now_s)

    def _end(self, job: _Job, now_s: float) -> None:
        self._account(job, now_s)
        job.done = 1.0
        job.state = _ENDED
        spec = job.spec
        del self.running[spec.job_id]
        i = bisect.bisect_left(self._running_order, job.order)
        del self._running_order[i]
        del self._running_views[i]
        self._running_tuple = None
        self._stale.pop(job.order, None)
        self._live.views.pop(spec.job_id, None)
        self.dynamic.discard(spec.job_id)
        self.requests.discard(spec.job_id)
        if job.request:
            job.refused += 1
            self.requests_refused += 1
        if job.claim:  # an expansion still waiting for nodes: give up on it
            self._cancel_claim(job)
        released = job.nodes
        job.nodes = []
        job.fields = _NO_FIELDS
        self.timeline.append((now_s, spec.job_id, 0))
        self.records.append(
            JobRecord.quick(
                spec.job_id,
                spec.kind,
                spec.submit_s,
                job.start_s,
                now_s,
                spec.nodes_requested,
                job.nodes_start,
                job.size,
                job.alloc_node_s,
                job.waste_node_s,
                job.expansions,
                job.shrinks,
                job.refused,
            )
        )
        self.ended += 1
        self.trigger_mask |= _ENDED_TRIGGER
        self.trigger_ids.add(spec.job_id)
        self._release(released, now_s)

    def _milestone(self, job: _Job, now_s: float) -> None:
        """The job reached its next evolving event: make the request."""
        event = job.spec.evolving[job.next_event]
        job.next_event += 1
        self._account(job, now_s)
        spec = job.spec
        if event.delta_nodes > 0:
            delta = min(event.delta_nodes, spec.nodes_max - job.size)
        else:
            delta = -min(-event.delta_nodes, job.size - spec.nodes_min)
        if job.request and job.request_blocking is False:
            job.refused += 1  # replaced before a cycle saw it (cannot happen between cycles)
            self.requests_refused += 1
        job.request = delta
        job.request_blocking = event.blocking and delta != 0
        self._dirty(job)
        if delta != 0:
            self.trigger_mask |= _REQUEST_TRIGGER
            self.trigger_ids.add(spec.job_id)
            if event.blocking:
                self._advance(job, now_s)  # it stops here: its work done is the event's
                job.done = event.at_work
                job.computing = False
                self.dynamic.add(spec.job_id)
                job.version += 1  # no milestone until it is served
                return
            self.requests.add(spec.job_id)
        self._schedule(job, now_s)

    def _finish_resize(self, job: _Job, now_s: float) -> None:
        self._account(job, now_s)
        delta = job.resize
        job.resize = 0
        self.in_flight -= 1
        spec = job.spec
        if delta < 0:
            released = job.nodes[delta:]
            del job.nodes[delta:]
            job.size += delta
            job.shrinks += 1
            self.shrinks += 1
            self.promised += delta
        else:
            job.size += delta
            job.expansions += 1
            self.expansions += 1
            released = []
        job.gain += delta
        size = job.size
        job.full_s = spec.runtime_at_s(size)
        if spec.walltime_s is not None:
            job.est_full_s = (
                spec.speedup.runtime_s(spec.walltime_s, spec.nodes_requested, size)
                if spec.speedup is not None
                else spec.walltime_s
            )
        job.anchor_s = now_s
        self._dirty(job)
        blocked = job.request_blocking and job.request != 0
        job.computing = not blocked
        if not blocked:
            if job.request_blocking:
                job.request_blocking = False
            self.dynamic.discard(spec.job_id)
            self._schedule(job, now_s)
        self.timeline.append((now_s, spec.job_id, len(job.nodes)))
        self.trigger_mask |= _RESIZED_TRIGGER
        self.trigger_ids.add(spec.job_id)
        if released:
            self._release(released, now_s)

    # ------------------------------------------------------------------ nodes
    def _take(self, count: int) -> list[str]:
        self._idle = None
        taken = self.free[:count]
        del self.free[:count]
        return taken

    def _release(self, names: list[str], now_s: float) -> None:
        """Nodes come back: first to starts and expansions waiting for them, then idle."""
        while names and self.claims:
            job = self.claims[0]
            give = min(job.claim, len(names))
            self._account(job, now_s)
            job.nodes.extend(names[:give])
            names = names[give:]
            job.claim -= give
            self.claimed -= give
            if job.claim == 0:
                self.claims.pop(0)
                self.in_flight -= 1
                if job.state == _STARTING:
                    self._start(job, now_s)
                else:
                    self._begin_expand(job, now_s)
        if names:
            self._idle = None
            free = self.free
            if len(names) <= _INSORT_MAX:
                # a few nodes: each binary search and shift costs less than re-sorting a
                # large machine's idle list (a few microseconds at thousands of nodes)
                insort = bisect.insort
                for name in names:
                    insort(free, name)
            else:
                free.extend(names)
                free.sort()

    def _cancel_claim(self, job: _Job) -> None:
        self.claims.remove(job)
        self.claimed -= job.claim
        job.claim = 0
        job.resize = 0
        self.in_flight -= 1

    # ------------------------------------------------------------------ decisions
    def apply(self, decisions: Iterable[Decision], policy_name: str, now_s: float) -> None:
        """Carry out a policy's decisions (semantics and errors: see the module docstring).

        Legality is judged by :func:`elastic_slurm.plugins.legality.reasons` (the reasons of
        :func:`~elastic_slurm.plugins.legality.check`, which the live controller calls, without
        the verdict objects); the decisions before the first illegal one are carried out.

        Raises
        ------
        PolicyError
            For a decision that breaks the rules, naming the policy, the decision and why.
        """
        if not isinstance(decisions, (list, tuple)):
            decisions = list(decisions)
        why = legality.reasons(
            self._current_snapshot(now_s), decisions, releasing=self.promised - self.claimed
        )
        self._live.epoch += 1
        for d, reason in zip(decisions, why, strict=True):
            if reason:
                self._refuse(policy_name, d, now_s, reason)
            if type(d) is Start:
                self._apply_start(d, now_s)
            else:
                self._apply_resize(d, now_s)  # type: ignore[arg-type]

    def _current_snapshot(self, now_s: float) -> ClusterSnapshot:
        """The snapshot of ``now_s``: the last one made, if nothing changed since."""
        last = self._last_snapshot
        if last is not None and last[0] == self._live.epoch and last[1].time_s == now_s:
            return last[1]
        return self.snapshot(now_s)

    def end_cycle(self) -> None:
        """After a policy cycle: non-blocking requests it saw lapse if not served."""
        self._live.epoch += 1
        if not self.requests:
            return
        for job_id in self.requests:
            job = self.by_id[job_id]
            if job.request and not job.request_blocking:
                job.request = 0
                job.refused += 1
                self.requests_refused += 1
                self._dirty(job)
        self.requests.clear()

    def _refuse(self, policy: str, d: Any, now_s: float, why: str) -> None:
        raise PolicyError(f"policy {policy!r} decided {d!r} at t={now_s:g} s: {why}")

    def _apply_start(self, d: Start, now_s: float) -> None:
        job = self.by_id[d.job_id]
        n = d.nodes
        i = bisect.bisect_left(self._pending_order, job.order)
        del self._pending_order[i]
        del self._pending_views[i]
        self._pending_tuple = None
        del self._live.views[d.job_id]
        free = self.free
        have = min(n, len(free))
        job.nodes = free[:have]  # _take, inline: once per job
        del free[:have]
        self._idle = None
        if have == n:
            self._start(job, now_s)
            return
        job.state = _STARTING
        job.acct_s = now_s
        job.claim = n - have
        self.claimed += job.claim
        self.claims.append(job)
        self.in_flight += 1

    def _apply_resize(self, d: Expand | Shrink, now_s: float) -> None:
        job = self.by_id[d.job_id]
        spec = job.spec
        grow = type(d) is Expand
        if spec.kind is _EVOLVING:
            job.request += -d.count if grow else d.count
            if job.request == 0:
                self.requests.discard(spec.job_id)
        self._account(job, now_s)
        job.resize = d.count if grow else -d.count
        self._dirty(job)
        if not grow:
            self.promised += d.count
            self._begin_resize(job, now_s, job.size - d.count)
            return
        have = min(d.count, len(self.free))
        job.nodes.extend(self._take(have))
        if have == d.count:
            self._begin_expand(job, now_s)
            return
        job.claim = d.count - have
        self.claimed += job.claim
        self.claims.append(job)
        self.in_flight += 1

    def _begin_expand(self, job: _Job, now_s: float) -> None:
        self._begin_resize(job, now_s, job.size + job.resize)

    def _begin_resize(self, job: _Job, now_s: float, new_size: int) -> None:
        """Stop computing for the resize cost; the resize completes at ``now + cost``."""
        self._account(job, now_s)
        self._advance(job, now_s)
        cost = (job.spec.resize_cost or _NO_COST).cost_s(job.size, new_size)
        job.computing = False
        job.version += 1  # cancels the pending milestone
        self.in_flight += 1
        self.queue.push(now_s + cost, _RESIZE_DONE, (job, job.version))
        if len(job.nodes) != job.size:
            self.timeline.append((now_s, job.spec.job_id, len(job.nodes)))


__all__ = ["JobRecord", "SimulationError", "VirtualCluster", "node_names"]
