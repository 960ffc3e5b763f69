"""The operator's view of a controller journal: jobs over time with their resizes, utilisation.

Everything here reads the flat records of :attr:`elastic_slurm.controller.journal.Journal.records`
(dicts with ``t``, seconds since the epoch, ``kind`` and the record's fields):

* ``sizes`` records (written by the controller whenever a job's state or node list changes:
  ``nodes_total`` and ``jobs``, each with ``job_id``, ``name``, ``kind``, ``state`` and
  ``nodes``) give each job's intervals: a job keeps the state and nodes of one ``sizes`` record
  until the next; a job missing from a later record has ended (or left the queue) at that
  record's time; the jobs of the last ``sizes`` record are drawn up to the journal's last record.
* ``outcome`` records (finished resizes: ``job_id``, ``action``, ``ok`` and, when the resize got
  that far, ``seconds``, ``nodes``, ``strategy``; ``by``: ``user`` for a size change the
  controller saw but did not make, drawn as any other resize), ``overdue`` and ``recovery``
  notes, and ``skipped`` records (a job left out of a cycle: its input was unusable) become
  events (:class:`JobEvent`). Other kinds are ignored.

Times are seconds since the journal's first record (of any kind). Records are taken in the
order they were written; a record stamped earlier than the one before it (the clock stepped
back) is taken at the earlier record's time, so no interval has a negative length.

:func:`job_spans`, :func:`job_events`, :func:`job_records`, :func:`utilization_series`,
:func:`average_utilization`, :func:`job_metrics` and :func:`summary` are pure functions of the
records. The measures are the simulator's: its job record and
:func:`~elastic_slurm.simulator.metrics.compute_metrics`, so that a journal and a simulation
are measured alike. :func:`draw_report` draws them with :func:`draw_gantt`, which the
simulator's Gantt chart of a window uses too (matplotlib, the ``sim`` extra, imported only
there; no global pyplot state).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Record kinds that become events on a job's row.
EVENT_KINDS = ("outcome", "overdue", "recovery", "skipped")

Record = Mapping[str, Any]


@dataclass(frozen=True)
class Interval:
    """A stretch of time during which a job's state and node list did not change.

    Attributes
    ----------
    start_s, end_s
        Start and end, in seconds since the journal's first record (``start_s <= end_s``).
    nodes_held
        Number of nodes the job held (0 while pending).
    state
        The job's state as journaled (``"pending"``, ``"running"``, ``"completing"`` ...).
    nodes
        The names of the nodes held.
    """

    start_s: float
    end_s: float
    nodes_held: int
    state: str
    nodes: tuple[str, ...] = ()

    @property
    def duration_s(self) -> float:
        """Length of the interval in seconds."""
        return self.end_s - self.start_s


@dataclass
class JobSpan:
    """One job's life as the journal saw it.

    Attributes
    ----------
    job_id
        Slurm job id.
    name, kind
        The job's name and kind (``"rigid"``, ``"malleable"`` ...) from its last ``sizes`` record.
    intervals
        Consecutive intervals (:class:`Interval`) in time order (with a gap where the job
        was missing from the ``sizes`` records and came back).
    """

    job_id: int
    name: str
    kind: str
    intervals: list[Interval] = field(default_factory=list)

    @property
    def start_s(self) -> float:
        """When the job was first seen, in seconds since the journal's first record."""
        return self.intervals[0].start_s

    @property
    def end_s(self) -> float:
        """When the job was last seen, in seconds since the journal's first record."""
        return self.intervals[-1].end_s

    @property
    def max_nodes(self) -> int:
        """The most nodes the job held at once."""
        return max(i.nodes_held for i in self.intervals)

    @property
    def label(self) -> str:
        """The job's row label: ``"id name (kind)"``."""
        return f"{self.job_id} {self.name} ({self.kind})"


