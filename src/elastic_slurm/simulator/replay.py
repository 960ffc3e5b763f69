"""Run a policy on a workload in virtual time: the simulation loop and :func:`run`.

Each step takes every event of the next instant from the queue (job arrivals, ends, evolving
requests, finished resizes, periodic ticks; see :class:`~elastic_slurm.simulator.engine.EventKind`
for their order), lets the virtual cluster handle them, and then, if anything happened and no
resize is under way, calls ``policy.decide(snapshot, trigger)`` once with a trigger that
coalesces them (their kinds and the ids of the jobs concerned), and carries out the decisions
(:meth:`~elastic_slurm.simulator.cluster.VirtualCluster.apply`).

As in the live controller (:mod:`elastic_slurm.controller.daemon`), the policy is not called
while a resize (or a start waiting for nodes a shrink gives back) is under way: events that
happen meanwhile are kept and delivered, coalesced, in the first cycle after the last resize
completes. With zero resize costs (the default) no cycle is ever held back.

A run is deterministic: the event order is fixed (``(time_s, priority, seq)``), the only
randomness is the workload conversion's ``random.Random(seed)``, and the wall-clock time spent
in the policy is reported apart (:class:`~elastic_slurm.simulator.metrics.SchedulingTime`).

:meth:`Simulation.run` and :func:`run` pause Python's cyclic garbage collector while they run
(and restore it; :func:`gc_paused`): a run makes millions of short-lived objects but no
reference cycles, and the collector would otherwise walk the growing heap again and again (half
the time of a 50,000-job run). Reference counting still frees everything as usual; cycles a
policy makes are collected after the run.

The run stops when no event is left. Jobs still pending or running then (a policy that never
starts a job, or never serves a blocking request) raise
:class:`~elastic_slurm.simulator.cluster.SimulationError`; so does a policy that keeps
deciding at one instant without time advancing (``max_cycles_per_instant``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elastic_slurm.errors import InvalidRequest
from elastic_slurm.plugins.policy import Policy
from elastic_slurm.simulator import kernel
from elastic_slurm.simulator.cluster import JobRecord, SimulationError, VirtualCluster
from elastic_slurm.simulator.engine import EventKind, EventQueue
from elastic_slurm.simulator.metrics import (
    BSLD_BOUND_S,
    Metrics,
    SchedulingTime,
    compute_metrics,
    rigid_metrics,
)
from elastic_slurm.simulator.swf import SWFTrace, read_swf
from elastic_slurm.simulator.workload import (
    ElasticConversion,
    LinaConversion,
    SimJob,
    Workload,
    WorkloadReport,
    from_swf,
    make_elastic,
)

# the event kinds the loop tells apart, as module constants: reading a member from its Enum
# class goes through the metaclass (about 80 ns more than a global's 15 ns)
_JOB_SUBMIT, _PERIODIC = EventKind.JOB_SUBMIT, EventKind.PERIODIC

ENGINES = ("auto", "general")
"""The values of :attr:`SimConfig.engine`."""

Progress = Callable[[int, int], None]
"""Called as ``progress(jobs_ended, jobs_total)`` now and then during a run."""


@dataclass(frozen=True)
class SimConfig:
    """Options of the simulation loop.

    Parameters
    ----------
    periodic_s
        When set, a ``PERIODIC`` trigger every ``periodic_s`` seconds from the first arrival
        while jobs remain (Lina et al. and Ghafoor schedule on events; some policies also want
        a clock tick). ``None``: events only.
    max_cycles_per_instant
        How many policy cycles one instant may take before the policy is deemed to loop
        (each zero-cost resize makes one more cycle at the same instant).
    bsld_bound_s
        Bound of the bounded slowdown, seconds.
    engine
        ``"auto"``: the compiled engine (:mod:`~elastic_slurm.simulator.kernel`) where it
        gives the same result as the general loop (FCFS and EASY on rigid jobs, Numba
        installed), the general loop elsewhere; ``"general"``: always the general loop, which
        calls the policy object at every cycle.

    Raises
    ------
    ValueError
        For a non-positive period or bound, or fewer than one cycle per instant.
    """

    periodic_s: float | None = None
    max_cycles_per_instant: int = 10_000
    bsld_bound_s: float = BSLD_BOUND_S
    engine: str = "auto"

    def __post_init__(self) -> None:
        if self.periodic_s is not None and not self.periodic_s > 0:
            raise ValueError(f"periodic_s must be positive, got {self.periodic_s}")
        if self.max_cycles_per_instant < 1:
            raise ValueError("max_cycles_per_instant must be at least 1")
        if not self.bsld_bound_s > 0:
            raise ValueError(f"bsld_bound_s must be positive, got {self.bsld_bound_s}")
        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")


@dataclass(frozen=True)
class SimResult:
    """The outcome of one run.

    Parameters
    ----------
    policy
        The policy's registry name.
    nodes
        Machine size.
    seed
        The seed of the workload conversion.
    metrics
        Aggregate metrics (deterministic).
    records
        One record per job, by submission time, then id (deterministic).
    timeline
        ``(time_s, job_id, nodes_held)`` at each change of a job's allocation, in time order
        (deterministic; for plots).
    timing
        Wall-clock time in the policy; excluded from equality.
    workload
        How the workload was obtained from a trace, when it was.
    engine
        ``"general"`` or ``"compiled"`` (see :class:`SimConfig`); excluded from equality.
    """

    policy: str
    nodes: int
    seed: int
    metrics: Metrics
    records: tuple[JobRecord, ...]
    timeline: tuple[tuple[float, int, int], ...]
    timing: SchedulingTime = field(default_factory=SchedulingTime, compare=False)
    workload: WorkloadReport | None = None
    engine: str = field(default="general", compare=False)

    def summary(self) -> dict[str, Any]:
        """The CLI's JSON object: ``jobs``, ``policy``, the ``avg_*`` metrics, ``engine``, more."""
        m = self.metrics
        out: dict[str, Any] = {"policy": self.policy, "seed": self.seed}
        out.update(m.as_dict())
        out["sched_time_per_cycle_s"] = self.timing.per_cycle_s
        out["sched_time_per_decision_s"] = self.timing.per_decision_s
        out["sched_time_max_s"] = self.timing.max_s
        out["engine"] = self.engine
        return out


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector inside the block (see the module docstring).

    Restores it as it was (a block inside another pauses nothing more).
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


