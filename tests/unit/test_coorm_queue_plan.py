"""coorm's compiled cycle (``QueuePlan``) against its Python path, cycle after cycle.

``_Cycle.nonpreemptible_view`` without the kernel (``holds_from``, :class:`KeptPlan`, the
Python scan ``_Cycle._scan``) is the definition; with the kernel (compiled by Numba, and as
plain Python) it runs :func:`kit.placement.queue_cycle` in one call. Over random sequences of
cycles whose holds and queues follow the last cycle's or not, both must start the same jobs,
keep or recompute the plan alike, and leave the same plan (places, holds with the starts,
final profile, queue).
"""

from __future__ import annotations

import math
from typing import Any
from unittest import mock

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from snapshots import job

from elastic_slurm.plugins.kit import compiled_placement
from elastic_slurm.plugins.kit.compiled_placement import ArrayProfile, QueuePlan, kernel, plain
from elastic_slurm.plugins.kit.kept_plan import KeptPlan
from elastic_slurm.plugins.policies import coorm

pytest.importorskip("numpy")

INF = math.inf
TIMES = st.integers(0, 30).map(lambda k: k / 2.0)
ENDS = st.one_of(TIMES, st.just(INF))
DURATIONS = st.one_of(st.integers(0, 24).map(lambda k: k / 2.0), st.just(INF))
CYCLES = st.lists(
    st.tuples(
        st.sampled_from([0.0, 0.0, 0.5, 1.0, 2.0]),  # time since the last cycle
        st.booleans(),  # the holds: last cycle's with its starts (else drawn anew)
        st.booleans(),  # the queue: last cycle's without its starts, then arrivals
        st.lists(st.tuples(ENDS, st.integers(1, 4)), max_size=5),  # holds drawn
        st.lists(st.tuples(st.integers(1, 10), DURATIONS), max_size=8),  # arrivals
    ),
    min_size=1,
    max_size=7,
)


class _Chain:
    """One policy's cycles: its plan and request cache, run with or without a kernel."""

    def __init__(self, k: compiled_placement.Kernel | None) -> None:
        self.kernel = k
        self.plan: Any = None
        self.requests = coorm._Requests()
        self.followed = False

    def cycle(self, now: float, cap: int, running: list[Any], pending: tuple[Any, ...]) -> Any:
        cycle = object.__new__(coorm._Cycle)
        cycle.config, cycle.now, cycle.cap = coorm.EquiPartition.Config(), now, cap
        cycle.running, cycle.pending = running, pending
        cycle.run = coorm._Running.of(running, cycle.config, None)
        follows, compiled = KeptPlan.follows, QueuePlan.cycle
        self.followed = False

        def noted(plan: KeptPlan[Any], *args: Any) -> bool:
            self.followed = follows(plan, *args)
            return self.followed

        def noted_compiled(plan: QueuePlan, *args: Any) -> tuple[list[int], Any, bool]:
            out = compiled(plan, *args)
            self.followed = out[2]
            return out

        with (
            mock.patch.object(compiled_placement, "kernel", lambda: self.kernel),
            mock.patch.object(KeptPlan, "follows", noted),
            mock.patch.object(QueuePlan, "cycle", noted_compiled),
        ):
            self.plan = cycle.nonpreemptible_view(self.plan, self.requests)
        return cycle


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 9), CYCLES)
# the starts of a cycle join its holds, and the next cycle at the same time keeps its plan
@example(2, [(0.0, True, True, [], [(1, 1.0), (2, 5.0)])] * 2)
@example(3, [(0.0, True, True, [(4.0, 1)], [(2, 4.0), (3, 2.0), (1, 1.0), (1, 0.0)])] * 3)
# a kept reservation for the new now starts; a zero duration as wide as the machine after
# the scan stopped (no node left now) starts too
@example(3, [(0.0, False, True, [(1.0, 2)], [(2, 1.0), (1, 0.5)]), (1.0, True, True, [], [])])
@example(2, [(0.0, False, True, [], [(2, 5.0), (2, 0.0)])])
def test_the_compiled_cycle_is_the_python_cycle(cap: int, cycles: list[Any]) -> None:
    compiled = kernel()
    assert compiled is not None, "numba is installed with the test extra"
    for k in (compiled, plain()):
        python, fast = _Chain(None), _Chain(k)
        now, running, pending, made = 0.0, [], (), 0
        for dt, same_holds, same_queue, holds, arrivals in cycles:
            now += dt
            if not same_holds:
                running = []
                for end, nodes in holds:
                    made += 1
                    running.append(job(made, nodes, running=True, end=end))
            running = [j for j in running if j.estimated_end_s > now]  # the others ended
            if not same_queue:
                pending = ()
            for nodes, duration in arrivals:
                made += 1
                walltime = None if duration == INF else duration
                pending += (job(made, nodes, walltime=walltime),)
            want = python.cycle(now, cap, running, pending)
            got = fast.cycle(now, cap, running, pending)
            assert got.starts == want.starts
            assert fast.followed == python.followed
            assert got.occ.value_at(now) == want.occ.value_at(now)
            kept, plan = python.plan, fast.plan
            assert plan.queue == kept.keep and all(map(lambda a, b: a is b, plan.queue, kept.keep))
            assert (plan.now, plan.cap) == (kept.now, kept.basis)
            assert plan.kept[4][: plan.p].tolist() == kept.places
            base = plan.kept[0][: plan.base_n].tolist(), plan.kept[1][: plan.base_n].tolist()
            assert base == (kept.base.times, kept.base.vals)
            assert ArrayProfile(plan.kept[2], plan.kept[3], plan.final_n).same(kept.final)
            # the starts run until their estimates, as the simulator starts them
            for view in want.starts:
                made += 1
                end = now + (INF if view.walltime_s is None else view.walltime_s)
                running = [*running, job(made, view.nodes_requested, running=True, end=end)]
            pending = kept.keep
