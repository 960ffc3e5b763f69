"""Live against simulated: per-job and aggregate ``|live - simulated| / live``.

Both sides are the same job records (:class:`~elastic_slurm.simulator.cluster.JobRecord`:
the simulator's own, and :func:`~elastic_slurm.simulator.metrics.measured` ones from Slurm's
accounting) and their measures come from the one metrics function,
:func:`~elastic_slurm.simulator.metrics.compute_metrics`: turnaround time (end - submit), wait
time (start - submit) and its 95th percentile, bounded slowdown (10 s bound), makespan (last
end - first submit) and utilisation (node-seconds held by the jobs over ``nodes *
makespan``). A per-job relative error divides by ``max(live, floor_s)``: a job that waited
0.2 s live and 0.4 s simulated is not a 100 % error (``floor_s`` = 1 s by default).
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import fmean
from typing import Any

from elastic_slurm.simulator.cluster import JobRecord
from elastic_slurm.simulator.metrics import Metrics, compute_metrics


@dataclass(frozen=True)
class RunTimes:
    """The jobs of one run (live or simulated) on ``nodes`` nodes, by trace id."""

    jobs: dict[int, JobRecord]
    nodes: int

    @property
    def metrics(self) -> Metrics:
        """The run's measures (:func:`~elastic_slurm.simulator.metrics.compute_metrics`)."""
        records = sorted(self.jobs.values(), key=lambda r: (r.submit_s, r.job_id))
        return compute_metrics(records, self.nodes)


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

    >>> from elastic_slurm.simulator.metrics import measured as m
    >>> a = RunTimes({1: m(1, 0, 10, 30, 20), 2: m(2, 5, 5, 25, 40)}, 2)
    >>> b = RunTimes({1: m(1, 0, 12, 30, 18), 2: m(2, 5, 5, 20, 30)}, 2)
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
    lm, sm = live.metrics, simulated.metrics
    measures = [
        ("mean turnaround (s)", lm.avg_turnaround_s, sm.avg_turnaround_s),
        ("mean wait (s)", lm.avg_wait_s, sm.avg_wait_s),
        ("makespan (s)", lm.makespan_s, sm.makespan_s),
        ("utilisation", lm.utilization, sm.utilization),
        ("95th percentile wait (s)", lm.p95_wait_s, sm.p95_wait_s),
        ("mean bounded slowdown", lm.avg_bounded_slowdown, sm.avg_bounded_slowdown),
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
