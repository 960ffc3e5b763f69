"""An evolving job's evolution profile: its steps, their text form, and their bounds.

Klein and Pérez (2011, section 3.1) describe an evolving application by its *evolution
profile*: the sequence of ``(duration_s, nodes)`` steps it runs through at its own speed, the
first at its start size. A planner (:mod:`elastic_slurm.plugins.policies.klein_perez`) schedules
evolving jobs by these profiles. The profile travels with the job inside Slurm, in its elastic
tag (:mod:`elastic_slurm.adapter.tags`), so the controller sees live what the simulator sees.

Text form, as users write it (``--evolution-profile``, a job file's ``evolution_profile``) and
as the tag carries it: ``DURATION:NODES`` steps separated by commas, durations in seconds::

    600:2,300:4,600:2     # 10 minutes on 2 nodes, 5 on 4, 10 on 2

The text comes from users (and the tag from anyone who can change the job's comment), so it is
bounded: at most :data:`MAX_STEPS` steps, each duration a finite number of seconds in
``(0, MAX_STEP_S]`` and each node count plain decimal digits in ``[1, MAX_NODES]``.
"""

from __future__ import annotations

import math
import re

from elastic_slurm.errors import InvalidRequest

#: Most steps a profile may have.
MAX_STEPS = 64
#: Longest step, in seconds (a year: no job runs longer).
MAX_STEP_S = 365 * 86400.0
#: Largest node count of a step.
MAX_NODES = 1_000_000

Profile = tuple[tuple[float, int], ...]

_STEP = re.compile(r"([0-9]+(?:\.[0-9]+)?):([0-9]{1,7})")


def parse_profile(text: str) -> Profile:
    """The steps of ``DURATION:NODES[,DURATION:NODES...]``: ``((duration_s, nodes), ...)``.

    >>> parse_profile("600:2,300:4, 600:2")
    ((600.0, 2), (300.0, 4), (600.0, 2))

    Raises
    ------
    InvalidRequest
        An empty profile, a step not of the form ``DURATION:NODES`` (plain decimal numbers),
        more than :data:`MAX_STEPS` steps, or a value beyond its bound; the message names the
        step.
    """
    if not isinstance(text, str) or not text.strip():
        raise InvalidRequest("the evolution profile is empty: give DURATION:NODES steps")
    parts = text.split(",")
    if len(parts) > MAX_STEPS:
        raise InvalidRequest(f"the evolution profile has {len(parts)} steps; at most {MAX_STEPS}")
    steps = []
    for i, part in enumerate(parts, 1):
        match = _STEP.fullmatch(part.strip())
        if match is None:
            raise InvalidRequest(
                f"evolution profile step {i} {part.strip()[:30]!r} is not DURATION:NODES "
                "(seconds and nodes, e.g. 600:2)"
            )
        steps.append((float(match[1]), int(match[2])))
    return check_profile(steps)


def check_profile(steps: object) -> Profile:
    """``steps`` as a :data:`Profile`, checked against the bounds.

    >>> check_profile([(60, 1), (30.5, 2)])
    ((60.0, 1), (30.5, 2))

    Raises
    ------
    InvalidRequest
        Not a sequence of ``(duration_s, nodes)`` pairs, empty, too long, or a value out of
        bounds.
    """
    if not isinstance(steps, (tuple, list)) or not steps:
        raise InvalidRequest("an evolution profile is a non-empty list of (seconds, nodes) steps")
    if len(steps) > MAX_STEPS:
        raise InvalidRequest(f"the evolution profile has {len(steps)} steps; at most {MAX_STEPS}")
    out = []
    for i, step in enumerate(steps, 1):
        if not isinstance(step, (tuple, list)) or len(step) != 2:
            raise InvalidRequest(f"evolution profile step {i} is not a (seconds, nodes) pair")
        duration, nodes = step
        if isinstance(duration, bool) or not isinstance(duration, (int, float)):
            raise InvalidRequest(f"evolution profile step {i}: {duration!r} is not seconds")
        if isinstance(nodes, bool) or not isinstance(nodes, int):
            raise InvalidRequest(f"evolution profile step {i}: {nodes!r} is not a node count")
        if not (math.isfinite(duration) and 0 < duration <= MAX_STEP_S):
            raise InvalidRequest(
                f"evolution profile step {i}: a duration is more than 0 and at most "
                f"{MAX_STEP_S:g} s, got {duration:g}"
            )
        if not 1 <= nodes <= MAX_NODES:
            raise InvalidRequest(
                f"evolution profile step {i}: nodes must be 1 to {MAX_NODES}, got {nodes}"
            )
        out.append((float(duration), nodes))
    return tuple(out)


def format_profile(steps: Profile) -> str:
    """The text form of ``steps`` (what :func:`parse_profile` reads back).

    >>> format_profile(((600.0, 2), (300.5, 4)))
    '600:2,300.5:4'
    """
    return ",".join(f"{_seconds(d)}:{n}" for d, n in steps)


def _seconds(value: float) -> str:
    """Seconds in plain decimal digits (never an exponent, which the parser refuses)."""
    text = f"{value:.3f}".rstrip("0").rstrip(".")
    return text or "0"
