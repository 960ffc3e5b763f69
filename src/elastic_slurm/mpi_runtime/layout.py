"""Where a job's ranks run: a :class:`Layout` from PMIx, else from the environment.

Both sources describe the same thing, the set of processes started together (the *launch*):

* under ``srun --mpi=pmix`` that is the **step** (``scope="step"``), not the allocation: a
  step may use fewer nodes than the job holds. The allocation's nodes come from Slurm's
  ``SLURM_JOB_NODELIST`` and are kept apart in :attr:`Layout.allocation_nodes`;
* under ``mpirun`` (the elastic launcher) it is ``mpirun``'s job (``scope="mpirun"``).

With PMIx (:mod:`.pmix`) every fact is the server's: ``PMIX_JOB_SIZE``, each rank's
``PMIX_HOSTNAME``, ``PMIX_LOCAL_PEERS``, ``PMIX_LOCAL_RANK`` (about 1 ms for all of them on 4
ranks here). Without it:

* in a Slurm step: ``SLURM_STEP_NUM_TASKS``, ``SLURM_PROCID``, ``SLURM_LOCALID``,
  ``SLURM_STEP_NODELIST`` and ``SLURM_STEP_TASKS_PER_NODE``; ranks are placed by
  ``SLURM_DISTRIBUTION`` (``block``, the default, or ``cyclic``; other distributions are
  computed as block and :attr:`Layout.exact` is False);
* under ``mpirun``: ``OMPI_COMM_WORLD_SIZE``, ``_RANK``, ``_LOCAL_RANK`` and ``_LOCAL_SIZE``;
  the rank-to-node map assumes mpirun's by-slot placement of the same number of ranks on
  each node (``ELASTIC_SLURM_NTASKS_PER_NODE``, else the local size), on the nodes in the
  elastic launcher's order (``ELASTIC_SLURM_LAUNCH_HOST`` first, then the allocation's);
* otherwise a single process on this host (``scope="singleton"``).

Nodes are listed in the order of their lowest rank and :attr:`Layout.node_id` indexes that
list, so both sources give equal layouts (PMIx's own ``PMIX_NODEID`` is the daemon's number
under ``mpirun``, which starts at 1 when ``mpirun`` runs off the job's nodes).
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from elastic_slurm import envvars
from elastic_slurm.adapter.hostlist import expand

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Layout:
    """The ranks of this launch and their nodes.

    Attributes
    ----------
    source
        ``pmix`` or ``env``.
    scope
        ``step`` (an ``srun`` step), ``mpirun`` (mpirun's job) or ``singleton``.
    size
        Number of ranks.
    rank
        This process's rank.
    rank_hosts
        The host of every rank, in rank order.
    nodes
        The launch's nodes, in the order of their lowest rank.
    node_id
        Index of this process's node in :attr:`nodes`.
    local_ranks
        The ranks on this node (ascending).
    local_rank
        This process's index among :attr:`local_ranks`.
    allocation_nodes
        The job's allocation (``SLURM_JOB_NODELIST``; empty outside a job). Not the step's.
    exact
        False when the environment could not say where every rank runs (a guess was made).
    """

    source: str
    scope: str
    size: int
    rank: int
    rank_hosts: tuple[str, ...]
    nodes: tuple[str, ...]
    node_id: int
    local_ranks: tuple[int, ...]
    local_rank: int
    allocation_nodes: tuple[str, ...] = ()
    exact: bool = True

    @property
    def host(self) -> str:
        """The host of this process."""
        return self.rank_hosts[self.rank]

    def same_placement(self, other: Layout) -> bool:
        """Whether ``other`` describes the same ranks on the same nodes (source aside)."""
        keys = ("scope", "size", "rank", "rank_hosts", "nodes", "node_id", "local_ranks")
        return all(getattr(self, k) == getattr(other, k) for k in keys) and (
            self.local_rank == other.local_rank
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return asdict(self)


def _build(
    source: str,
    scope: str,
    rank: int,
    rank_hosts: Sequence[str],
    env: Mapping[str, str],
    exact: bool = True,
) -> Layout:
    hosts = tuple(rank_hosts)
    nodes = tuple(dict.fromkeys(hosts))
    mine = hosts[rank]
    local = tuple(r for r, h in enumerate(hosts) if h == mine)
    return Layout(
        source=source,
        scope=scope,
        size=len(hosts),
        rank=rank,
        rank_hosts=hosts,
        nodes=nodes,
        node_id=nodes.index(mine),
        local_ranks=local,
        local_rank=local.index(rank),
        allocation_nodes=expand(env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")),
        exact=exact,
    )


def tasks_per_node(expr: str) -> list[int]:
    """Slurm's compressed count list (``SLURM_STEP_TASKS_PER_NODE``) expanded.

    >>> tasks_per_node("2(x2),1")
    [2, 2, 1]

    Raises
    ------
    ValueError
        ``expr`` is not such a list.
    """
    counts: list[int] = []
    for part in expr.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:\(x(\d+)\))?\s*", part)
        if m is None:
            raise ValueError(f"not a Slurm task-count list: {expr!r}")
        counts.extend([int(m.group(1))] * int(m.group(2) or 1))
    return counts


def place(nodes: Sequence[str], counts: Sequence[int], distribution: str = "block") -> list[str]:
    """The host of each rank for ``counts[i]`` ranks on ``nodes[i]`` (block or cyclic).

    >>> place(["a", "b"], [2, 1]), place(["a", "b"], [2, 1], "cyclic")
    (['a', 'a', 'b'], ['a', 'b', 'a'])
    """
    if len(nodes) != len(counts):
        raise ValueError(f"{len(nodes)} node(s) but {len(counts)} task count(s)")
    if not distribution.startswith("cyclic"):
        return [n for n, c in zip(nodes, counts, strict=True) for _ in range(c)]
    left, out = list(counts), []
    while any(left):
        for i, node in enumerate(nodes):
            if left[i]:
                out.append(node)
                left[i] -= 1
    return out


def from_env(env: Mapping[str, str] | None = None, hostname: str | None = None) -> Layout:
    """The layout from environment variables (see the module docstring).

    Raises
    ------
    ValueError
        A variable is malformed, or the counts disagree with each other.
    """
    env = os.environ if env is None else env
    me = hostname or socket.gethostname()
    if "OMPI_COMM_WORLD_SIZE" in env:  # before SLURM_*: mpirun's daemons run in Slurm steps
        size = int(env["OMPI_COMM_WORLD_SIZE"])
        rank = int(env["OMPI_COMM_WORLD_RANK"])
        per = envvars.get_int("NTASKS_PER_NODE", 0, env) or int(
            env.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1")
        )
        nnodes = -(-size // per)
        launch_host = envvars.get_str("LAUNCH_HOST", None, env)
        alloc = list(expand(env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")))
        order = ([launch_host] if launch_host else []) + [n for n in alloc if n != launch_host]
        exact = len(order) >= nnodes
        nodes = order[:nnodes] if exact else [me] * nnodes
        hosts = [nodes[r // per] for r in range(size)]
        if hosts[rank] != me:  # the guess is wrong about this very process
            hosts[rank], exact = me, False
        return _build("env", "mpirun", rank, hosts, env, exact)
    if "SLURM_PROCID" in env and "SLURM_STEP_NODELIST" in env:
        nodes = expand(env["SLURM_STEP_NODELIST"])
        counts = tasks_per_node(env.get("SLURM_STEP_TASKS_PER_NODE") or "1")
        dist = env.get("SLURM_DISTRIBUTION", "block")
        hosts = place(nodes, counts, dist)
        size = int(env.get("SLURM_STEP_NUM_TASKS") or env.get("SLURM_NTASKS") or len(hosts))
        if size != len(hosts):
            raise ValueError(f"{size} task(s) but the task counts add up to {len(hosts)}")
        exact = dist.split(",")[0] in ("block", "cyclic")
        return _build("env", "step", int(env["SLURM_PROCID"]), hosts, env, exact)
    return _build("env", "singleton", 0, [me], env)


def from_pmix(client: Any, env: Mapping[str, str] | None = None) -> Layout:
    """The layout from a connected :class:`~.pmix.Client` (one ``PMIx_Get`` per rank).

    Raises
    ------
    elastic_slurm.mpi_runtime.pmix.PmixError
        The server does not answer a key every PMIx server provides.
    """
    from elastic_slurm.mpi_runtime import pmix

    env = os.environ if env is None else env
    size = int(client.get(pmix.PMIX_JOB_SIZE))
    hosts = [str(client.get(pmix.PMIX_HOSTNAME, r)) for r in range(size)]
    scope = "step" if client.nspace.startswith("slurm.pmix.") else "mpirun"
    layout = _build("pmix", scope, client.rank, hosts, env)
    peers = client.get(pmix.PMIX_LOCAL_PEERS)
    if peers:  # the server's own list of this node's ranks wins over the derived one
        local = tuple(sorted(int(p) for p in str(peers).split(",") if p.strip()))
        lrank = client.get(pmix.PMIX_LOCAL_RANK, client.rank, missing=local.index(client.rank))
        layout = replace(layout, local_ranks=local, local_rank=int(lrank))
    return layout


def current_layout(env: Mapping[str, str] | None = None) -> Layout:
    """The layout of this process: from PMIx when a server answers, else from the environment."""
    from elastic_slurm.mpi_runtime import pmix

    client, _why = pmix.connect(env)
    if client is not None:
        try:
            return from_pmix(client, env)
        except pmix.PmixError as exc:
            log.info("PMIx layout failed (%s); using the environment", exc)
    return from_env(env)
