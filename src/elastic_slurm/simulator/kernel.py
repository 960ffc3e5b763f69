"""The compiled engine: FCFS and EASY backfilling of rigid workloads, one compiled loop.

A rigid workload under :class:`~elastic_slurm.plugins.policies.fcfs.FCFS` or
:class:`~elastic_slurm.plugins.policies.easy_backfill.EasyBackfill` is what every elastic
comparison needs as its baseline, and what a researcher runs on whole traces. For it,
:meth:`Simulation.run <elastic_slurm.simulator.replay.Simulation.run>` can skip the per-event
work of the general loop (snapshots, decisions, legality checks) and run this module's loop,
compiled with Numba, over columns of numbers. Its result is the general loop's, field for
field: the same records, timeline and metrics (``tests/sim/test_kernel.py`` compares them on
real traces, with zero-second jobs and jobs arriving together). The policies themselves stay
plain Python (``plugins/policies/``); this is their schedule written a second time, for speed,
and it is used only where it is known to give the same result (:func:`why_not`).

The semantics are the general loop's (:mod:`~elastic_slurm.simulator.replay`):

* At an instant, the jobs that end are taken first (those started first, first), then the
  arrivals (by submission time, then job id), then one scheduling pass. A job that runs for
  0 s ends at the same instant; that end makes another pass.
* **FCFS**: start waiting jobs in arrival order while they fit; stop at the first that does
  not.
* **EASY** (Mu'alem and Feitelson, IEEE TPDS 12(6), 2001, section 2): after FCFS, the first
  blocked job's *shadow time* and *extra* nodes are found from the running jobs' estimated
  ends (an end in the past counts as now; ``(end, nodes)`` ascending), once per pass and only
  if some later job fits now; a later job that fits starts if it ends by the shadow time or
  needs no more than the extra nodes (which it uses up).

Numba is optional (the ``sim`` extra installs it): without it the general loop runs.
"""

from __future__ import annotations

import functools
import logging
import operator
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from elastic_slurm.model.request import JobKind
from elastic_slurm.simulator.cluster import JobRecord

if TYPE_CHECKING:
    import numpy as np

    from elastic_slurm.plugins.policy import Policy
    from elastic_slurm.simulator.workload import SimJob

log = logging.getLogger(__name__)

INFINITY = float("inf")

_SUBMIT, _JOB_ID, _RUNTIME = map(operator.attrgetter, ("submit_s", "job_id", "runtime_s"))
_NODES, _WALLTIME, _KIND = map(operator.attrgetter, ("nodes_requested", "walltime_s", "kind"))


@functools.cache
def _compiled() -> Callable[..., tuple[Any, Any, int]] | None:
    """The compiled loop, or ``None`` without Numba (or when Numba cannot compile it).

    Compiled here, on a two-job workload, so that a failure shows now: Numba keeps the
    machine code in a cache on disk (beside this module, else in the user's cache
    directory) and loads it in later processes; where it can write no cache, the loop is
    compiled in memory at each start (a second or two).
    """
    try:
        import numba
        import numpy as np

        from elastic_slurm.simulator.rigid_loop import schedule
    except ImportError:
        return None
    sample = (np.zeros(2), np.ones(2), np.ones(2, np.int64), np.ones(2), 1, True)
    for cache in (True, False):
        try:
            loop = numba.njit(cache=cache)(schedule)
            loop(*sample)
            return loop  # type: ignore[no-any-return]
        except Exception as exc:  # noqa: BLE001 - numba's errors have no common base
            log.debug("numba could not compile the engine (cache %s): %s", cache, exc)
    log.warning("numba could not compile the simulator's engine: the general loop runs")
    return None


def why_not(policy: Policy, jobs: Sequence[SimJob], periodic_s: float | None) -> str | None:
    """Why the compiled engine cannot run this simulation; ``None`` when it can.

    It runs FCFS and EASY (with either estimate source) exactly as the plain classes do: not
    a subclass, nor a class or object whose ``decide`` was replaced or wrapped (by a test's
    spy, say), which may decide otherwise. On rigid jobs only, without periodic ticks (which
    only add passes), and only when Numba is installed.
    """
    from elastic_slurm.plugins.policies.easy_backfill import EasyBackfill
    from elastic_slurm.plugins.policies.fcfs import FCFS

    cls = type(policy)
    if cls not in (FCFS, EasyBackfill):
        return f"policy {policy.name!r} is not fcfs or easy_backfill"
    decide = cls.decide
    if (
        "decide" in getattr(policy, "__dict__", {})
        or decide.__qualname__ != f"{cls.__name__}.decide"
        or hasattr(decide, "__wrapped__")
    ):
        return f"{cls.__name__}.decide is not the shipped one (replaced or wrapped)"
    if periodic_s is not None:
        return "periodic ticks"
    if set(map(_KIND, jobs)) - {JobKind.RIGID}:
        return "the workload has elastic jobs"
    if _compiled() is None:
        return "numba is not installed (pip install 'elastic-slurm[sim]') or cannot compile"
    return None


