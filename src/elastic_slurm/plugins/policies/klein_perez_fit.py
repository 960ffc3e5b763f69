"""Klein and Pérez's offline scheduling of evolving applications: ``fit``, compacting, Algorithm 1.

C. Klein and C. Pérez, "Towards Scheduling Evolving Applications", CoreGRID/ERCIM Workshop on
Grids, Clouds and P2P Computing, 2011 (HAL inria-00609353), sections 3-5, also chapter 5 of
Klein's thesis (ENS Lyon, 2012).

An application's needs are an *evolution profile* (EP, section 3.1): a sequence of steps
``(duration, nodes)``. Algorithm 1 takes the applications in a fixed order and, for each, calls
``fit`` to *delay* its requested EP and *expand* some of its steps (an expanded step holds its
nodes, idle, while it waits for the nodes of the next step) so that the sum of the scheduled
EPs never exceeds the machine; the result is added to the resource EP
(:class:`~elastic_slurm.plugins.kit.occupancy.Occupancy`). Algorithm 2 is the base ``fit``
with an *expand limit* ``l`` (a step may last at most ``l`` times its duration), and
*compacting* (section 4.2) re-places the steps right to left against the completion time the
base ``fit`` found, which removes needless expansion. The five variants of section 5.1 are
``noX`` (``l = 1``), ``2X`` and ``2X+c`` (``l = 2``, without and with compacting), ``infX`` and
``infX+c`` (no limit). The ``+c`` in these names means compacting; it is not a parameter.

Everything here is a pure function; the online policy is
:class:`~elastic_slurm.plugins.policies.klein_perez.KleinPerez`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from elastic_slurm.plugins.kit.occupancy import Occupancy

INFINITY = math.inf

Step = tuple[float, int]
"""One step of an evolution profile: ``(duration_s, nodes)``."""

#: The variants of section 5.1: expand limit and compacting.
FITS: dict[str, tuple[float, bool]] = {
    "noX": (1.0, False),
    "2X": (2.0, False),
    "2X+c": (2.0, True),
    "infX": (INFINITY, False),
    "infX+c": (INFINITY, True),
}


def _fit_from(
    occ: Occupancy,
    steps: Sequence[Step],
    cap: int,
    limit: float,
    i: int,
    t0: float,
) -> tuple[float, list[float] | None]:
    """Algorithm 2 from step ``i`` on: ``(t_s, starts of steps i..)`` or ``(retry, None)``.

    ``t0`` is the earliest start of step ``i`` (the end of step ``i - 1``'s computation).
    On failure the caller must move step ``i - 1`` to start at ``retry`` or later.
    """
    if i == len(steps):
        return t0, []
    d, n = steps[i]
    ts = t0
    while True:
        if ts == INFINITY:
            return INFINITY, [INFINITY] * (len(steps) - i)
        busy, loc = occ.max_and_last_end(ts, ts + d)
        if cap - busy < n:  # lines 6-7: the step does not fit here, jump past the maximum
            ts = loc
            continue
        if i > 0:
            dp, np_ = steps[i - 1]
            if limit < INFINITY:  # lines 8-11: the previous step would exceed the limit
                earliest_allowed = ts - limit * dp
                if earliest_allowed > t0 - dp:
                    return earliest_allowed, None
            busy, loc = occ.max_and_last_end(t0, ts)
            if cap - busy < np_:  # lines 12-13: it could not hold its nodes meanwhile
                return loc, None
        tail_t, tail = _fit_from(occ, steps, cap, limit, i + 1, ts + d)  # line 14
        if tail is None:  # lines 15-16
            ts = tail_t
            continue
        return ts, [ts, *tail]


def fit(
    steps: Sequence[Step],
    occ: Occupancy,
    cap: int,
    limit: float,
    t0: float = 0.0,
    *,
    first_fixed: bool = False,
) -> list[float]:
    """Klein and Pérez's base ``fit`` (Algorithm 2): the start time of every step.

    Step ``i`` then holds its nodes from ``starts[i]`` to ``starts[i + 1]`` (the last one for
    its duration): it is *expanded* when that is longer than its duration.

    Parameters
    ----------
    steps
        The requested EP, ``(duration_s, nodes)`` per step.
    occ
        The resource EP (not changed).
    cap
        Nodes in the machine.
    limit
        The expand limit ``l >= 1`` (``math.inf`` for none).
    t0
        The earliest start (seconds).
    first_fixed
        False for an application not started yet: its first step is *delayed* to end where
        the second starts, instead of being expanded (Algorithm 2, lines 18-20). True for the
        rest of a running application, whose preceding step is already under way: the first
        step given here is then placed like any other (and expanding the step under way is
        the caller's business).

    Returns
    -------
    list of float
        One start per step; every one is ``math.inf`` when the EP never fits (a step wider
        than the machine, or the machine busy for ever).

    Notes
    -----
    As printed, line 17 reads ``if i > 0`` with steps numbered from 1, which would make the
    else branch (the first step's delay, lines 18-20) dead code; we read ``i > 1``, as the
    text says ("the first step is delayed instead of being expanded").
    """
    if not steps:
        return []
    if any(n > cap for _, n in steps):
        return [INFINITY] * len(steps)
    if len(steps) == 1:  # Algorithm 2 for one step: the earliest start where it fits
        return [occ.earliest(steps[0][1], steps[0][0], cap, t0)]
    _, starts = _fit_from(occ, steps, cap, limit, 0, t0)
    assert starts is not None  # level 0 never fails: it retries later
    if starts[-1] == INFINITY:  # some step never fits: the EP never completes
        return [INFINITY] * len(steps)
    if not first_fixed and len(starts) > 1:
        starts[0] = starts[1] - steps[0][0]
    return starts


def compact(
    steps: Sequence[Step],
    starts: Sequence[float],
    occ: Occupancy,
    cap: int,
    limit: float,
    lo: float,
    *,
    before: tuple[int, float | None, float] | None = None,
) -> list[float]:
    """Klein and Pérez's compacting (section 4.2): re-place the steps from right to left.

    The last step keeps the completion time found by :func:`fit`; each earlier step is then
    placed as late as it can be, "similarly to the base algorithm" but mirrored: a step that
    cannot be placed just before the next one moves earlier and holds its nodes (expands) up
    to it, within the expand limit, and when even that fails the next step moves earlier.
    The first step of an application not started yet is only ever delayed, never expanded.

    Parameters
    ----------
    steps, starts
        The EP and the start of each step found by :func:`fit`.
    occ, cap, limit
        As for :func:`fit`.
    lo
        No step may start before this time (seconds).
    before
        For the rest of a running application: ``(nodes, start_s, duration_s)`` of the step
        under way, which holds its nodes from ``lo`` until the first step given here starts
        (that hold must fit, and, when ``start_s`` is known, last at most ``limit`` times
        ``duration_s`` from ``start_s``). ``None`` for an application not started.

    Returns
    -------
    list of float
        The compacted starts, or ``starts`` unchanged when no compacted placement is found
        (the paper: "in the worst case, no compacting occurs").

    Notes
    -----
    The paper gives no pseudo-code for compacting. Ours is Algorithm 2 with time reversed;
    as there, every jump skips only placements that cannot work, so the result is the latest
    placement, step by step from the last, that keeps the completion time.
    """
    n_steps = len(steps)
    if n_steps < 2 and before is None or not starts or starts[-1] == INFINITY:
        return list(starts)
    end = starts[-1] + steps[-1][0]
    if end == INFINITY:  # a step that never ends: nothing to compact against
        return list(starts)

    def level(i: int, t_end: float) -> tuple[bool, float, list[float]]:
        d, n = steps[i]
        te = t_end
        no_gap = i == n_steps - 1 or (i == 0 and before is None)
        while True:
            s = te - d
            if s < lo:
                return False, -INFINITY, []
            busy, first = occ.max_and_first_start(s, te)
            if cap - busy < n:
                te = first
                continue
            if te < t_end:
                if no_gap:
                    return False, te, []
                if limit < INFINITY and t_end - s > limit * d:
                    return False, s + limit * d, []
                busy, first = occ.max_and_first_start(te, t_end)
                if cap - busy < n:
                    return False, first, []
            if i == 0:
                if before is not None and s > lo:
                    n_prev, prev_start, d_prev = before
                    busy, first = occ.max_and_first_start(lo, s)
                    if cap - busy < n_prev:
                        te = first + d
                        continue
                    if prev_start is not None and limit < INFINITY:
                        latest = prev_start + limit * d_prev
                        if s > latest:
                            te = latest + d
                            continue
                return True, 0.0, [s]
            ok, hint, left = level(i - 1, s)
            if ok:
                left.append(s)
                return True, 0.0, left
            te = hint + d

    ok, _, placed = level(n_steps - 1, end)
    if not ok:
        return list(starts)
    return placed


def holds(steps: Sequence[Step], starts: Sequence[float]) -> list[tuple[float, float, int]]:
    """The scheduled EP as ``(start_s, end_s, nodes)`` segments.

    Each step holds its nodes until the next one starts (the last for its duration).
    """
    out = []
    last = len(steps) - 1
    for i, (d, n) in enumerate(steps):
        s = starts[i]
        e = starts[i + 1] if i < last else s + d
        out.append((s, e, n))
    return out


@dataclass(frozen=True)
class ScheduledEP:
    """One application's schedule: when each step starts, and what it holds.

    Parameters
    ----------
    steps
        The requested EP, ``(duration_s, nodes)`` per step.
    starts
        When each step starts (seconds); step ``i`` holds its nodes until step ``i + 1``
        starts.
    """

    steps: tuple[Step, ...]
    starts: tuple[float, ...]

    @property
    def start_s(self) -> float:
        """When the application starts (the end of its delay)."""
        return self.starts[0]

    @property
    def end_s(self) -> float:
        """When the application completes."""
        return self.starts[-1] + self.steps[-1][0]

    @property
    def used_node_s(self) -> float:
        """Node-seconds computed: the requested EP's area."""
        return sum(d * n for d, n in self.steps)

    @property
    def allocated_node_s(self) -> float:
        """Node-seconds held, computing or waiting."""
        return sum((e - s) * n for s, e, n in holds(self.steps, self.starts))

    @property
    def expanded(self) -> bool:
        """True when some step holds its nodes longer than its duration."""
        return any(
            e - s > d
            for (s, e, _), (d, _) in zip(holds(self.steps, self.starts), self.steps, strict=True)
        )

    @property
    def expansion_s(self) -> float:
        """Seconds spent waiting between steps (scheduled minus requested duration)."""
        return self.end_s - self.start_s - sum(d for d, _ in self.steps)


def schedule(
    profiles: Iterable[Sequence[Step]],
    nodes: int,
    *,
    fit_name: str = "noX",
    expand_limit: float | None = None,
    compacting: bool | None = None,
    origin_s: float = 0.0,
) -> list[ScheduledEP]:
    """Klein and Pérez's Algorithm 1: schedule the applications offline, in the order given.

    Parameters
    ----------
    profiles
        Each application's requested EP, ``(duration_s, nodes)`` per step.
    nodes
        Nodes in the machine.
    fit_name
        One of :data:`FITS` (``"noX"``, ``"2X"``, ``"2X+c"``, ``"infX"``, ``"infX+c"``).
    expand_limit, compacting
        Override the variant's expand limit (``>= 1``) or compacting.
    origin_s
        No application starts before this time.

    Returns
    -------
    list of ScheduledEP
        In the order given; an EP wider than the machine starts at ``math.inf``.

    Raises
    ------
    ValueError
        For an unknown ``fit_name`` or a limit below 1.

    >>> eps = schedule([[(10.0, 2)], [(5.0, 1), (5.0, 2)]], 3, fit_name="noX")
    >>> [(e.start_s, e.end_s) for e in eps]
    [(0.0, 10.0), (5.0, 15.0)]
    """
    limit, comp = variant(fit_name, expand_limit, compacting)
    occ = Occupancy(origin_s)
    out = []
    for profile in profiles:
        steps = tuple((float(d), int(n)) for d, n in profile)
        starts = fit(steps, occ, nodes, limit, origin_s)
        if comp:
            starts = compact(steps, starts, occ, nodes, limit, origin_s)
        for s, e, n in holds(steps, starts):
            occ.add(s, e, n)
        out.append(ScheduledEP(steps, tuple(starts)))
    return out


def variant(name: str, limit: float | None, comp: bool | None) -> tuple[float, bool]:
    """The expand limit and compacting of variant ``name``, with overrides.

    Raises
    ------
    ValueError
        For an unknown variant or a limit below 1.
    """
    if name not in FITS:
        raise ValueError(f"unknown fit variant {name!r}; the variants are {', '.join(FITS)}")
    base_limit, base_comp = FITS[name]
    limit = base_limit if limit is None else float(limit)
    if not limit >= 1.0:
        raise ValueError(f"the expand limit must be at least 1 (1 means no expansion), got {limit}")
    return limit, base_comp if comp is None else comp


def merge_steps(steps: Iterable[Step]) -> tuple[Step, ...]:
    """Merge consecutive steps with the same node count (the application asks nothing there).

    >>> merge_steps([(10.0, 2), (5.0, 2), (1.0, 3)])
    ((15.0, 2), (1.0, 3))
    """
    out: list[Step] = []
    for d, n in steps:
        if out and out[-1][1] == n:
            out[-1] = (out[-1][0] + d, n)
        else:
            out.append((float(d), int(n)))
    return tuple(out)


__all__ = [
    "FITS",
    "Occupancy",
    "ScheduledEP",
    "Step",
    "compact",
    "fit",
    "holds",
    "merge_steps",
    "schedule",
    "variant",
]
