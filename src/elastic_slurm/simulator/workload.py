"""Simulated jobs: what the simulator runs, made from SWF traces or by generators.

:class:`SimJob` is one job as the simulator needs it (times in seconds, sizes in nodes).
:func:`from_swf` turns an SWF trace into rigid jobs; an :class:`ElasticConversion` then makes
some of them moldable, malleable or evolving (:class:`LinaConversion`: Lina et al., section
5.1). Later generators (Downey's model, Klein and Perez's evolution profiles, Ghafoor's
malleable workloads) produce :class:`SimJob` lists the same way.

From SWF to jobs (:func:`from_swf`):

* **Processors to nodes.** A job's processors are SWF field 8 (requested), else field 5
  (allocated). With ``procs_per_node`` processors per node a job takes
  ``ceil(processors / procs_per_node)`` nodes. By default ``procs_per_node`` is
  ``MaxProcs / MaxNodes`` from the header, rounded up when MaxProcs is not a multiple of
  MaxNodes (a machine with nodes of several sizes, such as CEA-Curie's 93,312 processors on
  5,544 nodes: 17 per node), so that the machine keeps its MaxNodes nodes and every job that
  fitted the real machine fits (a warning says which machine is assumed); without both
  directives, 1.
* **Machine size.** ``nodes`` if given; else the ``MaxNodes`` directive; else ``MaxProcs /
  procs_per_node``; else the widest job (with a warning).
* **Run time** is field 4 (the job's real run time). Jobs are never killed at their time limit
  (as in AccaSim), so a job that overran its estimate in the log overruns it here too.
* **Time limit** (``walltime_s``) is field 9. When it is missing, ``walltime_fallback``
  decides: ``"runtime"`` (default) uses the real run time, a perfect estimate; ``"none"``
  leaves it unknown (backfilling then cannot reserve past that job).
* **Left out, and counted in the report:** jobs that
  :func:`~elastic_slurm.simulator.swf.read_swf` dropped for a zero run time
  (``drop_zero_runtime``); jobs with a missing submit time, run time or
  processor count; with ``min_runtime_s`` (default 0) jobs that ran for less; jobs whose
  ``status`` is not in ``statuses`` when that is given; jobs wider than the machine unless
  ``too_wide="error"`` (then :class:`~elastic_slurm.simulator.swf.TraceError`).
* Jobs are sorted by submit time, then job number (the SWF order), and submit times are
  shifted so that the first job arrives at 0 s.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from elastic_slurm.errors import InvalidRequest
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.speedup import (
    LinaOverhead,
    LinaResizeCost,
    ResizeCost,
    SpeedupModel,
)
from elastic_slurm.simulator.swf import SWFJob, SWFTrace, TraceError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvolvingEvent:
    """A request an evolving application makes when it has done part of its work.

    Parameters
    ----------
    at_work
        Fraction of the job's work done when it asks, ``0 < at_work < 1``.
    delta_nodes
        ``+k`` to ask for ``k`` more nodes, ``-k`` to give ``k`` back (``k >= 1``). The
        simulator clips the request to the job's node range at the time it is made; a request
        clipped to 0 is not made.
    blocking
        True: the application waits, making no progress, until the policy serves the request
        (Klein and Perez, section 3.2). False: it goes on at its current size, and the request
        lapses if the first policy cycle that sees it does not serve it (Lina et al.).

    Raises
    ------
    InvalidRequest
        For ``at_work`` outside ``(0, 1)`` or ``delta_nodes == 0``.
    """

    at_work: float
    delta_nodes: int
    blocking: bool = False

    def __post_init__(self) -> None:
        if not 0.0 < self.at_work < 1.0:
            raise InvalidRequest(
                f"an evolving event's at_work must be in (0, 1), got {self.at_work}"
            )
        if self.delta_nodes == 0:
            raise InvalidRequest("an evolving event must ask for a change of at least one node")


@dataclass(frozen=True)
class SimJob:
    """One job to simulate.

    Parameters
    ----------
    job_id
        Unique id (the SWF job number for traces).
    submit_s
        Arrival time in seconds from the start of the simulation (``>= 0``).
    runtime_s
        Real run time in seconds on ``nodes_requested`` nodes (``>= 0``).
    nodes_requested
        The size the user asked for (SWF processors, in nodes): the size of rigid and evolving
        jobs at start, and the reference size of ``runtime_s`` and ``walltime_s``.
    kind
        Rigid, moldable, malleable or evolving.
    nodes_min, nodes_max
        The size range, ``1 <= nodes_min <= nodes_requested <= nodes_max``; default
        ``nodes_requested`` (``nodes_min == nodes_max`` for rigid jobs).
    walltime_s
        The time limit (user's estimate) in seconds on ``nodes_requested`` nodes, ``None`` if
        unknown.
    speedup
        How the run time changes with the size; required when the size can differ from
        ``nodes_requested`` (a range), ignored otherwise.
    resize_cost
        Cost of a size change; ``None`` for none.
    evolving
        For evolving jobs, the requests the application will make, by increasing ``at_work``.
    evolution_profile
        For evolving jobs that declare it: ``(duration_s, nodes)`` per step at the job's own
        speed (Klein and Pérez 2011, section 3.1), published to policies in
        :attr:`~elastic_slurm.model.snapshot.JobView.evolution_profile`; ``None``: undeclared.
    user_id, status
        From the trace, for analysis (``-1`` when unknown).

    Raises
    ------
    InvalidRequest
        For an impossible combination (negative times, a range that does not contain
        ``nodes_requested``, a rigid job with a range, a range without a speedup model,
        evolving events on a job that is not evolving or not in increasing order).
    """

    job_id: int
    submit_s: float
    runtime_s: float
    nodes_requested: int
    kind: JobKind = JobKind.RIGID
    nodes_min: int = 0
    nodes_max: int = 0
    walltime_s: float | None = None
    speedup: SpeedupModel | None = None
    resize_cost: ResizeCost | None = None
    evolving: tuple[EvolvingEvent, ...] = ()
    user_id: int = -1
    status: int = -1
    evolution_profile: tuple[tuple[float, int], ...] | None = None

    def __post_init__(self) -> None:
        if self.nodes_min == 0:
            object.__setattr__(self, "nodes_min", self.nodes_requested)
        if self.nodes_max == 0:
            object.__setattr__(self, "nodes_max", self.nodes_requested)
        where = f"job {self.job_id}"
        if not self.submit_s >= 0:
            raise InvalidRequest(f"{where}: submit time {self.submit_s} s is negative")
        if not self.runtime_s >= 0:
            raise InvalidRequest(f"{where}: run time {self.runtime_s} s is negative")
        if self.walltime_s is not None and not self.walltime_s >= 0:
            raise InvalidRequest(f"{where}: time limit {self.walltime_s} s is negative")
        if not 1 <= self.nodes_min <= self.nodes_requested <= self.nodes_max:
            raise InvalidRequest(
                f"{where}: impossible sizes: need 1 <= nodes_min ({self.nodes_min}) <= "
                f"nodes_requested ({self.nodes_requested}) <= nodes_max ({self.nodes_max})"
            )
        if self.kind is JobKind.RIGID and self.nodes_min != self.nodes_max:
            raise InvalidRequest(f"{where}: a rigid job has one size, got a range")
        if self.nodes_min != self.nodes_max and self.speedup is None:
            raise InvalidRequest(
                f"{where}: a {self.kind} job with a size range needs a speedup model, to know "
                "its run time at other sizes"
            )
        if self.evolving and self.kind is not JobKind.EVOLVING:
            raise InvalidRequest(f"{where}: only evolving jobs make evolving requests")
        works = [e.at_work for e in self.evolving]
        if works != sorted(works):
            raise InvalidRequest(f"{where}: evolving events must come by increasing at_work")

    def runtime_at_s(self, nodes: int) -> float:
        """Real run time in seconds on ``nodes`` nodes (scaled by the speedup model)."""
        if nodes == self.nodes_requested or self.speedup is None:
            return self.runtime_s
        return self.speedup.runtime_s(self.runtime_s, self.nodes_requested, nodes)


@dataclass(frozen=True)
class WorkloadReport:
    """What :func:`from_swf` kept and left out, with counts by reason.

    Parameters
    ----------
    source
        The trace's name.
    records
        Job lines read.
    kept
        Jobs in the workload.
    dropped
        ``(reason, count)`` for each reason a job was left out.
    walltime_from_runtime
        Jobs whose missing time limit was replaced by their run time.
    nodes
        The machine size used, in nodes.
    procs_per_node
        Processors per node used for the mapping.
    """

    source: str
    records: int
    kept: int
    dropped: tuple[tuple[str, int], ...]
    walltime_from_runtime: int
    nodes: int
    procs_per_node: int

    def describe(self) -> str:
        """One line for humans."""
        parts = [f"{self.kept} of {self.records} jobs from {self.source}"]
        parts += [f"{n} {why}" for why, n in self.dropped if n]
        if self.walltime_from_runtime:
            parts.append(f"{self.walltime_from_runtime} missing time limits set to the run time")
        return f"{'; '.join(parts)}; {self.nodes} nodes ({self.procs_per_node} processor(s)/node)"


@dataclass(frozen=True)
class Workload:
    """Jobs to simulate on a machine of ``nodes`` nodes, and how they were obtained."""

    jobs: tuple[SimJob, ...]
    nodes: int
    report: WorkloadReport | None = None


def _procs_per_node(trace: SWFTrace, given: int | None) -> int:
    """Processors per node: given, else from the header (the module docstring says how)."""
    if given is not None:
        if given < 1:
            raise InvalidRequest(f"procs_per_node must be at least 1, got {given}")
        return given
    procs, nodes = trace.header.max_procs, trace.header.max_nodes
    if not (procs and nodes):
        return 1
    ppn = -(-procs // nodes)  # ceil: MaxNodes nodes hold at least MaxProcs processors
    if procs < nodes:  # not nodes of several sizes: the header contradicts itself
        log.warning(
            "%s: MaxProcs %d is less than MaxNodes %d (fewer processors than nodes): assuming "
            "%d nodes of 1 processor; give procs_per_node (simulate --procs-per-node) to "
            "choose otherwise",
            trace.source,
            procs,
            nodes,
            nodes,
        )
    elif procs % nodes:
        log.warning(
            "%s: MaxProcs %d is not a multiple of MaxNodes %d (nodes of several sizes): "
            "assuming %d nodes of %d processors (%d processors); give procs_per_node "
            "(simulate --procs-per-node) to choose otherwise",
            trace.source,
            procs,
            nodes,
            nodes,
            ppn,
            nodes * ppn,
        )
    return ppn


def from_swf(
    trace: SWFTrace,
    *,
    nodes: int | None = None,
    procs_per_node: int | None = None,
    max_jobs: int | None = None,
    min_runtime_s: float = 0.0,
    statuses: frozenset[int] | None = None,
    walltime_fallback: Literal["runtime", "none"] = "runtime",
    too_wide: Literal["skip", "error"] = "skip",
) -> Workload:
    """Rigid jobs from an SWF trace (the module docstring gives every rule).

    Parameters
    ----------
    trace
        The parsed trace.
    nodes
        Machine size in nodes; ``None`` to take it from the header.
    procs_per_node
        Processors per node; ``None`` to take it from the header.
    max_jobs
        Keep the first ``max_jobs`` usable jobs (after the filters); ``None`` for all.
    min_runtime_s
        Leave out jobs that ran for less than this (seconds); 0 keeps zero-length jobs.
    statuses
        Keep only jobs with these SWF status codes (``{1}``: completed); ``None`` for all.
    walltime_fallback
        What a missing time limit becomes: ``"runtime"`` or ``"none"``.
    too_wide
        Jobs wider than the machine are left out (``"skip"``) or an error (``"error"``).

    Raises
    ------
    InvalidRequest
        For ``nodes < 1`` or ``procs_per_node < 1``.
    TraceError
        With ``too_wide="error"``, for the first job wider than the machine; when the machine
        size cannot be known (no header and no usable job).
    """
    if nodes is not None and nodes < 1:
        raise InvalidRequest(f"the machine must have at least 1 node, got {nodes}")
    ppn = _procs_per_node(trace, procs_per_node)
    if nodes is None:
        if trace.header.max_nodes:
            nodes = trace.header.max_nodes
        elif trace.header.max_procs:
            nodes = max(1, trace.header.max_procs // ppn)
            log.warning(
                "%s: the header gives no MaxNodes%s: assuming MaxProcs %d / %d processor(s) "
                "per node = %d node(s); give nodes (simulate --nodes) to choose it",
                trace.source,
                " above 0" if trace.header.max_nodes == 0 else "",
                trace.header.max_procs,
                ppn,
                nodes,
            )
    dropped = {
        "with run time 0 (dropped by read_swf)": trace.dropped_zero_runtime,
        "without submit time": 0,
        "without run time": 0,
        "without processor count": 0,
        "shorter than min_runtime_s": 0,
        "with a status not kept": 0,
        "wider than the machine": 0,
    }
    candidates: list[tuple[SWFJob, int]] = []
    for job in trace.jobs:
        if job.submit_time < 0:
            dropped["without submit time"] += 1
            continue
        if job.run_time < 0:
            dropped["without run time"] += 1
            continue
        procs = job.processors
        if procs <= 0:
            dropped["without processor count"] += 1
            continue
        if job.run_time < min_runtime_s:
            dropped["shorter than min_runtime_s"] += 1
            continue
        if statuses is not None and job.status not in statuses:
            dropped["with a status not kept"] += 1
            continue
        candidates.append((job, math.ceil(procs / ppn)))
    if nodes is None:
        if not candidates:
            raise TraceError(f"{trace.source}: no usable job and no MaxNodes/MaxProcs header")
        nodes = max(n for _, n in candidates)
        log.warning(
            "%s: the header gives no machine size (no MaxNodes or MaxProcs above 0): "
            "assuming a machine as wide as the widest job, %d node(s); give nodes "
            "(simulate --nodes) to choose it",
            trace.source,
            nodes,
        )
    candidates.sort(key=lambda c: (c[0].submit_time, c[0].job_number))
    jobs: list[SimJob] = []
    from_runtime = 0
    t0: float | None = None
    for swf, width in candidates:
        if width > nodes:
            if too_wide == "error":
                raise TraceError(
                    f"{trace.source}: job {swf.job_number} asks for {width} node(s) "
                    f"({swf.processors} processors), more than the machine's {nodes}; "
                    "give a larger --nodes or leave such jobs out"
                )
            dropped["wider than the machine"] += 1
            continue
        if max_jobs is not None and len(jobs) >= max_jobs:
            break
        if t0 is None:
            t0 = float(swf.submit_time)
        walltime: float | None = float(swf.requested_time) if swf.requested_time > 0 else None
        if walltime is None and walltime_fallback == "runtime":
            walltime = float(swf.run_time)
            from_runtime += 1
        jobs.append(
            SimJob(
                job_id=int(swf.job_number),
                submit_s=float(swf.submit_time) - t0,
                runtime_s=float(swf.run_time),
                nodes_requested=width,
                walltime_s=walltime,
                user_id=int(swf.user_id),
                status=int(swf.status),
            )
        )
    report = WorkloadReport(
        source=trace.source,
        records=len(trace.jobs) + trace.dropped_zero_runtime,
        kept=len(jobs),
        dropped=tuple(dropped.items()),
        walltime_from_runtime=from_runtime,
        nodes=nodes,
        procs_per_node=ppn,
    )
    return Workload(tuple(jobs), nodes, report)


class ElasticConversion:
    """Turns some rigid jobs of a workload elastic. Subclasses implement :meth:`apply`.

    A conversion must be deterministic for a given ``rng`` state and must keep job ids,
    submit times and order; it may change kinds, ranges, speedup and cost models and add
    evolving events.
    """

    def apply(
        self, jobs: Sequence[SimJob], rng: random.Random, nodes: int
    ) -> tuple[SimJob, ...]:  # pragma: no cover - interface
        """Return the converted jobs (same length and order) for a machine of ``nodes``."""
        raise NotImplementedError


@dataclass(frozen=True)
class LinaConversion(ElasticConversion):
    """Lina, Ghafoor and Hines, section 5.1 ("Creating Elastic Workload") with section 5.2.

    A fraction ``elastic_fraction`` of the jobs, drawn at random, become elastic: half of them
    malleable, half evolving (the odd one malleable). Each elastic job gets
    ``p_min = ceil(min_factor * P)`` and ``p_max = min(machine, ceil(max_factor * P))``
    (50 % and 800 % of its size ``P``), the parallel-overhead speedup of section 3
    (:class:`~elastic_slurm.model.speedup.LinaOverhead`, overhead drawn in
    ``overhead_range``) and the resize cost of section 3
    (:class:`~elastic_slurm.model.speedup.LinaResizeCost`: ``alpha`` and ``beta`` drawn in
    ``alpha_beta_range_s``, synchronisation in ``sync_range_s``, ``b = process_s``).

    Evolving jobs make between ``events_range`` requests (1 to 4), each an expansion with
    probability ``expand_probability`` (0.8), else a shrink, when the work left is between
    ``work_left_range`` (30 % to 60 %); the section gives these only for expansions and we use
    them for shrinks too. It gives no request sizes: ours are drawn uniformly in
    ``[1, ceil(delta_factor * P)]`` nodes (our choice, ``delta_factor`` 1).

    Parameters
    ----------
    elastic_fraction
        Fraction of jobs made elastic, ``0 <= x <= 1``.
    min_factor, max_factor
        ``p_min`` and ``p_max`` as multiples of ``P`` (0.5 and 8).
    overhead_range
        Range of the parallel-overhead fraction ``x`` of the speedup model.
    alpha_beta_range_s, sync_range_s, process_s
        Ranges of the resize-cost parameters, and ``b`` (seconds).
    events_range
        Fewest and most evolving requests per evolving job.
    expand_probability
        Probability that a request is an expansion.
    work_left_range
        Range of the work left (fraction) when a request is made.
    delta_factor
        Largest request, as a multiple of ``P`` (nodes, rounded up).
    blocking
        Whether evolving jobs wait for their requests to be served (Lina et al.: no).

    Raises
    ------
    InvalidRequest
        For a fraction outside ``[0, 1]`` or an empty range.
    """

    elastic_fraction: float = 0.0
    min_factor: float = 0.5
    max_factor: float = 8.0
    overhead_range: tuple[float, float] = (0.005, 0.01)
    alpha_beta_range_s: tuple[float, float] = (0.005, 0.05)
    sync_range_s: tuple[float, float] = (0.015, 0.1)
    process_s: float = 0.0
    events_range: tuple[int, int] = (1, 4)
    expand_probability: float = 0.8
    work_left_range: tuple[float, float] = (0.3, 0.6)
    delta_factor: float = 1.0
    blocking: bool = False

    def __post_init__(self) -> None:
        if not 0.0 <= self.elastic_fraction <= 1.0:
            raise InvalidRequest(
                f"the elastic fraction must be between 0 and 1, got {self.elastic_fraction}"
            )
        for name in ("overhead_range", "alpha_beta_range_s", "sync_range_s", "events_range"):
            lo, hi = getattr(self, name)
            if lo > hi:
                raise InvalidRequest(f"{name} is empty: {lo} > {hi}")
        lo, hi = self.work_left_range
        if not 0.0 < lo <= hi < 1.0:
            raise InvalidRequest(f"work_left_range must be within (0, 1), got {lo}..{hi}")

    def apply(self, jobs: Sequence[SimJob], rng: random.Random, nodes: int) -> tuple[SimJob, ...]:
        """Convert ``round(elastic_fraction * len(jobs))`` jobs (see the class docstring)."""
        count = round(self.elastic_fraction * len(jobs))
        chosen = rng.sample(range(len(jobs)), count)
        n_malleable = count - count // 2
        kinds = {i: JobKind.MALLEABLE for i in chosen[:n_malleable]}
        kinds.update({i: JobKind.EVOLVING for i in chosen[n_malleable:]})
        out = list(jobs)
        for i in sorted(kinds):
            out[i] = self._convert(jobs[i], kinds[i], rng, nodes)
        return tuple(out)

    def _convert(self, job: SimJob, kind: JobKind, rng: random.Random, nodes: int) -> SimJob:
        p = job.nodes_requested
        low = min(p, max(1, math.ceil(self.min_factor * p)))
        high = max(p, min(nodes, math.ceil(self.max_factor * p)))
        speedup = LinaOverhead(rng.uniform(*self.overhead_range), p)
        cost = LinaResizeCost(
            alpha_s=rng.uniform(*self.alpha_beta_range_s),
            beta_s=rng.uniform(*self.alpha_beta_range_s),
            sync_s=rng.uniform(*self.sync_range_s),
            process_s=self.process_s,
        )
        events: tuple[EvolvingEvent, ...] = ()
        if kind is JobKind.EVOLVING:
            n_events = rng.randint(*self.events_range)
            drawn = []
            for _ in range(n_events):
                grow = rng.random() < self.expand_probability
                size = rng.randint(1, max(1, math.ceil(self.delta_factor * p)))
                at = 1.0 - rng.uniform(*self.work_left_range)
                drawn.append(EvolvingEvent(at, size if grow else -size, self.blocking))
            events = tuple(sorted(drawn, key=lambda e: e.at_work))
        return dataclasses.replace(
            job,
            kind=kind,
            nodes_min=low,
            nodes_max=high,
            speedup=speedup,
            resize_cost=cost,
            evolving=events,
        )


def make_elastic(workload: Workload, conversion: ElasticConversion, seed: int) -> Workload:
    """Apply ``conversion`` with ``random.Random(seed)``; the same seed gives the same jobs."""
    jobs = conversion.apply(workload.jobs, random.Random(seed), workload.nodes)
    if len(jobs) != len(workload.jobs):
        raise InvalidRequest(
            f"conversion {conversion!r} returned {len(jobs)} jobs for {len(workload.jobs)}"
        )
    return Workload(tuple(jobs), workload.nodes, workload.report)


__all__ = [
    "ElasticConversion",
    "EvolvingEvent",
    "LinaConversion",
    "SimJob",
    "Workload",
    "WorkloadReport",
    "from_swf",
    "make_elastic",
]
