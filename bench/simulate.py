"""Simulator speed at trace scale (issue 17): everything side by side, in one run.

Prints, in order:

1. **Parsing.** ``read_swf`` on the whole SDSC-SP2 trace (microseconds per line) and with
   ``max_records`` (only the first records are read).
2. **Simulator vs textbook.** FCFS and EASY on the first ``N`` jobs of each shared trace
   (``/work/shared/workloads``): jobs/s of the simulator (``Simulation(...).run()`` with the
   policy objects of ``plugins/``) in both engines, the compiled one (the default for these
   rigid runs) and the general loop (``SimConfig(engine="general")``), and of the minimal
   heap-based scheduler of ``bench/textbook.py``; the ratios (the target is 2x), and how many
   jobs start at the same second in all three with equal records in both engines (every one
   must).
3. **Every policy.** jobs/s of each registered policy on the first ``N`` jobs of Lublin's
   trace with half the jobs made elastic (Lina et al.'s conversion, seed 1), each in its own
   process with a time limit (target: 10,000 jobs/s).
4. **Growth and the 300,000-job run.** FCFS, EASY and ``lina_elastic`` (half the jobs
   elastic: the general loop), then FCFS and EASY on the rigid workload (the compiled engine),
   on 1,000 ... 300,000 jobs of Lina et al.'s synthetic workload model (Downey's model with
   their Table 1 ranges, load 0.75, seed 1) on 5,544 nodes (CEA-Curie's size): seconds,
   jobs/s, cost per job relative to the smallest size (1.0 is linear growth), and each run's
   peak memory (``VmHWM`` of its own process: interpreter, imports, workload and run).
   Targets: under 60 s and under 2 GiB at 300,000 jobs.

Times: jobs/s and ratios use the process's CPU time (``time.process_time``), since these
machines are shared and a run's wall time includes waiting for a core; the 300,000-job rows
also give wall time (the 60 s target). Workload generation and parsing are not counted in a
run's time (they are in 1.), nor is the elastic conversion (Lina et al.'s, applied to the
workload before the timed run with the same seed, so the same jobs are simulated), nor a
policy's one-off ``prepare()`` (loading its compiled kernel, like an import; section 3 shows it
apart, as "load s").

Usage::

    .venv/bin/python bench/simulate.py --quick    # about a minute: small sizes
    .venv/bin/python bench/simulate.py            # the targets' sizes: many minutes
    .venv/bin/python bench/simulate.py --peer     # also AccaSim 1.1.3 on SDSC-SP2 (slow)

AccaSim (``--peer``, installed with pip when missing) is the external peer: the full
``--peer-jobs`` SDSC-SP2 jobs under FCFS and EASY in both simulators, their speed and how far
their schedules agree (its "EASY" is not standard EASY: see ``shared/docs/PEERS.md``).
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import textbook  # noqa: E402

from elastic_slurm.plugins.registry import make_policy  # noqa: E402
from elastic_slurm.simulator import (  # noqa: E402
    LinaConversion,
    SimConfig,
    Simulation,
    SWFHeader,
    Workload,
    from_swf,
    make_elastic,
    read_swf,
    run,
    write_swf,
)

WORKLOADS = Path("/work/shared/workloads")
TRACES = ("SDSC-SP2-1998-4.2-cln.swf.gz", "KTH-SP2-1996-2.1-cln.swf.gz", "lublin_256.swf.gz")
POLICY_TRACE = "lublin_256.swf.gz"
MACHINE = 5544  # nodes: CEA-Curie's
GROWTH_POLICIES = ("fcfs", "easy_backfill", "lina_elastic")


def trace_slice(name: str, jobs: int) -> Workload:
    """The first ``jobs`` usable jobs of a shared trace (reading only the records needed)."""
    trace = read_swf(WORKLOADS / name, max_records=jobs + jobs // 5 + 500)
    return from_swf(trace, max_jobs=jobs)


# ---------------------------------------------------------------------------------- 1. parsing
def parsing() -> None:
    """Print read_swf's cost per line, whole file and first records."""
    path = WORKLOADS / TRACES[0]
    t0 = time.process_time()
    trace = read_swf(path)
    whole = time.process_time() - t0
    lines = len(trace.jobs) + len(trace.header.lines)
    t0 = time.process_time()
    first = read_swf(path, max_records=1000)
    head = time.process_time() - t0
    print("\n== 1. parsing (read_swf, CPU time)")
    print(f"  {path.name}: {lines} lines in {whole:.2f} s, {1e6 * whole / lines:.1f} us/line")
    print(f"  max_records=1000: {len(first.jobs)} jobs in {1e3 * head:.1f} ms (the rest unread)")


