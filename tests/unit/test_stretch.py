"""How far a shrink stretches a job's time limit (:mod:`elastic_slurm.controller.stretch`)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic_slurm.controller.stretch import MAX_LIMIT_S, stretched_limit_s
from elastic_slurm.model.speedup import Amdahl


def test_the_time_left_is_scaled_by_the_size_ratio() -> None:
    # 20 of 60 minutes used, 40 left on 6 nodes: at most 120 on 2
    assert stretched_limit_s(start_s=0, now_s=1200, limit_s=3600, before=6, after=2) == 140 * 60


@pytest.mark.parametrize(
    ("limit_s", "before", "after", "now_s"),
    [
        (None, 4, 2, 10),  # no limit
        (math.inf, 4, 2, 10),  # UNLIMITED
        (3600, 2, 4, 10),  # a grow
        (3600, 3, 3, 10),  # the same size
        (3600, 4, 2, 4000),  # past its limit already
    ],
)
def test_nothing_to_stretch(limit_s, before, after, now_s) -> None:
    assert (
        stretched_limit_s(start_s=0, now_s=now_s, limit_s=limit_s, before=before, after=after)
        is None
    )


def test_whole_minutes_and_a_ceiling() -> None:
    assert stretched_limit_s(start_s=0, now_s=0, limit_s=61, before=2, after=1) == 180.0
    huge = stretched_limit_s(start_s=0, now_s=0, limit_s=300 * 86400, before=1000, after=1)
    assert huge == MAX_LIMIT_S


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1 node"):
        stretched_limit_s(start_s=0, now_s=0, limit_s=60, before=2, after=0)
    with pytest.raises(ValueError, match="finite"):
        stretched_limit_s(start_s=math.nan, now_s=0, limit_s=60, before=2, after=1)


@given(
    n=st.integers(2, 64),
    m_frac=st.floats(0.0, 0.99),
    used=st.floats(0.0, 0.99),
    serial=st.floats(0.0, 0.5),
)
def test_the_work_left_fits_for_a_concave_speedup(n, m_frac, used, serial) -> None:
    # a job exactly as long as its limit on n nodes, shrunk to m after `used` of it: under an
    # Amdahl speedup (concave) what is left on m nodes ends by the stretched limit
    m = max(1, int(n * m_frac))
    if m >= n:
        return
    limit = 3600.0
    model = Amdahl(parallel_fraction=1 - serial)
    left_on_m = (1 - used) * model.runtime_s(limit, n, m)
    new = stretched_limit_s(start_s=0, now_s=used * limit, limit_s=limit, before=n, after=m)
    assert new is not None and used * limit + left_on_m <= new + 1e-6
