"""``elastic-slurm simulate TRACE``: run a scheduling policy on a workload trace in virtual time.

The policy is the same plugin the controller runs (``--policy``, options with ``--option``).
Results: averages, the 50th/95th/99th percentiles of wait and bounded slowdown (bound 10 s,
as Feitelson's), utilisation and makespan; with ``--seeds`` each configuration runs once per
seed and every measure is a mean with its 95 % Student t confidence interval. Per-job output:
``--jobs-out FILE.swf`` (SWF with the simulated start and end times) and ``--jobs-csv FILE``
(Batsim's jobs.csv, which evalys reads). Elastic runs are compared with one rigid baseline
(``--baseline``: a policy on the trace with no job made elastic), named in the output.

With ``--json`` the last line printed is one JSON object: the metrics (``jobs``, ``policy``,
``seed``, ``avg_wait_s``, ``p50_wait_s``, ``p95_wait_s``, ``p99_wait_s``,
``avg_turnaround_s``, ``avg_bounded_slowdown`` and its percentiles, ``utilization``,
``makespan_s`` ...); with several seeds each measure is the mean over them, with ``seeds``,
``confidence_intervals`` (``{measure: {mean, ci_low, ci_high, ci_half_width, n,
confidence}}``) and ``runs`` (each seed's metrics); ``baseline`` (its metrics and
``description``) and ``vs_baseline`` (``(value - baseline) / baseline`` per measure);
``sweep`` (one entry per policy and fraction); ``job_files`` and ``figures`` (paths written).

Progress goes to stderr: a bar (rich) when stderr is a terminal and the run lasts more than a
few seconds, plain lines with ``--progress`` when it is not; never on stdout, so ``--json``
(whose last line printed is one JSON object) is not disturbed. The simulator, NumPy and
matplotlib are imported inside :func:`run`, so that ``elastic-slurm --help`` stays fast.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from elastic_slurm.errors import ConfigError, InvalidRequest

#: A bar shows only once a run has lasted this long (seconds), unless asked for.
PROGRESS_DELAY_S = 2.0
#: Without a terminal (``--progress`` to a file), at most one line per this many seconds.
PLAIN_PROGRESS_EVERY_S = 5.0
#: The measures aggregated over seeds and compared with the baseline, in printing order.
MEASURES = (
    ("avg_wait_s", "average wait", "s"),
    ("p50_wait_s", "wait, median", "s"),
    ("p95_wait_s", "wait, 95th percentile", "s"),
    ("p99_wait_s", "wait, 99th percentile", "s"),
    ("max_wait_s", "maximum wait", "s"),
    ("avg_turnaround_s", "average turnaround", "s"),
    ("avg_bounded_slowdown", "average bounded slowdown", ""),
    ("p50_bounded_slowdown", "bounded slowdown, median", ""),
    ("p95_bounded_slowdown", "bounded slowdown, 95th percentile", ""),
    ("p99_bounded_slowdown", "bounded slowdown, 99th percentile", ""),
    ("utilization", "utilisation", ""),
    ("waste_fraction", "waste (share of node-seconds)", ""),
    ("makespan_s", "makespan", "s"),
    ("expansions", "expansions", ""),
    ("shrinks", "shrinks", ""),
    ("requests_refused", "evolving requests refused", ""),
)
#: The measures drawn against the elastic fraction by ``--fractions``.
SWEEP_MEASURES = ("avg_turnaround_s", "utilization")
DEFAULT_BASELINE = "easy_backfill"


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``simulate`` subcommand."""
    p = sub.add_parser(
        "simulate",
        help="run a scheduling policy on an SWF workload trace in virtual time",
        description="Simulate a policy plugin on a Standard Workload Format trace (.swf or "
        ".swf.gz) and print wait, turnaround and bounded slowdown (bound 10 s) with their "
        "50th/95th/99th percentiles, utilisation and makespan.",
    )
    p.add_argument("trace", type=Path, help="SWF trace (.swf or .swf.gz)")
    p.add_argument("--policy", default="easy_backfill", help="policy name (default: %(default)s)")
    p.add_argument(
        "--option",
        "-o",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an option of --policy's policy (VALUE read as JSON when it parses, else as a "
        "string), or POLICY:KEY=VALUE for one of --compare-policies; repeat",
    )
    p.add_argument(
        "--nodes", type=int, default=None, help="machine size (default: the trace's MaxNodes)"
    )
    p.add_argument(
        "--procs-per-node",
        type=int,
        default=None,
        metavar="N",
        help="processors per node: a job of P processors takes ceil(P / N) nodes (default: "
        "from the header, MaxProcs / MaxNodes rounded up, else 1)",
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
    p.add_argument(
        "--seeds",
        default=None,
        metavar="N|S1,S2,...",
        help="run each configuration once per seed and report means with 95 %% confidence "
        "intervals (Student t): N seeds from --seed on, or a list of seeds",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="K",
        help="simulate the first K usable jobs (after the filters), not the first K records; "
        "see --records",
    )
    p.add_argument(
        "--records",
        type=int,
        default=None,
        metavar="K",
        help="read only the first K records (job lines) of the trace, counted before any "
        "filter; the rest is not read",
    )
    p.add_argument(
        "--drop-zero-runtime",
        action="store_true",
        help="leave out jobs whose run time is 0 (how many is reported)",
    )
    p.add_argument(
        "--periodic", type=float, default=None, metavar="S", help="also decide every S seconds"
    )
    p.add_argument(
        "--engine",
        choices=("auto", "general"),
        default="auto",
        help="auto: FCFS and EASY on rigid jobs run compiled (same results, much faster; needs "
        "numba), everything else in the general loop; general: always the general loop, which "
        "calls the policy object every cycle (default: %(default)s)",
    )
    p.add_argument(
        "--skip-bad-lines",
        action="store_true",
        help="leave out malformed trace lines (with a warning) instead of stopping",
    )
    p.add_argument("--json", action="store_true", help="print the results as one JSON object")
    p.add_argument(
        "--jobs-out",
        type=Path,
        default=None,
        metavar="FILE.swf",
        help="write every job with its simulated wait and run time as SWF (.gz: compressed); "
        "with several seeds, one file per seed (-seedN before the suffix)",
    )
    p.add_argument(
        "--jobs-csv",
        type=Path,
        default=None,
        metavar="FILE",
        help="write Batsim's jobs.csv (evalys reads it); with several seeds, one per seed",
    )
    p.add_argument(
        "--plot", type=Path, default=None, metavar="DIR", help="write figures (PNG) into DIR"
    )
    p.add_argument(
        "--window",
        default=None,
        metavar="START:END",
        help="the time window of the Gantt chart, seconds from the first submission (suffix "
        "m, h or d for minutes, hours, days; default: the whole run, or one day in its middle "
        "when it is longer than three days)",
    )
    p.add_argument(
        "--fractions",
        default=None,
        metavar="F1,F2,...",
        help="also run --compare-policies at these elastic fractions; print them against the "
        "rigid baseline, and with --plot draw average turnaround and utilisation against the "
        "fraction",
    )
    p.add_argument(
        "--compare-policies",
        default=None,
        metavar="P1,P2,...",
        help="policies compared at each of --fractions, or at --elastic-fraction without "
        "it (default: --policy)",
    )
    p.add_argument(
        "--baseline",
        default=None,
        metavar="POLICY",
        help="the rigid baseline every elastic result is compared with: POLICY (default "
        f"options) on the trace with no job made elastic (default with --fractions: "
        f"{DEFAULT_BASELINE}, which backfills with the users' time limits as estimates)",
    )
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress on stderr (default: a bar when stderr is a terminal and the run takes "
        "more than a few seconds)",
    )
    p.set_defaults(func=run)


def _options(pairs: list[str], policy: str, compared: list[str]) -> dict[str, dict[str, Any]]:
    """``--option`` values by policy: ``KEY=VALUE`` for ``policy``, ``P:KEY=VALUE`` for ``P``.

    Raises
    ------
    InvalidRequest
        For a pair without ``=`` or key, or a ``P:`` that is neither ``policy`` nor one of
        ``compared`` (the baseline keeps its default options).
    """
    options: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        owner, colon, name = key.rpartition(":")
        owner = owner.strip() if colon else policy
        if not sep or not name:
            raise InvalidRequest(f"--option takes KEY=VALUE or POLICY:KEY=VALUE, got {pair!r}")
        if owner not in (policy, *compared):
            raise InvalidRequest(
                f"--option {pair!r} is for {owner!r}, which is neither --policy nor one of "
                "--compare-policies"
            )
        try:
            options.setdefault(owner, {})[name] = json.loads(value)
        except json.JSONDecodeError:
            options.setdefault(owner, {})[name] = value
    return options


def _seeds(text: str | None, first: int) -> list[int]:
    """``--seeds``: a count (``5``: seeds ``first .. first + 4``) or a list (``1,7,9``)."""
    if text is None:
        return [first]
    try:
        if "," in text:
            seeds = [int(s) for s in text.split(",") if s.strip()]
        else:
            count = int(text)
            if count < 1:
                raise InvalidRequest(f"--seeds must be at least 1, got {count}")
            seeds = list(range(first, first + count))
    except ValueError as exc:
        raise InvalidRequest(f"--seeds takes a count or a list like 1,2,3, got {text!r}") from exc
    if not seeds or len(set(seeds)) != len(seeds):
        raise InvalidRequest(f"--seeds must list distinct seeds, got {text!r}")
    return seeds


def _fractions(text: str) -> list[float]:
    try:
        fractions = [float(f) for f in text.split(",") if f.strip()]
    except ValueError as exc:
        raise InvalidRequest(f"--fractions takes numbers like 0,0.5,1: {exc}") from exc
    if not fractions or not all(0.0 <= f <= 1.0 for f in fractions):
        raise InvalidRequest(f"--fractions must be numbers in [0, 1], got {text!r}")
    return fractions


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def _seconds(text: str) -> float:
    text = text.strip()
    unit = _UNITS.get(text[-1:].lower()) if text else None
    number = text[:-1] if unit else text
    return float(number) * (unit or 1.0)


def _window(text: str | None) -> tuple[float, float] | None:
    """``--window START:END`` in seconds (units s, m, h, d)."""
    if text is None:
        return None
    start, sep, end = text.partition(":")
    try:
        if not sep:
            raise ValueError("no ':'")
        window = (_seconds(start), _seconds(end))
    except ValueError as exc:
        raise InvalidRequest(
            f"--window takes START:END in seconds (or with m, h, d), like 0:2d, got {text!r}"
        ) from exc
    if not 0 <= window[0] < window[1]:
        raise InvalidRequest(f"--window must have 0 <= START < END, got {text!r}")
    return window


class _Progress:
    """Progress of all the runs of one command, on stderr.

    A rich bar when stderr is a terminal (shown once the command has lasted
    :data:`PROGRESS_DELAY_S`, at once when asked with ``--progress``), plain lines at most
    every :data:`PLAIN_PROGRESS_EVERY_S` when asked without a terminal, else nothing.
    """

    def __init__(self, asked: bool | None, total_jobs: int) -> None:
        tty = sys.stderr.isatty()
        self.enabled = asked if asked is not None else tty
        self.plain = self.enabled and not tty
        self.delay_s = 0.0 if asked else PROGRESS_DELAY_S
        self.total = max(1, total_jobs)
        self.done = 0
        self.t0 = time.monotonic()
        self.last_line = float("-inf")
        self.shown = -1
        self.bar: Any = None
        self.task: Any = None

    def callback(self, label: str) -> Callable[[int, int], None] | None:
        """The progress callback of one run (``None`` when disabled)."""
        if not self.enabled:
            return None
        offset = self.done

        def update(done: int, total: int) -> None:
            self.done = offset + done
            self._show(label)

        return update

    def _show(self, label: str) -> None:
        now = time.monotonic()
        if now - self.t0 < self.delay_s:
            return
        if self.plain:
            due = now - self.last_line >= PLAIN_PROGRESS_EVERY_S
            if self.done != self.shown and (due or self.done >= self.total):
                self.last_line, self.shown = now, self.done
                pct = 100 * self.done / self.total
                print(
                    f"simulating {label}: {self.done:,}/{self.total:,} jobs ({pct:.0f} %), "
                    f"{now - self.t0:.0f} s",
                    file=sys.stderr,
                    flush=True,
                )
            return
        if self.bar is None:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self.task = self.bar.add_task(label, total=self.total)
            self.bar.start()
        self.bar.update(self.task, completed=self.done, description=label)

    def close(self) -> None:
        """Take the bar down (it leaves nothing on the terminal)."""
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def _require_extras(*, confidence: bool, plots: bool) -> None:
    """Fail before the runs, in one line, when what the output needs is not installed."""
    if confidence:
        try:
            import scipy.stats  # noqa: F401
        except ImportError as exc:
            raise ConfigError(
                "--seeds with two seeds or more needs SciPy for the confidence intervals "
                "(Student's t): pip install 'elastic-slurm[sim]' (or scipy)"
            ) from exc
    if plots:
        try:
            import matplotlib  # noqa: F401
        except ImportError as exc:
            raise ConfigError("--plot needs matplotlib: pip install 'elastic-slurm[sim]'") from exc


def _per_seed_path(path: Path, seed: int, several: bool) -> Path:
    if not several:
        return path
    name = path.name
    for suffix in (".swf.gz", ".csv.gz", ".swf", ".csv", ".gz"):
        if name.endswith(suffix):
            return path.with_name(f"{name.removesuffix(suffix)}-seed{seed}{suffix}")
    return path.with_name(f"{name}-seed{seed}")


def _aggregate(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """One summary: the first run's, with each measure's mean and its interval over seeds."""
    from elastic_slurm.simulator.stats import over_runs

    out = dict(summaries[0])
    if len(summaries) == 1:
        return out
    estimates = over_runs(summaries, [m for m, _, _ in MEASURES])
    for key, est in estimates.items():
        out[key] = est.mean
    out["seeds"] = [s["seed"] for s in summaries]
    out["confidence_intervals"] = {k: e.as_dict() for k, e in estimates.items()}
    out["runs"] = summaries
    del out["seed"]
    return out


def _relative(value: float, base: float) -> float | None:
    return (value - base) / base if base else None


def _vs_baseline(summary: dict[str, Any], baseline: dict[str, Any]) -> dict[str, float | None]:
    return {
        key: _relative(summary[key], baseline[key])
        for key, _, _ in MEASURES
        if isinstance(summary.get(key), int | float) and isinstance(baseline.get(key), int | float)
    }


def _describe_baseline(policy: str) -> str:
    return (
        f"{policy} (default options) on the rigid trace (no job made elastic); the same "
        "baseline for every policy and elastic fraction"
    )


def _check(args: argparse.Namespace) -> None:
    if args.nodes is not None and args.nodes < 1:
        raise InvalidRequest(f"--nodes must be at least 1, got {args.nodes}")
    if args.procs_per_node is not None and args.procs_per_node < 1:
        raise InvalidRequest(f"--procs-per-node must be at least 1, got {args.procs_per_node}")
    if args.jobs is not None and args.jobs < 1:
        raise InvalidRequest(f"--jobs must be at least 1, got {args.jobs}")
    if args.records is not None and args.records < 1:
        raise InvalidRequest(f"--records must be at least 1, got {args.records}")
    if not 0.0 <= args.elastic_fraction <= 1.0:
        raise InvalidRequest(f"--elastic-fraction must be in [0, 1], got {args.elastic_fraction}")
    if args.periodic is not None and not 0.0 < args.periodic < math.inf:
        raise InvalidRequest(
            f"--periodic must be a positive number of seconds, got {args.periodic}"
        )
    for option, path in (("--jobs-out", args.jobs_out), ("--jobs-csv", args.jobs_csv)):
        if path is not None:
            _writable(option, path)


def _writable(option: str, path: Path) -> None:
    """Refuse, before any run, an output file whose directory is missing or not writable.

    Raises
    ------
    InvalidRequest
        Naming the option and the directory.
    """
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise InvalidRequest(f"{option} {path}: is a directory, not a file")
    if not folder.is_dir():
        raise InvalidRequest(f"{option} {path}: directory {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InvalidRequest(f"{option} {path}: directory {folder} is not writable")


def _known_policies(args: argparse.Namespace) -> None:
    """Every policy named by ``--policy``, ``--compare-policies`` and ``--baseline`` exists.

    Raises
    ------
    PolicyError
        For the first unknown name (before any run), listing the known ones.
    """
    from elastic_slurm.plugins.registry import load_policy_class

    for name in [args.policy, *_names(args.compare_policies), *_names(args.baseline)]:
        load_policy_class(name)


def _names(text: str | None) -> list[str]:
    """The names of a comma-separated list (spaces around them allowed); ``[]`` for None."""
    return [name.strip() for name in (text or "").split(",") if name.strip()]


def run(args: argparse.Namespace) -> int:
    """Run the simulations described by ``args``; print the results; return 0.

    Raises
    ------
    PolicyError
        For an unknown policy (the message lists the known ones), bad options, or a policy
        that breaks the simulator's rules.
    TraceError
        For an unreadable or malformed trace.
    InvalidRequest
        For impossible sizes, fractions, seeds or windows.
    ConfigError
        For ``--seeds`` with two seeds or more without SciPy, or ``--plot`` without
        matplotlib (the message names the extra), before any run.
    """
    from elastic_slurm.simulator.replay import SimConfig, load_workload
    from elastic_slurm.simulator.swf import TraceError

    _check(args)
    seeds = _seeds(args.seeds, args.seed)
    fractions = _fractions(args.fractions) if args.fractions else []
    if args.compare_policies and not fractions:
        fractions = [args.elastic_fraction]  # compared at the main run's fraction
    _known_policies(args)
    window = _window(args.window)
    options = _options(args.option, args.policy, _names(args.compare_policies))
    _require_extras(confidence=len(seeds) > 1, plots=args.plot is not None)
    workload = load_workload(
        args.trace,
        args.nodes,
        max_jobs=args.jobs,
        on_error="skip" if args.skip_bad_lines else "raise",
        max_records=args.records,
        drop_zero_runtime=args.drop_zero_runtime,
        swf_options={"procs_per_node": args.procs_per_node},
    )
    if not workload.jobs:
        why = f" ({workload.report.describe()})" if workload.report is not None else ""
        raise TraceError(f"{args.trace}: no job to simulate{why}")
    config = SimConfig(periodic_s=args.periodic, engine=args.engine)
    results, baseline, sweep = _simulate_all(args, workload, config, options, seeds, fractions)
    summary = _aggregate([r.summary() for r in results])
    summary["trace"] = str(args.trace)
    summary["elastic_fraction"] = args.elastic_fraction
    if baseline is not None:
        summary["baseline"] = baseline
        summary["vs_baseline"] = _vs_baseline(summary, baseline)
    if sweep:
        summary["sweep"] = sweep
    written = _write_jobs(args, results, workload, config.bsld_bound_s)
    if written:
        summary["job_files"] = written
    figures: list[str] = []
    if args.plot is not None:
        figures = _figures(args, results[0], window, sweep, baseline)
        summary["figures"] = figures
    if args.json:
        if workload.report is not None:
            summary["workload"] = _report_fields(workload.report)
            if any(n for _, n in workload.report.dropped):  # said where a reader looks
                print(f"elastic-slurm: {workload.report.describe()}", file=sys.stderr)
        print(json.dumps(summary, sort_keys=True))
        return 0
    _print_text(workload, results, summary, sweep, baseline)
    for path in written:
        print(f"  jobs: {path}")
    for figure in figures:
        print(f"  figure: {figure}")
    return 0


def _report_fields(report: Any) -> dict[str, Any]:
    """The trace's :class:`~elastic_slurm.simulator.workload.WorkloadReport` for ``--json``.

    ``records`` read, jobs ``kept``, ``dropped`` (``{reason: count}``, reasons with a count
    only), ``walltime_from_runtime``, the machine's ``nodes`` and ``procs_per_node``.
    """
    return {**dataclasses.asdict(report), "dropped": {why: n for why, n in report.dropped if n}}


def _simulate_all(
    args: argparse.Namespace,
    workload: Any,
    config: Any,
    options: dict[str, dict[str, Any]],
    seeds: list[int],
    fractions: list[float],
) -> tuple[list[Any], dict[str, Any] | None, list[dict[str, Any]]]:
    """Every run, under one progress bar: the results per seed, the baseline, the sweep."""
    from elastic_slurm.simulator.replay import run as simulate

    policies = _names(args.compare_policies or args.policy) if fractions else []
    baseline_policy = args.baseline or (DEFAULT_BASELINE if fractions else None)
    runs = len(seeds) * (1 + len(policies) * len(fractions)) + (1 if baseline_policy else 0)
    bar = _Progress(args.progress, runs * len(workload.jobs))

    def one(policy: str, fraction: float, seed: int, opts: dict[str, Any] | None) -> Any:
        label = f"{policy} at {fraction:g} elastic, seed {seed}"
        return simulate(
            workload,
            policy,
            seed=seed,
            elastic_fraction=fraction,
            policy_options=opts or None,
            config=config,
            progress=bar.callback(label),
        )

    try:
        main = options.get(args.policy)
        results = [one(args.policy, args.elastic_fraction, s, main) for s in seeds]
        baseline = None
        if baseline_policy:
            base = one(baseline_policy, 0.0, seeds[0], None)
            baseline = {
                "description": _describe_baseline(baseline_policy),
                **base.summary(),
                "elastic_fraction": 0.0,
            }
        sweep: list[dict[str, Any]] = []
        for policy in policies:
            for fraction in fractions:
                opts = options.get(policy)
                point = _aggregate([one(policy, fraction, s, opts).summary() for s in seeds])
                point["elastic_fraction"] = fraction
                if opts:
                    point["options"] = opts
                if baseline is not None:
                    point["vs_baseline"] = _vs_baseline(point, baseline)
                sweep.append(point)
    finally:
        bar.close()
    return results, baseline, sweep


def _write_jobs(
    args: argparse.Namespace, results: list[Any], workload: Any, bound_s: float
) -> list[str]:
    """``--jobs-out`` and ``--jobs-csv`` for each seed's run; the paths written."""
    if args.jobs_out is None and args.jobs_csv is None:
        return []
    from elastic_slurm.simulator.output import write_jobs_csv, write_jobs_swf

    jobs_by_id = {j.job_id: j for j in workload.jobs}
    several = len(results) > 1
    written: list[str] = []
    for result in results:
        if args.jobs_out is not None:
            path = _per_seed_path(args.jobs_out, result.seed, several)
            write_jobs_swf(path, result, jobs_by_id)
            written.append(str(path))
        if args.jobs_csv is not None:
            path = _per_seed_path(args.jobs_csv, result.seed, several)
            write_jobs_csv(path, result, jobs_by_id, bound_s=bound_s)
            written.append(str(path))
    return written


def _figures(
    args: argparse.Namespace,
    result: Any,
    window: tuple[float, float] | None,
    sweep: list[dict[str, Any]],
    baseline: dict[str, Any] | None,
) -> list[str]:
    from elastic_slurm.simulator.plots import (
        plot_gantt,
        plot_job_sizes,
        plot_metric_vs_fraction,
        plot_utilization,
    )

    base = args.trace.name.removesuffix(".gz").removesuffix(".swf")
    stem = f"{base}-{result.policy}"
    out = [
        plot_utilization(result, args.plot / f"{stem}-utilization.png"),
        plot_gantt(result, args.plot / f"{stem}-gantt.png", window=window),
        plot_job_sizes(result, args.plot / f"{stem}-sizes.png", window=window),
    ]
    for m in SWEEP_MEASURES if sweep else ():
        points: dict[str, list[tuple[float, float]]] = {}
        errors: dict[str, list[float]] = {}
        for point in sweep:
            points.setdefault(point["policy"], []).append((point["elastic_fraction"], point[m]))
            ci = point.get("confidence_intervals", {}).get(m, {})
            errors.setdefault(point["policy"], []).append(ci.get("ci_half_width") or 0.0)
        out.append(
            plot_metric_vs_fraction(
                points,
                args.plot / f"{stem}-{m}-by-fraction.png",
                metric=m,
                baseline=baseline[m] if baseline else None,
                baseline_label=f"rigid baseline: {baseline['policy']}" if baseline else "rigid",
                errors=errors if any(any(e) for e in errors.values()) else None,
            )
        )
    return [str(p) for p in out]


def _value(key: str, value: float, unit: str) -> str:
    if unit == "s":
        return f"{value:,.1f} s"
    if key in ("expansions", "shrinks", "requests_refused"):
        return f"{int(value):,}" if float(value).is_integer() else f"{value:,.1f}"
    return f"{value:,.4f}"


def _print_text(
    workload: Any,
    results: list[Any],
    summary: dict[str, Any],
    sweep: list[dict[str, Any]],
    baseline: dict[str, Any] | None,
) -> None:
    m = results[0].metrics
    if workload.report is not None:
        print(workload.report.describe())
    seeds = summary.get("seeds")
    which = f"seeds {', '.join(map(str, seeds))}" if seeds else f"seed {results[0].seed}"
    print(f"policy {results[0].policy} on {m.nodes} nodes, {m.jobs} jobs ({which})")
    if seeds:
        print(f"  means over {len(seeds)} seeds with 95 % confidence intervals (Student t)")
    cis = summary.get("confidence_intervals", {})
    rows = []
    for key, name, unit in MEASURES:
        if key == "avg_bounded_slowdown":
            name += f" (bound {m.bsld_bound_s:g} s)"
        text = _value(key, summary[key], unit)
        half = cis.get(key, {}).get("ci_half_width")
        if half is not None:
            text += f" ± {_value(key, half, unit)}"
        if baseline is not None and summary.get("vs_baseline", {}).get(key) is not None:
            text += f"  ({100 * summary['vs_baseline'][key]:+.1f} % vs baseline)"
        rows.append((name, text))
    rows.append(("policy cycles / decisions", f"{m.cycles} / {m.decisions}"))
    rows.append(
        ("policy time per cycle", f"{1e6 * results[0].timing.per_cycle_s:.1f} us (wall clock)")
    )
    if results[0].engine == "compiled":
        rows.append(("engine", "compiled (--engine general: the policy object every cycle)"))
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    if baseline is not None:
        print(f"rigid baseline: {baseline['description']}")
        print(
            f"  average turnaround {baseline['avg_turnaround_s']:,.1f} s, average wait "
            f"{baseline['avg_wait_s']:,.1f} s, utilisation {baseline['utilization']:.4f}"
        )
    if sweep:
        print("elastic fraction sweep (turnaround and utilisation; change against the baseline):")
        for point in sweep:
            vs = point.get("vs_baseline", {})
            ci = point.get("confidence_intervals", {})
            tat, util = vs.get("avg_turnaround_s"), vs.get("utilization")
            tat_ci = ci.get("avg_turnaround_s", {}).get("ci_half_width")
            util_ci = ci.get("utilization", {}).get("ci_half_width")
            opts = ", ".join(f"{k}={v}" for k, v in point.get("options", {}).items())
            name = f"{point['policy']} ({opts})" if opts else point["policy"]
            print(
                f"  {name:<24} {100 * point['elastic_fraction']:5.1f} % elastic  "
                f"turnaround {point['avg_turnaround_s']:,.1f} s"
                + (f" ± {tat_ci:,.1f} s" if tat_ci is not None else "")
                + (f" ({100 * tat:+.1f} %)" if tat is not None else "")
                + f"  utilisation {point['utilization']:.4f}"
                + (f" ± {util_ci:.4f}" if util_ci is not None else "")
                + (f" ({100 * util:+.1f} %)" if util is not None else "")
            )
