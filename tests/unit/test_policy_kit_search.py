"""The kit's earliest-fit searches against a brute force, over random profiles and queries.

``Occupancy.earliest`` and ``FreeProfile.earliest`` skip what an earlier search of the same
profile ruled out; these tests check, query after query, that they still answer what trying
every candidate start (the origin or query time, and every breakpoint) answers.
"""

from __future__ import annotations

import bisect
import random

import pytest

from elastic_slurm.plugins.kit.backfill import FreeProfile
from elastic_slurm.plugins.kit.occupancy import Occupancy

INF = float("inf")


def _busy_over(occ: Occupancy, t0: float, t1: float) -> int:
    """Most nodes busy on [t0, t1), read segment by segment."""
    j = max(0, bisect.bisect_right(occ.times, t0) - 1)
    best = occ.vals[j] if occ.times[j] <= t0 else 0
    for k in range(j + 1, len(occ.times)):
        if occ.times[k] >= t1:
            break
        best = max(best, occ.vals[k])
    return best


def _brute_occupancy(occ: Occupancy, need: int, d: float, cap: int, t0: float) -> float:
    if need > cap:
        return INF
    if not d > 0.0:
        return t0
    for s in [t0, *(t for t in occ.times if t > t0)]:
        if cap - _busy_over(occ, s, s + d) >= need:
            return s
    return INF


@pytest.mark.parametrize("seed", range(40))
def test_occupancy_earliest_is_the_first_start_that_fits(seed: int) -> None:
    rng = random.Random(seed)
    cap = rng.randint(3, 8)
    occ = Occupancy(0.0)
    for _ in range(120):
        if rng.random() < 0.7:  # queries from the origin, a breakpoint or anywhere
            # few distinct needs and start times, so that searches build on earlier ones
            need = rng.choice([1, 2, 3, cap + 1])
            d = rng.choice([0.0, float(rng.randint(1, 30)), rng.uniform(0.5, 30.0), INF])
            t0 = rng.choice([0.0, 0.0, rng.uniform(0.0, 60.0), rng.choice(occ.times)])
            assert occ.earliest(need, d, cap, t0) == _brute_occupancy(occ, need, d, cap, t0)
        else:
            s = float(rng.randint(0, 60))
            e = rng.choice([s + rng.randint(1, 30), INF])
            nodes = rng.randint(1, 3) if rng.random() < 0.85 else -1
            if nodes < 0 and occ.value_at(s) < 1:
                continue
            occ.add(s, e, nodes)


def _brute_free(p: FreeProfile, need: int, d: float) -> int:
    """The first breakpoint from which every segment that ``[t, t + d)`` overlaps fits."""
    n = len(p.times)
    for i, t in enumerate(p.times):
        window = [k for k in range(i, n) if k == i or p.times[k] < t + d]
        if all(p.free[k] >= need for k in window):
            return i
    return n


@pytest.mark.parametrize("seed", range(40))
def test_free_profile_earliest_is_the_first_breakpoint_that_fits(seed: int) -> None:
    rng = random.Random(seed)
    releases = [(float(rng.randint(1, 50)), rng.randint(1, 4)) for _ in range(rng.randint(0, 8))]
    p = FreeProfile(0.0, rng.randint(0, 4), releases)
    for _ in range(60):
        need, d = rng.randint(1, 8), rng.choice([0.0, float(rng.randint(1, 40))])
        i = p.earliest(need, d)
        assert i == _brute_free(p, need, d)
        if i < len(p.times):
            p.reserve(i, need, d)


@pytest.mark.parametrize("seed", range(40))
def test_free_profile_earliest_after_longer_and_unbounded_runs_of_the_same_width(
    seed: int,
) -> None:
    # the same widths asked again and again, for runs as long, longer, shorter and for ever:
    # a search may start where one as long or shorter for that width ended, never earlier
    rng = random.Random(1000 + seed)
    releases = [(float(rng.randint(1, 50)), rng.randint(1, 4)) for _ in range(rng.randint(0, 8))]
    releases += [(INF, rng.randint(1, 2))] if rng.random() < 0.3 else []
    p = FreeProfile(0.0, rng.randint(0, 4), releases)
    for _ in range(80):
        need = rng.randint(1, 4)
        d = rng.choice([0.0, INF, float(rng.randint(1, 40)), float(rng.randint(1, 40))])
        i = p.earliest(need, d)
        assert i == _brute_free(p, need, d)
        if i < len(p.times) and rng.random() < 0.7:
            p.reserve(i, need, d)


def test_occupancy_searches_again_from_what_the_last_one_ruled_out() -> None:
    occ = Occupancy(0.0)
    occ.add(0.0, 10.0, 3)  # 3 of 4 nodes busy until 10 s
    assert occ.earliest(2, 5.0, 4, 0.0) == 10.0
    assert occ.earliest(2, 5.0, 4, 0.0) == 10.0  # the same answer, searched from 10 s
    assert occ.earliest(2, 5.0, 4, 12.0) == 12.0
    assert occ.earliest(1, 5.0, 4, 0.0) == 0.0  # another need: another search
    occ.add(10.0, 20.0, 3)
    assert occ.earliest(2, 5.0, 4, 0.0) == 20.0  # more busy: the old bound still holds
    occ.add(0.0, 10.0, -3)  # fewer busy: what was ruled out may fit now
    assert occ.earliest(2, 5.0, 4, 0.0) == 0.0
