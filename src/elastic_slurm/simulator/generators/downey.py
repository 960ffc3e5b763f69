"""Downey's parallel workload model, and the workloads Lina et al. and Ghafoor built with it.

A. B. Downey, "A Parallel Workload Model and Its Implications for Processor Allocation", 6th
IEEE HPDC, 1997 (fitted to the SDSC and CTC logs; summarised by the Parallel Workloads
Archive's "Downey 1997" page):

* a job's **parallelism** is log-uniform: the chance that it uses fewer than ``n`` processors
  grows as ``log n``;
* its **run time** is log-uniform too. Downey models the *cumulative* run time (node-seconds,
  the job's work), the wall-clock time following from a speedup model; Lina et al. (section
  5.1, Table 1: "``ln(T_r)``" between 5.69 and 9.91) and Ghafoor (thesis section 6.2: minimum
  and maximum *execution time*, 100 and 3600 s) instead draw the execution time on the job's
  own size. :class:`DowneyModel` does either (``runtime_basis``).
* **arrivals** are a Poisson process. Downey modulates its rate over the day; the papers that
  use the model give only a load (Lina et al.'s ``rho``) or nothing (Ghafoor), so the rate
  here is constant: ``load * nodes / mean(P * T)`` over the jobs drawn (the offered load is
  then ``load`` of the machine), or ``1 / mean_interarrival_s``.

Sizes are rounded to whole nodes within the range and the machine; a job's time limit is its
run time (the model has no user estimates). A speedup model can be attached (linear, or
Downey's own with ``sigma`` uniform in ``sigma_range`` around the drawn parallelism: the
low-variance model for ``sigma <= 1``, the high-variance one above).

The two papers' workloads:

* :func:`lina_synthetic`: Lina et al. Table 1 (10,000 jobs, ``rho`` = 0.75, seed 17 in their
  generator, ``ln(T_r)`` in [5.69, 9.91], ``ln(P)`` in [0.69, 8.51], 10,000 processors). Our
  random numbers are not theirs, so the seed reproduces the distribution, not their jobs.
* :func:`ghafoor_model` and :class:`GhafoorMalleable`: Ghafoor's thesis sections 3.3.2 and
  6.2 (1000 jobs, 100-3600 s, 16-128 processors; x % of jobs malleable with a flexibility
  range of 2-128 processors, spread uniformly through the workload, linear speedup, adaptation
  cost 2 ms per processor and negotiation cost 1.5 ms). The thesis does not give the arrival
  rate; see :func:`ghafoor_model`.

>>> w = DowneyModel(jobs=3, nodes=64, size_range=(2, 64), load=0.5).generate(seed=1)
>>> [j.nodes_requested for j in w.jobs], w.nodes
([3, 28, 11], 64)
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from elastic_slurm.errors import InvalidRequest
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.speedup import DowneyHigh, DowneyLow, Linear, LinearResizeCost
from elastic_slurm.simulator.workload import ElasticConversion, SimJob, Workload


def log_uniform(rng: random.Random, low: float, high: float) -> float:
    """A draw whose logarithm is uniform on ``[log low, log high]`` (``0 < low <= high``).

    >>> log_uniform(random.Random(1), 5.0, 5.0)
    5.0
    """
    if low == high:
        return float(low)
    return math.exp(rng.uniform(math.log(low), math.log(high)))


@dataclass(frozen=True)
class DowneyModel:
    """Downey's workload model (see the module docstring), to generate rigid jobs.

    Parameters
    ----------
    jobs
        Number of jobs.
    nodes
        Machine size in nodes: sizes never exceed it, and ``load`` is relative to it.
    size_range
        Smallest and largest job size (nodes, before rounding); log-uniform between them.
    runtime_range_s
        Smallest and largest run time in seconds (``runtime_basis="runtime"``), or work in
        node-seconds (``"cumulative"``); log-uniform between them.
    runtime_basis
        ``"runtime"``: the range is the wall-clock run time on the job's own size (Lina et
        al., Ghafoor); ``"cumulative"``: it is the job's work, as in Downey's model, and the
        run time on ``P`` nodes is ``work / S(P)`` (linear speedup unless ``speedup`` says
        otherwise).
    load
        Offered load, the fraction of the machine's node-seconds the jobs ask for per unit of
        time (Downey's and Lina et al.'s ``rho``); sets the arrival rate. ``None`` to use
        ``mean_interarrival_s``.
    mean_interarrival_s
        Mean time between arrivals in seconds, when ``load`` is ``None``.
    speedup
        ``"none"`` (rigid jobs need none), ``"linear"`` or ``"downey"``.
    sigma_range
        Range of Downey's ``sigma`` (uniform), for ``speedup="downey"``.

    Raises
    ------
    InvalidRequest
        For an empty or non-positive range, fewer than one job or node, or neither ``load``
        nor ``mean_interarrival_s``.
    """

    jobs: int = 1000
    nodes: int = 128
    size_range: tuple[float, float] = (1.0, 128.0)
    runtime_range_s: tuple[float, float] = (100.0, 3600.0)
    runtime_basis: Literal["runtime", "cumulative"] = "runtime"
    load: float | None = 0.75
    mean_interarrival_s: float | None = None
    speedup: Literal["none", "linear", "downey"] = "none"
    sigma_range: tuple[float, float] = (0.0, 2.0)

    def __post_init__(self) -> None:
        if self.jobs < 1 or self.nodes < 1:
            raise InvalidRequest(f"need at least 1 job and 1 node, got {self.jobs}, {self.nodes}")
        for name in ("size_range", "runtime_range_s", "sigma_range"):
            lo, hi = getattr(self, name)
            if not (lo <= hi and (lo > 0 or name == "sigma_range") and lo >= 0):
                raise InvalidRequest(f"{name} must satisfy 0 < low <= high, got {lo}..{hi}")
        if self.size_range[0] > self.nodes:
            raise InvalidRequest(
                f"the smallest job ({self.size_range[0]} nodes) exceeds the machine ({self.nodes})"
            )
        if self.load is None and self.mean_interarrival_s is None:
            raise InvalidRequest("give the offered load or the mean inter-arrival time")
        if self.load is not None and not self.load > 0:
            raise InvalidRequest(f"the load must be positive, got {self.load}")
        if self.mean_interarrival_s is not None and not self.mean_interarrival_s > 0:
            raise InvalidRequest(
                f"the mean inter-arrival time must be positive, got {self.mean_interarrival_s}"
            )
        if self.runtime_basis not in ("runtime", "cumulative"):
            raise InvalidRequest(
                f"runtime_basis is runtime or cumulative, not {self.runtime_basis}"
            )
        if self.speedup not in ("none", "linear", "downey"):
            raise InvalidRequest(f"speedup is none, linear or downey, not {self.speedup!r}")

    def generate(self, seed: int = 0) -> Workload:
        """The jobs, from ``random.Random(seed)``: same seed, same jobs.

        The draws, in this order: per job its parallelism, its run time (or work) and its
        ``sigma``; then the inter-arrival gaps (the first job arrives at 0 s).
        """
        rng = random.Random(seed)
        lo = max(1, math.ceil(self.size_range[0] - 0.5))
        hi = min(self.nodes, max(lo, math.floor(self.size_range[1] + 0.5)))
        drawn = []
        for _ in range(self.jobs):
            parallelism = log_uniform(rng, *self.size_range)
            length = log_uniform(rng, *self.runtime_range_s)
            sigma = rng.uniform(*self.sigma_range) if self.speedup == "downey" else 0.0
            size = min(hi, max(lo, round(parallelism)))
            model = None
            if self.speedup == "linear":
                model = Linear()
            elif self.speedup == "downey":
                a = max(1.0, parallelism)
                model = DowneyLow(a, sigma) if sigma <= 1.0 else DowneyHigh(a, sigma)
            if self.runtime_basis == "cumulative":
                rate = model.speedup(size) if model is not None else float(size)
                length = length / rate
            drawn.append((size, length, model))
        if self.load is not None:
            work = sum(size * t for size, t, _ in drawn) / len(drawn)
            mean_gap = work / (self.load * self.nodes)
        else:
            assert self.mean_interarrival_s is not None
            mean_gap = self.mean_interarrival_s
        jobs = []
        now = 0.0
        for i, (size, length, model) in enumerate(drawn):
            if i:
                now += rng.expovariate(1.0 / mean_gap)
            jobs.append(
                SimJob(
                    job_id=i + 1,
                    submit_s=now,
                    runtime_s=length,
                    nodes_requested=size,
                    walltime_s=length,
                    speedup=model,
                )
            )
        return Workload(tuple(jobs), self.nodes)


def lina_synthetic(jobs: int = 10_000, nodes: int = 10_000, load: float = 0.75) -> DowneyModel:
    """Lina et al.'s synthetic workload (section 5.1, Tables 1 and 2), as a model.

    ``ln(T_r)`` in [5.69, 9.91] (296 s to 5.5 h) and ``ln(P)`` in [0.69, 8.51] (2 to 4965
    processors, one per node here), ``rho`` = 0.75 on 10,000 processors. Generate with their
    seed, 17, for the paper's set-up (our generator's numbers are not theirs).

    >>> m = lina_synthetic()
    >>> round(m.size_range[0], 2), round(m.runtime_range_s[1])
    (1.99, 20131)
    """
    return DowneyModel(
        jobs=jobs,
        nodes=nodes,
        size_range=(math.exp(0.69), math.exp(8.51)),
        runtime_range_s=(math.exp(5.69), math.exp(9.91)),
        load=load,
    )


#: Mean inter-arrival time of :func:`ghafoor_model` (seconds); see there for why.
GHAFOOR_INTERARRIVAL_S = 20.0


def ghafoor_model(
    jobs: int = 1000, nodes: int = 256, mean_interarrival_s: float = GHAFOOR_INTERARRIVAL_S
) -> DowneyModel:
    """Ghafoor's rigid baseline workload (thesis section 6.2), as a model.

    1000 jobs, run times 100-3600 s and sizes 16-128 processors, both log-uniform as in
    Downey's model (the thesis gives the ranges, not the shape). The thesis does not give the
    arrival rate. Its Table 6.2 does constrain it: all-rigid FCFS reaches a mean turnaround of
    109,741 s on 256 nodes, about half the schedule span at 84 % utilisation (the mean job
    needs about 53,000 node-seconds, 1000 jobs about 2.4e5 s on 256 nodes at that
    utilisation). That happens only if nearly all jobs have arrived early in the span: with
    ``span/2 - A/2`` as the mean turnaround of a saturated FCFS queue filled over ``A``
    seconds, both of the table's cluster sizes give ``A`` of about 2e4 s, so one job every 20 s
    (``GHAFOOR_INTERARRIVAL_S``; section 6.2's "about 200 jobs a day" contradicts the table's
    turnarounds, and we follow the table). The malleable rows are not used to choose it.

    ``nodes`` is the machine the jobs are generated for (sizes never exceed it): the table
    runs one workload on 256 and 512 nodes, so generate it for 256.
    """
    return DowneyModel(
        jobs=jobs,
        nodes=nodes,
        size_range=(16.0, 128.0),
        runtime_range_s=(100.0, 3600.0),
        load=None,
        mean_interarrival_s=mean_interarrival_s,
    )


@dataclass(frozen=True)
class GhafoorMalleable(ElasticConversion):
    """Ghafoor's malleable workloads (thesis sections 3.3.2, 3.3.3 and 6.1-6.3).

    A fraction ``malleable_fraction`` of the jobs become malleable with the node range
    ``flexibility`` (2-128 for Table 6.2), linear speedup (the thesis' work model, eq. 3.5:
    ``W = p_d * t_d``) and the adaptation cost ``C * |dp|`` plus negotiation ``C_n`` per resize
    (eq. 3.16 and section 3.3.4; 2 ms and 1.5 ms by default, the "simpler model" with no
    variation). A job whose size lies outside the range is moved to its nearest end, with its
    run time scaled to keep its work.

    Which jobs: ``placement="even"`` spreads them evenly (job ``i`` is malleable when
    ``floor((i + 1) f) > floor(i f)``; the thesis distributes malleable jobs "uniformly
    through out the workload", section 4.3.3); ``"random"`` draws them.

    Parameters
    ----------
    malleable_fraction
        Fraction of malleable jobs, ``0 <= f <= 1``.
    flexibility
        ``(nodes_min, nodes_max)`` of every malleable job.
    adaptation_s, negotiation_s
        ``C`` (seconds per node added or removed) and ``C_n`` (seconds per resize).
    placement
        ``"even"`` or ``"random"``.

    Raises
    ------
    InvalidRequest
        For a fraction outside ``[0, 1]``, an empty range, negative costs or an unknown
        placement.

    >>> from elastic_slurm.simulator.workload import SimJob
    >>> jobs = [SimJob(i, float(i), 100.0, 16) for i in range(1, 5)]
    >>> out = GhafoorMalleable(0.5).apply(jobs, random.Random(0), 256)
    >>> [(j.kind.value, j.nodes_min, j.nodes_max) for j in out][:2]
    [('rigid', 16, 16), ('malleable', 2, 128)]
    """

    malleable_fraction: float = 0.0
    flexibility: tuple[int, int] = (2, 128)
    adaptation_s: float = 0.002
    negotiation_s: float = 0.0015
    placement: Literal["even", "random"] = "even"

    def __post_init__(self) -> None:
        if not 0.0 <= self.malleable_fraction <= 1.0:
            raise InvalidRequest(
                f"the malleable fraction must be in [0, 1], got {self.malleable_fraction}"
            )
        lo, hi = self.flexibility
        if not 1 <= lo <= hi:
            raise InvalidRequest(f"the flexibility range must satisfy 1 <= min <= max: {lo}-{hi}")
        if self.adaptation_s < 0 or self.negotiation_s < 0:
            raise InvalidRequest("adaptation and negotiation costs must be >= 0")
        if self.placement not in ("even", "random"):
            raise InvalidRequest(f"placement is even or random, not {self.placement!r}")

    def chosen(self, count: int, rng: random.Random) -> list[int]:
        """Indices of the jobs made malleable, in order."""
        f = self.malleable_fraction
        if self.placement == "random":
            return sorted(rng.sample(range(count), round(f * count)))
        return [i for i in range(count) if math.floor((i + 1) * f) > math.floor(i * f)]

    def apply(self, jobs: Sequence[SimJob], rng: random.Random, nodes: int) -> tuple[SimJob, ...]:
        """Make the chosen jobs malleable (same length and order; see the class docstring)."""
        lo, hi = self.flexibility
        hi = min(hi, nodes)
        lo = min(lo, hi)
        cost = LinearResizeCost(per_node_s=self.adaptation_s, fixed_s=self.negotiation_s)
        out = list(jobs)
        for i in self.chosen(len(jobs), rng):
            job = jobs[i]
            size = min(max(job.nodes_requested, lo), hi)
            scale = job.nodes_requested / size
            out[i] = dataclasses.replace(
                job,
                kind=JobKind.MALLEABLE,
                nodes_requested=size,
                nodes_min=lo,
                nodes_max=hi,
                runtime_s=job.runtime_s * scale,
                walltime_s=None if job.walltime_s is None else job.walltime_s * scale,
                speedup=Linear(),
                resize_cost=cost,
            )
        return tuple(out)


__all__ = [
    "GHAFOOR_INTERARRIVAL_S",
    "DowneyModel",
    "GhafoorMalleable",
    "ghafoor_model",
    "lina_synthetic",
    "log_uniform",
]
