"""A job of a workload trace, replayed for real: a malleable mpi4py program with a work clock.

``elastic-slurm validate`` (``docs/live-validation.md``) submits one of these per trace job. The
job has a fixed amount of *work*: ``--runtime-s`` seconds on ``--ref-nodes`` nodes (the trace
job's run time and size, scaled to the local cluster). On ``n`` nodes it does that work at the
rate ``S(n) / S(ref_nodes)`` per second, with the linear speedup ``S(n) = min(n, max_nodes)``
(linear up to its maximum size, no gain beyond). So a job that the controller grows from 1 to
2 nodes halfway through finishes its second half in half the time, as in the simulator
(:meth:`elastic_slurm.model.speedup.SpeedupModel.runtime_s`: work is conserved, only the rate
changes).

What it does with the CPU: this machine's nodes share two cores, so "computing" is mostly
waiting on the work clock. Each step of about ``--step-s`` seconds (0.5) every rank updates
its rows of a small distributed array (``--rows`` x 64 doubles; a few microseconds of real
work), sleeps the rest of the step (every rank the same time, decided by rank 0, so no rank
spins in a collective while another sleeps), agrees on the array's checksum
(``Allreduce``), adds the step's wall time times its rate to the work done, and calls the
resize point. Time spent resizing (checkpoint, relaunch, restore; spawn, merge) is not counted
as work: it is the job's resize cost.

The work clock starts when Slurm started the job (``squeue``'s start time, read once by rank 0
on the first start), not when Python got going: a trace's run time is the job's wall time in
its allocation, launch included. When Slurm's start time cannot be read, the clock starts at
``init()``.

The last line printed by rank 0 is a JSON summary (its own claims, for reading the output; the
validation takes every number from Slurm's accounting and the controller's journal).

Usage (inside a Slurm job, through the elastic launcher)::

    elastic-slurm run examples/trace_job.py --runtime-s 20 --ref-nodes 2 --max-nodes 4
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from elastic_slurm.mpi_runtime import init


def rate(nodes: int, ref_nodes: int, max_nodes: int) -> float:
    """Work per second on ``nodes`` nodes, relative to ``ref_nodes`` (linear up to the maximum)."""
    return min(nodes, max_nodes) / min(ref_nodes, max_nodes)


def slurm_start_s() -> float | None:
    """When Slurm started this job (seconds since the epoch), ``None`` when unknown."""
    job = os.environ.get("SLURM_JOB_ID")
    if not job:
        return None
    try:
        out = subprocess.run(
            ["squeue", "-h", "-j", job, "-o", "%S"],
            capture_output=True,
            text=True,
            timeout=10,
            env={**os.environ, "SLURM_TIME_FORMAT": "%s"},
            check=False,
        ).stdout.strip()
        return float(out) if out.isdigit() else None
    except (OSError, subprocess.SubprocessError):
        return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runtime-s", type=float, required=True, help="run time on --ref-nodes (s)")
    p.add_argument("--ref-nodes", type=int, default=1, help="size of --runtime-s (nodes)")
    p.add_argument("--max-nodes", type=int, default=0, help="no speedup beyond (0: ref-nodes)")
    p.add_argument("--step-s", type=float, default=0.5, help="seconds between resize points")
    p.add_argument("--rows", type=int, default=256, help="rows of the distributed array")
    args = p.parse_args(argv)
    max_nodes = args.max_nodes or args.ref_nodes

    ec = init()
    x = ec.array("x", (args.rows, 64), np.float64)
    if not ec.resumed:
        start, stop = x.rows()
        x.local[:] = np.arange(start, stop, dtype=np.float64)[:, None] / args.rows
        ec.state.update(done=0.0, steps=0, sizes="")  # state holds scalars only
        if ec.rank == 0:
            began = slurm_start_s()
            ago = max(0.0, time.time() - began) if began is not None else 0.0
            # launch time was spent at the start size: it counts as work done
            ec.state["done"] = ago * rate(ec.size, args.ref_nodes, max_nodes) / args.runtime_s
            ec.state["launch_s"] = round(ago, 3)
    if ec.rank == 0:
        ec.state["sizes"] = f"{ec.state['sizes']},{ec.size}".lstrip(",")
    checksum = None
    while True:
        # rank 0 decides whether to go on and how long this step lasts; every rank sleeps it
        if ec.rank == 0:
            r = rate(ec.size, args.ref_nodes, max_nodes)
            left_s = max(0.0, (1.0 - ec.state["done"]) * args.runtime_s / r)
            plan = min(args.step_s, left_s) if ec.state["done"] < 1.0 - 1e-9 else -1.0
        else:
            plan = None
        plan = ec.comm.bcast(plan, root=0)
        if plan < 0:
            break
        t0 = time.monotonic()
        x.local = 0.5 * x.local + 0.25  # the step's real work: tiny, on every rank
        time.sleep(max(0.0, plan - (time.monotonic() - t0)))
        checksum = ec.comm.allreduce(float(x.local.sum()))
        if ec.rank == 0:
            dt = time.monotonic() - t0
            ec.state["done"] += dt * rate(ec.size, args.ref_nodes, max_nodes) / args.runtime_s
            ec.state["steps"] += 1
        if ec.resize_point() and ec.rank == 0:  # the world changed: ec.comm, x.local are new
            ec.state["sizes"] = f"{ec.state['sizes']},{ec.size}".lstrip(",")

    if ec.rank == 0:
        summary = {
            "runtime_s": args.runtime_s,
            "ref_nodes": args.ref_nodes,
            "steps": ec.state["steps"],
            "sizes": [int(n) for n in ec.state["sizes"].split(",") if n],
            "resizes": ec.generation,
            "launch_s": ec.state.get("launch_s"),
            "checksum": checksum,
        }
        print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
