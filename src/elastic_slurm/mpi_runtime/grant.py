"""The Slurm side of a resize, done by the job itself as its own user (a service controller).

A controller that runs as an unprivileged service user (``controller.privilege: service``,
``docs/protocol.md``, "Least privilege") can neither submit an allocation for another user nor
change another user's job. So it only decides and tells: its expansion order carries
``by_job`` and how many nodes to ask for, and the job asks Slurm for them as its own user, which
Slurm allows (an expander that depends on the user's own job, merged into it; or a sibling
allocation). Rank 0's order watcher does it in its background thread, while the ranks compute
(:class:`~elastic_slurm.mpi_runtime.orders.OrderWatcher`); the order then goes on as if the
controller had granted the nodes. A shrink's nodes are given back by the job's launcher, after
the job left them (:func:`give_back`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence

from elastic_slurm.adapter.backend import SlurmBackend
from elastic_slurm.errors import ResizeError
from elastic_slurm.model.resize_order import ResizeOrder

log = logging.getLogger(__name__)


def take_nodes(order: ResizeOrder, slurm: SlurmBackend, job_id: int) -> ResizeOrder:
    """Ask Slurm for the nodes expansion ``order`` names; return it with the granted node list.

    A merge can only bring in idle nodes that come after the job's batch host: the job asks
    for those if fewer than ``order.count`` (as the controller does in root mode). Blocks for
    up to ``order.grant_timeout_s`` seconds.

    Parameters
    ----------
    order
        An order with :attr:`~ResizeOrder.needs_grant`.
    slurm
        Slurm's commands, as the job's user.
    job_id
        The job.

    Returns
    -------
    ResizeOrder
        ``order`` with ``nodes`` the job's node list after the grant, ``count`` 0, and the
        grant's seconds in ``phases_s["grant"]``.

    Raises
    ------
    ResizeError
        Nothing granted (no room, no grant in time, Slurm refused): the job keeps exactly
        the nodes it had and no helper allocation is left behind.
    SlurmCommandError
        Slurm did not answer.
    """
    count = order.count
    path = "sibling" if order.grow_path == "sibling" else "merge"
    if path == "merge":
        room = slurm.merge_room(job_id)
        if room <= 0:
            raise ResizeError(
                f"job {job_id}: no idle node comes after its batch host, which a merge needs"
            )
        if room < count:
            log.info("order %d: asking for %d of the %d nodes (merge room)", order.seq, room, count)
            count = room
    timeout = max(1, round(order.grant_timeout_s or 30.0))
    grown = slurm.grow(job_id, count, path=path, grant_timeout_s=timeout)
    log.info(
        "order %d: granted %s (%s %d, %.2f s)",
        order.seq,
        ",".join(grown.added),
        grown.path,
        grown.helper_id,
        grown.elapsed_s,
    )
    return dataclasses.replace(
        order,
        nodes=tuple(grown.nodes),
        count=0,
        phases_s={**order.phases_s, "grant": grown.elapsed_s},
    )


def give_back(slurm: SlurmBackend, job_id: int, keep: Sequence[str]) -> tuple[str, ...]:
    """Shrink job ``job_id`` to ``keep`` as its own user (the leaving nodes are vacated).

    Returns
    -------
    tuple[str, ...]
        The job's nodes afterwards.

    Raises
    ------
    ResizeError
        Slurm refused, or ``keep`` is not a subset of the job's nodes with its batch host.
    """
    return slurm.shrink(job_id, list(keep))


__all__ = ["give_back", "take_nodes"]
