"""kit.holds: the jobs split by start and the holds from now, as the plain way builds them."""

from __future__ import annotations

import math
import random

from snapshots import job, snapshot

from elastic_slurm.model import ClusterSnapshot
from elastic_slurm.plugins.kit.holds import holds_from, may_start_now, split_by_start
from elastic_slurm.plugins.kit.occupancy import Occupancy
from elastic_slurm.plugins.kit.queue import submit_order


def test_holds_from_is_one_add_per_hold() -> None:
    rng = random.Random(7)
    for _ in range(200):
        now = rng.choice([0.0, 5.0, 12.5])
        holds = [
            (rng.choice([now - 1.0, now, now + rng.randint(1, 30), math.inf]), rng.randint(0, 4))
            for _ in range(rng.randint(0, 12))
        ]
        plain = Occupancy(now)
        for end, nodes in holds:
            plain.add(now, end, nodes)
        fast = holds_from(now, holds)
        assert (fast.times, fast.vals) == (plain.times, plain.vals), holds


def test_split_by_start_is_the_sorted_split_for_both_kinds_of_snapshot() -> None:
    jobs = [
        job(3, 2, running=True, submit=1.0),
        job(1, 1, submit=2.0),
        job(2, 4, running=True, submit=0.5),
        job(4, 1, submit=2.0),
    ]
    whole = snapshot(*jobs, idle=3, total=9)
    order = sorted(whole.jobs, key=submit_order)
    expected = (
        [j for j in order if j.start_time_s is not None],
        [j for j in order if j.start_time_s is None],
    )
    started, queued = split_by_start(whole)
    assert (list(started), list(queued)) == expected

    def parts_of(pending: list, running: list, known: bool = False) -> ClusterSnapshot:
        names = tuple(n.name for n in whole.nodes)
        return ClusterSnapshot.from_parts(
            whole.time_s,
            tuple(pending),
            tuple(running),
            whole.idle_nodes(),
            names,
            starts_known=known,
        )

    parts = parts_of(expected[1], expected[0])
    started, queued = split_by_start(parts)
    assert (list(started), list(queued)) == expected
    assert "jobs" not in vars(parts)  # not built: no sort
    # pending and running swapped: the views are checked, found wrong, and sorted instead,
    # unless the snapshot's maker guarantees their start times (then they are trusted)
    for known in (False, True):
        swapped = parts_of(expected[0], expected[1], known)
        started, queued = split_by_start(swapped)
        if known:
            assert (list(started), list(queued)) == (expected[1], expected[0])
            assert "jobs" not in vars(swapped)
        else:
            assert (list(started), list(queued)) == expected


def test_may_start_now_looks_at_the_whole_run() -> None:
    occ = Occupancy(0.0)
    occ.add(0.0, 10.0, 2)
    occ.add(20.0, 30.0, 3)
    assert may_start_now(occ, 2, 15.0, 4, 0.0)  # 2 busy until 15
    assert not may_start_now(occ, 2, 25.0, 4, 0.0)  # 3 busy from 20
    assert not may_start_now(occ, 5, 1.0, 4, 0.0)  # wider than the machine
