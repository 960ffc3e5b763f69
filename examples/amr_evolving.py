"""An evolving application after Klein's AMR model: it asks for nodes as its data grows.

It gives them back as its data shrinks again.

The working set follows the *acceleration-deceleration* model of Klein's thesis (section
6.2.1): phases of 1-200 of its 1000 steps alternately accelerate the growth
(``v += 0.01``) and decelerate it (``v *= 0.95``), with Gaussian noise (sigma 2), normalised to
a maximum of 1000. The duration of a step on ``n`` nodes with ``S`` MiB of data is section
6.2.2's ``t(n, S) = A S / n + B n + C S + D``; like the thesis' synthetic AMR application
(section 6.4) the application targets an efficiency of 75 %: before each step it computes the
largest ``n`` whose efficiency ``t(1, S) / (n t(n, S))`` is at least 0.75 and asks the controller
for the difference (``ec.request_nodes``). The constants are scaled down (``--scale``) so that the
targets span 1 to a few nodes on the local cluster. Klein's profiles mostly grow; with
``--coarsen-steps K`` the run ends with ``K`` steps that retrace the profile backwards (the
mesh is coarsened), so the application also gives nodes back.

The data is real: a registered array of ``--cells`` float64 cells distributed by blocks; at
each step the first ``S / S_max`` fraction of the cells (the refined region) is updated. The
result is checked against the same computation on one process (bitwise equal expected).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

import numpy as np
from mpi4py import MPI  # noqa: F401  (initialises MPI before the runtime)

from elastic_slurm.mpi_runtime import init

# Klein's thesis, Table 6.1 (seconds, nodes, MiB)
A, B, C, D = 7.26e-3, 1.23e-4, 1.13e-6, 1.38
S_MAX_MIB = 3.16 * 1024 * 1024


def working_set(steps: int, seed: int) -> list[float]:
    """Klein's normalised working-set sizes (0..1000), sampled at ``steps`` steps.

    The model has 1000 steps (section 6.2.1); a shorter run samples it evenly, so its shape
    does not depend on the run's length.
    """
    rng = random.Random(seed)
    sizes, s, v, phase = [], 0.0, 0.0, 0
    while len(sizes) < 1000:
        for _ in range(rng.randint(1, 200)):
            v = v + 0.01 if phase % 2 == 0 else v * 0.95
            s += v + rng.gauss(0.0, 2.0)
            sizes.append(max(s, 0.0))
        phase += 1
    top = max(sizes[:1000]) or 1.0
    return [1000.0 * sizes[int(i * 1000 / steps)] / top for i in range(steps)]


def step_time(n: int, s_mib: float) -> float:
    """Section 6.2.2, eq. 6.2: duration (s) of a step on ``n`` nodes with ``s_mib`` MiB."""
    return A * s_mib / n + B * n + C * s_mib + D


def target_nodes(s_mib: float, max_nodes: int, efficiency: float = 0.75) -> int:
    """The largest node count whose efficiency stays at least ``efficiency``."""
    best = 1
    for n in range(1, max_nodes + 1):
        if step_time(1, s_mib) / (n * step_time(n, s_mib)) >= efficiency:
            best = n
    return best


def update(cells: np.ndarray, first: int, active: int, step: int) -> np.ndarray:
    """One step on this rank's cells (global indices ``first..``): the active ones change."""
    idx = np.arange(first, first + len(cells), dtype=np.float64)
    live = idx < active
    out = cells.copy()
    out[live] = out[live] * 0.5 + np.sin(idx[live] * 0.001 + step)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--cells", type=int, default=200_000, help="cells of the finest mesh")
    p.add_argument("--max-nodes", type=int, default=4)
    p.add_argument(
        "--scale",
        type=float,
        default=4e-4,
        help="S_max is the thesis' 3.16 TiB times this (smaller: fewer nodes)",
    )
    p.add_argument("--pace-s", type=float, default=0.02, help="least seconds per step")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--coarsen-steps",
        type=int,
        default=0,
        help="end with this many steps retracing the profile backwards",
    )
    p.add_argument("--check", action="store_true", help="compare with one process")
    args = p.parse_args(argv)

    ec = init()
    profile = working_set(args.steps, args.seed)
    profile += profile[::-1][: args.coarsen_steps]
    total_steps = len(profile)
    cells = ec.array("cells", (args.cells,), np.float64)
    if not ec.resumed:
        cells.local[:] = 1.0
        ec.state.update(step=0, asked=0, requests=0)
    s_max = S_MAX_MIB * args.scale
    while ec.state["step"] < total_steps:
        t0 = time.monotonic()
        step = ec.state["step"]
        s_mib = profile[step] / 1000.0 * s_max
        want = target_nodes(s_mib, args.max_nodes)
        nodes = max(1, ec.size // max(1, ec.ntasks_per_node))
        if ec.rank == 0 and want != nodes and want != ec.state["asked"]:
            ec.request_nodes(want - nodes)  # grows or gives back
            ec.state["asked"] = want
            ec.state["requests"] += 1
        first, _ = cells.rows()
        active = int(round(profile[step] / 1000.0 * args.cells))
        cells.local = update(cells.local, first, active, step)
        ec.state["step"] += 1
        time.sleep(max(0.0, args.pace_s - (time.monotonic() - t0)))
        ec.resize_point()

    parts = ec.comm.gather(cells.local, root=0)
    if ec.rank != 0:
        return 0
    final = np.concatenate(parts)
    summary = {
        "steps": args.steps,
        "ranks": ec.size,
        "resizes": ec.generation,
        "requests": ec.state["requests"],
        "checksum": float(final.sum()),
    }
    if args.check:
        ref = np.ones(args.cells)
        for step in range(total_steps):
            ref = update(ref, 0, int(round(profile[step] / 1000.0 * args.cells)), step)
        summary["max_abs_error"] = float(np.max(np.abs(final - ref)))
        summary["matches_reference"] = summary["max_abs_error"] == 0.0
    print(json.dumps(summary), flush=True)
    return 0 if summary.get("matches_reference", True) else 1


if __name__ == "__main__":
    sys.exit(main())
