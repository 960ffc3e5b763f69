"""Sizes from speedup models: the knee, the largest useful size, a moldable job's range.

Shared by the moldable policies of Huang et al. ("Moldable Job Scheduling for HPC as a Service
with Application Speedup Model and Execution Time Information", sections 3-4); the knee is
Eager, Zahorjan and Lazowska's (their reference [12]).
"""

from __future__ import annotations

import functools
from typing import Literal

from elastic_slurm.model.request import JobKind
from elastic_slurm.model.snapshot import JobView
from elastic_slurm.model.speedup import (
    Amdahl,
    DowneyHigh,
    DowneyLow,
    Linear,
    SpeedupModel,
    best_size,
)
from elastic_slurm.plugins.kit.queue import start_size

_SIZEABLE = (JobKind.MOLDABLE, JobKind.MALLEABLE)

#: Models whose speedup never decreases with the size and whose ``S(n)**2 / n`` has one peak:
#: their best size and knee are found by bisection (a job's sizes are looked up once).
_UNIMODAL = (Linear, Amdahl, DowneyLow, DowneyHigh)
_TOLERANCE = 1.0 + 1e-12


@functools.lru_cache(maxsize=65536)
def max_useful(model: SpeedupModel, low: int, high: int) -> int:
    """The smallest size in ``[low, high]`` whose speedup is (within a tolerance) the top one.

    More nodes than this would only idle (Downey's models are flat beyond ``2A - 1``).
    """
    if type(model) not in _UNIMODAL:
        return best_size(model, low, high)
    top = model.speedup(high)
    while low < high:  # the smallest size within the tolerance of the top speedup
        mid = (low + high) // 2
        if model.speedup(mid) * _TOLERANCE >= top:
            high = mid
        else:
            low = mid + 1
    return low


def _knee_value(model: SpeedupModel, n: int) -> float:
    return model.speedup(n) ** 2 / n


@functools.lru_cache(maxsize=65536)
def _knee(model: SpeedupModel, low: int, high: int) -> int:
    if type(model) in _UNIMODAL:
        while low < high:  # the first size after which S(n)^2/n stops rising
            mid = (low + high) // 2
            if _knee_value(model, mid + 1) > _knee_value(model, mid) * _TOLERANCE:
                low = mid + 1
            else:
                high = mid
        return low
    best, best_v = low, _knee_value(model, low)
    for n in range(low + 1, high + 1):
        v = _knee_value(model, n)
        if v > best_v * _TOLERANCE:
            best, best_v = n, v
    return best


def knee(model: SpeedupModel, low: int, high: int) -> int:
    """The knee of ``model`` in ``[low, high]``: the size that maximises ``S(n)**2 / n``.

    That is efficiency over run time, ``E(n) / T(n)`` (Eager, Zahorjan and Lazowska, Huang et
    al.'s reference [12]); the smallest such size.

    >>> from elastic_slurm.model.speedup import Amdahl, DowneyLow
    >>> knee(Amdahl(0.9), 1, 128)  # p / (1 - p)
    9
    >>> knee(DowneyLow(8, 0.2), 1, 128)  # A when sigma is small
    8

    Raises
    ------
    ValueError
        Unless ``1 <= low <= high``.
    """
    if low < 1 or high < low:
        raise ValueError(f"need 1 <= low <= high, got {low}..{high}")
    return _knee(model, low, high)


def size_range(job: JobView, cap: Literal["none", "max_speedup", "knee"]) -> tuple[int, int]:
    """The sizes a moldable policy may start ``job`` at: ``(low, high)`` in nodes.

    Rigid and evolving jobs (and moldable ones without a range): their start size, twice.
    Moldable and malleable jobs: ``nodes_min`` to ``nodes_max``, with ``high`` lowered to the
    smallest size of highest speedup (``cap="max_speedup"``: more nodes would only idle) or to
    the knee (``cap="knee"``), when the job has a speedup model.

    >>> from elastic_slurm.model import JobKind, JobState, JobView
    >>> from elastic_slurm.model.speedup import DowneyLow
    >>> job = JobView(1, JobKind.MOLDABLE, JobState.PENDING, (), 8, 1, 128, 0.0,
    ...               speedup=DowneyLow(8, 0.5))
    >>> size_range(job, "none"), size_range(job, "max_speedup")  # 2A - 1
    ((1, 128), (1, 15))
    """
    if job.kind not in _SIZEABLE or job.nodes_min >= job.nodes_max:
        n = start_size(job)
        return n, n
    low, high = max(1, job.nodes_min), job.nodes_max
    if job.speedup is not None:
        if cap == "max_speedup":
            high = max_useful(job.speedup, low, high)
        elif cap == "knee":
            high = _knee(job.speedup, low, high)
    return low, high


__all__ = ["knee", "max_useful", "size_range"]
