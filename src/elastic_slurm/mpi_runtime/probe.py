"""Which join strategy a resize can use here, and why (one line for the log).

Facts behind the rules (SLURM-FACTS.md, and re-seen while building this module):

* Open MPI 4.1 can spawn ranks onto nodes Slurm added to the job only when every current rank
  runs on ``mpirun``'s own node; with ranks on several nodes ``MPI_Comm_spawn`` aborts or loses
  a daemon. MPICH 4.0 cannot spawn at all.
* Open MPI 4.1's runtime (ORTE) cannot let go of a daemon: killing the daemon on a node that
  is given back aborts ``mpirun`` ("ORTE has lost communication with a remote daemon"), and
  leaving it would leave a process on a node Slurm hands to someone else. So every shrink ends
  the MPI step (after a checkpoint) and restarts it on the nodes kept.
* Checkpoint-restart works for any placement of ranks.
* Open MPI 5 and 6 (PRRTE): spawning onto added nodes completes, but PRRTE 3.0.8's daemons
  corrupted their heap in some multi-node runs, so checkpoint-restart is the default there;
  ``ELASTIC_SLURM_JOIN=spawn`` asks for spawning anyway, honoured under the same placement rule
  as 4.1 (all ranks on ``mpirun``'s node: the layout that was clean). The spawn's info keys
  differ (:func:`spawn_info`).

:func:`pmix_support` asks the process's PMIx server (:mod:`.pmix`) what it supports:

* spawning: ``PMIx_Query_info(PMIX_QUERY_SPAWN_SUPPORT)``. Under ``mpirun`` (ORTE) it returns
  0 and the spawn attributes it honours (``pmix.host,pmix.hostfile,pmix.addhost,...``); under
  ``srun --mpi=pmix`` Slurm 22.05's server has no query handler and the call returns -25
  (``PMIX_ERR_UNREACH``), which matches what MPI shows (``Comm.Spawn`` fails under ``srun``).
  So: status 0 means "the server spawns", anything else "it does not";
* allocation requests: ``PMIx_Allocation_request`` with ``EXTEND`` then ``RELEASE`` of one
  node; both return -47 (``PMIX_ERR_NOT_SUPPORTED``) under both servers here, in 0.1-0.4 ms. A
  server that grants the ``EXTEND`` gets the node back by the ``RELEASE`` at once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

SPAWN = "spawn"
RESTART = "restart"
#: why a grow by spawn failed when the program ended before a resize point took the new ranks in
ENDED_BEFORE_JOIN = "the application ended before a resize point took in the new ranks"


class Join(Protocol):
    """A join strategy: how a running application takes a new node set (one module each).

    :class:`~.join_spawn.SpawnJoin` and :class:`~.join_restart.RestartJoin` implement it;
    :class:`~.session.ElasticComm` calls :meth:`follow` at the resize point where an order is
    acted on, and :meth:`arrive` in ``init()`` of every process that starts.
    """

    strategy: str  # SPAWN or RESTART

    def follow(self, order: Any, hosts: list[str], reason: str) -> bool:
        """Act on ``order`` (collective); True when the world changed at this resize point.

        ``hosts`` are the ranks' hosts now; ``reason`` why this strategy was chosen.
        """
        ...

    def arrive(self) -> bool:
        """In a starting process: take over from an earlier size (collective); whether it did."""
        ...


@dataclass(frozen=True)
class JoinChoice:
    """A join strategy (``spawn`` or ``restart``) and the reason it was chosen."""

    strategy: str
    reason: str


def choose_join(
    action: str,
    rank_hosts: Sequence[str],
    launch_host: str | None,
    mpi_vendor: tuple[str, tuple[int, ...]],
    forced: str | None = None,
) -> JoinChoice:
    """Choose how to follow a resize order.

    Parameters
    ----------
    action
        ``expand`` or ``shrink``.
    rank_hosts
        The hostname of every current rank.
    launch_host
        The node ``mpirun`` runs on; ``None`` when the ranks were not started by our launcher.
    mpi_vendor
        ``mpi4py.MPI.get_vendor()``, e.g. ``("Open MPI", (4, 1, 4))``.
    forced
        ``ELASTIC_SLURM_JOIN`` (``spawn``, ``restart`` or ``auto``/``None``).

    Raises
    ------
    ValueError
        ``forced`` or ``action`` is not one of the values above.

    >>> choose_join("expand", ["n1", "n1"], "n1", ("Open MPI", (4, 1, 4))).strategy
    'spawn'
    >>> choose_join("expand", ["n1", "n2"], "n1", ("Open MPI", (4, 1, 4))).strategy
    'restart'
    >>> choose_join("expand", ["n1"], "n1", ("Open MPI", (5, 0, 7))).reason[:29]
    'Open MPI 5.0.7 (PRRTE): live '
    >>> choose_join("expand", ["n1"], "n1", ("Open MPI", (5, 0, 7)), "spawn").strategy
    'spawn'
    """
    if forced not in (None, "", "auto", SPAWN, RESTART):
        raise ValueError(f"ELASTIC_SLURM_JOIN={forced!r}: use spawn, restart or auto")
    if action not in ("expand", "shrink"):
        raise ValueError(f"unknown resize action {action!r}")
    if forced == RESTART:
        return JoinChoice(RESTART, "checkpoint-restart forced by ELASTIC_SLURM_JOIN=restart")
    if action == "shrink":
        return JoinChoice(
            RESTART,
            "shrink: Open MPI's runtime cannot release the daemons on leaving nodes while "
            "mpirun runs, so the step is checkpointed and restarted on the nodes kept",
        )
    vendor, version = mpi_vendor
    if vendor == "Open MPI" and version[:1] >= (5,) and forced != SPAWN:
        return JoinChoice(
            RESTART,
            f"Open MPI {'.'.join(map(str, version))} (PRRTE): live spawning across nodes is "
            "unreliable there (PRRTE's daemons corrupted their heap in some multi-node runs, "
            "SLURM-FACTS.md), so checkpoint-restart is used (ELASTIC_SLURM_JOIN=spawn to try "
            "spawning)",
        )
    if vendor != "Open MPI" or version[:1] < (4,):
        return JoinChoice(
            RESTART,
            f"{vendor} {'.'.join(map(str, version))}: spawning onto added nodes is "
            "supported here only with Open MPI 4.x under mpirun"
            + (" (ELASTIC_SLURM_JOIN=spawn cannot be honoured)" if forced == SPAWN else ""),
        )
    asked = " (ELASTIC_SLURM_JOIN=spawn cannot be honoured)" if forced == SPAWN else ""
    if launch_host is None:
        return JoinChoice(
            RESTART, f"ranks were not started by elastic-slurm's mpirun launcher{asked}"
        )
    elsewhere = sorted({h for h in rank_hosts if h != launch_host})
    if elsewhere:
        return JoinChoice(
            RESTART,
            f"ranks run on node(s) {', '.join(elsewhere)}, not only on mpirun's node "
            f"{launch_host}; Open MPI 4.1 spawns reliably only when all ranks run on mpirun's "
            f"node{asked}",
        )
    if version[:1] >= (5,):
        return JoinChoice(
            SPAWN,
            f"ELASTIC_SLURM_JOIN=spawn on Open MPI {'.'.join(map(str, version))} (PRRTE): all "
            f"{len(rank_hosts)} rank(s) run on mpirun's node {launch_host}",
        )
    return JoinChoice(SPAWN, f"all {len(rank_hosts)} rank(s) run on mpirun's node {launch_host}")


def spawn_info(
    new_hosts: Sequence[str], per_node: int, mpi_version: tuple[int, ...]
) -> dict[str, str]:
    """The ``MPI_Comm_spawn`` info that places ``per_node`` ranks on each of ``new_hosts``.

    Nodes Slurm added to the job are unknown to ``mpirun``'s daemons, so the info must add
    them as well as name them. Open MPI 4.1 (ORTE): ``add-host`` and ``host`` with each name
    once per rank. Open MPI 5 and 6 (PRRTE): ``add-host`` is deprecated for ``PMIX_ADD_HOST``,
    and a bare ``nX`` in ``host`` means one slot, so ``host`` lists ``nX:k``; ``map_by``
    ``slot:oversubscribe`` and ``bind_to`` ``none`` keep PRRTE from refusing more ranks than
    cores on small nodes (SLURM-FACTS.md).

    >>> spawn_info(["n3", "n4"], 2, (4, 1, 4))
    {'add-host': 'n3,n4', 'host': 'n3,n3,n4,n4'}
    >>> spawn_info(["n3"], 2, (5, 0, 7))["host"]
    'n3:2'

    Raises
    ------
    ValueError
        No host, or ``per_node`` < 1.
    """
    if not new_hosts or per_node < 1:
        raise ValueError(f"a spawn needs hosts and >= 1 rank per node: {new_hosts}, {per_node}")
    if tuple(mpi_version[:1]) >= (5,):
        return {
            "PMIX_ADD_HOST": ",".join(new_hosts),
            "host": ",".join(f"{h}:{per_node}" for h in new_hosts),
            "map_by": "slot:oversubscribe",
            "bind_to": "none",
        }
    return {
        "add-host": ",".join(new_hosts),
        "host": ",".join(h for h in new_hosts for _ in range(per_node)),
    }


@dataclass(frozen=True)
class PmixSupport:
    """What this process's PMIx server is and supports (:func:`pmix_support`).

    ``spawn`` and ``allocation`` are ``None`` when PMIx is unavailable (``reason`` says why);
    the ``*_status`` fields are the raw ``pmix_status_t`` of each call.
    """

    available: bool
    reason: str = ""
    version: str | None = None
    server: str | None = None
    nspace: str | None = None
    init_ms: float | None = None
    spawn: bool | None = None
    spawn_status: int | None = None
    spawn_detail: str = ""
    allocation: bool | None = None
    extend_status: int | None = None
    release_status: int | None = None
    allocation_detail: str = ""
    layout: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (what ``python -m elastic_slurm.mpi_runtime.pmix --json`` prints)."""
        return asdict(self)


