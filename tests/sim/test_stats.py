"""Percentiles of per-job values and Student t confidence intervals over seeds."""

from __future__ import annotations

import importlib.util
import math
import statistics
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_slurm.simulator.stats import (
    Estimate,
    mean_ci,
    over_runs,
    percentiles,
    ranks,
    t_quantile,
)

needs_scipy = pytest.mark.skipif(
    importlib.util.find_spec("scipy") is None,
    reason="SciPy is not installed (Student's t quantiles; the sim extra should bring it)",
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1e7, allow_nan=False), min_size=1, max_size=300))
def test_percentiles_agree_with_numpy_linear(values: list[float]) -> None:
    got = percentiles(values, (0, 1, 50, 95, 99, 100))
    want = np.percentile(values, [0, 1, 50, 95, 99, 100])
    assert list(got) == [0, 1, 50, 95, 99, 100]
    assert list(got.values()) == pytest.approx(list(want), rel=1e-9, abs=1e-6)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(st.floats(-1e9, 1e9, allow_nan=False), st.just(math.inf)),
        min_size=2,
        max_size=400,
    )
)
def test_percentiles_are_statistics_quantiles_to_the_bit_sorted_or_partitioned(values) -> None:
    # the same arithmetic as statistics.quantiles (inclusive), also when the sample comes as
    # a NumPy array partitioned at the ranks read (the compiled engine's metrics)
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    ps = (1, 25, 50, 95, 99)
    want = {p: float(cuts[p - 1]) for p in ps}
    same = lambda a, b: a == b or (math.isnan(a) and math.isnan(b))  # noqa: E731
    got = percentiles(values, ps)
    assert all(same(got[p], want[p]) for p in ps), (got, want)
    array = np.asarray(values)
    with np.errstate(all="raise"):
        partitioned = np.partition(array, ranks(len(values), ps))
        got = percentiles(partitioned, ps, ordered=True)
    assert all(same(got[p], want[p]) for p in ps), (got, want)


def test_percentiles_of_a_known_sample_and_edge_cases() -> None:
    # waits of the four-job EASY example: 0, 90, 0, 120
    assert percentiles([0, 90, 0, 120]) == pytest.approx({50: 45.0, 95: 115.5, 99: 119.1})
    assert percentiles([]) == {50: 0.0, 95: 0.0, 99: 0.0}
    with pytest.raises(ValueError, match="whole number in \\[0, 100\\]"):
        percentiles([1.0], (101,))


@needs_scipy
def test_mean_ci_matches_the_t_table() -> None:
    # n = 5, s = sqrt(2.5), t(0.975, 4) = 2.776445 (any t table)
    e = mean_ci([1.0, 2.0, 3.0, 4.0, 5.0])
    assert e.mean == 3.0
    assert e.half_width == pytest.approx(2.776445 * (2.5**0.5) / 5**0.5, rel=1e-6)
    assert e.low == pytest.approx(3.0 - e.half_width)
    assert e.high == pytest.approx(3.0 + e.half_width)
    assert mean_ci([4.0]) == Estimate(4.0, None, 1, 0.95)
    assert mean_ci([4.0, 4.0, 4.0]).half_width == 0.0
    # a wider level gives a wider interval
    assert mean_ci([1.0, 2.0, 4.0], 0.99).half_width > mean_ci([1.0, 2.0, 4.0]).half_width
    with pytest.raises(ValueError, match="at least one value"):
        mean_ci([])
    with pytest.raises(ValueError, match="confidence level"):
        mean_ci([1.0, 2.0], 1.5)


@needs_scipy
def test_over_runs_aggregates_numeric_entries() -> None:
    runs = [{"a": 1.0, "b": "x", "seed": 0}, {"a": 3.0, "b": "y", "seed": 1}]
    got = over_runs(runs, ["a", "b", "missing"])
    assert list(got) == ["a"]
    assert got["a"].mean == 2.0 and got["a"].n == 2
    assert got["a"].as_dict()["ci_low"] == pytest.approx(2.0 - got["a"].half_width)


def test_without_scipy_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "scipy.stats", None)
    with pytest.raises(ImportError, match=r"elastic-slurm\[sim\]"):
        t_quantile(0.975, 3)
    assert mean_ci([2.0]).half_width is None  # one run needs no t quantile
