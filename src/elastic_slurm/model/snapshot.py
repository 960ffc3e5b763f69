"""An immutable view of the cluster at one instant, as the controller or simulator observed it.

The policy sees only this: no Slurm handles, no I/O. Times are in seconds since the epoch (live)
or since the simulation started (simulator); the policy compares them only with each other.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any

from elastic_slurm.model.estimates import USER_ESTIMATES, RuntimeEstimates
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.speedup import ResizeCost, SpeedupModel


class JobState(enum.StrEnum):
    """The job states a policy distinguishes (Slurm's states map onto these)."""

    PENDING = "pending"
    RUNNING = "running"
    COMPLETING = "completing"
    ENDED = "ended"
    UNKNOWN = "unknown"


class NodeState(enum.StrEnum):
    """Node availability as a policy needs it."""

    IDLE = "idle"
    ALLOCATED = "allocated"
    UNAVAILABLE = "unavailable"  # down, drained, failing, not responding
    UNKNOWN = "unknown"


# members read by JobView's properties on every call, as module constants: reading a member
# from its Enum class goes through the metaclass (about 80 ns more than a global's 15 ns)
_RUNNING, _MALLEABLE = JobState.RUNNING, JobKind.MALLEABLE


@dataclass(frozen=True)
class JobView:
    """One job as observed.

    Parameters
    ----------
    job_id
        Slurm's job id.
    kind
        The job's kind; jobs not submitted through elastic-slurm are rigid.
    state
        :class:`JobState`.
    nodes
        Names of the allocated nodes, in Slurm's order (empty while pending).
    nodes_requested
        Nodes the job asks for while pending; its current size while running.
    nodes_min, nodes_max
        The node range; equal to ``nodes_requested`` for rigid jobs.
    submit_time_s, start_time_s
        Submission and start times in seconds; ``start_time_s`` is ``None`` while pending.
    resizing
        True while a resize of this job is under way (a policy must leave it alone).
    batch_host
        The node running the batch script, which can never be given back while the job runs.
    name
        The job's name.
    walltime_s
        The time limit asked at submission, in seconds, for a run at ``nodes_requested`` (the
        user's estimate: SWF field 9, ``sbatch --time``); ``None`` when unknown. Backfilling
        policies reserve by it.
    runtime_s
        The job's true run time in seconds at ``nodes_requested`` (SWF field 4). Known only to
        the simulator (``None`` live): a policy that reads it assumes perfect knowledge of run
        times, as the simulators of Huang et al. (section 4) and Lina et al. (section 4) do.
    estimated_end_s
        Running jobs: when the job should end if it keeps its current size, by the time limit
        (``start_time_s + walltime_s`` for a job never resized; after resizes, the estimated work
        left, scaled by ``speedup``); may be in the past for a job that overruns its estimate;
        ``None`` when unknown or pending.
    end_time_s
        Running jobs, simulator only: when the job will really end if it keeps its current size
        and makes no further evolving request (``None`` live and while pending). For a job
        waiting for its evolving request to be served, as if it resumed now.
    speedup
        How the job's run time depends on its size (:mod:`elastic_slurm.model.speedup`);
        ``None`` when unknown or irrelevant (rigid jobs).
    resize_cost
        What a size change costs the job, in seconds
        (:class:`~elastic_slurm.model.speedup.ResizeCost`); ``None`` when unknown.
    evolving_request
        Evolving jobs: nodes the application asks for now, ``+k`` to grow by ``k``, ``-k`` to
        give back ``k``; 0 when it asks for nothing. A policy serves it with an ``Expand`` or
        ``Shrink`` of that job.
    evolving_blocking
        True when the application makes no progress until ``evolving_request`` is served
        (Klein and Perez's evolving applications); false when it goes on at its current size
        and the request lapses if not served in the cycle that sees it (Lina et al.).
    expansions, shrinks
        Resizes of this job completed so far.
    gain_nodes
        Nodes added by expansions minus nodes removed by shrinks so far (Lina et al. section 4,
        the "gain" priority).
    evolution_profile
        Evolving jobs: the evolution profile the application declared, ``(duration_s, nodes)``
        per step at its own speed, the first step at ``nodes_requested`` (Klein and Pérez
        2011, section 3.1); ``None`` when it declared none. Published live and simulated
        alike, so that a planner sees the same thing in both.
    """

    job_id: int
    kind: JobKind
    state: JobState
    nodes: tuple[str, ...]
    nodes_requested: int
    nodes_min: int
    nodes_max: int
    submit_time_s: float
    start_time_s: float | None = None
    resizing: bool = False
    batch_host: str | None = None
    name: str = ""
    walltime_s: float | None = None
    runtime_s: float | None = None
    estimated_end_s: float | None = None
    end_time_s: float | None = None
    speedup: SpeedupModel | None = None
    resize_cost: ResizeCost | None = None
    evolving_request: int = 0
    evolving_blocking: bool = False
    expansions: int = 0
    shrinks: int = 0
    gain_nodes: int = 0
    evolution_profile: tuple[tuple[float, int], ...] | None = None

    @property
    def size(self) -> int:
        """Current size in nodes (allocated nodes while running, requested while pending)."""
        return len(self.nodes) if self.state is _RUNNING else self.nodes_requested

    @property
    def malleable(self) -> bool:
        """True when a resource manager may resize the job while it runs."""
        return self.kind is _MALLEABLE

    def walltime_at_s(self, nodes: int) -> float | None:
        """The time limit scaled to a run on ``nodes`` nodes (seconds), ``None`` when unknown.

        ``walltime_s`` itself at ``nodes_requested`` or without a speedup model; otherwise
        ``speedup.runtime_s(walltime_s, nodes_requested, nodes)``.
        """
        if self.walltime_s is None:
            return None
        if self.speedup is None or nodes == self.nodes_requested:
            return self.walltime_s
        return self.speedup.runtime_s(self.walltime_s, self.nodes_requested, nodes)

    @classmethod
    def from_fields(cls, values: Mapping[str, Any]) -> JobView:
        """``JobView(**values)``, built without a frozen dataclass's cost per field.

        A simulator builds a view each time a job arrives, starts or changes: at trace scale
        that is millions of views, and the generated ``__init__`` sets its 23 fields one
        ``object.__setattr__`` at a time (about 5 us). This sets them in one step (about
        1 us); the view is the same (equal, same hash, as frozen).

        Raises
        ------
        TypeError
            For a name that is not a field, or a field without a default left out.
        """
        given = values.keys()
        if not _JOB_REQUIRED <= given or not given <= _JOB_FIELDS:
            missing = sorted(_JOB_REQUIRED - given)
            unknown = sorted(given - _JOB_FIELDS)
            raise TypeError(f"JobView fields missing {missing}, unknown {unknown}")
        view = object.__new__(cls)
        object.__setattr__(view, "__dict__", _JOB_DEFAULTS | dict(values))
        return view

    def runtime_at_s(self, nodes: int) -> float | None:
        """The true run time on ``nodes`` nodes (seconds; simulator only, else ``None``).

        Scaled from ``runtime_s`` as :meth:`walltime_at_s` scales ``walltime_s``.
        """
        if self.runtime_s is None:
            return None
        if self.speedup is None or nodes == self.nodes_requested:
            return self.runtime_s
        return self.speedup.runtime_s(self.runtime_s, self.nodes_requested, nodes)


_JOB_FIELDS = frozenset(f.name for f in fields(JobView))
_JOB_DEFAULTS = {f.name: f.default for f in fields(JobView) if f.default is not MISSING}
_JOB_REQUIRED = _JOB_FIELDS - _JOB_DEFAULTS.keys()


@dataclass(frozen=True)
class NodeView:
    """One node as observed: its name, state and CPU count."""

    name: str
    state: NodeState
    cpus: int = 1


JobLookup = Callable[[int], "JobView | None"]
"""``lookup(job_id)``: the view of a job of the snapshot (``KeyError`` when it has none), or
``None`` once the lookup can no longer answer for that snapshot (see
:meth:`ClusterSnapshot.from_parts`)."""


@dataclass(frozen=True)
class ClusterSnapshot:
    """The cluster at ``time_s``: every known job and node.

    Invariant: job ids and node names are unique; ``jobs`` is sorted by submission time, then id.

    The selections (:meth:`pending`, :meth:`running`, :meth:`idle_nodes`, :meth:`job`) are
    computed once, on first use, and kept (an attribute read thereafter: a policy may call them
    as often as it likes). A simulator builds snapshots with :meth:`from_parts` from the
    selections it keeps up to date anyway; then ``jobs`` and ``nodes`` are assembled only if
    read. Both kinds are equal when they hold the same jobs and nodes.

    ``estimates`` is what policies may believe about run times
    (:mod:`~elastic_slurm.model.estimates`): the users' time limits unless the host knows
    better (the simulator: the true run times).

    Parameters
    ----------
    time_s
        When the cluster was observed, seconds.
    jobs
        Every known job, by submission time, then id.
    nodes
        Every node.
    estimates
        The run-time estimates policies read (default: the users' time limits).
    """

    time_s: float
    jobs: tuple[JobView, ...]
    nodes: tuple[NodeView, ...]
    estimates: RuntimeEstimates = USER_ESTIMATES

    @classmethod
    def from_parts(
        cls,
        time_s: float,
        pending: tuple[JobView, ...],
        running: tuple[JobView, ...],
        idle: tuple[str, ...],
        node_names: tuple[str, ...],
        lookup: JobLookup | None = None,
        estimates: RuntimeEstimates = USER_ESTIMATES,
        *,
        starts_known: bool = False,
    ) -> ClusterSnapshot:
        """A snapshot of pending and running jobs only (as the controller's are), built in O(1).

        Parameters
        ----------
        time_s
            Seconds.
        pending, running
            The pending and the running jobs' views, each by submission time, then id.
        idle
            Names of the idle nodes, in ``node_names`` order; every other node is allocated.
        node_names
            Every node's name.
        lookup
            An index of the caller's, asked first by :meth:`job` (:data:`JobLookup`); it must
            answer with exactly the views given here, or ``None`` from the moment it cannot
            (then the snapshot builds its own index). ``None``: the snapshot builds its own.
        estimates
            The run-time estimates policies read (the simulator's: the true run times).
        starts_known
            The caller guarantees that no pending view has a start time and every running
            one has one (:meth:`starts_known`): the simulator builds its views so. Otherwise
            a reader that relies on it checks the views first.

        Returns
        -------
        ClusterSnapshot
            With ``jobs`` (pending and running merged by submission time, then id) and
            ``nodes`` (idle or allocated) built on first read.
        """
        snap = object.__new__(cls)
        state = {
            "time_s": time_s,
            "_pending": pending,
            "_running": running,
            "_idle": idle,
            "_names": node_names,
            "_lookup": lookup,
            "estimates": estimates,
            "_parts": True,
            "_starts_known": starts_known,
        }
        object.__setattr__(snap, "__dict__", state)
        return snap

    @classmethod
    def parts_maker(
        cls,
        node_names: tuple[str, ...],
        estimates: RuntimeEstimates = USER_ESTIMATES,
        *,
        starts_known: bool = False,
    ) -> Callable[
        [float, tuple[JobView, ...], tuple[JobView, ...], tuple[str, ...], JobLookup | None],
        ClusterSnapshot,
    ]:
        """:meth:`from_parts` with the machine's parts fixed, for a series of snapshots.

        For a host that makes a snapshot of the same machine at every cycle (the simulator):
        ``make = ClusterSnapshot.parts_maker(names, estimates, starts_known=True)``, then
        ``make(time_s, pending, running, idle, lookup)`` is ``from_parts(time_s, pending,
        running, idle, names, lookup, estimates, starts_known=True)`` (the same snapshot),
        made by copying a prepared state instead of a call with keywords (about 300 ns less).

        Parameters
        ----------
        node_names, estimates, starts_known
            As for :meth:`from_parts`.

        Returns
        -------
        Callable
            ``make(time_s, pending, running, idle, lookup) -> ClusterSnapshot``.
        """
        template = {
            "time_s": 0.0,
            "_pending": (),
            "_running": (),
            "_idle": (),
            "_names": node_names,
            "_lookup": None,
            "estimates": estimates,
            "_parts": True,
            "_starts_known": starts_known,
        }  # the keys of from_parts' state, in its order
        new, set_state = object.__new__, object.__setattr__

        def make(
            time_s: float,
            pending: tuple[JobView, ...],
            running: tuple[JobView, ...],
            idle: tuple[str, ...],
            lookup: JobLookup | None,
        ) -> ClusterSnapshot:
            state = template.copy()
            state["time_s"] = time_s
            state["_pending"] = pending
            state["_running"] = running
            state["_idle"] = idle
            state["_lookup"] = lookup
            snap = new(cls)
            set_state(snap, "__dict__", state)
            return snap  # type: ignore[no-any-return]

        return make

    def __getattr__(self, name: str) -> Any:
        """``jobs`` and ``nodes`` of a snapshot made by :meth:`from_parts`, built on first read."""
        state = self.__dict__
        if "_names" in state and name in ("jobs", "nodes"):
            if name == "jobs":
                merged = sorted(state["_pending"] + state["_running"], key=_SUBMIT_KEY)
                state["jobs"] = tuple(merged)
            else:
                idle = set(state["_idle"])
                state["nodes"] = tuple(
                    NodeView(n, NodeState.IDLE if n in idle else NodeState.ALLOCATED)
                    for n in state["_names"]
                )
            return state[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def node_count(self) -> int:
        """How many nodes the cluster has (idle or not), without building their views."""
        names = self.__dict__.get("_names")
        return len(self.nodes) if names is None else len(names)

    def idle_nodes(self) -> tuple[str, ...]:
        """Names of nodes that can take a job now."""
        try:
            return self._idle  # type: ignore[no-any-return]  # kept, or given to from_parts
        except AttributeError:
            pass
        idle = tuple(n.name for n in self.nodes if n.state is NodeState.IDLE)
        self.__dict__["_idle"] = idle
        return idle

    def pending_and_running_only(self) -> bool:
        """Whether the snapshot holds pending and running jobs only (made by :meth:`from_parts`).

        Then :meth:`pending` and :meth:`running` are all its jobs, each in submission order,
        read without building :attr:`jobs`.
        """
        return bool(self.__dict__.get("_parts"))

    def starts_known(self) -> bool:
        """Whether the maker of this :meth:`from_parts` snapshot guarantees the start times.

        That is: no view of :meth:`pending` has a ``start_time_s`` and every view of
        :meth:`running` has one (``from_parts(..., starts_known=True)``).
        """
        return bool(self.__dict__.get("_starts_known"))

    def pending(self) -> tuple[JobView, ...]:
        """Pending jobs in submission order (first come, first served)."""
        try:
            return self._pending  # type: ignore[no-any-return]  # kept, or given to from_parts
        except AttributeError:
            pass
        pending = tuple(j for j in self.jobs if j.state is JobState.PENDING)
        self.__dict__["_pending"] = pending
        return pending

    def running(self) -> tuple[JobView, ...]:
        """Running jobs in submission order."""
        try:
            return self._running  # type: ignore[no-any-return]  # kept, or given to from_parts
        except AttributeError:
            pass
        running = tuple(j for j in self.jobs if j.state is JobState.RUNNING)
        self.__dict__["_running"] = running
        return running

    def job(self, job_id: int) -> JobView:
        """The job with this id; ``KeyError`` if it is not in the snapshot."""
        state = self.__dict__
        lookup = state.get("_lookup")
        if lookup is not None:
            view = lookup(job_id)
            if view is not None:
                return view  # type: ignore[no-any-return]
            state["_lookup"] = None
        by_id = state.get("_by_id")
        if by_id is None:
            jobs = state["_pending"] + state["_running"] if "_names" in state else self.jobs
            by_id = state["_by_id"] = {j.job_id: j for j in jobs}
        return by_id[job_id]  # type: ignore[no-any-return]


def _submit_key(job: JobView) -> tuple[float, int]:
    return job.submit_time_s, job.job_id


_SUBMIT_KEY = _submit_key
