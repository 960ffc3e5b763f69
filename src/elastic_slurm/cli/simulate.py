"""``elastic-slurm simulate TRACE``: run a scheduling policy on a workload trace in virtual time.

The policy is the same plugin the controller runs (``--policy``, options with ``--option``).
A progress bar goes to stderr when it is a terminal (not with ``--json``). With ``--json`` the
last line printed is one JSON object with the metrics (``jobs``, ``policy``,
``avg_turnaround_s``, ``avg_wait_s``, ``avg_bounded_slowdown``, ``utilization``,
``makespan_s`` and more).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from elastic_slurm.errors import InvalidRequest


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``simulate`` subcommand."""
    p = sub.add_parser(
        "simulate",
        help="run a scheduling policy on an SWF workload trace in virtual time",
        description="Simulate a policy plugin on a Standard Workload Format trace (.swf or "
        ".swf.gz) and print turnaround, wait, bounded slowdown (bound 10 s), utilisation and "
        "makespan.",
    )
    p.add_argument("trace", type=Path, help="SWF trace (.swf or .swf.gz)")
    p.add_argument("--policy", default="easy_backfill", help="policy name (default: %(default)s)")
    p.add_argument(
        "--option",
        "-o",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a policy option (VALUE read as JSON when it parses, else as a string); repeat",
    )
    p.add_argument(
        "--nodes", type=int, default=None, help="machine size (default: the trace's MaxNodes)"
    )
    p.add_argument(
        "--elastic-fraction",
        type=float,
        default=0.0,
        metavar="F",
        help="fraction of jobs made elastic, half malleable, half evolving (Lina et al. "
        "section 5.1); default 0",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the elastic conversion")
    p.add_argument("--jobs", type=int, default=None, metavar="K", help="simulate the first K jobs")
    p.add_argument(
        "--periodic", type=float, default=None, metavar="S", help="also decide every S seconds"
    )
    p.add_argument(
        "--skip-bad-lines",
        action="store_true",
        help="leave out malformed trace lines (with a warning) instead of stopping",
    )
    p.add_argument("--json", action="store_true", help="print the metrics as one JSON object")
    p.add_argument(
        "--plot", type=Path, default=None, metavar="DIR", help="write figures (PNG) into DIR"
    )
    p.add_argument(
        "--fractions",
        default=None,
        metavar="F1,F2,...",
        help="with --plot: also run --compare-policies at these elastic fractions and plot "
        "average turnaround and utilisation against the fraction",
    )
    p.add_argument(
        "--compare-policies",
        default=None,
        metavar="P1,P2,...",
        help="policies for --fractions (default: --policy)",
    )
    p.set_defaults(func=run)


def _options(pairs: list[str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InvalidRequest(f"--option takes KEY=VALUE, got {pair!r}")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar on stderr, or nothing."""
    if not enabled:
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task("simulating", total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def _fraction_plots(
    args: argparse.Namespace, workload: Any, options: dict[str, Any], stem: str
) -> list[str]:
    """Sweep policies over elastic fractions; draw turnaround and utilisation against them."""
    from elastic_slurm.simulator.plots import plot_metric_vs_fraction
    from elastic_slurm.simulator.replay import run as simulate

    try:
        fractions = [float(f) for f in args.fractions.split(",") if f.strip()]
    except ValueError as exc:
        raise InvalidRequest(f"--fractions takes numbers like 0,0.5,1: {exc}") from exc
    if not fractions or not all(0.0 <= f <= 1.0 for f in fractions):
        raise InvalidRequest(f"--fractions must be numbers in [0, 1], got {args.fractions!r}")
    policies = (args.compare_policies or args.policy).split(",")
    metrics = ("avg_turnaround_s", "utilization")
    points: dict[str, dict[str, list[tuple[float, float]]]] = {m: {} for m in metrics}
    for policy in policies:
        for fraction in fractions:
            result = simulate(
                workload,
                policy,
                seed=args.seed,
                elastic_fraction=fraction,
                policy_options=(options or None) if policy == args.policy else None,
            )
            for m in metrics:
                points[m].setdefault(policy, []).append((fraction, getattr(result.metrics, m)))
    return [
        str(plot_metric_vs_fraction(points[m], args.plot / f"{stem}-{m}-by-fraction.png", metric=m))
        for m in metrics
    ]


def run(args: argparse.Namespace) -> int:
    """Run the simulation described by ``args``; print the metrics; return 0.

    Raises
    ------
    PolicyError
        For an unknown policy (the message lists the known ones), bad options, or a policy
        that breaks the simulator's rules.
    TraceError
        For an unreadable or malformed trace.
    InvalidRequest
        For impossible sizes or fractions.
    """
    from elastic_slurm.simulator.replay import SimConfig, load_workload
    from elastic_slurm.simulator.replay import run as simulate

    if args.nodes is not None and args.nodes < 1:
        raise InvalidRequest(f"--nodes must be at least 1, got {args.nodes}")
    if args.jobs is not None and args.jobs < 1:
        raise InvalidRequest(f"--jobs must be at least 1, got {args.jobs}")
    if not 0.0 <= args.elastic_fraction <= 1.0:
        raise InvalidRequest(f"--elastic-fraction must be in [0, 1], got {args.elastic_fraction}")
    options = _options(args.option)
    workload = load_workload(
        args.trace,
        args.nodes,
        max_jobs=args.jobs,
        on_error="skip" if args.skip_bad_lines else "raise",
    )
    config = SimConfig(periodic_s=args.periodic)
    show_bar = not args.json and sys.stderr.isatty() and len(workload.jobs) >= 2000
    with _progress(show_bar) as progress:
        result = simulate(
            workload,
            args.policy,
            seed=args.seed,
            elastic_fraction=args.elastic_fraction,
            policy_options=options or None,
            config=config,
            progress=progress,
        )
    summary = result.summary()
    summary["trace"] = str(args.trace)
    summary["elastic_fraction"] = args.elastic_fraction
    figures: list[str] = []
    if args.plot is not None:
        from elastic_slurm.simulator.plots import plot_job_sizes, plot_utilization

        base = args.trace.name.removesuffix(".gz").removesuffix(".swf")
        stem = f"{base}-{result.policy}"
        figures.append(str(plot_utilization(result, args.plot / f"{stem}-utilization.png")))
        figures.append(str(plot_job_sizes(result, args.plot / f"{stem}-sizes.png")))
        if args.fractions:
            figures += _fraction_plots(args, workload, options, stem)
        summary["figures"] = figures
    if args.json:
        print(json.dumps(summary, sort_keys=True))
        return 0
    m = result.metrics
    if workload.report is not None:
        print(workload.report.describe())
    print(f"policy {result.policy} on {m.nodes} nodes, {m.jobs} jobs (seed {result.seed})")
    rows = [
        ("average wait", f"{m.avg_wait_s:,.1f} s"),
        ("average turnaround", f"{m.avg_turnaround_s:,.1f} s"),
        ("average bounded slowdown", f"{m.avg_bounded_slowdown:,.3f} (bound {m.bsld_bound_s:g} s)"),
        ("maximum wait", f"{m.max_wait_s:,.1f} s"),
        ("utilisation", f"{m.utilization:.4f}"),
        ("waste", f"{m.waste_node_s:,.1f} node-s ({100 * m.waste_fraction:.2f} %)"),
        ("makespan", f"{m.makespan_s:,.1f} s"),
        ("expansions / shrinks", f"{m.expansions} / {m.shrinks}"),
        ("evolving requests refused", f"{m.requests_refused}"),
        ("policy cycles / decisions", f"{m.cycles} / {m.decisions}"),
        ("policy time per cycle", f"{1e6 * result.timing.per_cycle_s:.1f} us (wall clock)"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    for figure in figures:
        print(f"  figure: {figure}")
    return 0
