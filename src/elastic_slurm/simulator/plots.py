"""Figures of simulation results (matplotlib, drawn off-screen with the Agg canvas).

* :func:`plot_utilization`: the allocated fraction of the machine over time;
* :func:`plot_job_sizes`: the size of jobs over time (the resized ones first);
* :func:`plot_metric_vs_fraction`: one metric against the elastic fraction, a line per policy.

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


def _time_axis(times_s: Sequence[float]) -> tuple[list[float], str]:
    if times_s and max(times_s) > 3 * _DAY_S:
        return [t / _DAY_S for t in times_s], "time (days)"
    return list(times_s), "time (s)"


def plot_utilization(result: SimResult, path: str | Path) -> Path:
    """Draw the allocated fraction of the nodes over time (a step function) to ``path``."""
    times, values = utilization_series(result.timeline, result.nodes)
    x, label = _time_axis(times)
    fig = _figure()
    ax = fig.add_subplot()
    ax.step(x, values, where="post", linewidth=0.6)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(label)
    ax.set_ylabel("allocated fraction of nodes")
    m = result.metrics
    ax.set_title(
        f"{result.policy} on {result.nodes} nodes: {m.jobs} jobs, utilisation {m.utilization:.3f}"
    )
    return _save(fig, path)


def plot_job_sizes(result: SimResult, path: str | Path, max_jobs: int = 40) -> Path:
    """Draw the size (nodes held) of up to ``max_jobs`` jobs over time to ``path``.

    Jobs that changed size come first (most resizes first), then the widest; each is a step
    line from its start to its end.
    """
    series: dict[int, tuple[list[float], list[int]]] = {}
    for time_s, job_id, count in result.timeline:
        xs, ys = series.setdefault(job_id, ([], []))
        xs.append(time_s)
        ys.append(count)
    by_id = {r.job_id: r for r in result.records}

    def rank(job_id: int) -> tuple[int, int, int]:
        r = by_id.get(job_id)
        resizes = r.expansions + r.shrinks if r is not None else 0
        return (-resizes, -max(series[job_id][1]), job_id)

    chosen = sorted(series, key=rank)[:max_jobs]
    fig = _figure(8.0, 4.5)
    ax = fig.add_subplot()
    scale = _DAY_S if result.timeline and result.timeline[-1][0] > 3 * _DAY_S else 1.0
    for job_id in sorted(chosen):
        xs, ys = series[job_id]
        ax.step([x / scale for x in xs], ys, where="post", linewidth=0.8, label=str(job_id))
    ax.set_xlabel("time (days)" if scale != 1.0 else "time (s)")
    ax.set_ylabel("nodes held")
    ax.set_title(f"job sizes over time ({len(chosen)} of {len(series)} jobs), {result.policy}")
    if len(chosen) <= 12:
        ax.legend(title="job", fontsize="small")
    return _save(fig, path)


def plot_metric_vs_fraction(
    points: Mapping[str, Sequence[tuple[float, float]]],
    path: str | Path,
    *,
    metric: str = "avg_turnaround_s",
    baseline: float | None = None,
    title: str | None = None,
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
    """
    fig = _figure()
    ax = fig.add_subplot()
    for policy, pts in sorted(points.items()):
        pts = sorted(pts)
        ax.plot([100 * f for f, _ in pts], [v for _, v in pts], marker="o", label=policy)
    if baseline is not None:
        ax.axhline(baseline, linestyle=":", color="black", label="rigid")
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


__all__ = ["plot_job_sizes", "plot_metric_vs_fraction", "plot_utilization", "sweep_fractions"]