def prepare(jobs: Sequence[SimJob], nodes: int) -> Columns | None:
    """The jobs as columns in arrival order; ``None`` when the general loop must judge them.

    Parameters
    ----------
    jobs
        Rigid jobs (see :func:`why_not`), in any order.
    nodes
        Machine size.

    Returns
    -------
    Columns or None
        ``None`` for no job, no node, duplicate job ids or a job wider than the machine: the
        general loop raises the error for those, with its message.
    """
    import numpy as np

    n = len(jobs)
    if n == 0 or nodes < 1:
        return None
    ids = list(map(_JOB_ID, jobs))
    if len(set(ids)) != n:
        return None
    try:
        walltime = np.array(list(map(_WALLTIME, jobs)), dtype=np.float64)  # None: nan
        cols = Columns(
            submit=np.fromiter(map(_SUBMIT, jobs), np.float64, n),
            job_id=np.array(ids, dtype=np.int64),
            runtime=np.fromiter(map(_RUNTIME, jobs), np.float64, n),
            size=np.fromiter(map(_NODES, jobs), np.int64, n),
            walltime=np.where(np.isnan(walltime), INFINITY, walltime),
            kind=jobs[0].kind,
        )
    except OverflowError:  # a job id or size beyond 64 bits: Python's integers take it
        return None
    if int(cols.size.max()) > nodes:
        return None
    cols.arrival_order()
    return cols


class Columns:
    """A rigid workload's jobs as columns (NumPy arrays, shape ``(n,)``), and their schedule.

    ``submit``, ``runtime``, ``walltime`` (seconds; ``inf``: none), ``job_id``, ``size``
    (nodes), and the jobs' one ``kind``; after a run,
    ``start`` and ``end`` (seconds) and ``events``
    (:func:`~elastic_slurm.simulator.rigid_loop.schedule`).
    """

    def __init__(
        self,
        submit: np.ndarray,
        job_id: np.ndarray,
        runtime: np.ndarray,
        size: np.ndarray,
        walltime: np.ndarray,
        kind: JobKind,
    ) -> None:
        self.submit = submit
        self.job_id = job_id
        self.runtime = runtime
        self.size = size
        self.walltime = walltime
        self.kind = kind
        self.start: np.ndarray = submit
        self.end: np.ndarray = submit
        self.events: np.ndarray = job_id

    def arrival_order(self) -> None:
        """Put the jobs in arrival order (submission time, then id), if they are not."""
        import numpy as np

        sub, ids = self.submit, self.job_id
        later = sub[1:] > sub[:-1]
        if bool(np.all(later | ((sub[1:] == sub[:-1]) & (ids[1:] > ids[:-1])))):
            return
        order = np.lexsort((ids, sub))
        self.submit, self.job_id = sub[order], ids[order]
        self.runtime, self.size = self.runtime[order], self.size[order]
        self.walltime = self.walltime[order]

    def run(self, policy: Policy, nodes: int) -> tuple[int, float]:
        """Schedule the jobs under ``policy`` (``FCFS`` or ``EasyBackfill``) on ``nodes`` nodes.

        Sets ``start``, ``end`` and ``events``; returns ``(passes, seconds)``: the scheduling
        passes (the general loop's policy cycles) and the seconds the compiled loop took.
        """
        estimates = getattr(policy.config, "estimates", "walltime")
        estimate = self.runtime if estimates == "runtime" else self.walltime
        t0 = time.perf_counter()
        start, events, cycles = _compiled()(  # type: ignore[misc]
            self.submit, self.runtime, self.size, estimate, nodes, policy.name == "easy_backfill"
        )
        elapsed = time.perf_counter() - t0
        self.start, self.end, self.events = start, start + self.runtime, events
        return int(cycles), elapsed

    def records(self) -> tuple[JobRecord, ...]:
        """One record per job, in arrival order, as the general loop writes them."""
        import numpy as np

        with np.errstate(invalid="ignore"):  # a job that never ends: inf - inf, as in Python
            run = self.end - self.start
            node_s = (self.size * run).tolist()
            ran = (run > 0).tolist()
        kind, quick = self.kind, JobRecord.quick
        return tuple(
            quick(
                job_id,
                kind,
                submit,
                start,
                end,
                size,
                size,
                size,
                held if positive else 0.0,
                0.0,
                0,
                0,
                0,
            )
            for job_id, submit, start, end, size, held, positive in zip(
                self.job_id.tolist(),
                self.submit.tolist(),
                self.start.tolist(),
                self.end.tolist(),
                self.size.tolist(),
                node_s,
                ran,
                strict=True,
            )
        )

    def timeline(self) -> tuple[tuple[float, int, int], ...]:
        """``(time_s, job_id, nodes_held)`` at each start and end, in the general loop's order."""
        n = len(self.job_id)
        start, end = self.start.tolist(), self.end.tolist()
        ids, size = self.job_id.tolist(), self.size.tolist()
        return tuple(
            (start[e], ids[e], size[e]) if e < n else (end[e - n], ids[e - n], 0)
            for e in self.events.tolist()
        )


class LazyTuple(Sequence[Any]):
    """A tuple built on first use (a result's records or timeline from the compiled engine).

    Behaves as the tuple it stands for: equal to it, same hash, indexing, slicing and
    iteration; pickles as that tuple.
    """

    __slots__ = ("_build", "_items", "_len")

    def __init__(self, build: Callable[[], tuple[Any, ...]], length: int) -> None:
        self._build: Callable[[], tuple[Any, ...]] | None = build
        self._items: tuple[Any, ...] | None = None
        self._len = length

    def _tuple(self) -> tuple[Any, ...]:
        if self._items is None:
            assert self._build is not None
            self._items, self._build = self._build(), None
        return self._items

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, index: Any) -> Any:
        return self._tuple()[index]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._tuple())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyTuple):
            other = other._tuple()
        if isinstance(other, tuple):
            return self._tuple() == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._tuple())

    def __repr__(self) -> str:
        return repr(self._tuple())

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, (self._tuple(),))


__all__ = ["Columns", "LazyTuple", "prepare", "why_not"]