@dataclass(frozen=True)
class JobEvent:
    """A resize outcome or a note about a job, at one moment.

    Attributes
    ----------
    t_s
        When it was journaled, in seconds since the journal's first record (a resize's end).
    job_id
        The job it is about.
    what
        ``"expand"`` or ``"shrink"`` (a resize that succeeded), ``"start"`` (a moldable job
        sized and released), ``"declined"`` (an offer the job rejected or let lapse),
        ``"failed"`` (a resize that did not happen otherwise), ``"overdue"``, ``"recovery"``
        (notes) or ``"skipped"`` (left out of cycles; ``message`` says why).
    action
        The resize's action (``"expand"``, ``"shrink"``) when the record names one, else ``""``.
    seconds
        How long the resize took (seconds), when journaled.
    nodes_after
        Nodes the job held after the resize, when journaled.
    strategy
        How the job redistributed its data, when journaled.
    message
        The record's message (``""`` if none).
    by
        Who asked for a resize: ``policy`` or ``user`` (``""`` for notes).
    """

    t_s: float
    job_id: int
    what: str
    action: str = ""
    seconds: float | None = None
    nodes_after: int | None = None
    strategy: str | None = None
    message: str = ""
    by: str = ""


def _times(records: Sequence[Record]) -> list[float]:
    """Each record's time in seconds since the first record, never earlier than the previous."""
    out: list[float] = []
    if not records:
        return out
    t0 = float(records[0]["t"])
    latest = 0.0
    for r in records:
        latest = max(latest, float(r["t"]) - t0)
        out.append(latest)
    return out


def _sizes(records: Sequence[Record]) -> tuple[list[tuple[float, Record]], float]:
    """The ``sizes`` records with their relative times, and the journal's end (relative)."""
    times = _times(records)
    sizes = [(t, r) for t, r in zip(times, records, strict=True) if r.get("kind") == "sizes"]
    return sizes, (times[-1] if times else 0.0)


def _require_sizes(records: Sequence[Record]) -> tuple[list[tuple[float, Record]], float]:
    sizes, end = _sizes(records)
    if not sizes:
        raise ValueError(
            "the journal has no 'sizes' record (written by controllers that journal job sizes; "
            "this journal is empty or from an older controller): nothing to report"
        )
    return sizes, end


def job_spans(records: Sequence[Record]) -> list[JobSpan]:
    """Each job's intervals, from the ``sizes`` records.

    Parameters
    ----------
    records
        The journal's records in the order written (:attr:`Journal.records`).

    Returns
    -------
    list of JobSpan
        One per job seen in a ``sizes`` record, in the order first seen (then by job id). Each
        job's consecutive records with the same state and nodes make one :class:`Interval`;
        times are seconds since the journal's first record.

    Raises
    ------
    ValueError
        The journal has no ``sizes`` record.
    """
    sizes, end = _require_sizes(records)
    spans: dict[int, JobSpan] = {}
    for i, (t, rec) in enumerate(sizes):
        until = sizes[i + 1][0] if i + 1 < len(sizes) else end
        for job in sorted(rec.get("jobs") or [], key=lambda j: int(j["job_id"])):
            job_id = int(job["job_id"])
            nodes = tuple(str(n) for n in job.get("nodes") or ())
            state = str(job.get("state", "unknown"))
            span = spans.setdefault(job_id, JobSpan(job_id, "", ""))
            span.name = str(job.get("name") or "")
            span.kind = str(job.get("kind") or "")
            last = span.intervals[-1] if span.intervals else None
            if last is not None and last.end_s == t and (last.state, last.nodes) == (state, nodes):
                span.intervals[-1] = Interval(last.start_s, until, len(nodes), state, nodes)
            else:
                span.intervals.append(Interval(t, until, len(nodes), state, nodes))
    return list(spans.values())


