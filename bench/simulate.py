"""Simulator speed and agreement: ours against AccaSim on SDSC-SP2, same trace, same policies.

Runs the full SDSC-SP2 trace (``shared/workloads/SDSC-SP2-1998-4.2-cln.swf.gz``) with EASY
backfilling and with FCFS in our simulator and in AccaSim 1.1.3 (PyPI), in one run, then Lina
et al.'s elastic policy (``lina_elastic``, half the jobs elastic) in ours only, and prints:

* jobs per second of each, and the speed ratio (AccaSim's time over ours, both measured from
  reading the trace to the last job's end);
* how far the two agree: average wait and turnaround, the share of jobs started at the same
  second, and the largest difference of a job's start.

Both simulators get the same input: the trace less the jobs AccaSim cannot take (run time
<= 0 or no processor count, see ``shared/docs/PEERS.md``), written to one SWF file they both
read, on 128 one-processor nodes. AccaSim's FCFS is expected to agree start for start. Its
"EASY" is not standard EASY (no reservation protects the blocked head job during backfilling;
the head is retried only at events at or after its computed start), so the averages differ by
a few percent and the maximum waits much more.

AccaSim is installed into this environment when missing (``pip install accasim``); it does not
import on Python 3.10+ without ``collections.Mapping`` and friends, which this script restores
before importing it (AccaSim itself is left unchanged).

Usage::

    .venv/bin/python bench/simulate.py               # full trace, both policies, both simulators
    .venv/bin/python bench/simulate.py --jobs 5000   # the first 5000 jobs only
    .venv/bin/python bench/simulate.py --no-peer     # ours only

Not part of the test suite. AccaSim needs minutes on the full trace (FCFS, whose queue grows to
thousands of jobs on SDSC-SP2, the longest).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from elastic_slurm.simulator import SWFHeader, read_swf, run, write_swf  # noqa: E402

TRACE = Path("/work/shared/workloads/SDSC-SP2-1998-4.2-cln.swf.gz")
NODES = 128


def filtered_trace(source: Path, out: Path, max_jobs: int | None) -> int:
    """Write the jobs both simulators can take; return how many."""
    trace = read_swf(source)
    jobs = [j for j in trace.jobs if j.run_time > 0 and j.processors > 0]
    if max_jobs is not None:
        jobs = jobs[:max_jobs]
    header = SWFHeader.from_directives([("MaxNodes", NODES), ("MaxProcs", NODES)])
    write_swf(out, jobs, header)
    return len(jobs)


def ours(path: Path, policy: str) -> tuple[float, dict[int, tuple[float, float, float]]]:
    """Seconds from reading to the end, and ``{job: (submit, start, end)}`` (trace seconds)."""
    t0 = time.perf_counter()
    result = run(path, policy, nodes=NODES)
    elapsed = time.perf_counter() - t0
    first = min(j.submit_time for j in read_swf(path).jobs)
    records = {
        r.job_id: (r.submit_s + first, r.start_s + first, r.end_s + first) for r in result.records
    }
    return elapsed, records


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


def ensure_accasim() -> bool:
    """Install AccaSim into this environment if it is missing; True when importable."""
    code = "import importlib.util as u; print(bool(u.find_spec('accasim')))"
    probe = [sys.executable, "-c", code]
    if subprocess.run(probe, capture_output=True, text=True).stdout.strip() == "True":
        return True
    print("installing accasim (pip install accasim) ...", flush=True)
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "accasim"])
    return pip.returncode == 0


def accasim(
    path: Path, policy: str, workdir: Path, timeout_s: float
) -> tuple[float, dict[int, tuple[float, float, float]]] | None:
    """Run AccaSim in a subprocess; seconds and ``{job: (submit, start, end)}``, or None."""
    config = workdir / "system.json"
    config.write_text(
        json.dumps(
            {
                "system_name": "SDSC-SP2",
                "start_time": 0,
                "equivalence": {"processor": {"core": 1}},
                "groups": {"g": {"core": 1}},
                "resources": {"g": NODES},
            }
        )
    )
    results = workdir / f"accasim-{policy}"
    argv = [sys.executable, "-c", PEER_CODE, str(path), str(config), str(results), policy]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        print(f"  AccaSim {policy}: gave up after {timeout_s:g} s")
        return None
    if proc.returncode != 0:
        print(f"  AccaSim {policy} failed:\n{proc.stderr[-2000:]}")
        return None
    seconds = json.loads(proc.stdout.strip().splitlines()[-1])["seconds"]
    records = {}
    sched = next(results.glob("sched-*"))
    for line in sched.read_text().splitlines():
        # job;user;queue__assignments__start;end;nodes;cpus;mem;expected;
        head, _, rest = line.split("__")
        job, _, queued = head.split(";")
        start, end = rest.split(";")[:2]
        records[int(job)] = tuple(_epoch(t) for t in (queued, start, end))
    return seconds, records


def _epoch(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()


def averages(records: dict[int, tuple[float, float, float]]) -> tuple[float, float, float]:
    """Average wait, average turnaround, maximum wait (seconds)."""
    waits = [b - s for s, b, _ in records.values()]
    tats = [e - s for s, _, e in records.values()]
    return sum(waits) / len(waits), sum(tats) / len(tats), max(waits)


def compare(name: str, a: dict, b: dict) -> None:  # type: ignore[type-arg]
    """Print how far two schedules ``{job: (submit, start, end)}`` agree."""
    common = sorted(set(a) & set(b))
    same = sum(1 for j in common if abs(a[j][1] - b[j][1]) < 0.5)
    worst = max((abs(a[j][1] - b[j][1]), j) for j in common)
    wa, ta, ma = averages(a)
    wb, tb, mb = averages(b)
    print(f"  {name}: {len(common)} jobs in both ({len(a)} ours, {len(b)} AccaSim)")
    print(f"    average wait        ours {wa:12.1f} s   AccaSim {wb:12.1f} s   diff {_pct(wa, wb)}")
    print(f"    average turnaround  ours {ta:12.1f} s   AccaSim {tb:12.1f} s   diff {_pct(ta, tb)}")
    print(f"    maximum wait        ours {ma:12.1f} s   AccaSim {mb:12.1f} s")
    print(
        f"    same start (to the second): {same} of {len(common)} "
        f"({100 * same / len(common):.2f} %); largest start difference {worst[0]:.0f} s "
        f"(job {worst[1]})"
    )


def _pct(ours_value: float, peer_value: float) -> str:
    if peer_value == 0:
        return "n/a"
    return f"{100 * (ours_value - peer_value) / peer_value:+.2f} %"


def main() -> int:
    """Run the benchmark; print the results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--jobs", type=int, default=None, help="only the first JOBS jobs")
    parser.add_argument("--no-peer", action="store_true", help="skip AccaSim")
    parser.add_argument(
        "--peer-timeout", type=float, default=3600.0, help="seconds per AccaSim run"
    )
    parser.add_argument(
        "--policies", default="easy_backfill,fcfs", help="comma-separated (easy_backfill, fcfs)"
    )
    parser.add_argument(
        "--elastic-fraction",
        type=float,
        default=0.5,
        help="also run lina_elastic with this fraction of jobs elastic (0: skip)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-sim-") as tmp:
        workdir = Path(tmp)
        path = workdir / "sdsc-filtered.swf"
        count = filtered_trace(args.trace, path, args.jobs)
        print(f"trace {args.trace.name}: {count} jobs with run time > 0 and processors > 0")
        print(f"machine: {NODES} nodes; python {sys.version.split()[0]}; pid {os.getpid()}")
        peer_ok = not args.no_peer and ensure_accasim()
        for policy in args.policies.split(","):
            print(f"\n== {policy}")
            seconds, mine = ours(path, policy)
            print(f"  ours:    {seconds:8.2f} s  {count / seconds:10.0f} jobs/s")
            if not peer_ok:
                continue
            peer = accasim(path, policy, workdir, args.peer_timeout)
            if peer is None:
                continue
            peer_s, theirs = peer
            print(f"  AccaSim: {peer_s:8.2f} s  {count / peer_s:10.0f} jobs/s")
            print(f"  speed ratio (AccaSim time / ours): {peer_s / seconds:.1f}x")
            compare(policy, mine, theirs)
        if args.elastic_fraction > 0:
            elastic(path, count, args.elastic_fraction)
    return 0


def elastic(path: Path, count: int, fraction: float) -> None:
    """Lina et al.'s elastic policy on the same trace, ``fraction`` of it made elastic.

    AccaSim has no elastic jobs, so there is no peer: this prints our speed, beside EASY's
    above, and the policy's effect on the averages against EASY on the rigid trace.
    """
    print(f"\n== lina_elastic ({fraction:.0%} of the jobs elastic, Lina et al. section 5.1)")
    t0 = time.perf_counter()
    result = run(path, "lina_elastic", nodes=NODES, elastic_fraction=fraction, seed=1)
    seconds = time.perf_counter() - t0
    m = result.summary()
    print(f"  ours:    {seconds:8.2f} s  {count / seconds:10.0f} jobs/s  (no peer)")
    print(
        f"  average turnaround {m['avg_turnaround_s']:,.0f} s, wait {m['avg_wait_s']:,.0f} s, "
        f"bounded slowdown {m['avg_bounded_slowdown']:.2f}, utilisation {m['utilization']:.4f}, "
        f"{m['expansions']} expansions, {m['shrinks']} shrinks"
    )


if __name__ == "__main__":
    sys.exit(main())
