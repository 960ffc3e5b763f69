"""Node counts: the machine a policy plans for, and batches kept within the free nodes.

Decisions name node counts, never node names (which nodes is Slurm's choice, see
:mod:`~elastic_slurm.plugins.legality`), so "node picking" here is counting.
"""

from __future__ import annotations

from collections.abc import Iterable

from elastic_slurm.model.decisions import Decision, Expand, Shrink, Start
from elastic_slurm.model.snapshot import ClusterSnapshot


def machine_nodes(snapshot: ClusterSnapshot) -> int:
    """Nodes that can run jobs: the idle ones and those the jobs hold (down nodes left out)."""
    held = sum(len(j.nodes) for j in snapshot.running())
    return len(snapshot.idle_nodes()) + held


def within_free(decisions: Iterable[Decision], idle: int) -> list[Decision]:
    """Keep a batch within the nodes it may use: ``idle`` plus what its shrinks give back.

    Taken in order, as :func:`~elastic_slurm.plugins.legality.check` takes them: a shrink adds
    its nodes for the decisions after it; a start that does not fit is dropped; an expansion
    that does not fit is cut to what is left (dropped when nothing is). A batch that
    fits is returned unchanged. A policy whose own accounting should already guarantee this
    calls it as a last line of defence, so that a snapshot that contradicts itself (a resize
    under way, a job past its estimate) never makes it ask for nodes that are not there.

    >>> kept = within_free([Shrink(1, 2), Expand(2, 5), Start(3, 1)], 1)
    >>> [(type(d).__name__, d.job_id, getattr(d, "count", None)) for d in kept]
    [('Shrink', 1, 2), ('Expand', 2, 3)]
    """
    free = idle
    kept: list[Decision] = []
    for d in decisions:
        if isinstance(d, Shrink):
            free += d.count
        elif isinstance(d, Start):
            if d.nodes > free:
                continue
            free -= d.nodes
        elif isinstance(d, Expand):
            if d.count > free:
                if free < 1:
                    continue
                d = Expand(d.job_id, free, d.reason)
            free -= d.count
        kept.append(d)
    return kept


__all__ = ["machine_nodes", "within_free"]
