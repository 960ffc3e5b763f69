"""Metrics of a simulated schedule, with the papers' definitions (units in the names).

Per job (:class:`~elastic_slurm.simulator.cluster.JobRecord`), with submit time ``s``, start
``b`` and end ``e``:

* wait ``b - s``; run ``e - b`` (including any resize costs); turnaround ``e - s`` (Lina et
  al. section 4.1, "TAT");
* bounded slowdown ``max(1, (e - s) / max(e - b, tau))`` with the bound ``tau`` =
  :data:`BSLD_BOUND_S` (10 s) unless told otherwise (Feitelson et al., "Theory and Practice in
  Parallel Job Scheduling", 1997; Mu'alem and Feitelson 2001 use 10 s too). Plain slowdown,
  ``(e - s) / (e - b)``, is :attr:`Metrics.avg_slowdown` (jobs that ran 0 s are left out of
  it);
* the 50th, 95th and 99th percentiles of wait and bounded slowdown over the jobs
  (:func:`~elastic_slurm.simulator.stats.percentiles`: linear interpolation between ranks),
  since averages hide the jobs that wait longest.

For the whole run:

* makespan: last end minus first submission (seconds);
* utilisation: node-seconds allocated to jobs over ``nodes * makespan`` (Lina et al. section
  4.1: ``sum_i sum_phases T_p P_p / (SS p)``; the time a job spends resizing counts, since its
  nodes are allocated), or over ``nodes * window`` for a measured window (a journal);
* waste: node-seconds allocated but not computing (resize costs, blocked evolving requests,
  nodes held while a start or an expansion waits for more), and its share of the allocation;
* expansions and shrinks completed; evolving requests that lapsed unserved;
* scheduling cycles and decisions. The wall-clock time a policy takes per cycle is measured
  but kept apart (:class:`SchedulingTime`), so that results never depend on the machine.

One record, one function: :class:`~elastic_slurm.simulator.cluster.JobRecord` is the record of
a job wherever its times come from (the simulator, Slurm's accounting in live validation, a
controller's journal; :func:`measured` makes one from measured times), and
:func:`compute_metrics` is how all three compute their results. Identifiers spell
``utilization`` (as the JSON keys); prose says utilisation.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from elastic_slurm.model.request import JobKind
from elastic_slurm.simulator.cluster import JobRecord
from elastic_slurm.simulator.stats import PERCENTILES, percentiles, ranks

BSLD_BOUND_S = 10.0
"""The default bound of the bounded slowdown, in seconds."""


def bounded_slowdown(record: JobRecord, bound_s: float = BSLD_BOUND_S) -> float:
    """``max(1, turnaround / max(run, bound_s))`` of one job.

    >>> from elastic_slurm.model import JobKind
    >>> r = JobRecord(1, JobKind.RIGID, 0.0, 90.0, 95.0, 1, 1, 1, 5.0, 0.0, 0, 0)
    >>> bounded_slowdown(r)
    9.5
    """
    return max(1.0, record.turnaround_s / max(record.run_s, bound_s))


def measured(
    job_id: int,
    submit_s: float,
    start_s: float,
    end_s: float,
    node_s: float,
    *,
    kind: JobKind = JobKind.RIGID,
    nodes_start: int = 0,
    nodes_end: int | None = None,
    expansions: int = 0,
    shrinks: int = 0,
) -> JobRecord:
    """The record of a job whose times were measured (live), not simulated.

    Parameters
    ----------
    job_id
        The job's id (a trace's job number in validation, Slurm's in a journal).
    submit_s, start_s, end_s
        Seconds from any common origin.
    node_s
        Node-seconds the job held.
    kind
        Its kind, when known.
    nodes_start, nodes_end
        Its size at start and at the end (``nodes_end`` defaults to ``nodes_start``); the
        requested size is taken as the start size.
    expansions, shrinks
        Resizes completed.

    >>> r = measured(7, 100.0, 110.0, 130.0, 40.0, nodes_start=2, nodes_end=1, shrinks=1)
    >>> (r.wait_s, r.turnaround_s, r.nodes_requested, r.waste_node_s)
    (10.0, 30.0, 2, 0.0)
    """
    end_size = nodes_start if nodes_end is None else nodes_end
    return JobRecord(
        job_id=job_id,
        kind=kind,
        submit_s=submit_s,
        start_s=start_s,
        end_s=end_s,
        nodes_requested=nodes_start,
        nodes_start=nodes_start,
        nodes_end=end_size,
        node_s=node_s,
        waste_node_s=0.0,
        expansions=expansions,
        shrinks=shrinks,
    )


@dataclass(frozen=True)
class Metrics:
    """Aggregate results of one simulation (see the module docstring for definitions).

    Averages and percentiles are over all jobs (``p95_wait_s``: 95 % of the jobs waited at
    most this long); times in seconds; utilisation and waste fraction in ``[0, 1]``.
    """

    jobs: int
    nodes: int
    avg_wait_s: float
    max_wait_s: float
    avg_turnaround_s: float
    avg_run_s: float
    avg_bounded_slowdown: float
    max_bounded_slowdown: float
    avg_slowdown: float
    bsld_bound_s: float
    p50_wait_s: float
    p95_wait_s: float
    p99_wait_s: float
    p50_bounded_slowdown: float
    p95_bounded_slowdown: float
    p99_bounded_slowdown: float
    makespan_s: float
    utilization: float
    node_s: float
    waste_node_s: float
    waste_fraction: float
    expansions: int
    shrinks: int
    requests_refused: int
    cycles: int
    decisions: int

    def as_dict(self) -> dict[str, Any]:
        """The metrics as a JSON-ready dict."""
        return asdict(self)


@dataclass(frozen=True)
class SchedulingTime:
    """Wall-clock time spent in the policy (not part of the results: it depends on the machine).

    Parameters
    ----------
    cycles
        Calls of ``decide``.
    decisions
        Decisions returned in all.
    total_s
        Seconds spent in ``decide``.
    max_s
        The longest call, in seconds.
    """

    cycles: int = 0
    decisions: int = 0
    total_s: float = 0.0
    max_s: float = 0.0

    @property
    def per_cycle_s(self) -> float:
        """Mean seconds per call of ``decide``."""
        return self.total_s / self.cycles if self.cycles else 0.0

    @property
    def per_decision_s(self) -> float:
        """Seconds in ``decide`` per decision returned (0 when there was none)."""
        return self.total_s / self.decisions if self.decisions else 0.0


_COLUMNS = operator.attrgetter(
    "submit_s",
    "start_s",
    "end_s",
    "node_s",
    "waste_node_s",
    "expansions",
    "shrinks",
    "requests_refused",
)
"""The fields of a record :func:`compute_metrics` reads, as one tuple."""


def compute_metrics(
    records: Sequence[JobRecord],
    nodes: int,
    *,
    bound_s: float = BSLD_BOUND_S,
    cycles: int = 0,
    decisions: int = 0,
    requests_refused: int | None = None,
    window_s: tuple[float, float] | None = None,
) -> Metrics:
    """The aggregate metrics of finished jobs on a machine of ``nodes`` nodes.

    Parameters
    ----------
    records
        One per job (simulated, or :func:`measured`).
    nodes
        Nodes in the machine.
    bound_s
        The bounded slowdown's bound, seconds.
    cycles, decisions
        Policy calls and decisions, when known.
    requests_refused
        Evolving requests refused, when counted apart from the records.
    window_s
        ``(start_s, end_s)``: the utilisation is the records' node-seconds over ``nodes *
        (end_s - start_s)`` instead of over ``nodes * makespan`` (for a measured window, such
        as a journal's, whose node-seconds the records hold); 0 for an empty window.

    Raises
    ------
    ValueError
        For a non-positive ``bound_s`` or ``nodes``.
    """
    if bound_s <= 0:
        raise ValueError(f"the slowdown bound must be positive, got {bound_s} s")
    if nodes < 1:
        raise ValueError(f"the machine must have at least 1 node, got {nodes}")
    n = len(records)
    if n == 0:
        zero = {f: 0.0 for f in Metrics.__dataclass_fields__}
        zero.update(jobs=0, nodes=nodes, bsld_bound_s=bound_s, cycles=cycles, decisions=decisions)
        zero.update(expansions=0, shrinks=0, requests_refused=0)
        return Metrics(**zero)  # type: ignore[arg-type]
    # the records' columns in one pass (in C: attrgetter, zip), then each per-job value with
    # the same operation as r.start_s - r.submit_s and so on, and the same sums in the same order
    submit, start, end, node_s, waste, expansions, shrinks, refused = zip(
        *map(_COLUMNS, records), strict=True
    )
    waits = list(map(operator.sub, start, submit))
    runs = list(map(operator.sub, end, start))
    tats = list(map(operator.sub, end, submit))
    return _metrics(
        nodes,
        waits,
        runs,
        tats,
        [max(1.0, t / max(run, bound_s)) for t, run in zip(tats, runs, strict=True)],
        [t / run for t, run in zip(tats, runs, strict=True) if run > 0],
        first=min(submit),
        last=max(end),
        node_s=list(node_s),
        total_waste=sum(waste),
        expansions=sum(expansions),
        shrinks=sum(shrinks),
        requests_refused=sum(refused) if requests_refused is None else requests_refused,
        bound_s=bound_s,
        cycles=cycles,
        decisions=decisions,
        window_s=window_s,
    )


def rigid_metrics(
    submit: Any,
    start: Any,
    end: Any,
    size: Any,
    nodes: int,
    *,
    bound_s: float = BSLD_BOUND_S,
    cycles: int = 0,
    decisions: int = 0,
) -> Metrics:
    """:func:`compute_metrics` of rigid jobs given as NumPy columns (the compiled engine's).

    Parameters
    ----------
    submit, start, end
        Per job, seconds, shape ``(n,)`` with ``n >= 1``, in the records' order.
    size
        Nodes per job, shape ``(n,)``.
    nodes, bound_s, cycles, decisions
        As for :func:`compute_metrics`.

    Returns
    -------
    Metrics
        Equal to :func:`compute_metrics` of the same jobs' records (each element is computed
        with the same floating-point operations, and the sums and percentiles by the same
        Python code, in the same order).
    """
    import numpy as np

    if bound_s <= 0:
        raise ValueError(f"the slowdown bound must be positive, got {bound_s} s")
    with np.errstate(invalid="ignore"):  # jobs that never end: inf - inf, as Python gives
        run = end - start
        tat = end - submit
        ran = run > 0
        node_s = np.where(ran, size * run, 0.0)  # held nodes times the time held, as recorded
        wait = start - submit
        # Python's max(a, b) is a unless b > a (so a NaN in first place stays): the same here
        ratio = tat / np.where(bound_s > run, bound_s, run)
        bsld = np.where(ratio > 1.0, ratio, 1.0)
        slowdowns = tat[ran] / run[ran]
    return _metrics(
        nodes,
        wait.tolist(),
        run.tolist(),
        tat.tolist(),
        bsld.tolist(),
        slowdowns.tolist(),
        # the same percentiles of the same values, from the ranks they read put in place
        ordered_waits=np.partition(wait, ranks(len(wait))) if len(wait) > 1 else None,
        ordered_bslds=np.partition(bsld, ranks(len(bsld))) if len(bsld) > 1 else None,
        first=float(submit.min()),
        last=float(end.max()),
        node_s=node_s.tolist(),
        total_waste=0.0,
        expansions=0,
        shrinks=0,
        requests_refused=0,
        bound_s=bound_s,
        cycles=cycles,
        decisions=decisions,
        window_s=None,
    )


def _metrics(
    nodes: int,
    waits: list[float],
    runs: list[float],
    tats: list[float],
    bslds: list[float],
    slowdowns: list[float],
    *,
    first: float,
    last: float,
    node_s: list[float],
    total_waste: float,
    expansions: int,
    shrinks: int,
    requests_refused: int,
    bound_s: float,
    cycles: int,
    decisions: int,
    window_s: tuple[float, float] | None,
    ordered_waits: Any = None,
    ordered_bslds: Any = None,
) -> Metrics:
    """The metrics from per-job lists (seconds; node-seconds), one meaning for every caller.

    ``ordered_waits`` and ``ordered_bslds``: the same values as ``waits`` and ``bslds``, in
    an order :func:`~.stats.percentiles` may read without sorting (``ordered=True``), when
    the caller has them (the percentiles are the same; only the sums are order-dependent).
    """
    n = len(waits)
    if ordered_waits is None:
        wait_p = percentiles(waits, PERCENTILES)
    else:
        wait_p = percentiles(ordered_waits, PERCENTILES, ordered=True)
    if ordered_bslds is None:
        bsld_p = percentiles(bslds, PERCENTILES)
    else:
        bsld_p = percentiles(ordered_bslds, PERCENTILES, ordered=True)
    makespan = last - first
    total_node_s = sum(node_s)
    span = makespan if window_s is None else window_s[1] - window_s[0]
    return Metrics(
        jobs=n,
        nodes=nodes,
        avg_wait_s=sum(waits) / n,
        max_wait_s=max(waits),
        avg_turnaround_s=sum(tats) / n,
        avg_run_s=sum(runs) / n,
        avg_bounded_slowdown=sum(bslds) / n,
        max_bounded_slowdown=max(bslds),
        avg_slowdown=sum(slowdowns) / len(slowdowns) if slowdowns else 0.0,
        bsld_bound_s=bound_s,
        p50_wait_s=wait_p[50],
        p95_wait_s=wait_p[95],
        p99_wait_s=wait_p[99],
        p50_bounded_slowdown=bsld_p[50],
        p95_bounded_slowdown=bsld_p[95],
        p99_bounded_slowdown=bsld_p[99],
        makespan_s=makespan,
        utilization=total_node_s / (nodes * span) if span > 0 else 0.0,
        node_s=total_node_s,
        waste_node_s=total_waste,
        waste_fraction=total_waste / total_node_s if total_node_s > 0 else 0.0,
        expansions=expansions,
        shrinks=shrinks,
        requests_refused=requests_refused,
        cycles=cycles,
        decisions=decisions,
    )


def utilization_series(
    timeline: Sequence[tuple[float, int, int]], nodes: int
) -> tuple[list[float], list[float]]:
    """Allocated fraction of the machine over time, as a step function.

    Parameters
    ----------
    timeline
        ``(time_s, job_id, nodes_held)`` in time order: each change of a job's allocation.
    nodes
        Nodes in the machine.

    Returns
    -------
    tuple of lists
        ``(times_s, fraction)``: from ``times_s[i]`` on, ``fraction[i]`` of the nodes are
        allocated (one point per distinct time, the last value at that time).

    >>> utilization_series([(0.0, 1, 2), (0.0, 2, 1), (5.0, 1, 0)], 4)
    ([0.0, 5.0], [0.75, 0.25])
    """
    held: dict[int, int] = {}
    total = 0
    times: list[float] = []
    values: list[float] = []
    for time_s, job_id, count in timeline:
        total += count - held.get(job_id, 0)
        held[job_id] = count
        if times and times[-1] == time_s:
            values[-1] = total / nodes
        else:
            times.append(time_s)
            values.append(total / nodes)
    return times, values


__all__ = [
    "BSLD_BOUND_S",
    "Metrics",
    "SchedulingTime",
    "bounded_slowdown",
    "compute_metrics",
    "measured",
    "utilization_series",
]