# ------------------------------------------------------------------- 2. simulator vs textbook
def best_cpu(fn: Any, repeats: int) -> tuple[float, Any]:
    """Smallest CPU time of ``repeats`` calls, and the last call's result."""
    best = float("inf")
    out = None
    for _ in range(repeats):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


def versus_textbook(jobs: int, repeats: int) -> None:
    """Print both engines' and the textbook scheduler's jobs/s, their ratios, same starts."""
    from elastic_slurm.plugins.policies.easy_backfill import EasyBackfill
    from elastic_slurm.plugins.policies.fcfs import FCFS

    general = SimConfig(engine="general")
    print(f"\n== 2. simulator vs textbook heap scheduler: first {jobs} jobs, best of {repeats}")
    print(
        f"  {'trace':30} {'policy':6} {'jobs':>6} {'compiled j/s':>13} {'general j/s':>12} "
        f"{'textbook j/s':>13} {'ratio':>6} {'general':>8} {'same start':>11}"
    )
    for name in TRACES:
        workload = trace_slice(name, jobs)
        n = len(workload.jobs)
        plain = textbook.from_simjobs(workload.jobs)
        for short, policy in (("fcfs", FCFS), ("easy", EasyBackfill)):
            Simulation(workload.jobs, policy(), workload.nodes).run()  # compiled or loaded once
            fast_s, fast = best_cpu(
                lambda p=policy, w=workload: Simulation(w.jobs, p(), w.nodes).run(), repeats
            )
            sim_s, result = best_cpu(
                lambda p=policy, w=workload: Simulation(w.jobs, p(), w.nodes, config=general).run(),
                repeats,
            )
            book_s, starts = best_cpu(
                lambda s=short, j=plain, w=workload: textbook.schedule(j, w.nodes, s), repeats
            )
            same = sum(
                1
                for r, f in zip(result.records, fast.records, strict=True)
                if starts[r.job_id] == r.start_s == f.start_s and r == f
            )
            print(
                f"  {name:30} {short:6} {n:6d} {n / fast_s:13,.0f} {n / sim_s:12,.0f} "
                f"{n / book_s:13,.0f} {book_s / fast_s:5.2f}x {book_s / sim_s:7.2f}x {same:6d}/{n}"
            )
            if fast.engine != "compiled":
                print(f"  (the compiled engine did not run: {fast.engine})")
    print(
        "  ratio = textbook CPU time / simulator CPU time (the target is 2x or more): 'ratio' for\n"
        "  the compiled engine (SimConfig(engine='auto'), the default), 'general' for the general\n"
        "  loop calling the policy objects; 'same start': jobs that start at the same second in\n"
        "  all three, with equal records in both engines"
    )


# ------------------------------------------------------------------ runs in their own process
def child(spec: dict[str, Any]) -> dict[str, Any]:
    """One measured run (in a fresh process): its times, peak memory and a few metrics."""
    if spec["workload"] == "trace":
        workload = trace_slice(spec["trace"], spec["jobs"])
    else:
        from elastic_slurm.simulator.generators.downey import lina_synthetic

        model = lina_synthetic(jobs=spec["jobs"], nodes=MACHINE, load=0.75)
        workload = model.generate(seed=1)
    if spec["fraction"]:  # preparing the workload, as generating or parsing it: not timed
        workload = make_elastic(workload, LinaConversion(elastic_fraction=spec["fraction"]), 1)
    policy = make_policy(spec["policy"])
    c0 = time.process_time()
    policy.prepare()  # a one-off load (a compiled kernel), as imports: reported apart
    prepare_s = time.process_time() - c0
    c0, w0 = time.process_time(), time.perf_counter()
    result = run(workload, policy, seed=1)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    peak = peak_bytes()
    m = result.metrics
    return {
        "jobs": len(result.records),
        "cpu_s": cpu,
        "wall_s": wall,
        "prepare_s": prepare_s,
        "peak_bytes": peak,
        "avg_wait_s": m.avg_wait_s,
        "utilization": m.utilization,
    }