def job_events(records: Sequence[Record]) -> list[JobEvent]:
    """The resize outcomes and ``overdue``/``recovery`` notes, as events (:class:`JobEvent`).

    Parameters
    ----------
    records
        The journal's records in the order written.

    Returns
    -------
    list of JobEvent
        In the order written; records without an integer ``job_id`` are left out. Times are
        seconds since the journal's first record.
    """
    out: list[JobEvent] = []
    for t, r in zip(_times(records), records, strict=True):
        kind = r.get("kind")
        job_id = r.get("job_id")
        if kind not in EVENT_KINDS or not isinstance(job_id, int):
            continue
        action = str(r.get("action") or "")
        if kind == "outcome":
            ok = bool(r.get("ok", False))
            if ok and action in ("expand", "shrink", "start"):
                what = action
            else:
                what = "declined" if r.get("declined") else "failed"
        else:
            what = str(kind)
        nodes = r.get("nodes")
        seconds = r.get("seconds")
        out.append(
            JobEvent(
                t_s=t,
                job_id=job_id,
                what=what,
                action=action,
                seconds=float(seconds) if isinstance(seconds, int | float) else None,
                nodes_after=len(nodes) if isinstance(nodes, list) else None,
                strategy=r.get("strategy"),
                message=str(r.get("message") or r.get("reason") or ""),
                by=str(r.get("by") or "policy") if kind == "outcome" else "",
            )
        )
    return out


def utilization_series(records: Sequence[Record]) -> tuple[list[float], list[float]]:
    """The fraction of the cluster's nodes held by running jobs over time (a step function).

    At each ``sizes`` record the fraction is the number of distinct nodes held by its
    ``running`` jobs over its ``nodes_total`` (0 if ``nodes_total`` is missing or 0); it holds
    until the next ``sizes`` record, the last one until the journal's last record.

    Parameters
    ----------
    records
        The journal's records in the order written.

    Returns
    -------
    tuple of lists
        ``(times_s, fraction)``, both of length ``n + 1`` for ``n`` ``sizes`` records:
        ``fraction[i]`` (between 0 and 1) holds from ``times_s[i]`` to ``times_s[i + 1]``
        (seconds since the journal's first record); the last point, at the journal's end,
        repeats the last value (for ``step(..., where="post")``).

    Raises
    ------
    ValueError
        The journal has no ``sizes`` record.

    Examples
    --------
    >>> def sizes(t, *held):
    ...     jobs = [{"job_id": i, "state": "running", "nodes": n} for i, n in enumerate(held)]
    ...     return {"t": t, "kind": "sizes", "nodes_total": 4, "jobs": jobs}
    >>> utilization_series([sizes(100, ["a"]), sizes(102, ["a"], ["b", "c"])])
    ([0.0, 2.0, 2.0], [0.25, 0.75, 0.75])
    """
    sizes, end = _require_sizes(records)
    times: list[float] = []
    values: list[float] = []
    for t, rec in sizes:
        held: set[str] = set()
        for job in rec.get("jobs") or []:
            if job.get("state") == "running":
                held.update(str(n) for n in job.get("nodes") or ())
        total = int(rec.get("nodes_total") or 0)
        times.append(t)
        values.append(min(1.0, len(held) / total) if total > 0 else 0.0)
    times.append(end)
    values.append(values[-1])
    return times, values


def _kind(text: str) -> Any:
    from elastic_slurm.model.request import JobKind

    try:
        return JobKind(text)
    except ValueError:
        return JobKind.RIGID


def job_records(records: Sequence[Record]) -> list[Any]:
    """Each job the journal saw running, as the simulator's job record.

    The record (:class:`~elastic_slurm.simulator.cluster.JobRecord`, made by
    :func:`~elastic_slurm.simulator.metrics.measured`) has: submit, the time the job was first
    seen (pending, or already running); start, first seen running; end, last seen; its
    node-seconds, the nodes it held while running, a node held by several jobs at once counted
    once (for the lowest job id), at most ``nodes_total`` nodes at a time; its sizes at start
    and end; its completed expansions and shrinks (:func:`job_events`). Times are seconds since
    the journal's first record.

    Parameters
    ----------
    records
        The journal's records in the order written.

    Returns
    -------
    list of JobRecord
        By first sighting (then job id); jobs never seen running are left out.

    Raises
    ------
    ValueError
        The journal has no ``sizes`` record.
    """
    from elastic_slurm.simulator.metrics import measured

    sizes, end = _require_sizes(records)
    node_s: dict[int, float] = {}
    for i, (t, rec) in enumerate(sizes):
        until = sizes[i + 1][0] if i + 1 < len(sizes) else end
        total = int(rec.get("nodes_total") or 0)
        claimed: set[str] = set()
        running = [j for j in rec.get("jobs") or [] if j.get("state") == "running"]
        for job in sorted(running, key=lambda j: int(j["job_id"])):
            new = [n for n in dict.fromkeys(str(n) for n in job.get("nodes") or ())]
            new = [n for n in new if n not in claimed][: max(0, total - len(claimed))]
            claimed.update(new)
            job_id = int(job["job_id"])
            node_s[job_id] = node_s.get(job_id, 0.0) + len(new) * (until - t)
    resizes: dict[int, list[str]] = {}
    for e in job_events(records):
        if e.what in ("expand", "shrink"):
            resizes.setdefault(e.job_id, []).append(e.what)
    out = []
    for span in job_spans(records):
        ran = [iv for iv in span.intervals if iv.state == "running"]
        if not ran:
            continue
        done = resizes.get(span.job_id, [])
        out.append(
            measured(
                span.job_id,
                span.start_s,
                ran[0].start_s,
                span.end_s,
                node_s.get(span.job_id, 0.0),
                kind=_kind(span.kind),
                nodes_start=ran[0].nodes_held,
                nodes_end=ran[-1].nodes_held,
                expansions=done.count("expand"),
                shrinks=done.count("shrink"),
            )
        )
    return out


