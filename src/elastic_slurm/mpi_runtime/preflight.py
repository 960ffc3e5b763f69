"""Check that the nodes a grow added can run the job's processes, before using them.

Starting ranks on a node that died after Slurm granted it would make ``mpirun`` abort the whole
job (Open MPI 4.1 cannot lose a daemon). So before spawning onto added nodes, or restarting on
them, the runtime starts a trivial step on each (``srun --overlap ... true``, in the allocation
that holds the node) with a deadline. A node that does not answer makes the grow fail: the
application goes on at its old size and the controller gives the grant back.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from elastic_slurm.mpi_runtime.slurm_env import without_allocation_size

log = logging.getLogger(__name__)

#: slurmd's answer to a step of a job on a node given back to the job right after it left it
#: (seen here when a shrink to 1 node was followed at once by a grow to 4): asked again
#: after a second, up to :data:`REVOKED_RETRIES` times.
REVOKED = "Job credential revoked"
REVOKED_RETRIES = 3


def probe_argv(host: str, job_id: int) -> list[str]:
    """The step that proves ``host`` runs processes of allocation ``job_id``.

    >>> probe_argv("n3", 42)[:3]
    ['srun', '--jobid=42', '--overlap']
    """
    return [
        "srun",
        f"--jobid={job_id}",
        "--overlap",
        "--nodes=1",
        "--ntasks=1",
        f"--nodelist={host}",
        "--mpi=none",
        "--quit-on-interrupt",
        "true",
    ]


def unreachable(
    hosts: Mapping[str, int], timeout_s: float = 20.0, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The hosts (mapped to their allocation) where a trivial step fails, with the reason.

    All hosts are tried at once; each gets ``timeout_s`` seconds.
    """
    base = without_allocation_size(os.environ if env is None else env)

    def try_one(item: tuple[str, int]) -> tuple[str, str | None]:
        host, job = item
        for attempt in range(REVOKED_RETRIES + 1):
            try:
                res = subprocess.run(
                    probe_argv(host, job),
                    capture_output=True,
                    text=True,
                    timeout=timeout_s,
                    env=base,
                    check=False,
                )
            except subprocess.TimeoutExpired:
                return host, f"no answer within {timeout_s:g} s"
            except OSError as exc:
                return host, f"srun could not start: {exc}"
            if res.returncode == 0:
                return host, None
            if REVOKED in res.stderr and attempt < REVOKED_RETRIES:
                time.sleep(1.1)  # a node given back to the job within the second it left it
                continue
            return host, (res.stderr.strip() or f"exit status {res.returncode}")[-300:]
        return host, None  # pragma: no cover - the loop always returns

    if not hosts:
        return {}
    with ThreadPoolExecutor(max_workers=min(8, len(hosts))) as pool:
        results = list(pool.map(try_one, hosts.items()))
    bad = {h: why for h, why in results if why is not None}
    for host, why in bad.items():
        log.warning("node %s cannot run the job's processes: %s", host, why)
    return bad


def check_hosts(hosts: Sequence[str], job_id: int, timeout_s: float = 20.0) -> dict[str, str]:
    """:func:`unreachable` for ``hosts`` of job ``job_id`` (its sibling allocations included)."""
    from elastic_slurm.adapter.slurm_cli import SlurmCLI
    from elastic_slurm.adapter.transport.local import LocalTransport

    holders = SlurmCLI(LocalTransport()).elastic_nodes(job_id)
    missing = {h: "not in the job's allocation" for h in hosts if h not in holders}
    return {**missing, **unreachable({h: holders[h] for h in hosts if h in holders}, timeout_s)}
