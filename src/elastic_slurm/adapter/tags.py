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
    """A job's kind and node range (nodes), and optionally its speedup model and grace period.

    ``speedup`` is the text form of :func:`elastic_slurm.jobspec.parse_speedup`
    (``amdahl:0.95``); ``grace_s`` is in seconds.
    """

    kind: JobKind
    nodes_min: int
    nodes_max: int
    speedup: str | None = None
    grace_s: float | None = None

    def encode(self) -> str:
        """The comment text.

        >>> ElasticTag(JobKind.MALLEABLE, 2, 4).encode()
        'elastic-slurm:kind=malleable;min=2;max=4'
        >>> ElasticTag(JobKind.MOLDABLE, 2, 8, "amdahl:0.9", 60.0).encode()
        'elastic-slurm:kind=moldable;min=2;max=8;speedup=amdahl:0.9;grace=60'
        """
        text = f"{PREFIX}kind={self.kind.value};min={self.nodes_min};max={self.nodes_max}"
        if self.speedup:
            text += f";speedup={self.speedup}"
        if self.grace_s is not None:
            text += f";grace={self.grace_s:g}"
        return text


def decode(comment: str | None) -> ElasticTag | None:
    """The tag in a job's comment, or ``None`` for a job that has none (or a malformed one).

    >>> tag = decode("elastic-slurm:kind=malleable;min=2;max=4;grace=30")
    >>> tag.kind.value, tag.nodes_min, tag.nodes_max, tag.speedup, tag.grace_s
    ('malleable', 2, 4, None, 30.0)
    >>> decode("a user's own comment") is None
    True
    """
    if not comment or not comment.startswith(PREFIX):
        return None
    fields = dict(item.split("=", 1) for item in comment[len(PREFIX) :].split(";") if "=" in item)
    try:
        grace = float(fields["grace"]) if "grace" in fields else None
        tag = ElasticTag(
            JobKind(fields["kind"]),
            int(fields["min"]),
            int(fields["max"]),
            fields.get("speedup") or None,
            grace,
        )
    except (KeyError, ValueError):
        return None
    if not 1 <= tag.nodes_min <= tag.nodes_max:
        return None
    if tag.kind is JobKind.RIGID and tag.nodes_min != tag.nodes_max:
        return None
    return tag
