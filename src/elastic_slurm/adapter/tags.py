"""The elastic tag: how a job's kind and node range travel with it inside Slurm.

elastic-slurm keeps no registry of its own: the kind and the range are written into the job's
``--comment`` at submission (``elastic-slurm:kind=malleable;min=2;max=4``) and read back from
Slurm by the controller, so any observer of Slurm (a restarted controller, ``squeue``) sees them.
"""

from __future__ import annotations

from dataclasses import dataclass

from elastic_slurm.model.request import JobKind

PREFIX = "elastic-slurm:"


@dataclass(frozen=True)
class ElasticTag:
    """A job's kind and node range (nodes)."""

    kind: JobKind
    nodes_min: int
    nodes_max: int

    def encode(self) -> str:
        """The comment text.

        >>> ElasticTag(JobKind.MALLEABLE, 2, 4).encode()
        'elastic-slurm:kind=malleable;min=2;max=4'
        """
        return f"{PREFIX}kind={self.kind.value};min={self.nodes_min};max={self.nodes_max}"


def decode(comment: str | None) -> ElasticTag | None:
    """The tag in a job's comment, or ``None`` for a job that has none (or a malformed one).

    >>> decode("elastic-slurm:kind=malleable;min=2;max=4")
    ElasticTag(kind=<JobKind.MALLEABLE: 'malleable'>, nodes_min=2, nodes_max=4)
    >>> decode("a user's own comment") is None
    True
    """
    if not comment or not comment.startswith(PREFIX):
        return None
    fields = dict(item.split("=", 1) for item in comment[len(PREFIX) :].split(";") if "=" in item)
    try:
        tag = ElasticTag(JobKind(fields["kind"]), int(fields["min"]), int(fields["max"]))
    except (KeyError, ValueError):
        return None
    if not 1 <= tag.nodes_min <= tag.nodes_max:
        return None
    if tag.kind is JobKind.RIGID and tag.nodes_min != tag.nodes_max:
        return None
    return tag