class Simulation:
    """One simulation of ``jobs`` on ``nodes`` nodes under ``policy``.

    Use :meth:`run`, or :meth:`step` to advance one instant at a time (to watch or pace a run).

    Parameters
    ----------
    jobs
        The workload, in submission order.
    policy
        The policy object (the controller's kind: :class:`~elastic_slurm.plugins.policy.Policy`).
    nodes
        Machine size.
    config
        Loop options.
    progress
        Called as ``progress(jobs_ended, jobs_total)`` about every 1 % of the jobs.
    seed
        Recorded in the result (the workload conversion's seed).
    queue
        The event queue; pass a subclass of
        :class:`~elastic_slurm.simulator.engine.EventQueue` to inject a clock.

    Raises
    ------
    ValueError, InvalidRequest
        For an impossible workload (see :class:`~elastic_slurm.simulator.cluster.VirtualCluster`).
    """

    def __init__(
        self,
        jobs: Sequence[SimJob],
        policy: Policy,
        nodes: int,
        *,
        config: SimConfig | None = None,
        progress: Progress | None = None,
        seed: int = 0,
        queue: EventQueue | None = None,
    ) -> None:
        self.policy = policy
        self.config = config or SimConfig()
        self.progress = progress
        self.seed = seed
        self.total = len(jobs)
        self.nodes = nodes
        #: why the compiled engine does not run this simulation (``None``: it does)
        self.why_general: str | None = "a queue was given" if queue is not None else None
        self.queue = queue if queue is not None else EventQueue()  # an empty queue is falsy
        self._rigid: kernel.Columns | None = None
        self._compiled_result: SimResult | None = None  # the compiled engine's, once it ran
        if self.why_general is None:
            self.why_general = (
                "engine 'general' asked for"
                if self.config.engine == "general"
                else kernel.why_not(policy, jobs, self.config.periodic_s)
            )
        if self.why_general is None:
            self._rigid = kernel.prepare(jobs, nodes)
            if self._rigid is None:
                self.why_general = "the workload needs the general loop's checks"
        self._jobs: Sequence[SimJob] = jobs if self._rigid is not None else ()
        self._cluster: VirtualCluster | None = None
        self._step_every = max(1, self.total // 100)
        self._next_report = self._step_every
        self._cycles = 0
        self._decisions = 0
        self._sched_s = 0.0
        self._sched_max_s = 0.0
        self._instant = float("nan")
        self._instant_cycles = 0
        if self._rigid is None:
            self._general(jobs)

    @property
    def cluster(self) -> VirtualCluster:
        """The general loop's virtual cluster.

        Made on first use when the compiled engine could run the simulation: :meth:`step`
        uses it (and :meth:`run` then goes on with the general loop).
        """
        if self._cluster is None:
            self._general(self._jobs)
        assert self._cluster is not None
        return self._cluster

    def _general(self, jobs: Sequence[SimJob]) -> None:
        """Set up the general loop: the virtual cluster and the arrivals in the event queue."""
        self._jobs, self._rigid = (), None
        if self.why_general is None:
            self.why_general = "stepped"
        self._cluster = VirtualCluster(jobs, self.nodes, self.queue)
        arrivals = self._cluster.arrivals()
        submit = EventKind.JOB_SUBMIT
        self.queue.push_sorted([(submit_s, submit, handle) for submit_s, handle in arrivals])
        if self.config.periodic_s is not None and arrivals:
            self.queue.push(arrivals[0][0], EventKind.PERIODIC, None)
        self.policy.prepare()  # before the first cycle, whoever steps: not in its time

    @property
    def now_s(self) -> float:
        """The simulation clock, in seconds."""
        return self.queue.now_s

    def step(self) -> bool:
        """Handle the next instant's events and run the policy once if due.

        Returns
        -------
        bool
            False when no event was left (the run is over).

        Raises
        ------
        PolicyError
            When a decision breaks the rules, or the policy loops at one instant.
        """
        cluster = self._cluster
        if cluster is None:
            if self._compiled_result is not None:
                return False  # the compiled engine ran it all
            cluster = self.cluster  # made on first use: the arrivals go into the queue
        return self._loop(cluster, True)

    def _loop(self, cluster: VirtualCluster, once: bool) -> bool:
        """Handle instants until no event is left (or only the next one, when ``once``).

        The loop of :meth:`step` and :meth:`_run`, in one function: an instant's events go to
        the cluster, then a policy cycle runs if one is due (see the module docstring). The
        counters of cycles, decisions and scheduling time are kept in locals and written back
        on the way out, also when an error is raised.

        Returns
        -------
        bool
            True when an instant was handled (``once``), False when no event was left.
        """
        queue = self.queue
        pop_batch = queue.pop_batch
        policy = self.policy
        decide = policy.decide
        name = policy.name
        submit = cluster.submit
        event = cluster.event
        take_trigger = cluster.take_trigger
        snapshot = cluster.snapshot
        apply = cluster.apply
        end_cycle = cluster.end_cycle
        perf_counter = time.perf_counter
        periodic_s = self.config.periodic_s
        max_cycles = self.config.max_cycles_per_instant
        progress = self.progress
        cycles, decided, sched_s, sched_max_s = (
            self._cycles,
            self._decisions,
            self._sched_s,
            self._sched_max_s,
        )
        instant, instant_cycles = self._instant, self._instant_cycles
        try:
            while True:
                try:
                    now, batch = pop_batch()
                except IndexError:  # pop_batch's signal of an empty queue
                    if len(queue):
                        raise
                    return False
                tick = False
                for priority, payload in batch:
                    if priority == _JOB_SUBMIT:
                        submit(payload)
                    elif priority == _PERIODIC:
                        if cluster.busy or len(queue):
                            cluster.tick()
                            tick = True
                    else:
                        job, version = payload
                        if version == job.version:  # else stale (the job changed since): no call
                            event(priority, job, version, now)
                if cluster.in_flight == 0 and cluster.trigger_mask:  # cluster.cycle_due
                    if now == instant:
                        instant_cycles += 1
                        if instant_cycles > max_cycles:
                            raise SimulationError(
                                f"policy {name!r} made {instant_cycles - 1} cycles at "
                                f"t={now:g} s without time advancing (it keeps resizing at no "
                                "cost?); raise SimConfig.max_cycles_per_instant if this is "
                                "intended"
                            )
                    else:
                        instant = now
                        instant_cycles = 1
                    trigger = take_trigger()
                    snap = snapshot(now)
                    t0 = perf_counter()
                    decisions = decide(snap, trigger)
                    elapsed = perf_counter() - t0
                    sched_s += elapsed
                    if elapsed > sched_max_s:
                        sched_max_s = elapsed
                    cycles += 1
                    if decisions:
                        decided += len(decisions)
                        apply(decisions, name, now)
                    end_cycle()
                if tick and periodic_s is not None and (len(queue) or cluster.running_count):
                    # tick on while anything can still happen; pending jobs alone with no
                    # other event are stuck, and the run ends with an error instead of
                    # ticking for ever
                    queue.push(now + periodic_s, _PERIODIC, None)
                if progress is not None and cluster.ended >= self._next_report:
                    self._next_report = cluster.ended + self._step_every
                    progress(cluster.ended, self.total)
                if once:
                    return True
        finally:
            self._cycles, self._decisions = cycles, decided
            self._sched_s, self._sched_max_s = sched_s, sched_max_s
            self._instant, self._instant_cycles = instant, instant_cycles

    def run(self) -> SimResult:
        """Run to the end and return the result (again the same one, once the run is over).

        Raises
        ------
        SimulationError
            When jobs are left pending or running with no event left (see the module docstring).
        PolicyError
            When a decision breaks the rules.
        """
        if self._compiled_result is not None:
            return self._compiled_result  # as the general loop, which has no event left
        if self._rigid is not None:
            self._compiled_result = self._run_compiled(self._rigid)
            return self._compiled_result
        with gc_paused():
            return self._run()

    def _run_compiled(self, cols: kernel.Columns) -> SimResult:
        """The compiled engine's run (:mod:`~elastic_slurm.simulator.kernel`)."""
        self._rigid = None
        cycles, elapsed = cols.run(self.policy, self.nodes)
        n = len(cols.job_id)
        metrics = rigid_metrics(
            cols.submit,
            cols.start,
            cols.end,
            cols.size,
            self.nodes,
            bound_s=self.config.bsld_bound_s,
            cycles=cycles,
            decisions=n,
        )
        if self.progress is not None:
            self.progress(n, self.total)
        return SimResult(
            policy=self.policy.name,
            nodes=self.nodes,
            seed=self.seed,
            metrics=metrics,
            records=kernel.LazyTuple(cols.records, n),  # type: ignore[arg-type]
            timeline=kernel.LazyTuple(cols.timeline, 2 * n),  # type: ignore[arg-type]
            timing=SchedulingTime(cycles, n, elapsed, elapsed / cycles if cycles else 0.0),
            engine="compiled",
        )

    def _run(self) -> SimResult:
        cluster = self.cluster
        self._loop(cluster, False)
        if cluster.busy:
            raise SimulationError(
                f"policy {self.policy.name!r} left the simulation stuck at t={self.now_s:g} s "
                f"with {cluster.stuck_reason()}"
            )
        if self.progress is not None:
            self.progress(cluster.ended, self.total)
        records = cluster.records_by_submission()
        metrics = compute_metrics(
            records,
            cluster.node_count,
            bound_s=self.config.bsld_bound_s,
            cycles=self._cycles,
            decisions=self._decisions,
            requests_refused=cluster.requests_refused,
        )
        timing = SchedulingTime(self._cycles, self._decisions, self._sched_s, self._sched_max_s)
        return SimResult(
            policy=self.policy.name,
            nodes=cluster.node_count,
            seed=self.seed,
            metrics=metrics,
            records=tuple(records),
            timeline=tuple(cluster.timeline),
            timing=timing,
        )


def load_workload(
    source: str | Path | SWFTrace | Workload | Sequence[SimJob],
    nodes: int | None = None,
    *,
    max_jobs: int | None = None,
    on_error: str = "raise",
    swf_options: Mapping[str, Any] | None = None,
    max_records: int | None = None,
    drop_zero_runtime: bool = False,
) -> Workload:
    """A workload from a trace path, a parsed trace, a workload, or a list of jobs.

    Parameters
    ----------
    source
        SWF path (``.swf`` or ``.swf.gz``), :class:`SWFTrace`, :class:`Workload` or jobs.
    nodes
        Machine size; required for a plain list of jobs, else taken from the trace.
    max_jobs
        Keep the first ``max_jobs`` usable jobs.
    on_error
        How malformed SWF lines are handled (:func:`~elastic_slurm.simulator.swf.read_swf`).
    swf_options
        More options for :func:`~elastic_slurm.simulator.workload.from_swf`.
    max_records, drop_zero_runtime
        For a trace path: read only its first ``max_records`` records (before any filter),
        and leave out jobs that ran for 0 s (:func:`~elastic_slurm.simulator.swf.read_swf`).

    Raises
    ------
    TraceError
        For a trace that cannot be read or is malformed.
    InvalidRequest
        For a list of jobs without ``nodes``.
    """
    if isinstance(source, (str, Path)):
        source = read_swf(
            source,
            on_error=on_error,  # type: ignore[arg-type]
            max_records=max_records,
            drop_zero_runtime=drop_zero_runtime,
        )
    if isinstance(source, SWFTrace):
        return from_swf(source, nodes=nodes, max_jobs=max_jobs, **dict(swf_options or {}))
    if isinstance(source, Workload):
        jobs = source.jobs[:max_jobs] if max_jobs is not None else source.jobs
        return Workload(jobs, nodes or source.nodes, source.report)
    if nodes is None:
        raise InvalidRequest("give the machine size (nodes) with a list of jobs")
    jobs = tuple(source)
    if max_jobs is not None:
        jobs = jobs[:max_jobs]
    return Workload(jobs, nodes)


def run(
    source: str | Path | SWFTrace | Workload | Sequence[SimJob],
    policy: Policy | str = "easy_backfill",
    nodes: int | None = None,
    *,
    seed: int = 0,
    elastic_fraction: float = 0.0,
    conversion: ElasticConversion | None = None,
    max_jobs: int | None = None,
    policy_options: Mapping[str, Any] | None = None,
    config: SimConfig | None = None,
    progress: Progress | None = None,
    on_error: str = "raise",
    swf_options: Mapping[str, Any] | None = None,
) -> SimResult:
    """Simulate ``policy`` on a workload and return metrics and per-job records.

    Parameters
    ----------
    source
        An SWF path, a parsed trace, a :class:`Workload` or a list of :class:`SimJob`.
    policy
        A policy object, or a registry name (built with ``policy_options``).
    nodes
        Machine size in nodes; ``None`` to take it from the trace's header.
    seed
        Seed of the workload conversion (``random.Random(seed)``); the loop itself has no
        randomness.
    elastic_fraction
        Fraction of jobs made elastic by Lina et al.'s conversion
        (:class:`~elastic_slurm.simulator.workload.LinaConversion`); 0 keeps the trace rigid.
    conversion
        Another conversion instead (then ``elastic_fraction`` must be 0).
    max_jobs
        Simulate only the first ``max_jobs`` usable jobs.
    policy_options
        Options of a policy given by name.
    config
        Loop options (:class:`SimConfig`).
    progress
        Progress callback (:data:`Progress`).
    on_error
        ``"raise"`` or ``"skip"`` malformed SWF lines.
    swf_options
        More options of :func:`~elastic_slurm.simulator.workload.from_swf`.

    Returns
    -------
    SimResult
        Deterministic for the same inputs and seed (except ``timing``).

    Raises
    ------
    PolicyError
        For an unknown policy (the message lists the known ones), bad options, a decision that
        breaks the rules, or a stuck run (:class:`SimulationError`).
    TraceError
        For a malformed trace.
    InvalidRequest
        For impossible sizes or fractions.
    """
    if isinstance(policy, str):
        from elastic_slurm.plugins.registry import make_policy

        policy = make_policy(policy, policy_options)
    elif policy_options:
        raise InvalidRequest("policy_options apply only to a policy given by name")
    if conversion is not None and elastic_fraction:
        raise InvalidRequest("give either elastic_fraction or conversion, not both")
    if conversion is None and elastic_fraction:
        conversion = LinaConversion(elastic_fraction=elastic_fraction)
    with gc_paused():
        workload = load_workload(
            source, nodes, max_jobs=max_jobs, on_error=on_error, swf_options=swf_options
        )
        if conversion is not None:
            workload = make_elastic(workload, conversion, seed)
        sim = Simulation(
            workload.jobs, policy, workload.nodes, config=config, progress=progress, seed=seed
        )
        result = sim.run()
    if workload.report is not None:
        result = dataclasses.replace(result, workload=workload.report)
    return result


__all__ = [
    "Progress",
    "SimConfig",
    "SimResult",
    "Simulation",
    "gc_paused",
    "load_workload",
    "run",
]
