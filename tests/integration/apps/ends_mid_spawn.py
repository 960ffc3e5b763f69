"""A malleable program that ends as soon as a grow's new ranks are being spawned.

A fixture of ``test_runtime_live.py``: it calls ``ec.resize_point()`` until the runtime has
started spawning in the background for an order, then returns at once, before any resize
point could take the new ranks in. The new ranks must leave and the job must end.
"""

from __future__ import annotations

import time


def main() -> None:
    import numpy as np
    from mpi4py import MPI  # noqa: F401 - MPI is initialised before the runtime

    from elastic_slurm.mpi_runtime import init

    ec = init()
    ec.array("u", (64, 8), np.float64)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and ec._spawn.pending is None:
        ec.resize_point()
        time.sleep(0.01)
    state = "under way" if ec._spawn.pending is not None else "never started"
    print(f"ended with a spawn {state} at {ec.size} rank(s)", flush=True)


if __name__ == "__main__":
    main()
