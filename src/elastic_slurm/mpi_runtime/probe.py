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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SPAWN = "spawn"
RESTART = "restart"


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
    if vendor != "Open MPI" or version[:1] != (4,):
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
    return JoinChoice(SPAWN, f"all {len(rank_hosts)} rank(s) run on mpirun's node {launch_host}")
