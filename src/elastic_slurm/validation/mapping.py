"""A slice of a real trace, compressed and scaled to the local cluster (Ghafoor, chapter 5).

Ghafoor validates his simulator by running the same workload on a real cluster and in the
simulator (thesis, chapter 5). Here the workload is a slice of an SWF trace mapped onto the
local cluster by a fixed, documented rule (:func:`map_trace`):

* **jobs**: the ``count`` usable jobs (run time > 0, processors > 0) from the ``first``-th one,
  in submission order;
* **arrival**: ``(submit - first submit) / compress`` seconds after the run starts;
* **run time**: ``run_time / compress``, clamped to ``[min_runtime_s, max_runtime_s]`` (a real
  job cannot take less than its launch, and one trace job must not outlast the run);
* **size**: ``ceil(processors * nodes / trace_nodes)`` nodes, at most ``nodes`` (SDSC-SP2's
  128 processors onto 4 nodes: 1-32 processors give 1 node, 33-64 give 2, ...);
* **kind**: every ``1 / malleable_fraction``-th job (spread evenly, as Ghafoor's
  ``GhafoorMalleable`` does) is malleable with range ``[1, nodes]`` and linear speedup up to
  ``nodes``, starting at its mapped size; the others are rigid at their mapped size;
* **time limit**: twice the run time plus 60 s (on the mapped size).

``compress`` defaults to the factor that makes the slice's arrivals span ``target_span_s``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from elastic_slurm.errors import InvalidRequest
from elastic_slurm.simulator.swf import SWFJob, read_swf


@dataclass(frozen=True)
class TraceJob:
    """One job of the slice, mapped (times in seconds, sizes in nodes).

    Parameters
    ----------
    trace_id
        The SWF job number.
    arrival_s
        Seconds after the run's start at which it is submitted.
    runtime_s
        Its run time on ``nodes`` nodes.
    nodes
        Its size (rigid), or its start size (malleable).
    malleable
        Whether the controller may resize it (range ``[nodes_min, nodes_max]``).
    nodes_min, nodes_max
        Its size range (``nodes`` both for a rigid job).
    walltime_s
        Its time limit on ``nodes`` nodes.
    """

    trace_id: int
    arrival_s: float
    runtime_s: float
    nodes: int
    malleable: bool
    nodes_min: int
    nodes_max: int
    walltime_s: float


@dataclass(frozen=True)
class Slice:
    """The mapped jobs and the mapping's parameters (for the report)."""

    jobs: tuple[TraceJob, ...]
    source: str
    first: int
    compress: float
    nodes: int
    trace_nodes: int
    clamped: int  # how many run times were clamped


def map_trace(
    jobs: list[SWFJob],
    *,
    nodes: int,
    trace_nodes: int,
    compress: float | None = None,
    target_span_s: float = 600.0,
    malleable_fraction: float = 0.5,
    min_runtime_s: float = 6.0,
    max_runtime_s: float = 60.0,
    source: str = "",
    first: int = 0,
) -> Slice:
    """Map trace jobs onto a cluster of ``nodes`` nodes by the rule of the module docstring.

    Raises
    ------
    InvalidRequest
        No jobs, a non-positive ``compress``, ``nodes`` or ``trace_nodes``, a fraction outside
        ``[0, 1]``, or ``min_runtime_s > max_runtime_s``.

    >>> from elastic_slurm.simulator.swf import SWFJob
    >>> def j(n, submit, run, procs):
    ...     rest = (-1, 1, 1, 1, 1, 1, 1, -1, -1)
    ...     return SWFJob(n, submit, 0, run, procs, -1, -1, procs, run, *rest)
    >>> s = map_trace([j(1, 100, 3000, 8), j(2, 700, 600, 40), j(3, 1300, 100, 128)],
    ...               nodes=4, trace_nodes=128, compress=60, malleable_fraction=0.5)
    >>> [(t.arrival_s, t.runtime_s, t.nodes, t.malleable) for t in s.jobs]
    [(0.0, 50.0, 1, False), (10.0, 10.0, 2, True), (20.0, 6.0, 4, False)]
    """
    if not jobs:
        raise InvalidRequest("the trace slice has no usable jobs")
    if nodes < 1 or trace_nodes < 1:
        raise InvalidRequest(f"nodes ({nodes}) and trace_nodes ({trace_nodes}) must be >= 1")
    if not 0.0 <= malleable_fraction <= 1.0:
        raise InvalidRequest(f"malleable_fraction must be in [0, 1], got {malleable_fraction}")
    if min_runtime_s > max_runtime_s:
        raise InvalidRequest(f"min_runtime_s {min_runtime_s} > max_runtime_s {max_runtime_s}")
    t0 = float(jobs[0].submit_time)
    span = float(jobs[-1].submit_time) - t0
    if compress is None:
        compress = max(1.0, span / target_span_s) if span > 0 else 1.0
    if not compress > 0:
        raise InvalidRequest(f"compress must be positive, got {compress}")
    out = []
    clamped = 0
    marked = 0.0
    for i, job in enumerate(jobs):
        runtime = float(job.run_time) / compress
        kept = min(max(runtime, min_runtime_s), max_runtime_s)
        clamped += kept != runtime
        size = min(nodes, max(1, math.ceil(float(job.processors) * nodes / trace_nodes)))
        # spread evenly: job i is malleable when the running share crosses a whole number
        malleable = math.floor((i + 1) * malleable_fraction) > marked
        marked = math.floor((i + 1) * malleable_fraction)
        out.append(
            TraceJob(
                trace_id=int(job.job_number),
                arrival_s=round((float(job.submit_time) - t0) / compress, 3),
                runtime_s=round(kept, 3),
                nodes=size,
                malleable=malleable,
                nodes_min=1 if malleable else size,
                nodes_max=nodes if malleable else size,
                walltime_s=round(2 * kept + 60.0, 3),
            )
        )
    return Slice(tuple(out), source, first, compress, nodes, trace_nodes, clamped)


def slice_trace(path: Path, *, first: int = 0, count: int = 150, **options: object) -> Slice:
    """Read ``path`` (SWF) and map ``count`` usable jobs from the ``first``-th (see above).

    ``options`` go to :func:`map_trace` (``nodes`` is required). The trace's size comes from
    its header (``MaxNodes``, else ``MaxProcs``), else from its widest job.

    Raises
    ------
    InvalidRequest
        Fewer than one usable job in the range, or bad options.
    elastic_slurm.simulator.swf.TraceError
        A malformed trace.
    """
    trace = read_swf(path)
    usable = [j for j in trace.jobs if j.run_time > 0 and j.processors > 0]
    chosen = usable[first : first + count]
    trace_nodes = (
        trace.header.max_nodes
        or trace.header.max_procs
        or max((int(j.processors) for j in usable), default=1)
    )
    return map_trace(
        chosen,
        trace_nodes=int(trace_nodes),
        source=Path(path).name,
        first=first,
        **options,  # type: ignore[arg-type]
    )
