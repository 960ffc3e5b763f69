"""The elastic tag: how a job's kind and node range travel with it inside Slurm.

elastic-slurm keeps no registry of its own: the kind and the range are written into the job's
``--comment`` at submission (``elastic-slurm:kind=malleable;min=2;max=4``) and read back from
Slurm by the controller, so any observer of Slurm (a restarted controller, ``squeue``) sees them.

A moldable job whose start size the controller chooses (Huang et al.'s HPCaaS setting: the
scheduler, not the user or Slurm, picks the size from the job's speedup model) is submitted held
and tagged ``sized=controller``; that mark, and nothing else, lets the controller release a
held job (a job its user held is never released).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

from elastic_slurm.errors import InvalidRequest
from elastic_slurm.model.evolution import Profile, format_profile, parse_profile
from elastic_slurm.model.request import JobKind

PREFIX = "elastic-slurm:"
#: Largest node count a tag may carry (Slurm's 32-bit counts, without its NO_VAL markers).
MAX_NODES = 0xFFFFFFFD
#: Longest grace period a tag may carry (seconds; the site caps it lower when it is used).
MAX_GRACE_S = 365 * 86400.0

#: Who chooses a moldable job's start size: Slurm (within ``--nodes=MIN-MAX``) or the
#: controller's policy (the job is submitted held until then).
SizedBy = Literal["slurm", "controller"]
SIZED_BY: tuple[str, ...] = get_args(SizedBy)


def check_sized_by(kind: JobKind, sized_by: str, *, array: bool = False) -> SizedBy:
    """Check who is to size a job of ``kind``; return ``sized_by`` as a :data:`SizedBy`.

    Only a moldable job, and not a job array, can be sized by the controller: the other kinds
    have their size from the user (rigid) or start at their start size and are resized while
    they run (malleable, evolving).

    >>> check_sized_by(JobKind.MOLDABLE, "controller")
    'controller'

    Raises
    ------
    InvalidRequest
        ``sized_by`` is not one of :data:`SIZED_BY`, or ``controller`` for another kind than
        moldable or for an array.
    """
    if sized_by not in SIZED_BY:
        raise InvalidRequest(
            f"sized by {sized_by!r}: choose one of {', '.join(SIZED_BY)} (who picks a moldable "
            "job's start size)"
        )
    if sized_by == "controller" and kind is not JobKind.MOLDABLE:
        raise InvalidRequest(
            f"a {kind.value} job cannot be sized by the controller: only a moldable job's start "
            "size is chosen before it starts (use --kind moldable --nodes MIN-MAX, or "
            "--sized-by slurm)"
        )
    if sized_by == "controller" and array:
        raise InvalidRequest(
            "a job array cannot be sized by the controller: each task would wait held; submit "
            "the tasks as separate moldable jobs, or use --sized-by slurm"
        )
    return "controller" if sized_by == "controller" else "slurm"


@dataclass(frozen=True)
class ElasticTag:
    """A job's kind and node range (nodes), and what else the controller needs to know of it.

    Optional: the speedup model, grace period and evolution profile. ``speedup`` is the text
    form of :func:`elastic_slurm.jobspec.parse_speedup`
    (``amdahl:0.95``); ``grace_s`` is in seconds. ``sized_by`` is ``controller`` for a
    moldable job submitted held for the controller to size and release (written
    ``sized=controller``; ``slurm``, the default, is not written). ``evolution_profile``:
    an evolving job's steps (:mod:`elastic_slurm.model.evolution`).
    """

    kind: JobKind
    nodes_min: int
    nodes_max: int
    speedup: str | None = None
    grace_s: float | None = None
    sized_by: SizedBy = "slurm"
    evolution_profile: Profile | None = None

    def encode(self) -> str:
        """The comment text.

        >>> ElasticTag(JobKind.MALLEABLE, 2, 4).encode()
        'elastic-slurm:kind=malleable;min=2;max=4'
        >>> ElasticTag(JobKind.MOLDABLE, 2, 8, "amdahl:0.9", 60.0).encode()
        'elastic-slurm:kind=moldable;min=2;max=8;speedup=amdahl:0.9;grace=60'
        >>> ElasticTag(JobKind.MOLDABLE, 1, 4, sized_by="controller").encode()
        'elastic-slurm:kind=moldable;min=1;max=4;sized=controller'
        >>> ElasticTag(JobKind.EVOLVING, 1, 4, evolution_profile=((600.0, 1), (60.0, 4))).encode()
        'elastic-slurm:kind=evolving;min=1;max=4;profile=600:1,60:4'
        """
        text = f"{PREFIX}kind={self.kind.value};min={self.nodes_min};max={self.nodes_max}"
        if self.speedup:
            text += f";speedup={self.speedup}"
        if self.grace_s is not None:
            text += f";grace={self.grace_s:g}"
        if self.sized_by == "controller":
            text += ";sized=controller"
        if self.evolution_profile:
            text += f";profile={format_profile(self.evolution_profile)}"
        return text


def decode(comment: str | None) -> ElasticTag | None:
    """The tag in a job's comment, or ``None`` for a job that has none (or a malformed one).

    >>> tag = decode("elastic-slurm:kind=malleable;min=2;max=4;grace=30")
    >>> tag.kind.value, tag.nodes_min, tag.nodes_max, tag.speedup, tag.grace_s
    ('malleable', 2, 4, None, 30.0)
    >>> decode("a user's own comment") is None
    True
    >>> decode("elastic-slurm:kind=moldable;min=1;max=4;sized=controller").sized_by
    'controller'

    A tag that marks another kind than moldable, or an unknown ``sized`` value, is malformed.
    The comment is text its user can change at any time (``scontrol update Comment=``), so
    node counts must be plain decimal numbers up to :data:`MAX_NODES` (no ``٣``, ``1_0`` or
    ``+3``, which Python's ``int`` would take), and a grace period a finite number of
    seconds in ``[0, MAX_GRACE_S]`` (no ``inf`` or ``nan``):

    >>> [decode(f"elastic-slurm:kind=malleable;min=1;max=4;grace={g}") for g in ("inf", "nan")]
    [None, None]
    >>> decode("elastic-slurm:kind=malleable;min=1;max=1_0") is None
    True

    An evolution profile (``profile=600:1,60:4``) belongs to an evolving job, within its
    range (:mod:`elastic_slurm.model.evolution` bounds it); a tag with any other is malformed:

    >>> decode("elastic-slurm:kind=evolving;min=1;max=4;profile=600:1,60:4").evolution_profile
    ((600.0, 1), (60.0, 4))
    >>> decode("elastic-slurm:kind=evolving;min=1;max=4;profile=600:1,60:9") is None
    True
    """
    if not comment or not comment.startswith(PREFIX):
        return None
    fields = dict(item.split("=", 1) for item in comment[len(PREFIX) :].split(";") if "=" in item)
    try:
        grace = _grace(fields["grace"]) if "grace" in fields else None
        tag = ElasticTag(
            JobKind(fields["kind"]),
            _count(fields["min"]),
            _count(fields["max"]),
            fields.get("speedup") or None,
            grace,
            "controller" if fields.get("sized") == "controller" else "slurm",
            parse_profile(fields["profile"]) if "profile" in fields else None,
        )
    except (KeyError, ValueError, InvalidRequest):
        return None
    if fields.get("sized", "slurm") not in SIZED_BY:
        return None
    if tag.sized_by == "controller" and tag.kind is not JobKind.MOLDABLE:
        return None
    if not 1 <= tag.nodes_min <= tag.nodes_max:
        return None
    if tag.kind is JobKind.RIGID and tag.nodes_min != tag.nodes_max:
        return None
    if tag.evolution_profile is not None and (
        tag.kind is not JobKind.EVOLVING
        or not all(tag.nodes_min <= n <= tag.nodes_max for _s, n in tag.evolution_profile)
    ):
        return None
    return tag


def _count(text: str) -> int:
    """A node count written as plain decimal digits, up to :data:`MAX_NODES`."""
    text = text.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 10 or int(text) > MAX_NODES:
        raise ValueError(f"not a node count: {text[:20]!r}")
    return int(text)


def _grace(text: str) -> float:
    """A grace period in seconds: finite, in ``[0, MAX_GRACE_S]``."""
    value = float(text)
    if not math.isfinite(value) or not 0 <= value <= MAX_GRACE_S:
        raise ValueError(f"not a grace period: {text[:20]!r}")
    return value
