"""Figures of simulation results (matplotlib, drawn off-screen with the Agg canvas).

* :func:`plot_utilization`: the allocated fraction of the machine and the number of jobs
  waiting, over time; on a long run both are averaged over bins (about 400 of them), so a
  two-year trace reads as a curve, not a solid block;
* :func:`plot_gantt`: the jobs of a time window as a Gantt chart, drawn by the same function
  as ``elastic-slurm report``'s (:func:`elastic_slurm.controller.report.draw_gantt`);
* :func:`plot_job_sizes`: the size of jobs over time (the resized ones first), in a window;
* :func:`plot_metric_vs_fraction`: one metric against the elastic fraction, a line per policy,
  with confidence intervals and the rigid baseline when given.

Each writes a PNG or SVG (by the file's suffix) and returns its path. matplotlib (the ``sim``
extra) is imported only when a figure is drawn; without it these functions raise
:class:`ImportError` naming the extra to install. No global pyplot state is touched.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from elastic_slurm.simulator.metrics import utilization_series
from elastic_slurm.simulator.replay import SimResult

_DAY_S = 86400.0
#: Bins of a long run's utilisation and queue length.
BINS = 400


def _figure(width_in: float = 8.0, height_in: float = 4.0) -> Any:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - matplotlib is in the test environment
        raise ImportError("plots need matplotlib: pip install 'elastic-slurm[sim]'") from exc
    fig = Figure(figsize=(width_in, height_in), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig: Any, path: str | Path) -> Path:
    out = Path(path)
    if out.suffix.lower() not in (".png", ".svg"):
        raise ValueError(f"plots are written as .png or .svg, not {out.suffix or 'no suffix'}")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    return out


def _check_suffix(path: str | Path) -> None:
    if Path(path).suffix.lower() not in (".png", ".svg"):
        raise ValueError(f"plots are written as .png or .svg, not {Path(path).suffix or 'none'}")


def _unit(span_s: float) -> tuple[float, str]:
    """Seconds per unit of the time axis, and its name: s, min, h or days."""
    if span_s > 3 * _DAY_S:
        return _DAY_S, "days"
    if span_s > 5 * 3600:
        return 3600.0, "h"
    if span_s > 300:
        return 60.0, "min"
    return 1.0, "s"


def _time_axis(times_s: Sequence[float]) -> tuple[list[float], str]:
    scale, unit = _unit(max(times_s) if times_s else 0.0)
    return [t / scale for t in times_s], f"time ({unit})"


def queue_series(result: SimResult) -> tuple[list[float], list[int]]:
    """Jobs waiting (submitted, not started) over time, as a step function.

    Returns
    -------
    tuple of lists
        ``(times_s, waiting)``: from ``times_s[i]`` on, ``waiting[i]`` jobs wait (one point
        per distinct time).

    >>> from elastic_slurm.simulator import SimJob, run
    >>> r = run([SimJob(1, 0, 10, 2), SimJob(2, 0, 10, 2)], "fcfs", nodes=2)
    >>> queue_series(r)
    ([0.0, 10.0], [1, 0])
    """
    changes: list[tuple[float, int]] = []
    for r in result.records:
        if r.start_s > r.submit_s:
            changes += [(r.submit_s, 1), (r.start_s, -1)]
    changes.sort()
    times: list[float] = []
    values: list[int] = []
    waiting = 0
    for t, d in changes:
        waiting += d
        if times and times[-1] == t:
            values[-1] = waiting
        else:
            times.append(float(t))
            values.append(waiting)
    return times, values


def binned_means(
    times_s: Sequence[float], values: Sequence[float], edges_s: Sequence[float]
) -> list[float]:
    """The time average of a step function over each bin.

    Parameters
    ----------
    times_s, values
        The step function: ``values[i]`` from ``times_s[i]`` (ascending) to the next time;
        0 before the first time; the last value holds after the last time.
    edges_s
        Bin edges, ascending (``n + 1`` edges for ``n`` bins), in seconds.

    Returns
    -------
    list of float
        One mean per bin.

    >>> binned_means([0.0, 5.0], [1.0, 0.0], [0.0, 10.0, 20.0])
    [0.5, 0.0]
    """
    import numpy as np

    t = np.asarray(times_s, dtype=float)
    v = np.asarray(values, dtype=float)
    e = np.asarray(edges_s, dtype=float)
    if t.size == 0:
        return [0.0] * (len(e) - 1)
    # the integral F(x) of the step function is piecewise linear: exact at its breakpoints
    knots = np.concatenate([t, [max(t[-1], e[-1])]])
    area = np.concatenate([[0.0], np.cumsum(v * np.diff(knots))])
    at = np.interp(e, knots, area, left=0.0)
    widths = np.diff(e)
    return [
        float(x) for x in np.where(widths > 0, np.diff(at) / np.where(widths > 0, widths, 1), 0)
    ]


def plot_utilization(result: SimResult, path: str | Path, *, bins: int = BINS) -> Path:
    """Draw utilisation (top) and jobs waiting (bottom) over time to ``path``.

    With more than ``bins`` changes, both are means over ``bins`` equal bins of the run
    (labelled with the bin width); else the exact step functions. The average utilisation is a
    dashed line.

    Raises
    ------
    ValueError
        ``path`` does not end in ``.png`` or ``.svg``.
    """
    _check_suffix(path)
    times, values = utilization_series(result.timeline, result.nodes)
    qtimes, queue = queue_series(result)
    end = max([0.0, *times[-1:], *qtimes[-1:]])
    scale, unit = _unit(end)
    fig = _figure(9.0, 5.0)
    util, wait = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    if len(times) + len(qtimes) > bins and end > 0:
        width = end / bins
        edges = [i * width for i in range(bins + 1)]
        mids = [(a + b) / 2 / scale for a, b in zip(edges[:-1], edges[1:], strict=True)]
        u = binned_means(times, values, edges)
        q = binned_means(qtimes, queue, edges)
        util.fill_between(mids, u, step="mid", alpha=0.35, linewidth=0)
        util.step(mids, u, where="mid", linewidth=0.8)
        wait.step(mids, q, where="mid", linewidth=0.8, color="tab:red")
        binned = f"means over bins of {width / scale:.3g} {unit}"
    else:
        util.step([t / scale for t in times], values, where="post", linewidth=0.8)
        wait.step([t / scale for t in qtimes], queue, where="post", linewidth=0.8, color="tab:red")
        binned = "exact"
    m = result.metrics
    util.axhline(m.utilization, linestyle="--", color="black", linewidth=0.8)
    util.set_ylim(0, 1.02)
    util.set_ylabel("utilisation")
    util.set_title(
        f"{result.policy} on {result.nodes} nodes: {m.jobs} jobs, utilisation "
        f"{m.utilization:.3f} (dashed), {binned}"
    )
    wait.set_ylabel("jobs waiting")
    wait.set_ylim(bottom=0)
    wait.set_xlabel(f"time since the first submission ({unit})")
    for ax in (util, wait):
        ax.grid(linewidth=0.3)
    return _save(fig, path)


def default_window(result: SimResult) -> tuple[float, float]:
    """The whole run, or one day in its middle when it lasts more than three days (seconds)."""
    end = max((r.end_s for r in result.records), default=0.0)
    if end <= 3 * _DAY_S:
        return 0.0, max(end, 1e-9)
    middle = end / 2
    return middle - _DAY_S / 2, middle + _DAY_S / 2


def sim_spans(
    result: SimResult, window: tuple[float, float] | None = None
) -> tuple[list[Any], list[Any]]:
    """The result's jobs as the report's spans (:class:`~elastic_slurm.controller.report.JobSpan`).

    Each job is pending from its submission to its start, then runs at each size it held
    (a size change ends one interval and, after the start, marks an ``expand`` or ``shrink``
    event). Only jobs that were in the system during ``window`` (seconds) are kept, their
    intervals clipped to it.

    Returns
    -------
    tuple of lists
        ``(spans, events)``, by submission time.
    """
    from elastic_slurm.controller.report import Interval, JobEvent, JobSpan

    lo, hi = window if window is not None else (float("-inf"), float("inf"))
    records = [r for r in result.records if r.submit_s <= hi and r.end_s >= lo]
    wanted = {r.job_id for r in records}
    sizes: dict[int, list[tuple[float, int]]] = {}
    for t, job_id, count in result.timeline:
        if job_id in wanted:
            sizes.setdefault(job_id, []).append((t, count))
    spans = []
    events = []
    for r in records:
        parts = [(r.submit_s, r.start_s, 0, "pending")]
        changes = sizes.get(r.job_id, [])
        for i, (t, count) in enumerate(changes):
            until = changes[i + 1][0] if i + 1 < len(changes) else r.end_s
            if count > 0:
                parts.append((t, until, count, "running"))
            if i > 0 and count > 0 and count != changes[i - 1][1] and lo <= t <= hi:
                what = "expand" if count > changes[i - 1][1] else "shrink"
                events.append(JobEvent(t, r.job_id, what, action=what, nodes_after=count))
        intervals = [
            Interval(max(a, lo), min(b, hi), n, state)
            for a, b, n, state in parts
            if b > a and min(b, hi) > max(a, lo)
        ]
        if intervals:
            spans.append(JobSpan(r.job_id, "", str(r.kind), intervals))
    return spans, events


def plot_gantt(
    result: SimResult,
    path: str | Path,
    *,
    window: tuple[float, float] | None = None,
    max_jobs: int = 60,
) -> Path:
    """Draw the jobs of a time window as a Gantt chart (the report's drawing) to ``path``.

    Parameters
    ----------
    result
        A finished run.
    path
        Output file, ``.png`` or ``.svg``.
    window
        ``(start_s, end_s)``, seconds from the first submission; default
        :func:`default_window`.
    max_jobs
        At most this many rows (resized jobs first, then those that held the most
        node-seconds in the window).

    Raises
    ------
    ValueError
        ``path`` does not end in ``.png`` or ``.svg``.
    """
    from elastic_slurm.controller.report import draw_gantt

    _check_suffix(path)
    lo, hi = window if window is not None else default_window(result)
    spans, events = sim_spans(result, (lo, hi))
    scale, unit = _unit(hi - lo)
    rows = min(len(spans), max_jobs)
    fig = _figure(10.0, 2.0 + 0.32 * max(rows, 3))
    ax = fig.add_subplot()
    shown = draw_gantt(ax, spans, events, scale=scale, xlim=(lo, hi), max_jobs=max_jobs)
    ax.set_xlabel(f"time since the first submission ({unit})")
    title = f"{result.policy}: jobs from {lo / scale:.4g} to {hi / scale:.4g} {unit}"
    if len(shown) < len(spans):
        title += f" ({len(shown)} of {len(spans)} jobs shown)"
    ax.set_title(title)
    return _save(fig, path)


def plot_job_sizes(
    result: SimResult,
    path: str | Path,
    max_jobs: int = 40,
    *,
    window: tuple[float, float] | None = None,
) -> Path:
    """Draw the size (nodes held) of up to ``max_jobs`` jobs over time to ``path``.

    Jobs that changed size come first (most resizes first), then the widest; each is a step
    line from its start to its end. Only the ``window`` (seconds; default
    :func:`default_window`) is drawn, so a long trace does not turn into vertical spikes.
    """
    _check_suffix(path)
    lo, hi = window if window is not None else default_window(result)
    series: dict[int, tuple[list[float], list[int]]] = {}
    for time_s, job_id, count in result.timeline:
        xs, ys = series.setdefault(job_id, ([], []))
        xs.append(time_s)
        ys.append(count)
    series = {j: s for j, s in series.items() if s[0][0] <= hi and s[0][-1] >= lo}
    by_id = {r.job_id: r for r in result.records}

    def rank(job_id: int) -> tuple[int, int, int]:
        r = by_id.get(job_id)
        resizes = r.expansions + r.shrinks if r is not None else 0
        return (-resizes, -max(series[job_id][1]), job_id)

    chosen = sorted(series, key=rank)[:max_jobs]
    fig = _figure(8.0, 4.5)
    ax = fig.add_subplot()
    scale, unit = _unit(hi - lo)
    for job_id in sorted(chosen):
        xs, ys = series[job_id]
        ax.step([x / scale for x in xs], ys, where="post", linewidth=0.8, label=str(job_id))
    ax.set_xlim(lo / scale, hi / scale)
    ax.set_xlabel(f"time since the first submission ({unit})")
    ax.set_ylabel("nodes held")
    ax.set_title(f"job sizes over time ({len(chosen)} of {len(series)} jobs), {result.policy}")
    if 0 < len(chosen) <= 12:
        ax.legend(title="job", fontsize="small")
    return _save(fig, path)


def plot_metric_vs_fraction(
    points: Mapping[str, Sequence[tuple[float, float]]],
    path: str | Path,
    *,
    metric: str = "avg_turnaround_s",
    baseline: float | None = None,
    title: str | None = None,
    baseline_label: str = "rigid",
    errors: Mapping[str, Sequence[float]] | None = None,
) -> Path:
    """Draw a metric against the elastic fraction, one line per policy.

    Parameters
    ----------
    points
        ``{policy: [(elastic_fraction, value), ...]}``; each line is drawn by fraction.
    path
        Output file (``.png`` or ``.svg``).
    metric
        The metric's name, for the axis label (for example ``"utilization"``).
    baseline
        A value drawn as a dotted line (the rigid workload, as in Lina et al.'s figures).
    title
        The figure's title.
    baseline_label
        The baseline's legend entry (say which policy it is).
    errors
        ``{policy: [half-width, ...]}`` in the order of ``points[policy]``: error bars (a
        confidence interval's half-width).
    """
    fig = _figure()
    ax = fig.add_subplot()
    for policy, pts in sorted(points.items()):
        err = list((errors or {}).get(policy, [0.0] * len(pts)))
        order = sorted(range(len(pts)), key=lambda i: pts[i])
        xs = [100 * pts[i][0] for i in order]
        ys = [pts[i][1] for i in order]
        if errors:
            ax.errorbar(xs, ys, yerr=[err[i] for i in order], marker="o", capsize=3, label=policy)
        else:
            ax.plot(xs, ys, marker="o", label=policy)
    if baseline is not None:
        ax.axhline(baseline, linestyle=":", color="black", label=baseline_label)
    ax.set_xlabel("elastic jobs (%)")
    ax.set_ylabel(metric)
    if title:
        ax.set_title(title)
    ax.legend(fontsize="small")
    return _save(fig, path)


def sweep_fractions(
    source: Any,
    policies: Sequence[str],
    fractions: Sequence[float],
    *,
    metric: str = "avg_turnaround_s",
    **run_options: Any,
) -> dict[str, list[tuple[float, float]]]:
    """Run every policy at every elastic fraction; return ``{policy: [(fraction, metric)]}``.

    ``run_options`` go to :func:`~elastic_slurm.simulator.replay.run` (``seed``, ``nodes``,
    ``max_jobs`` ...). A trace path is read once.
    """
    from elastic_slurm.simulator.replay import load_workload, run

    workload = load_workload(
        source,
        run_options.pop("nodes", None),
        max_jobs=run_options.pop("max_jobs", None),
        swf_options=run_options.pop("swf_options", None),
    )
    out: dict[str, list[tuple[float, float]]] = {}
    for policy in policies:
        for fraction in fractions:
            result = run(workload, policy, elastic_fraction=fraction, **run_options)
            out.setdefault(policy, []).append((fraction, getattr(result.metrics, metric)))
    return out


__all__ = [
    "BINS",
    "binned_means",
    "default_window",
    "plot_gantt",
    "plot_job_sizes",
    "plot_metric_vs_fraction",
    "plot_utilization",
    "queue_series",
    "sim_spans",
    "sweep_fractions",
]
