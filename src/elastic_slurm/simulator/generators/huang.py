"""Huang et al.'s workloads: moldable jobs with random speedup models, at integer load factors.

K.-C. Huang, T.-C. Huang, M.-J. Tsai, H.-Y. Chang and Y.-H. Tung, "Moldable Job Scheduling for
HPC as a Service with Application Speedup Model and Execution Time Information", section 5:
the SDSC-SP2 log on a 128-processor machine, every job moldable with a Downey speedup model
whose ``sigma`` and ``A`` "were generated randomly" (or Amdahl's law, Fig. 17), and "an integer
load factor ... multiplying it with the original job execution time recorded in the workload
log" to raise the load.

* :class:`HuangConversion` makes a trace's jobs moldable: each gets a speedup model drawn with
  a ``random.Random`` and the range ``[nodes_min, machine]``. The job's trace size ``P`` and
  run time stay its reference point: on ``n`` nodes it runs ``runtime * S(P) / S(n)``
  (:meth:`~elastic_slurm.model.speedup.SpeedupModel.runtime_s`).
* :func:`scale_load` applies a load factor: run times and time limits multiplied by it (the
  paper's way, the default), or inter-arrival times divided by it (``how="interarrival"``).
* :func:`huang_workload` does both to a trace, in that order.

The paper gives no distribution for ``A`` or ``sigma``; ours, stated in
:class:`HuangConversion`, are:

* ``A``: the job's own trace size ``P`` (``parallelism="trace"``, the default: the size its
  user asked for is the best evidence of its parallelism, and the trace's load stays close to
  what it was), or log-uniform on ``[1, machine]`` (``parallelism="log_uniform"``: Downey's
  1997 workload model, independent of ``P``);
* ``sigma``: uniform on ``[0, 1]`` for the low-variance model (its whole domain) and on
  ``[1, 2]`` for the high-variance one;
* Amdahl's parallel fraction: uniform on ``[0.9, 1]``.

A job of one processor in the trace gets ``A = 1`` in the default mode: it is sequential
(``S(n) = 1``), which is what the corrected fair-share baseline singles out.

>>> import random
>>> from elastic_slurm.simulator.workload import SimJob
>>> job = SimJob(1, 0.0, 100.0, 8, walltime_s=200.0)
>>> (out,) = HuangConversion("downey_low").apply([job], random.Random(1), 128)
>>> out.kind.value, out.nodes_min, out.nodes_max, out.speedup.average_parallelism
('moldable', 1, 128, 8.0)
>>> scale_load(Workload((job,), 128), 3).jobs[0].runtime_s
300.0
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from elastic_slurm.errors import InvalidRequest
from elastic_slurm.model.request import JobKind
from elastic_slurm.model.speedup import Amdahl, DowneyHigh, DowneyLow, Linear, SpeedupModel
from elastic_slurm.simulator.swf import SWFTrace
from elastic_slurm.simulator.workload import (
    ElasticConversion,
    SimJob,
    Workload,
    make_elastic,
)

SpeedupKind = Literal["downey_low", "downey_high", "amdahl", "linear"]

#: Default ``sigma`` ranges by model (the paper gives none; see the module docstring).
DEFAULT_SIGMA_RANGE: dict[str, tuple[float, float]] = {
    "downey_low": (0.0, 1.0),
    "downey_high": (1.0, 2.0),
}


@dataclass(frozen=True)
class HuangConversion(ElasticConversion):
    """Make jobs moldable with a random speedup model (Huang et al. section 5).

    Parameters
    ----------
    model
        ``"downey_low"`` (eqs. 2-3, :class:`~elastic_slurm.model.speedup.DowneyLow`),
        ``"downey_high"`` (eqs. 4-5, :class:`~elastic_slurm.model.speedup.DowneyHigh`),
        ``"amdahl"`` (Fig. 17) or ``"linear"``.
    parallelism
        How ``A`` is drawn for the Downey models: ``"trace"`` (``A = P``, the job's trace size)
        or ``"log_uniform"`` (on ``[1, machine]``, independent of ``P``).
    sigma_range
        ``sigma`` is uniform on this range; ``None`` for the model's default
        (:data:`DEFAULT_SIGMA_RANGE`: ``[0, 1]`` low variance, ``[1, 2]`` high variance).
    amdahl_range
        Amdahl's parallel fraction is uniform on this range.
    fraction
        Fraction of the jobs made moldable (drawn at random); the rest stay rigid. The paper
        makes every job moldable (1).
    nodes_min
        The smallest size of a moldable job (its largest is the machine).

    Raises
    ------
    InvalidRequest
        For an unknown model or mode, an empty range, a range outside the model's domain, a
        fraction outside ``[0, 1]`` or ``nodes_min < 1``.
    """

    model: SpeedupKind = "downey_low"
    parallelism: Literal["trace", "log_uniform"] = "trace"
    sigma_range: tuple[float, float] | None = None
    amdahl_range: tuple[float, float] = (0.9, 1.0)
    fraction: float = 1.0
    nodes_min: int = 1

    def __post_init__(self) -> None:
        if self.model not in ("downey_low", "downey_high", "amdahl", "linear"):
            raise InvalidRequest(
                f"unknown speedup model {self.model!r}; use downey_low, downey_high, amdahl "
                "or linear"
            )
        if self.parallelism not in ("trace", "log_uniform"):
            raise InvalidRequest(
                f"parallelism must be 'trace' or 'log_uniform', got {self.parallelism!r}"
            )
        lo, hi = self.sigmas
        if lo > hi:
            raise InvalidRequest(f"sigma_range is empty: {lo} > {hi}")
        if self.model == "downey_low" and not 0.0 <= lo <= hi <= 1.0:
            raise InvalidRequest(f"the low-variance model needs sigma in [0, 1], got {lo}..{hi}")
        if self.model == "downey_high" and lo < 0.0:
            raise InvalidRequest(f"sigma must be at least 0, got {lo}")
        plo, phi = self.amdahl_range
        if not 0.0 <= plo <= phi <= 1.0:
            raise InvalidRequest(f"amdahl_range must be within [0, 1], got {plo}..{phi}")
        if not 0.0 <= self.fraction <= 1.0:
            raise InvalidRequest(f"fraction must be in [0, 1], got {self.fraction}")
        if self.nodes_min < 1:
            raise InvalidRequest(f"nodes_min must be at least 1, got {self.nodes_min}")

    @property
    def sigmas(self) -> tuple[float, float]:
        """The ``sigma`` range in use."""
        if self.sigma_range is not None:
            return self.sigma_range
        return DEFAULT_SIGMA_RANGE.get(self.model, (0.0, 0.0))

    def draw(self, rng: random.Random, trace_nodes: int, machine: int) -> SpeedupModel:
        """One job's speedup model, for a job of ``trace_nodes`` on ``machine`` nodes."""
        if self.model == "linear":
            return Linear()
        if self.model == "amdahl":
            return Amdahl(rng.uniform(*self.amdahl_range))
        if self.parallelism == "trace":
            a = float(trace_nodes)
        else:
            a = math.exp(rng.uniform(0.0, math.log(machine)))
        sigma = rng.uniform(*self.sigmas)
        if self.model == "downey_low":
            return DowneyLow(a, sigma)
        return DowneyHigh(a, sigma)

    def apply(self, jobs: Sequence[SimJob], rng: random.Random, nodes: int) -> tuple[SimJob, ...]:
        """Return the jobs with ``round(fraction * len(jobs))`` of them moldable.

        With ``fraction == 1`` every job is converted in order, one model drawn per job, so
        the same seed gives the same models whatever the job count.
        """
        if self.nodes_min > nodes:
            raise InvalidRequest(f"nodes_min {self.nodes_min} exceeds the machine's {nodes}")
        if self.fraction >= 1.0:
            chosen = range(len(jobs))
        else:
            chosen = sorted(rng.sample(range(len(jobs)), round(self.fraction * len(jobs))))
        out = list(jobs)
        for i in chosen:
            job = jobs[i]
            p = job.nodes_requested
            out[i] = dataclasses.replace(
                job,
                kind=JobKind.MOLDABLE,
                nodes_min=min(self.nodes_min, p),
                nodes_max=max(nodes, p),
                speedup=self.draw(rng, p, nodes),
            )
        return tuple(out)


def scale_load(
    workload: Workload, factor: float, *, how: Literal["runtime", "interarrival"] = "runtime"
) -> Workload:
    """The workload at ``factor`` times its load.

    Parameters
    ----------
    workload
        The jobs and machine.
    factor
        The load factor, ``> 0`` (Huang et al. use integers 1, 2, ...).
    how
        ``"runtime"``: run times and time limits are multiplied by ``factor`` (Huang et al.
        section 5: the work grows, arrivals keep their times). ``"interarrival"``: submit
        times are divided by ``factor`` (arrivals come faster, the work stays; Ghafoor's
        "shrinking factor" is ``1 / factor``).

    Raises
    ------
    InvalidRequest
        For ``factor <= 0`` or an unknown ``how``.

    >>> from elastic_slurm.simulator.workload import SimJob
    >>> w = Workload((SimJob(1, 0.0, 10.0, 1), SimJob(2, 60.0, 10.0, 1)), 4)
    >>> [j.submit_s for j in scale_load(w, 2, how="interarrival").jobs]
    [0.0, 30.0]
    """
    if not factor > 0:
        raise InvalidRequest(f"the load factor must be positive, got {factor}")
    if how == "runtime":
        jobs = tuple(
            dataclasses.replace(
                j,
                runtime_s=j.runtime_s * factor,
                walltime_s=None if j.walltime_s is None else j.walltime_s * factor,
            )
            for j in workload.jobs
        )
    elif how == "interarrival":
        jobs = tuple(dataclasses.replace(j, submit_s=j.submit_s / factor) for j in workload.jobs)
    else:
        raise InvalidRequest(f"how must be 'runtime' or 'interarrival', got {how!r}")
    return Workload(jobs, workload.nodes, workload.report)


def huang_workload(
    source: str | Path | SWFTrace | Workload,
    *,
    model: SpeedupKind = "downey_low",
    load_factor: float = 1.0,
    seed: int = 0,
    max_jobs: int | None = None,
    how: Literal["runtime", "interarrival"] = "runtime",
    conversion: HuangConversion | None = None,
) -> Workload:
    """A trace as Huang et al. simulate it: scaled to ``load_factor``, every job moldable.

    Parameters
    ----------
    source
        An SWF path, a parsed trace or a workload. Jobs are taken as
        :func:`~elastic_slurm.simulator.workload.from_swf` takes them (every job with a run
        time; see :mod:`elastic_slurm.simulator.repro.huang` for why).
    model
        The speedup model (:class:`HuangConversion`), unless ``conversion`` is given.
    load_factor, how
        :func:`scale_load`.
    seed
        Seed of the speedup parameters (``random.Random(seed)``); the same seed gives the same
        parameters at every load factor.
    max_jobs
        Keep the first ``max_jobs`` jobs.
    conversion
        A conversion with other parameters.

    Raises
    ------
    TraceError
        For a malformed trace.
    InvalidRequest
        For bad parameters.
    """
    from elastic_slurm.simulator.replay import load_workload

    workload = load_workload(source, max_jobs=max_jobs)
    if load_factor != 1:
        workload = scale_load(workload, load_factor, how=how)
    return make_elastic(workload, conversion or HuangConversion(model), seed)


__all__ = ["DEFAULT_SIGMA_RANGE", "HuangConversion", "huang_workload", "scale_load"]
