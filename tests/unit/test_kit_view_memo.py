"""The kit's memo of per-view facts: entries keep their views, and it stays bounded."""

from __future__ import annotations

import gc

from snapshots import job

from elastic_slurm.model.estimates import TRUE_RUNTIMES, USER_ESTIMATES, ends_ignore_now
from elastic_slurm.plugins.kit.view_memo import ViewMemo


def test_an_entry_keeps_its_view_alive_so_its_id_is_not_reused() -> None:
    memo = ViewMemo()
    memo.remember((job(1), "facts"))
    gc.collect()
    others = [job(k) for k in range(2, 200)]  # would likely reuse a freed view's address
    ((view, facts),) = memo.values()
    assert view.job_id == 1 and facts == "facts"
    assert all(id(other) not in memo for other in others)


def test_forgetting_waits_for_the_bound_then_keeps_only_the_views_shown() -> None:
    memo = ViewMemo(factor=2, slack=3)
    views = [job(k) for k in range(20)]
    for view in views[:3]:
        memo.remember((view, view.job_id))
    memo.forget_others(views[:1])  # 3 <= 3 (slack): nothing dropped
    assert len(memo) == 3
    memo.remember((views[3], 3))
    memo.forget_others(views[:1], views[3:4])  # 4 > 3: only the views shown are kept
    assert sorted(facts for _, facts in memo.values()) == [0, 3]
    assert memo.bound == 2 * 2 + 3
    for view in views[4:9]:
        memo.remember((view, view.job_id))
    memo.forget_others(views[8:9])  # 7 <= 7: nothing dropped
    assert len(memo) == 7
    memo.remember((views[9], 9))
    memo.forget_others(views[8:10])  # 8 > 7
    assert sorted(facts for _, facts in memo.values()) == [8, 9]


def test_the_memo_stays_bounded_over_many_cycles() -> None:
    memo = ViewMemo(factor=2, slack=10)
    shown: list = []
    for k in range(2000):  # one view starts per cycle, one ends after 30 cycles
        shown = [*shown[-29:], job(k)]
        for view in shown:
            if memo.get(id(view)) is None:
                memo.remember((view, view.job_id))
        memo.forget_others(shown)
        assert len(memo) <= 2 * 30 + 10 + 1


def test_only_the_built_in_providers_have_ends_that_ignore_now() -> None:
    class History:
        def end_s(self, job: object, now_s: float) -> float:
            return now_s + 60.0

    assert ends_ignore_now(TRUE_RUNTIMES) and ends_ignore_now(USER_ESTIMATES)
    assert not ends_ignore_now(History())  # type: ignore[arg-type]