def average_utilization(records: Sequence[Record]) -> float:
    """The utilisation from the first ``sizes`` record to the journal's end.

    The simulator's measure (:func:`~elastic_slurm.simulator.metrics.compute_metrics` over
    :func:`job_records`, in the journal's window): node-seconds held by running jobs (a node
    counted once at a time) over the nodes (the largest ``nodes_total`` journaled) times the
    window; the time average of :func:`utilization_series` while ``nodes_total`` does not
    change.

    Parameters
    ----------
    records
        The journal's records in the order written.

    Returns
    -------
    float
        A fraction between 0 and 1; the instantaneous value when the window is empty.

    Raises
    ------
    ValueError
        The journal has no ``sizes`` record.
    """
    from elastic_slurm.simulator.metrics import compute_metrics

    sizes, end = _require_sizes(records)
    start = sizes[0][0]
    if end - start <= 0:
        return utilization_series(records)[1][0]
    nodes = max(int(rec.get("nodes_total") or 0) for _, rec in sizes)
    if nodes < 1:
        return 0.0
    return compute_metrics(job_records(records), nodes, window_s=(start, end)).utilization


def job_metrics(records: Sequence[Record]) -> Any:
    """The simulator's metrics of the jobs the journal saw from submission to end.

    :func:`~elastic_slurm.simulator.metrics.compute_metrics` over the :func:`job_records` of
    the jobs that were not already running at the first ``sizes`` record (their submission
    is unknown) and were gone by the last one (they ended); ``None`` when there is none.
    A job first seen running was submitted less than one observation interval before.

    Raises
    ------
    ValueError
        The journal has no ``sizes`` record.
    """
    from elastic_slurm.simulator.metrics import compute_metrics

    sizes, _ = _require_sizes(records)
    first = {int(j["job_id"]) for j in sizes[0][1].get("jobs") or [] if j.get("state") != "pending"}
    last = {int(j["job_id"]) for j in sizes[-1][1].get("jobs") or []}
    jobs = [r for r in job_records(records) if r.job_id not in first and r.job_id not in last]
    if not jobs:
        return None
    nodes = max(1, *(int(rec.get("nodes_total") or 0) for _, rec in sizes))
    return compute_metrics(jobs, nodes)


