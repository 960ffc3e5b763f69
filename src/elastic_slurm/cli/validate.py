"""``elastic-slurm validate``: a trace slice live with the controller, then simulated; compared.

The method of Ghafoor's thesis, chapter 5 (``docs/live-validation.md``). Writes into
``--out``: ``jobs.csv`` (per job: live and simulated turnaround and wait, relative errors),
``summary.json`` (the aggregate table, the mapping, the calibrated resize cost),
``live-vs-sim.png`` (per-job turnaround, live against simulated), the controller's journal
and log, and the jobs' outputs. Prints the aggregate table (or, with ``--json``, one object).
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from dataclasses import asdict
from pathlib import Path
from statistics import fmean
from typing import Any


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the ``validate`` subcommand."""
    p = sub.add_parser(
        "validate",
        help="replay a trace slice live with the controller, simulate it, compare (Ghafoor ch. 5)",
        description="Replay a time-compressed slice of a real trace on the cluster with the "
        "controller (each job a real MPI program that honours resize points), simulate the "
        "same workload with the same policy, and report |live - simulated| / live.",
    )
    p.add_argument("--trace", type=Path, help="SWF trace (default: SDSC-SP2 from the workloads)")
    p.add_argument("--first", type=int, default=0, help="first usable job of the slice")
    p.add_argument("--jobs", type=int, default=100, help="jobs in the slice (default 100)")
    p.add_argument("--compress", type=float, help="time compression (default: arrivals in --span)")
    p.add_argument("--span", type=float, default=600.0, help="arrivals span (s) when no --compress")
    p.add_argument("--malleable", type=float, default=0.5, help="fraction of malleable jobs")
    p.add_argument("--min-runtime", type=float, default=6.0, help="shortest job (s)")
    p.add_argument("--max-runtime", type=float, default=60.0, help="longest job (s)")
    p.add_argument("--policy", help="policy (default: the site config's)")
    p.add_argument("--out", type=Path, default=None, help="output directory")
    p.add_argument("--timeout", type=float, default=3600.0, help="limit of the live run (s)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5))
    live = [r["live_turnaround_s"] for r in rows]
    sim = [r["sim_turnaround_s"] for r in rows]
    ax.scatter(live, sim, s=12, alpha=0.7)
    top = max(live + sim) * 1.05
    ax.plot([0, top], [0, top], color="gray", lw=0.8, ls="--", label="live = simulated")
    ax.set_xlabel("live turnaround time (s)")
    ax.set_ylabel("simulated turnaround time (s)")
    ax.set_title("Per-job turnaround, live vs simulated")
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    """Run the validation; 0 when it ran (the errors are results, not failures)."""
    from rich.console import Console
    from rich.table import Table

    from elastic_slurm.adapter.factory import slurm_for
    from elastic_slurm.config import load_site
    from elastic_slurm.plugins.registry import make_policy
    from elastic_slurm.simulator.repro.ghafoor import trace_dir
    from elastic_slurm.validation.compare import compare
    from elastic_slurm.validation.live import run_live
    from elastic_slurm.validation.mapping import slice_trace
    from elastic_slurm.validation.simulated import simulate

    site = load_site(args.site)
    policy = args.policy or site.controller.policy.name
    options = site.controller.policy.options if policy == site.controller.policy.name else {}
    slurm = slurm_for(site)
    nodes = len(slurm.nodes())
    trace = args.trace or trace_dir() / "SDSC-SP2-1998-4.2-cln.swf.gz"
    out = args.out or Path(f"validation-{time.strftime('%Y%m%d-%H%M%S')}")
    out = out.resolve()
    slice_ = slice_trace(
        trace,
        first=args.first,
        count=args.jobs,
        nodes=nodes,
        compress=args.compress,
        target_span_s=args.span,
        malleable_fraction=args.malleable,
        min_runtime_s=args.min_runtime,
        max_runtime_s=args.max_runtime,
    )
    console = Console(stderr=args.json)
    console.print(
        f"validate: {len(slice_.jobs)} jobs of {slice_.source} from #{slice_.first}, time "
        f"compressed {slice_.compress:.1f}x, {slice_.trace_nodes} -> {nodes} nodes, "
        f"{sum(j.malleable for j in slice_.jobs)} malleable; {slice_.clamped} run times "
        f"clamped to [{args.min_runtime:g}, {args.max_runtime:g}] s; policy {policy}; "
        f"output {out}"
    )
    live = run_live(
        slice_, slurm, site, out, policy=policy, say=console.print, timeout_s=args.timeout
    )
    cost = fmean(live.resize_s) if live.resize_s else 0.0
    console.print(
        f"live: {len(live.resize_s)} resizes, mean {cost:.2f} s (the simulated resize cost)"
    )
    simulated, result = simulate(slice_, make_policy(policy, options), cost)
    comp = compare(live.times, simulated)
    with open(out / "jobs.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(comp.per_job[0]) + ["slurm_job_id"])
        writer.writeheader()
        for row in comp.per_job:
            writer.writerow({**row, "slurm_job_id": live.job_ids[row["trace_id"]]})
    _plot(comp.per_job, out / "live-vs-sim.png")
    summary = {
        "trace": slice_.source,
        "first": slice_.first,
        "jobs": len(slice_.jobs),
        "compress": slice_.compress,
        "nodes": nodes,
        "policy": policy,
        "resizes_live": len(live.resize_s),
        "resizes_simulated": result.metrics.expansions + result.metrics.shrinks,
        "resize_cost_s": cost,
        "aggregate": comp.aggregate,
        "mapping": [asdict(j) for j in slice_.jobs],
        "output": str(out),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    if args.json:
        print(json.dumps({k: v for k, v in summary.items() if k != "mapping"}))
        return 0
    table = Table(title=f"live vs simulated ({len(slice_.jobs)} jobs, policy {policy})")
    for col in ("measure", "live", "simulated", "|live - sim| / live"):
        table.add_column(col, justify="right" if col != "measure" else "left")
    for r in comp.aggregate:
        fmt = (lambda v: f"{v:.3f}") if r["measure"] == "utilisation" else (lambda v: f"{v:.1f}")
        table.add_row(
            r["measure"],
            "" if r["live"] is None else fmt(r["live"]),
            "" if r["simulated"] is None else fmt(r["simulated"]),
            f"{100 * r['relative_error']:.1f} %",
        )
    console.print(table)
    console.print(
        f"resizes: {summary['resizes_live']} live, {summary['resizes_simulated']} simulated; "
        f"per job: {out / 'jobs.csv'}; figure: {out / 'live-vs-sim.png'}"
    )
    return 0