def pmix_server(nspace: str, env: Mapping[str, str]) -> str:
    """Which PMIx server a namespace belongs to (Slurm's plugin, ORTE, or unknown).

    >>> pmix_server("slurm.pmix.716.0", {})
    'slurmstepd (srun --mpi=pmix, Slurm pmix plugin)'
    """
    if nspace.startswith("slurm.pmix."):
        return "slurmstepd (srun --mpi=pmix, Slurm pmix plugin)"
    if "OMPI_MCA_orte_hnp_uri" in env:
        return "Open MPI ORTE (mpirun)"
    if any(k.startswith("PRTE_") for k in env):
        return "PRRTE (prterun/mpirun)"
    return "unknown"


def pmix_support(env: Mapping[str, str] | None = None) -> PmixSupport:
    """Ask this process's PMIx server about spawning and allocation requests.

    Never raises for PMIx reasons: an unavailable server gives ``available=False`` and why.
    """
    import os

    from elastic_slurm.mpi_runtime import pmix
    from elastic_slurm.mpi_runtime.layout import from_pmix

    env = os.environ if env is None else env
    client, why = pmix.connect(env)
    if client is None:
        return PmixSupport(False, reason=why)
    status, results = client.query(pmix.PMIX_QUERY_SPAWN_SUPPORT)
    attrs = str(results.get(pmix.PMIX_QUERY_SPAWN_SUPPORT) or "")
    name = client.error_string(status)
    if status == pmix.PMIX_SUCCESS:
        spawn_detail = f"PMIx_Query_info(spawn support) 0: attributes {attrs or '(none)'}"
    else:
        spawn_detail = f"PMIx_Query_info(spawn support) returned {status} ({name})"
    extend, _ = client.allocation_request(pmix.PMIX_ALLOC_EXTEND, 1)
    release, _ = client.allocation_request(pmix.PMIX_ALLOC_RELEASE, 1)
    allocation = extend == pmix.PMIX_SUCCESS
    alloc_detail = (
        f"PMIx_Allocation_request EXTEND {extend} ({client.error_string(extend)}), "
        f"RELEASE {release} ({client.error_string(release)})"
    )
    try:
        layout = from_pmix(client, env).to_json()
    except pmix.PmixError as exc:
        layout = {"error": str(exc)}
    return PmixSupport(
        True,
        version=client.version(),
        server=pmix_server(client.nspace, env),
        nspace=client.nspace,
        init_ms=round(client.init_s * 1000, 2),
        spawn=status == pmix.PMIX_SUCCESS,
        spawn_status=status,
        spawn_detail=spawn_detail,
        allocation=allocation,
        extend_status=extend,
        release_status=release,
        allocation_detail=alloc_detail,
        layout=layout,
    )
