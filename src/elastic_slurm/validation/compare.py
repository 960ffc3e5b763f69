"""Live against simulated: per-job and aggregate ``|live - simulated| / live``.

The measures are the simulator's (:mod:`elastic_slurm.simulator.metrics`): turnaround time
(end - submit), wait time (start - submit), makespan (last end - first submit) and
utilisation (node-seconds held by the jobs over ``nodes * makespan``). A per-job relative
error divides by ``max(live, floor_s)``: a job that waited 0.2 s live and 0.4 s simulated is
not a 100 % error (``floor_s`` = 1 s by default).
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import fmean
from typing import Any


@dataclass(frozen=True)
class JobTimes:
    """One job's times, in seconds from any common origin, and its node-seconds."""

    trace_id: int
    submit_s: float
    start_s: float
    end_s: float
    node_s: float

    @property
    def turnaround_s(self) -> float:
        """End minus submission (seconds)."""
        return self.end_s - self.submit_s

    @property
    def wait_s(self) -> float:
        """Start minus submission (seconds)."""
        return self.start_s - self.submit_s


@dataclass(frozen=True)
class RunTimes:
    """The jobs of one run (live or simulated) on ``nodes`` nodes, by trace id."""

    jobs: dict[int, JobTimes]
    nodes: int

    @property
    def makespan_s(self) -> float:
        """Last end minus first submission (seconds)."""
        js = self.jobs.values()
        return max(j.end_s for j in js) - min(j.submit_s for j in js)

    @property
    def utilisation(self) -> float:
        """Node-seconds held over ``nodes * makespan`` (in [0, 1])."""
        span = self.makespan_s
        return sum(j.node_s for j in self.jobs.values()) / (self.nodes * span) if span else 0.0

    def mean(self, what: str) -> float:
        """The mean of ``turnaround_s`` or ``wait_s`` over the jobs (seconds)."""
        return fmean(getattr(j, what) for j in self.jobs.values())


def relative_error(live: float, simulated: float, floor: float = 1.0) -> float:
    """``|live - simulated| / max(|live|, floor)``.

    >>> relative_error(100.0, 90.0), relative_error(0.2, 0.4), relative_error(0.0, 0.0)
    (0.1, 0.2, 0.0)
    """
    return abs(live - simulated) / max(abs(live), floor)


@dataclass(frozen=True)
class Comparison:
    """Per-job rows and aggregate rows of a validation.

    ``per_job``: one dict per job (``trace_id``, live and simulated turnaround and wait, their
    relative errors). ``aggregate``: one dict per measure (``measure``, ``live``,
    ``simulated``, ``relative_error``), plus the mean per-job errors.
    """

    per_job: list[dict[str, Any]]
    aggregate: list[dict[str, Any]]


def compare(live: RunTimes, simulated: RunTimes, floor_s: float = 1.0) -> Comparison:
    """Compare two runs of the same jobs.

    Raises
    ------
    ValueError
        The runs do not have the same jobs.

    >>> a = RunTimes({1: JobTimes(1, 0, 10, 30, 20), 2: JobTimes(2, 5, 5, 25, 40)}, 2)
    >>> b = RunTimes({1: JobTimes(1, 0, 12, 30, 18), 2: JobTimes(2, 5, 5, 20, 30)}, 2)
    >>> c = compare(a, b)
    >>> [round(r["relative_error"], 3) for r in c.aggregate[:4]]  # turnaround, wait, makespan, util
    [0.1, 0.2, 0.0, 0.2]
    """
    if set(live.jobs) != set(simulated.jobs):
        missing = sorted(set(live.jobs) ^ set(simulated.jobs))
        raise ValueError(f"the runs differ in jobs {missing[:10]}")
    rows = []
    for tid in sorted(live.jobs, key=lambda t: (live.jobs[t].submit_s, t)):
        lj, sj = live.jobs[tid], simulated.jobs[tid]
        rows.append(
            {
                "trace_id": tid,
                "live_turnaround_s": lj.turnaround_s,
                "sim_turnaround_s": sj.turnaround_s,
                "turnaround_error": relative_error(lj.turnaround_s, sj.turnaround_s, floor_s),
                "live_wait_s": lj.wait_s,
                "sim_wait_s": sj.wait_s,
                "wait_error": relative_error(lj.wait_s, sj.wait_s, floor_s),
            }
        )
    measures = [
        ("mean turnaround (s)", live.mean("turnaround_s"), simulated.mean("turnaround_s")),
        ("mean wait (s)", live.mean("wait_s"), simulated.mean("wait_s")),
        ("makespan (s)", live.makespan_s, simulated.makespan_s),
        ("utilisation", live.utilisation, simulated.utilisation),
    ]
    aggregate = [
        {"measure": m, "live": a, "simulated": b, "relative_error": relative_error(a, b, 1e-9)}
        for m, a, b in measures
    ]
    for key, label in (("turnaround_error", "turnaround"), ("wait_error", "wait")):
        errors = [r[key] for r in rows]
        aggregate.append(
            {
                "measure": f"per-job {label} error (mean)",
                "live": None,
                "simulated": None,
                "relative_error": fmean(errors),
            }
        )
    return Comparison(rows, aggregate)