def summary(records: Sequence[Record]) -> dict[str, Any]:
    """Counts and averages of a journal, for ``--json`` and a one-line report.

    Parameters
    ----------
    records
        The journal's records in the order written.

    Returns
    -------
    dict
        ``records`` (how many), ``jobs`` (distinct jobs in ``sizes`` records),
        ``resizes_done`` and ``resizes_failed`` (expand/shrink ``outcome`` records with ``ok``
        true or not; a declined offer counts as failed; whoever asked), ``resizes_by_user``
        (those of them a user made),
        ``overdue`` and ``recoveries`` (notes), ``span_s`` (seconds from the first record to
        the last), ``utilization`` (:func:`average_utilization`, ``None`` without a ``sizes``
        record), ``start`` and ``end`` (the first and last record's ``t``, seconds since the
        epoch, ``None`` for an empty journal); and, from :func:`job_metrics` (``None`` without
        a job seen from submission to end), ``jobs_measured``, ``avg_wait_s``,
        ``p95_wait_s``, ``avg_turnaround_s`` and ``avg_bounded_slowdown`` (seconds; bound
        10 s).
    """
    times = _times(records)
    outcomes = [  # start outcomes (moldable sizing) are not resizes
        r
        for r in records
        if r.get("kind") == "outcome" and r.get("action") in ("expand", "shrink", None)
    ]
    jobs = {
        int(j["job_id"]) for r in records if r.get("kind") == "sizes" for j in r.get("jobs") or []
    }
    has_sizes = any(r.get("kind") == "sizes" for r in records)
    measured = job_metrics(records) if has_sizes else None
    keys = ("avg_wait_s", "p95_wait_s", "avg_turnaround_s", "avg_bounded_slowdown")
    return {
        "records": len(records),
        "jobs": len(jobs),
        "resizes_done": sum(1 for r in outcomes if r.get("ok")),
        "resizes_failed": sum(1 for r in outcomes if not r.get("ok")),
        "resizes_by_user": sum(1 for r in outcomes if r.get("by") == "user"),
        "overdue": sum(1 for r in records if r.get("kind") == "overdue"),
        "recoveries": sum(1 for r in records if r.get("kind") == "recovery"),
        "span_s": times[-1] if times else 0.0,
        "utilization": average_utilization(records) if has_sizes else None,
        "start": float(records[0]["t"]) if records else None,
        "end": float(records[0]["t"]) + times[-1] if records else None,
        "jobs_measured": measured.jobs if measured is not None else 0,
        **{k: getattr(measured, k) if measured is not None else None for k in keys},
    }


def summary_line(s: Mapping[str, Any]) -> str:
    """One line of text from a :func:`summary`."""
    util = s.get("utilization")
    parts = [
        f"{s['jobs']} job(s)",
        f"{s['resizes_done']} resize(s) done, {s['resizes_failed']} failed",
    ]
    if s.get("resizes_by_user"):
        parts[-1] += f" ({s['resizes_by_user']} by users)"
    if s.get("overdue") or s.get("recoveries"):
        parts.append(f"{s['overdue']} overdue, {s['recoveries']} recovered")
    parts.append(f"over {_duration(float(s['span_s']))}")
    if s.get("avg_wait_s") is not None:
        parts.append(
            f"mean wait {_duration(float(s['avg_wait_s']))} (95th percentile "
            f"{_duration(float(s['p95_wait_s']))}) and turnaround "
            f"{_duration(float(s['avg_turnaround_s']))} over {s['jobs_measured']} job(s)"
        )
    parts.append(f"average utilisation {util:.1%}" if util is not None else "no utilisation")
    return ", ".join(parts)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _time_unit(span_s: float) -> tuple[float, str]:
    """Divisor and axis label for a span: seconds up to 5 min, minutes up to 5 h, then hours."""
    if span_s <= 300:
        return 1.0, "time since the journal's first record (s)"
    if span_s <= 5 * 3600:
        return 60.0, "time since the journal's first record (min)"
    return 3600.0, "time since the journal's first record (h)"


#: How each kind of event is marked on a job's row: (marker, colour, legend label).
_MARKERS = {
    "expand": ("^", "tab:green", "expand"),
    "shrink": ("v", "tab:orange", "shrink"),
    "start": (">", "tab:cyan", "sized start"),
    "declined": ("o", "tab:olive", "declined offer"),
    "failed": ("X", "tab:red", "failed resize"),
    "overdue": ("D", "tab:purple", "overdue"),
    "recovery": ("s", "tab:gray", "recovery"),
    "skipped": ("x", "tab:brown", "left out (unusable input)"),
}
_STATE_STYLE = {
    # (face colour, alpha): pending lighter than running
    "running": ("tab:blue", 0.9),
    "pending": ("tab:blue", 0.25),
}


