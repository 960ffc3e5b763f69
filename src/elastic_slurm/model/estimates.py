"""Run-time estimates: what a policy may believe about how long a job runs.

A policy never reads run times from job fields that only a simulation fills; it asks the
snapshot's estimate provider (``ClusterSnapshot.estimates``), which a live site and the
simulator both supply:

* :class:`UserEstimates` (the default): the users' time limits (``sbatch --time``, SWF
  field 9), scaled by the job's speedup model; what every live site has.
* :class:`TrueRuntimes`: the true run times a simulation knows (SWF field 4), as the
  simulators of Huang et al. (section 4) and Lina et al. (section 4) assume; the time limits
  where no true run time is known.

A site with a better predictor (history, a model) writes its own provider: any object with
the two methods of :class:`RuntimeEstimates`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # the snapshot module imports this one
    from elastic_slurm.model.snapshot import JobView


@runtime_checkable
class RuntimeEstimates(Protocol):
    """What a policy may believe about jobs' run times (seconds)."""

    def runtime_s(self, job: JobView, nodes: int | None = None) -> float | None:
        """The job's estimated total run time on ``nodes`` nodes (its current size by default).

        Seconds from start to end for a run at that size throughout; ``None`` when unknown.
        """
        ...

    def end_s(self, job: JobView, now_s: float) -> float | None:
        """When a running job is expected to end if it keeps its size (seconds).

        On the same clock as ``now_s``; may be in the past for a job that overruns; ``None``
        when unknown or while the job is pending.
        """
        ...


def _size(job: JobView, nodes: int | None) -> int:
    return job.size if nodes is None else nodes


@dataclass(frozen=True)
class UserEstimates:
    """Estimates from the users' time limits: what a live site knows.

    ``runtime_s`` is :meth:`JobView.walltime_at_s`; ``end_s`` is ``JobView.estimated_end_s``
    (the start plus the time limit, rescaled after resizes).

    >>> from elastic_slurm.model import JobKind, JobState, JobView
    >>> job = JobView(1, JobKind.RIGID, JobState.PENDING, (), 4, 4, 4, 0.0, walltime_s=60.0,
    ...               runtime_s=30.0)
    >>> UserEstimates().runtime_s(job)
    60.0
    """

    def runtime_s(self, job: JobView, nodes: int | None = None) -> float | None:
        """The time limit scaled to ``nodes`` (seconds); ``None`` without a time limit."""
        return job.walltime_at_s(_size(job, nodes))

    def end_s(self, job: JobView, now_s: float) -> float | None:
        """The running job's end by its time limit (seconds); ``None`` when unknown."""
        return job.estimated_end_s


@dataclass(frozen=True)
class TrueRuntimes:
    """The true run times a simulation knows; the time limits where it knows none.

    Reads the simulator's ``JobView.runtime_s`` and ``JobView.end_time_s`` (``None`` live,
    where this provider therefore gives the same answers as :class:`UserEstimates`).

    >>> from elastic_slurm.model import JobKind, JobState, JobView
    >>> job = JobView(1, JobKind.RIGID, JobState.PENDING, (), 4, 4, 4, 0.0, walltime_s=60.0,
    ...               runtime_s=30.0)
    >>> TrueRuntimes().runtime_s(job), TrueRuntimes().runtime_s(job, 4)
    (30.0, 30.0)
    """

    def runtime_s(self, job: JobView, nodes: int | None = None) -> float | None:
        """The true run time scaled to ``nodes`` (seconds), else the time limit's."""
        n = _size(job, nodes)
        run = job.runtime_at_s(n)
        return job.walltime_at_s(n) if run is None else run

    def end_s(self, job: JobView, now_s: float) -> float | None:
        """When the running job really ends at its current size, else its estimated end."""
        end = job.end_time_s
        return job.estimated_end_s if end is None else end


USER_ESTIMATES = UserEstimates()
"""The shared :class:`UserEstimates` (it has no state)."""

TRUE_RUNTIMES = TrueRuntimes()
"""The shared :class:`TrueRuntimes` (it has no state)."""


def ends_ignore_now(estimates: RuntimeEstimates) -> bool:
    """True when ``estimates.end_s(job, now_s)`` is known not to depend on ``now_s``.

    So for :class:`TrueRuntimes` and :class:`UserEstimates` (a view's end is a field of the
    immutable view): a policy may keep a running view's release time with the view across
    cycles. False for any other provider (a history-based one may revise its belief).

    >>> ends_ignore_now(TRUE_RUNTIMES), ends_ignore_now(USER_ESTIMATES)
    (True, True)
    """
    return type(estimates) in _ENDS_IGNORE_NOW


_ENDS_IGNORE_NOW = (TrueRuntimes, UserEstimates)

__all__ = [
    "TRUE_RUNTIMES",
    "USER_ESTIMATES",
    "RuntimeEstimates",
    "TrueRuntimes",
    "UserEstimates",
    "ends_ignore_now",
]
