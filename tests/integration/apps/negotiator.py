"""A malleable test application that answers the controller's offers from a script.

``negotiator.py --script counter:1,accept,reject --deaf-after 2 --stop-file STOP``: the n-th
offer gets the n-th answer of the script (``accept``, ``reject``, ``counter:K``; past its end:
accept). Once it has followed ``--deaf-after`` orders it stops reaching resize points (a job
that ignores the controller). It runs until ``--stop-file`` exists, carrying a distributed
array and its counters across every resize, and prints one JSON line per generation on rank 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
from mpi4py import MPI  # noqa: F401  (initialises MPI before the runtime)

from elastic_slurm.model.offer import Answer, AnswerKind, Offer
from elastic_slurm.mpi_runtime import init


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--script", default="")
    p.add_argument("--deaf-after", type=int, default=0)
    p.add_argument("--deaf", action="store_true", help="never reach a resize point")
    p.add_argument("--stop-file", required=True)
    p.add_argument("--limit-s", type=float, default=240.0)
    args = p.parse_args()
    script = [s for s in args.script.split(",") if s]

    ec = init()
    data = ec.array("data", (64,), np.int64)
    if not ec.resumed:
        start, stop = data.rows()
        data.local = np.arange(start, stop, dtype=np.int64)
        ec.state.update(offers=0, t0=time.time())

    def hook(offer: Offer) -> Answer:
        n = int(ec.state["offers"])
        ec.state["offers"] = n + 1
        word = script[n] if n < len(script) else "accept"
        if word.startswith("counter:"):
            count = int(word.split(":", 1)[1])
            return Answer(number=offer.number, answer=AnswerKind.COUNTER, count=count)
        return Answer(number=offer.number, answer=AnswerKind(word), reason=f"script step {n}")

    ec.on_offer(hook)
    if ec.rank == 0:
        print(json.dumps({"generation": ec.generation, "ranks": ec.size}), flush=True)
    while not os.path.exists(args.stop_file) and time.time() - ec.state["t0"] < args.limit_s:
        time.sleep(0.2)
        if args.deaf or (args.deaf_after and ec.next_seq > args.deaf_after):
            continue  # deaf from now on: never reaches a resize point again
        ec.resize_point()
    total = ec.comm.allreduce(int(data.local.sum()))
    if ec.rank == 0:
        print(json.dumps({"done": True, "ranks": ec.size, "sum_ok": total == 64 * 63 // 2}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
