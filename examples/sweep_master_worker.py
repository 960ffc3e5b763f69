"""A master-worker parameter sweep that survives resizes: no task lost, none done twice.

Rank 0 (the master) keeps the queue of parameter values; every rank (the master too) works.
In each round the master deals each rank a small batch of tasks; a rank works through its
batch, one task at a time, with a resize point after each task. When the world changes in the
middle of a round, every rank hands over what it has not done yet and what it has finished
(the ``pack`` hook); the new master puts the unfinished tasks back at the front of the queue and
keeps the results (``unpack``), and deals again to the ranks that exist now. A task is only ever
on one rank's batch or in the queue, so none is lost and none is done twice.

Each task computes a deterministic value (a short Monte-Carlo-free series) of its parameter, and
records which rank, on which host, in which generation did it. The last line printed is a JSON
summary; ``--results FILE`` writes every result.

Usage (inside a Slurm job, through the elastic launcher)::

    elastic-slurm run examples/sweep_master_worker.py --tasks 200 --batch 3 --results out.json
"""

from __future__ import annotations

import argparse
import json
import math
import socket
import sys
import time
from typing import Any

from mpi4py import MPI  # noqa: F401  (initialises MPI before the runtime)

from elastic_slurm.mpi_runtime import init


def task_value(param: int, terms: int = 20000) -> float:
    """The value of task ``param``: a partial sum of a slowly converging series."""
    x = 1.0 + param / 100.0
    return math.fsum(((-1) ** k) * x / (2 * k + 1) for k in range(terms))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=100, help="number of parameter values")
    p.add_argument("--batch", type=int, default=2, help="tasks dealt to a rank per round")
    p.add_argument("--pace-s", type=float, default=0.0, help="make each task last this long")
    p.add_argument("--results", help="write every result to this JSON file")
    args = p.parse_args(argv)

    ec = init()
    queue: list[int] = list(range(args.tasks)) if not ec.resumed else []
    results: list[dict[str, Any]] = []
    batch: list[int] = []

    def pack() -> dict[str, Any]:
        # what this rank hands over: its unfinished batch, and (master) the queue and results
        return {
            "unfinished": list(batch),
            "queue": queue if ec.rank == 0 else [],
            "results": results if ec.rank == 0 else [],
        }

    def unpack(packed: list[dict[str, Any]]) -> None:
        nonlocal queue, results, batch
        batch = []
        if ec.rank == 0:
            unfinished = [t for part in packed for t in part["unfinished"]]
            queue = sorted(unfinished) + [t for part in packed for t in part["queue"]]
            results = [r for part in packed for r in part["results"]]
        else:
            queue, results = [], []

    ec.on_resize(pack, unpack)
    host = socket.gethostname()
    while True:
        if ec.rank == 0:
            deal = [queue[i * args.batch : (i + 1) * args.batch] for i in range(ec.size)]
            del queue[: args.batch * ec.size]
        else:
            deal = None
        batch = ec.comm.scatter(deal, root=0)
        if ec.comm.allreduce(len(batch)) == 0:
            break
        resized = False
        for _ in range(args.batch):  # the same number of steps on every rank
            done: list[dict[str, Any]] = []
            if batch:
                t0 = time.monotonic()
                param = batch[0]
                done.append(
                    {
                        "task": param,
                        "value": task_value(param),
                        "rank": ec.rank,
                        "host": host,
                        "generation": ec.generation,
                    }
                )
                batch.pop(0)
                if args.pace_s > 0:
                    time.sleep(max(0.0, args.pace_s - (time.monotonic() - t0)))
            # a finished result goes to the master at once, so it is never handed over twice
            gathered = ec.comm.gather(done, root=0)
            if ec.rank == 0:
                results.extend(r for part in gathered for r in part)
            if ec.resize_point():
                resized = True
                break
        if resized:
            continue  # unpack put the unfinished tasks back: deal again to the new world
    if ec.rank != 0:
        return 0
    ids = sorted(r["task"] for r in results)
    summary = {
        "tasks": args.tasks,
        "results": len(results),
        "unique": len(set(ids)),
        "lost": sorted(set(range(args.tasks)) - set(ids)),
        "done_twice": sorted({t for t in ids if ids.count(t) > 1}),
        "ranks": ec.size,
        "resizes": ec.generation,
        "hosts": sorted({r["host"] for r in results}),
        "generations": sorted({r["generation"] for r in results}),
        "values_ok": all(abs(r["value"] - task_value(r["task"])) == 0.0 for r in results),
    }
    if args.results:
        with open(args.results, "w", encoding="utf-8") as fh:
            json.dump(sorted(results, key=lambda r: r["task"]), fh)
    print(json.dumps(summary), flush=True)
    return 0 if not summary["lost"] and not summary["done_twice"] else 1


if __name__ == "__main__":
    sys.exit(main())
