"""Per-job output of a simulation, for other tools: SWF with the simulated times, Batsim's jobs.csv.

* :func:`write_jobs_swf`: the Standard Workload Format (Feitelson et al., version 2.2), one line
  per job with the *simulated* schedule: field 2 submit time, field 3 wait ``start - submit``,
  field 4 run time ``end - start`` (seconds), field 5 allocated processors, field 8 requested
  processors, field 9 requested time (the time limit), field 11 status 1 (completed), field
  12 user; fields the simulator does not know are ``-1``. Processors are nodes times the
  trace's processors per node (``; ProcsPerNode`` in the header, 1 for generated workloads).
  A job whose size changed gets its time-averaged size over its run as field 5 (rounded, so
  that run time times field 5 is about the node-seconds it held); its start and end sizes
  are in the jobs.csv.
* :func:`write_jobs_csv`: the jobs.csv that Batsim writes and evalys reads
  (``evalys.jobset.JobSet.from_csv``): ``job_id``, ``workload_name``, ``profile``,
  ``submission_time``, ``requested_number_of_resources``, ``requested_time``, ``success``,
  ``final_state``, ``starting_time``, ``execution_time``, ``finish_time``, ``waiting_time``,
  ``turnaround_time``, ``stretch`` (turnaround over execution time, empty for a job that ran
  0 s), ``allocated_resources`` (the nodes the job started on, as an interval set
  ``"0-3 7"``, nodes numbered from 0) and ``consumed_energy`` (``-1``: not simulated); then
  this simulator's own columns: ``kind``, ``nodes_start``, ``nodes_end``, ``node_s``,
  ``expansions``, ``shrinks``, ``bounded_slowdown``.

Node numbers: the simulator records how many nodes each job holds over time (the result's
``timeline``), not which; :func:`node_assignment` replays that timeline with the simulator's
rule (a job takes the lowest-numbered idle nodes; a shrink gives back the last ones taken), so
no two jobs ever hold the same node at once. Times are seconds from the first submission.
"""

from __future__ import annotations

import csv
import heapq
from collections.abc import Iterable, Mapping, Sequence
from itertools import groupby
from pathlib import Path
from typing import IO

from elastic_slurm.simulator.cluster import JobRecord
from elastic_slurm.simulator.metrics import BSLD_BOUND_S, bounded_slowdown
from elastic_slurm.simulator.replay import SimResult
from elastic_slurm.simulator.swf import SWFHeader, SWFJob, write_swf
from elastic_slurm.simulator.workload import SimJob

#: Batsim's jobs.csv columns, in Batsim's order, then this simulator's own.
JOBS_CSV_COLUMNS = (
    "job_id",
    "workload_name",
    "profile",
    "submission_time",
    "requested_number_of_resources",
    "requested_time",
    "success",
    "final_state",
    "starting_time",
    "execution_time",
    "finish_time",
    "waiting_time",
    "turnaround_time",
    "stretch",
    "allocated_resources",
    "consumed_energy",
    "kind",
    "nodes_start",
    "nodes_end",
    "node_s",
    "expansions",
    "shrinks",
    "bounded_slowdown",
)


def node_assignment(
    timeline: Iterable[tuple[float, int, int]], nodes: int
) -> dict[int, tuple[int, ...]]:
    """The node numbers each job started on, from a count-only timeline.

    Parameters
    ----------
    timeline
        ``(time_s, job_id, nodes_held)`` in time order (:attr:`SimResult.timeline`); a job's
        first entry is its start.
    nodes
        Nodes in the machine, numbered ``0 .. nodes - 1``.

    Returns
    -------
    dict
        ``{job_id: node numbers held at its start}``, ascending.

    Raises
    ------
    ValueError
        The timeline holds more nodes than the machine has at some instant.

    >>> node_assignment([(0, 1, 2), (0, 2, 1), (5, 1, 0), (5, 3, 3)], 4)
    {1: (0, 1), 2: (2,), 3: (0, 1, 3)}
    """
    free = list(range(nodes))
    held: dict[int, list[int]] = {}
    started: dict[int, tuple[int, ...]] = {}
    for time_s, entries in groupby(timeline, key=lambda e: e[0]):
        final: dict[int, int] = {}
        first: dict[int, int] = {}  # jobs starting at this instant: their start size
        for _, job_id, count in entries:
            if job_id not in held and job_id not in final:
                first[job_id] = count
            final[job_id] = count
        for job_id, count in final.items():  # releases first: ends come before starts
            have = held.setdefault(job_id, [])
            while len(have) > count:
                heapq.heappush(free, have.pop())
        for job_id, count in final.items():
            have = held[job_id]
            if count - len(have) > len(free):
                raise ValueError(
                    f"the timeline holds more than {nodes} node(s) at t={time_s:g} s (job {job_id})"
                )
            while len(have) < count:
                have.append(heapq.heappop(free))
        for job_id, count in first.items():
            have = held[job_id]
            if have:
                started[job_id] = tuple(sorted(have))
            else:  # started and ended at one instant: the lowest idle nodes, for no time
                started[job_id] = tuple(heapq.nsmallest(count, free))
                del held[job_id]
        for job_id, count in final.items():
            if count == 0:
                held.pop(job_id, None)
    return started


