"""Bring a job's Slurm environment up to date after Slurm resized its allocation.

After a resize the variables a batch script inherited still describe the old allocation, and
``srun`` then refuses to start (``SLURM_JOB_NUM_NODES ... conflicts with allocated node count``).
``scontrol update`` writes ``slurm_job_<id>_resize.sh`` to fix that, but only when run with the
job's environment and only into the current directory; this module computes the same update
from the node list Slurm reports, so any process of the job can apply it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from elastic_slurm import envvars
from elastic_slurm.adapter.hostlist import compress

if TYPE_CHECKING:
    from elastic_slurm.adapter.slurm_cli import SlurmCLI

#: How long (seconds) a job's own Slurm queries and commands keep retrying while slurmctld
#: does not answer (``ELASTIC_SLURM_SLURM_RETRY_S``): a job rides out a slurmctld restart or an
#: overloaded slurmctld instead of failing (a soak lost a finished job to a 20 s window).
JOB_SLURM_RETRY_S = 300.0


def job_slurm(env: Mapping[str, str] | None = None) -> SlurmCLI:
    """Slurm's commands on this node, as the job's processes (launcher, launch agent) use them.

    Transient failures (slurmctld down or overloaded) are retried for
    ``ELASTIC_SLURM_SLURM_RETRY_S`` seconds (default :data:`JOB_SLURM_RETRY_S`).

    Raises
    ------
    ValueError
        ``ELASTIC_SLURM_SLURM_RETRY_S`` is not a number.
    """
    from elastic_slurm.adapter.slurm_cli import SlurmCLI
    from elastic_slurm.adapter.transport.local import LocalTransport

    retry_s = envvars.get_float("SLURM_RETRY_S", JOB_SLURM_RETRY_S, env)
    return SlurmCLI(LocalTransport(), retry_s=max(1.0, min(retry_s, 3600.0)))


#: Variables that describe the allocation's size and are stale after a resize.
STALE = (
    "SLURM_NNODES",
    "SLURM_JOB_NUM_NODES",
    "SLURM_NODELIST",
    "SLURM_JOB_NODELIST",
    "SLURM_NTASKS",
    "SLURM_NPROCS",
    "SLURM_TASKS_PER_NODE",
    "SLURM_JOB_CPUS_PER_NODE",
)


def cpus_per_node_expr(cpus: Sequence[int]) -> str:
    """Slurm's compressed CPU-count list, e.g. ``[1, 1, 2]`` gives ``1(x2),2``.

    >>> cpus_per_node_expr([1, 1, 1, 1])
    '1(x4)'
    """
    parts: list[str] = []
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[i]:
            j += 1
        count = j - i + 1
        parts.append(f"{cpus[i]}(x{count})" if count > 1 else str(cpus[i]))
        i = j + 1
    return ",".join(parts)


def resized_env(
    env: Mapping[str, str],
    nodes: Sequence[str],
    cpus_per_node: int,
    tasks_per_node: int | None = None,
) -> dict[str, str]:
    """``env`` updated for an allocation of ``nodes`` with ``cpus_per_node`` CPUs each.

    Sets what ``slurm_job_<id>_resize.sh`` sets (node list, node count, CPUs per node) and
    drops the task counts it unsets; with ``tasks_per_node``, sets the task counts for that
    many tasks on every node instead (Open MPI's ``mpirun`` reads ``SLURM_TASKS_PER_NODE``).

    >>> e = resized_env({"SLURM_NTASKS": "2", "HOME": "/root"}, ["n1", "n2", "n3"], 1)
    >>> e["SLURM_JOB_NODELIST"], e["SLURM_NNODES"], "SLURM_NTASKS" in e, e["HOME"]
    ('n[1-3]', '3', False, '/root')
    >>> resized_env({}, ["n1", "n2"], 2, tasks_per_node=2)["SLURM_TASKS_PER_NODE"]
    '2(x2)'
    """
    if not nodes:
        raise ValueError("an allocation has at least one node")
    out = {k: v for k, v in env.items() if k not in STALE}
    expr = compress(nodes)
    out.update(
        SLURM_NODELIST=expr,
        SLURM_JOB_NODELIST=expr,
        SLURM_NNODES=str(len(nodes)),
        SLURM_JOB_NUM_NODES=str(len(nodes)),
        SLURM_JOB_CPUS_PER_NODE=cpus_per_node_expr([cpus_per_node] * len(nodes)),
    )
    if tasks_per_node is not None:
        total = str(tasks_per_node * len(nodes))
        out.update(
            SLURM_TASKS_PER_NODE=cpus_per_node_expr([tasks_per_node] * len(nodes)),
            SLURM_NTASKS=total,
            SLURM_NPROCS=total,
        )
    return out


def without_allocation_size(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without the size variables, so ``srun`` asks slurmctld for the allocation."""
    return {k: v for k, v in env.items() if k not in STALE}


_MAX_JOB_ID = 2**32  # Slurm's job ids are 32-bit


def holders_text(holders: Mapping[str, int]) -> str:
    """``holders`` (node -> job id) as ``ELASTIC_SLURM_NODE_HOLDERS`` carries them.

    The launcher sets that variable for ``mpirun``: which allocation holds each node of a
    generation, as Slurm last told it, so that the launch agent of each daemon need not ask
    Slurm itself (:mod:`.rsh_agent`).

    >>> holders_text({"n1": 12, "n3": 15})
    'n1=12,n3=15'
    """
    return ",".join(f"{node}={job}" for node, job in holders.items())


def parse_holders(text: str | None) -> dict[str, int]:
    """The node -> job id map of ``ELASTIC_SLURM_NODE_HOLDERS``; empty if absent or malformed.

    A malformed value (a word without ``=``, a job id that is not a positive 32-bit number,
    a node name with characters Slurm's host names do not have) gives an empty map as a
    whole: the agent then asks Slurm, as it did before the map existed.

    >>> parse_holders("n1=12,n3=15")
    {'n1': 12, 'n3': 15}
    >>> parse_holders("n1=12,n3")
    {}
    """
    out: dict[str, int] = {}
    for word in (text or "").split(","):
        node, sep, job = word.partition("=")
        if not sep or not node or not job.isdigit() or not 0 < int(job) < _MAX_JOB_ID:
            return {}
        if not all(c.isalnum() or c in "-_." for c in node):
            return {}
        out[node] = int(job)
    return out