def _select(
    spans: Sequence[JobSpan], by_job: Mapping[int, Sequence[JobEvent]], max_jobs: int
) -> list[JobSpan]:
    """The spans to draw: all, or the ``max_jobs`` with most events, then most node-seconds."""

    def weight(s: JobSpan) -> tuple[int, float]:
        return (
            -len(by_job.get(s.job_id, ())),
            -sum(i.nodes_held * i.duration_s for i in s.intervals),
        )

    if len(spans) <= max_jobs:
        return list(spans)
    keep = {s.job_id for s in sorted(spans, key=weight)[:max_jobs]}
    return [s for s in spans if s.job_id in keep]


def draw_gantt(
    ax: Any,
    spans: Sequence[JobSpan],
    events: Sequence[JobEvent],
    *,
    scale: float = 1.0,
    xlim: tuple[float, float] | None = None,
    max_jobs: int = 60,
) -> list[JobSpan]:
    """Draw jobs as a Gantt chart on a matplotlib ``ax``: the report's and the simulator's.

    One row per job (label ``"id name (kind)"``, first seen on top), a bar per
    :class:`Interval` whose height grows with the nodes held (pending drawn lighter and thin,
    other states such as ``completing`` grey), the node count written in bars wide enough for
    it, and a marker per :class:`JobEvent` (a line before a resize's marker spans the time it
    took); a legend of what is drawn, outside the axes on the right.

    Parameters
    ----------
    ax
        A matplotlib ``Axes``.
    spans, events
        The jobs and their events; times in seconds from the chart's origin.
    scale
        Seconds per unit of the time axis (60 for minutes ...).
    xlim
        The time axis's range in seconds (default: 0 to the last end); only what falls in
        it is drawn.
    max_jobs
        At most this many rows: jobs with events first, then those that held the most
        node-seconds.

    Returns
    -------
    list of JobSpan
        The jobs drawn.
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    by_job: dict[int, list[JobEvent]] = {}
    for e in events:
        by_job.setdefault(e.job_id, []).append(e)
    shown = _select(spans, by_job, max_jobs)
    row = {s.job_id: len(shown) - 1 - k for k, s in enumerate(shown)}  # first seen on top
    widest = max([1, *(s.max_nodes for s in shown)])
    lo, hi = xlim if xlim is not None else (0.0, max([0.0, *(s.end_s for s in shown)]))
    span_units = max(hi - lo, 1e-9) / scale
    for s in shown:
        y = row[s.job_id]
        for iv in s.intervals:
            a, b = max(iv.start_s, lo), min(iv.end_s, hi)  # the part inside the window
            if b < a:
                continue
            colour, alpha = _STATE_STYLE.get(iv.state, ("tab:gray", 0.5))
            height = 0.2 if iv.nodes_held == 0 else 0.3 + 0.5 * iv.nodes_held / widest
            x0, width = a / scale, (b - a) / scale
            ax.broken_barh([(x0, width)], (y - height / 2, height), facecolors=colour, alpha=alpha)
            if iv.nodes_held and width >= 0.04 * span_units:
                ax.text(
                    x0 + width / 2,
                    y,
                    str(iv.nodes_held),
                    ha="center",
                    va="center",
                    fontsize="x-small",
                    color="white",
                )
        for e in by_job.get(s.job_id, ()):
            if not lo <= e.t_s <= hi:
                continue
            marker, colour, _ = _MARKERS[e.what]
            x = e.t_s / scale
            if e.seconds:
                ax.plot([x - e.seconds / scale, x], [y + 0.42, y + 0.42], color=colour, lw=1.2)
            ax.plot([x], [y + 0.42], marker=marker, color=colour, markersize=6, linestyle="none")
    ax.set_yticks(list(row.values()), [s.label for s in shown], fontsize="small")
    ax.set_ylim(-0.7, max(len(shown), 1) - 0.3)
    ax.set_xlim(lo / scale, max(hi, lo + 1e-9) / scale)
    ax.set_ylabel("jobs (bar height: nodes held)")
    ax.grid(axis="x", linewidth=0.3)
    handles: list[Any] = [
        Patch(facecolor="tab:blue", alpha=0.9, label="running"),
        Patch(facecolor="tab:blue", alpha=0.25, label="pending"),
    ]
    if any(iv.state not in _STATE_STYLE for s in shown for iv in s.intervals):
        handles.append(Patch(facecolor="tab:gray", alpha=0.5, label="other state"))
    for what in _MARKERS:
        if any(e.what == what and e.job_id in row for e in events):
            marker, colour, label = _MARKERS[what]
            handles.append(
                Line2D([], [], marker=marker, color=colour, linestyle="none", label=label)
            )
    ax.legend(handles=handles, fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return shown


def draw_report(
    records: Sequence[Record],
    path: str | Path,
    *,
    max_jobs: int = 60,
    window_s: tuple[float, float] | None = None,
) -> Path:
    """Draw the journal's jobs (a Gantt chart, :func:`draw_gantt`) over its utilisation.

    Top panel: the jobs (:func:`draw_gantt`). Bottom panel: :func:`utilization_series` with
    its average as a dashed line. The panels share the time axis (seconds, minutes or hours
    since the journal's first record).

    Parameters
    ----------
    records
        The journal's records in the order written.
    path
        Output file, ``.png`` or ``.svg`` (its directory is created).
    max_jobs
        At most this many rows: jobs with events first, then those that held the most
        node-seconds; the rest are left out (the title says how many are shown).
    window_s
        ``(start_s, end_s)`` in seconds since the journal's first record: draw only this
        window, and only the jobs seen in it (default: the whole journal).

    Returns
    -------
    Path
        ``path``.

    Raises
    ------
    ValueError
        ``path`` does not end in ``.png`` or ``.svg``, the journal has no ``sizes`` record,
        or the window is empty.
    ImportError
        matplotlib is not installed.
    """
    out = Path(path)
    if out.suffix.lower() not in (".png", ".svg"):
        raise ValueError(f"reports are written as .png or .svg, not {out.suffix or 'no suffix'}")
    spans = job_spans(records)  # raises ValueError without a sizes record
    events = job_events(records)
    times, values = utilization_series(records)
    info = summary(records)
    lo, hi = window_s if window_s is not None else (0.0, max(times[-1], 1e-9))
    if not hi > lo:
        raise ValueError(f"the window must end after it starts, got {lo:g} to {hi:g} s")
    if window_s is not None:
        spans = [s for s in spans if s.start_s <= hi and s.end_s >= lo]
        events = [e for e in events if lo <= e.t_s <= hi]
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - matplotlib is in the test environment
        raise ImportError("reports need matplotlib: pip install 'elastic-slurm[sim]'") from exc

    rows = min(len(spans), max_jobs)
    scale, xlabel = _time_unit(hi - lo)
    fig = Figure(figsize=(10.0, 3.0 + 0.32 * max(rows, 3)), layout="constrained")
    FigureCanvasAgg(fig)
    gantt, util = fig.subplots(
        2, 1, sharex=True, gridspec_kw={"height_ratios": [max(rows, 3) * 0.32 + 1.0, 1.6]}
    )
    shown = draw_gantt(gantt, spans, events, scale=scale, xlim=(lo, hi), max_jobs=max_jobs)
    title = (
        f"{info['jobs']} job(s), {info['resizes_done']} resize(s) done, "
        f"{info['resizes_failed']} failed, over {_duration(info['span_s'])}"
    )
    if len(shown) < len(spans):
        title += f" ({len(shown)} of {len(spans)} jobs shown)"
    gantt.set_title(title)

    avg = info["utilization"]
    util.step([t / scale for t in times], values, where="post", linewidth=1.0)
    util.fill_between([t / scale for t in times], values, step="post", alpha=0.2)
    util.axhline(avg, linestyle="--", color="black", linewidth=0.8, label=f"average {avg:.1%}")
    util.set_ylim(0, 1.05)
    util.set_ylabel("utilisation")
    util.set_xlabel(xlabel)
    util.grid(linewidth=0.3)
    util.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0))

    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    return out


__all__ = [
    "EVENT_KINDS",
    "Interval",
    "JobEvent",
    "JobSpan",
    "average_utilization",
    "draw_gantt",
    "draw_report",
    "job_events",
    "job_metrics",
    "job_records",
    "job_spans",
    "summary",
    "summary_line",
    "utilization_series",
]