def interval_set(numbers: Iterable[int]) -> str:
    """Node numbers as Batsim's interval set text (``"0-3 7"``).

    >>> interval_set([7, 0, 1, 2, 3])
    '0-3 7'
    >>> interval_set([])
    ''
    """
    out: list[str] = []
    ordered = sorted(numbers)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return " ".join(out)


def _procs_per_node(result: SimResult) -> int:
    return result.workload.procs_per_node if result.workload is not None else 1


def _mean_size(record: JobRecord) -> int:
    if record.expansions or record.shrinks:
        run = record.run_s
        return max(1, round(record.node_s / run)) if run > 0 else record.nodes_start
    return record.nodes_start


def swf_jobs(result: SimResult, jobs: Mapping[int, SimJob] | None = None) -> list[SWFJob]:
    """The result's jobs as SWF lines with the simulated times (see the module docstring).

    Parameters
    ----------
    result
        A finished run.
    jobs
        The simulated jobs by id, for the time limits and users (``-1`` without them).
    """
    ppn = _procs_per_node(result)
    jobs = jobs or {}
    out = []
    for r in result.records:
        spec = jobs.get(r.job_id)
        walltime = spec.walltime_s if spec is not None and spec.walltime_s is not None else -1
        out.append(
            SWFJob(
                r.job_id,
                _num(r.submit_s),
                _num(r.wait_s),
                _num(r.run_s),
                _mean_size(r) * ppn,
                -1,
                -1,
                r.nodes_requested * ppn,
                _num(walltime),
                -1,
                1,
                spec.user_id if spec is not None else -1,
                -1,
                -1,
                -1,
                -1,
                -1,
                -1,
            )
        )
    return out


def _num(value: float) -> int | float:
    """Whole seconds as ints (SWF's usual form), others kept as they are."""
    return int(value) if float(value).is_integer() else round(value, 6)


def write_jobs_swf(
    path: str | Path | IO[str], result: SimResult, jobs: Mapping[int, SimJob] | None = None
) -> None:
    """Write the result as an SWF trace with the simulated schedule (``.gz``: compressed).

    Raises
    ------
    OSError
        The file cannot be written.
    """
    ppn = _procs_per_node(result)
    source = result.workload.source if result.workload is not None else "a generated workload"
    header = SWFHeader.from_directives(
        [
            ("Version", "2.2"),
            ("Computer", f"elastic-slurm simulation, policy {result.policy}"),
            ("Note", f"simulated schedule of {source} (seed {result.seed})"),
            ("Note", "fields 3 (wait) and 4 (run time) are the simulated ones, in seconds"),
            ("MaxJobs", len(result.records)),
            ("MaxRecords", len(result.records)),
            ("MaxNodes", result.nodes),
            ("MaxProcs", result.nodes * ppn),
        ]
    )
    write_swf(path, swf_jobs(result, jobs), header)


def jobs_csv_rows(
    result: SimResult,
    jobs: Mapping[int, SimJob] | None = None,
    *,
    workload_name: str = "w0",
    bound_s: float = BSLD_BOUND_S,
) -> list[dict[str, object]]:
    """One dict per job with the :data:`JOBS_CSV_COLUMNS` (see the module docstring)."""
    placed = node_assignment(result.timeline, result.nodes)
    jobs = jobs or {}
    rows = []
    for r in result.records:
        spec = jobs.get(r.job_id)
        walltime = spec.walltime_s if spec is not None and spec.walltime_s is not None else -1
        run = r.run_s
        rows.append(
            {
                "job_id": r.job_id,
                "workload_name": workload_name,
                "profile": str(r.kind),
                "submission_time": r.submit_s,
                "requested_number_of_resources": r.nodes_requested,
                "requested_time": walltime,
                "success": 1,
                "final_state": "COMPLETED_SUCCESSFULLY",
                "starting_time": r.start_s,
                "execution_time": run,
                "finish_time": r.end_s,
                "waiting_time": r.wait_s,
                "turnaround_time": r.turnaround_s,
                "stretch": r.turnaround_s / run if run > 0 else "",
                "allocated_resources": interval_set(placed.get(r.job_id, ())),
                "consumed_energy": -1,
                "kind": str(r.kind),
                "nodes_start": r.nodes_start,
                "nodes_end": r.nodes_end,
                "node_s": r.node_s,
                "expansions": r.expansions,
                "shrinks": r.shrinks,
                "bounded_slowdown": bounded_slowdown(r, bound_s),
            }
        )
    return rows


def write_jobs_csv(
    path: str | Path | IO[str],
    result: SimResult,
    jobs: Mapping[int, SimJob] | None = None,
    *,
    bound_s: float = BSLD_BOUND_S,
) -> None:
    """Write Batsim's jobs.csv for the result (evalys reads it with ``JobSet.from_csv``).

    Raises
    ------
    OSError
        The file cannot be written.
    """
    rows = jobs_csv_rows(result, jobs, bound_s=bound_s)
    if isinstance(path, (str, Path)):
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("w", newline="", encoding="utf-8") as stream:
            _write_csv(stream, rows)
    else:
        _write_csv(path, rows)


def _write_csv(stream: IO[str], rows: Sequence[Mapping[str, object]]) -> None:
    writer = csv.DictWriter(stream, fieldnames=JOBS_CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)


__all__ = [
    "JOBS_CSV_COLUMNS",
    "interval_set",
    "jobs_csv_rows",
    "node_assignment",
    "swf_jobs",
    "write_jobs_csv",
    "write_jobs_swf",
]