def peak_bytes() -> int:
    """The peak resident memory of the calling process, bytes.

    ``VmHWM`` of ``/proc/self/status``, which starts afresh at ``exec``; ``ru_maxrss`` does not
    (a child forked from a large parent reports at least the parent's size), so it is only
    the fallback.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def in_process(spec: dict[str, Any], timeout_s: float) -> dict[str, Any] | str:
    """Run :func:`child` in a new process; its result, or why there is none."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return f"> {timeout_s:g} s"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return f"failed: {last[:90]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


# ------------------------------------------------------------------------ 3. every policy
def every_policy(jobs: int, fraction: float, timeout_s: float) -> None:
    """Print jobs/s of every registered policy on a trace slice, ``fraction`` elastic."""
    from elastic_slurm.plugins.registry import installed_registry

    names = installed_registry().names()
    print(
        f"\n== 3. every policy: first {jobs} jobs of {POLICY_TRACE}, {fraction:.0%} elastic "
        f"(Lina et al.'s conversion, seed 1), {timeout_s:g} s each"
    )
    print(
        f"  {'policy':24} {'jobs/s':>10} {'CPU s':>8} {'load s':>7} {'avg wait s':>12} {'util':>6}"
    )
    for name in names:
        spec = {
            "workload": "trace",
            "trace": POLICY_TRACE,
            "jobs": jobs,
            "policy": name,
            "fraction": fraction,
        }
        out = in_process(spec, timeout_s)
        if isinstance(out, str):
            print(f"  {name:24} {out}")
            continue
        print(
            f"  {name:24} {out['jobs'] / out['cpu_s']:10,.0f} {out['cpu_s']:8.2f} "
            f"{out['prepare_s']:7.2f} {out['avg_wait_s']:12,.0f} {out['utilization']:6.3f}"
        )
    print(
        "  target: 10,000 jobs/s or more for every policy. 'load s': the policy's one-off"
        " prepare() (loading a compiled kernel), not in its CPU s"
    )


# ------------------------------------------------------------------------ 4. growth, 300k
def growth(sizes: list[int], fraction: float, timeout_s: float) -> None:
    """Print the growth table and each run's peak memory."""
    print(
        f"\n== 4. growth: Lina et al.'s synthetic model on {MACHINE} nodes, load 0.75, seed 1; "
        f"{fraction:.0%} elastic jobs, none in the 'rigid' rows (the compiled engine)"
    )
    print(
        f"  {'policy':14} {'jobs':>8} {'CPU s':>8} {'wall s':>8} {'jobs/s':>9} "
        f"{'cost/job':>9} {'peak MiB':>9} {'avg wait s':>12}"
    )
    runs = [(p, fraction, p) for p in GROWTH_POLICIES]
    runs += [(p, 0.0, f"{p.split('_')[0]} rigid") for p in GROWTH_POLICIES[:2]]
    for policy, share, label in runs:
        base: float | None = None
        for n in sizes:
            spec = {"workload": "model", "jobs": n, "policy": policy, "fraction": share}
            out = in_process(spec, timeout_s)
            if isinstance(out, str):
                print(f"  {label:14} {n:8d} {out}")
                break
            per_job = out["cpu_s"] / out["jobs"]
            base = base or per_job
            print(
                f"  {label:14} {out['jobs']:8d} {out['cpu_s']:8.2f} {out['wall_s']:8.2f} "
                f"{out['jobs'] / out['cpu_s']:9,.0f} {per_job / base:9.2f} "
                f"{out['peak_bytes'] / 2**20:9.0f} {out['avg_wait_s']:12,.0f}"
            )
    print(
        "  cost/job: CPU time per job over that of the smallest size (1.00 = linear growth); "
        "targets at 300,000 jobs: under 60 s, under 2048 MiB\n  (peak: the run's own process, "
        "with its interpreter, imports and workload; a rigid row's time includes importing\n"
        "  Numba and loading the compiled loop, about half a second, which dominates its small "
        "sizes)"
    )


# ------------------------------------------------------------------------------- AccaSim peer
PEER_CODE = r"""
import collections, collections.abc, json, os, sys, time
os.environ["TZ"] = "UTC"
time.tzset()
for name in ("Mapping", "MutableMapping", "Sequence", "Iterable", "Callable"):
    setattr(collections, name, getattr(collections.abc, name))
from accasim.base.simulator_class import Simulator
from accasim.base.scheduler_class import FirstInFirstOut, EASYBackfilling
from accasim.base.allocator_class import FirstFit
workload, config, results, policy = sys.argv[1:5]
dispatcher = FirstInFirstOut(FirstFit()) if policy == "fcfs" else EASYBackfilling(FirstFit())
t0 = time.perf_counter()
sim = Simulator(workload, config, dispatcher, RESULTS_FOLDER_PATH=results,
                scheduling_output=True, statistics_output=True, show_statistics=False,
                LOG_LEVEL="WARNING")
sim.start_simulation()
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""
PEER_NODES = 128


def peer(jobs: int, timeout_s: float) -> None:
    """AccaSim against the simulator on SDSC-SP2 (same filtered trace, 128 nodes)."""
    print(f"\n== AccaSim 1.1.3 (peer): first {jobs} SDSC-SP2 jobs with run time and processors")
    code = "import importlib.util as u; print(bool(u.find_spec('accasim')))"
    probe = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if probe.stdout.strip() != "True":
        print("  installing accasim (pip install accasim) ...", flush=True)
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "accasim"])
        if pip.returncode != 0:
            print("  AccaSim could not be installed: skipped")
            return
    with tempfile.TemporaryDirectory(prefix="bench-sim-") as tmp:
        workdir = Path(tmp)
        path = workdir / "sdsc-filtered.swf"
        trace = read_swf(WORKLOADS / TRACES[0])
        kept = [j for j in trace.jobs if j.run_time > 0 and j.processors > 0][:jobs]
        header = SWFHeader.from_directives([("MaxNodes", PEER_NODES), ("MaxProcs", PEER_NODES)])
        write_swf(path, kept, header)
        first = min(j.submit_time for j in kept)
        for policy in ("fcfs", "easy_backfill"):
            t0 = time.perf_counter()
            result = run(path, policy, nodes=PEER_NODES)
            ours_s = time.perf_counter() - t0
            mine = {r.job_id: r.start_s + first for r in result.records}
            theirs = _accasim(path, policy, workdir, timeout_s)
            if theirs is None:
                continue
            peer_s, starts = theirs
            same = sum(1 for j in mine if j in starts and abs(mine[j] - starts[j]) < 0.5)
            print(
                f"  {policy:14} ours {ours_s:7.2f} s, AccaSim {peer_s:7.2f} s "
                f"({peer_s / ours_s:.1f}x); same start {same} of {len(mine)}"
            )


def _accasim(
    path: Path, policy: str, workdir: Path, timeout_s: float
) -> tuple[float, dict[int, float]] | None:
    config = workdir / "system.json"
    system = {
        "system_name": "SDSC-SP2",
        "start_time": 0,
        "equivalence": {"processor": {"core": 1}},
        "groups": {"g": {"core": 1}},
        "resources": {"g": PEER_NODES},
    }
    config.write_text(json.dumps(system))
    results = workdir / f"accasim-{policy}"
    name = "fcfs" if policy == "fcfs" else "easy"
    argv = [sys.executable, "-c", PEER_CODE, str(path), str(config), str(results), name]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        print(f"  AccaSim {policy}: gave up after {timeout_s:g} s")
        return None
    if proc.returncode != 0:
        print(f"  AccaSim {policy} failed: {proc.stderr.strip()[-300:]}")
        return None
    seconds = json.loads(proc.stdout.strip().splitlines()[-1])["seconds"]
    starts = {}
    for line in next(results.glob("sched-*")).read_text().splitlines():
        head, _, rest = line.split("__")  # job;user;queue__assignments__start;end;...
        start = datetime.strptime(rest.split(";")[0], "%Y-%m-%d %H:%M:%S")
        starts[int(head.split(";")[0])] = start.replace(tzinfo=UTC).timestamp()
    return seconds, starts


# -------------------------------------------------------------------------------------- main
def main() -> int:
    """Run the benchmark; print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: about a minute")
    parser.add_argument("--jobs", type=int, help="jobs per trace in 2. and 3.")
    parser.add_argument("--sizes", help="comma-separated job counts of 4.")
    parser.add_argument("--fraction", type=float, default=0.5, help="elastic fraction in 3., 4.")
    parser.add_argument("--policy-timeout", type=float, help="seconds per run in 3.")
    parser.add_argument("--growth-timeout", type=float, default=900.0, help="seconds per run, 4.")
    parser.add_argument("--peer", action="store_true", help="also AccaSim on SDSC-SP2")
    parser.add_argument("--peer-jobs", type=int, default=10_000)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return 0
    jobs = args.jobs or (2_000 if args.quick else 10_000)
    default_sizes = "1000,10000" if args.quick else "1000,10000,100000,300000"
    sizes = [int(s) for s in (args.sizes or default_sizes).split(",")]
    policy_timeout = args.policy_timeout or (20.0 if args.quick else 120.0)
    load = os.getloadavg()[0]
    print(
        f"bench/simulate.py ({'quick' if args.quick else 'full'}): python "
        f"{sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {load:.1f}"
    )
    parsing()
    versus_textbook(jobs, repeats=3)
    every_policy(jobs, args.fraction, policy_timeout)
    growth(sizes, args.fraction, args.growth_timeout)
    if args.peer:
        peer(args.peer_jobs, 3600.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
