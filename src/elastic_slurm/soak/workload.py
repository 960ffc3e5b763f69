"""The soak's workload: a slice of a real trace, mapped onto the cluster and replayed live.

The mapping is the live validation's (:func:`elastic_slurm.validation.mapping.slice_trace`:
arrivals compressed into the window, sizes scaled to the cluster, every other job malleable
over ``[1, nodes]``), and so is each job's program
(:func:`elastic_slurm.validation.live.request_for`: ``examples/trace_job.py``, a real MPI
program that honours resize points). Unlike the validation, the replay goes on while Slurm
does not answer: a submission that fails is tried again on the next tick, and the job keeps
its place in the queue.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from elastic_slurm import api
from elastic_slurm.adapter.backend import SlurmBackend
from elastic_slurm.errors import ElasticSlurmError
from elastic_slurm.validation.live import request_for
from elastic_slurm.validation.mapping import Slice, TraceJob, slice_trace

log = logging.getLogger(__name__)


def default_trace() -> Path:
    """The trace a soak replays by default: SDSC-SP2 from the shared workloads.

    ``ELASTIC_SLURM_WORKLOADS`` overrides the folder, as for ``elastic-slurm validate``.
    """
    from elastic_slurm.simulator.repro.ghafoor import trace_dir

    return trace_dir() / "SDSC-SP2-1998-4.2-cln.swf.gz"


def plan(trace: Path, *, nodes: int, window_s: float, jobs: int, first: int = 0) -> Slice:
    """``jobs`` jobs of ``trace`` from its ``first`` usable one, arriving over ``window_s``.

    Run times are compressed like the arrivals and clamped to ``[6, window_s / 5]`` seconds
    (at most 120), so the last arrivals end soon after the window.

    Raises
    ------
    elastic_slurm.errors.InvalidRequest
        No usable jobs, or bad numbers.
    elastic_slurm.simulator.swf.TraceError
        A malformed trace.
    """
    return slice_trace(
        trace,
        first=first,
        count=jobs,
        nodes=nodes,
        target_span_s=0.85 * window_s,
        malleable_fraction=0.5,
        min_runtime_s=6.0,
        max_runtime_s=min(120.0, max(6.0, window_s / 5.0)),
    )


@dataclass
class Replay:
    """Submits the jobs of a slice at their arrival times (:meth:`tick`), retrying failures.

    Parameters
    ----------
    slice_
        The jobs.
    slurm
        The cluster's backend.
    out_dir
        The jobs' working directory is ``out_dir / "jobs"`` (their job directories live
        there).
    controller_url
        The controller's URL the jobs talk to.
    python
        The interpreter the nodes run elastic-slurm with.
    mpi_env
        The site's MPI parameters (:mod:`elastic_slurm.mca`).
    """

    slice_: Slice
    slurm: SlurmBackend
    out_dir: Path
    controller_url: str
    python: str
    mpi_env: dict[str, str] = field(default_factory=dict)
    #: trace id -> Slurm job id, for every job submitted
    job_ids: dict[int, int] = field(default_factory=dict)
    #: submissions that failed and were tried again
    retries: int = 0
    _pending: list[TraceJob] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._pending = sorted(self.slice_.jobs, key=lambda j: (j.arrival_s, j.trace_id))
        (self.out_dir / "jobs").mkdir(parents=True, exist_ok=True)

    @property
    def done(self) -> bool:
        """True once every job has been submitted."""
        return not self._pending

    def tick(self, now_s: float) -> list[int]:
        """Submit the jobs due by ``now_s`` (seconds since the start); their Slurm ids.

        A job whose submission fails (Slurm does not answer, a node briefly unusable) stays
        first in line and is tried at the next tick.
        """
        submitted = []
        while self._pending and self._pending[0].arrival_s <= now_s:
            job = self._pending[0]
            try:
                job_id = api.submit(
                    request_for(job, self.python),
                    self.slurm,
                    workdir=self.out_dir / "jobs",
                    output=str(self.out_dir / "jobs" / "%j.out"),
                    python=self.python,
                    controller=self.controller_url,
                    mpi_env=self.mpi_env,
                )
            except ElasticSlurmError as exc:
                self.retries += 1
                log.info("trace job %d not submitted (%s); trying again", job.trace_id, exc)
                break
            self._pending.pop(0)
            self.job_ids[job.trace_id] = job_id
            submitted.append(job_id)
        return submitted

    def next_arrival_s(self) -> float | None:
        """When the next job is due (seconds since the start), ``None`` when all are in."""
        return self._pending[0].arrival_s if self._pending else None


def wait_s(replay: Replay, now_s: float, tick_s: float = 1.0) -> float:
    """How long to sleep before the next tick (at most ``tick_s`` seconds)."""
    nxt = replay.next_arrival_s()
    return tick_s if nxt is None else min(tick_s, max(0.05, nxt - now_s))
