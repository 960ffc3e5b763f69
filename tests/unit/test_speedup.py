"""Speedup models (Huang et al. eqs. 2-5, Amdahl, linear, Lina's overhead) and resize costs."""

from __future__ import annotations

import random

import pytest

from elastic_slurm.model.speedup import (
    Amdahl,
    DowneyHigh,
    DowneyLow,
    LinaOverhead,
    LinaResizeCost,
    Linear,
    LinearResizeCost,
    NoResizeCost,
    best_size,
)
from elastic_slurm.simulator.costs import ghafoor_cost, lina_cost, ramp

MODELS = [
    Linear(),
    Amdahl(0.95),
    DowneyLow(10, 0.5),
    DowneyHigh(10, 2.0),
    LinaOverhead(0.01, 4),
]


@pytest.mark.parametrize("model", MODELS[:4])
def test_speedup_of_one_node_is_one(model) -> None:  # noqa: ANN001
    assert model.speedup(1) == pytest.approx(1.0)


@pytest.mark.parametrize("model", MODELS)
def test_runtime_scales_by_the_speedup_ratio(model) -> None:  # noqa: ANN001
    assert model.runtime_s(120.0, 3, 3) == 120.0
    t6 = model.runtime_s(120.0, 3, 6)
    assert t6 == pytest.approx(120.0 * model.speedup(3) / model.speedup(6))
    assert model.runtime_s(t6, 6, 3) == pytest.approx(120.0)


def test_linear_and_amdahl_values() -> None:
    assert Linear().runtime_s(100.0, 4, 8) == 50.0
    # Amdahl p = 0.8: S(4) = 1 / (0.2 + 0.2) = 2.5
    assert Amdahl(0.8).speedup(4) == pytest.approx(2.5)
    assert Amdahl(0.0).speedup(64) == 1.0


def test_downey_low_variance_branches_by_hand() -> None:
    m = DowneyLow(average_parallelism=4, sigma=1.0)
    # n <= A: T(n) = (A - s/2)/n + s/2 -> T(2) = 3.5/2 + 0.5 = 2.25; T(1) = A = 4
    assert m.time(1) == pytest.approx(4.0)
    assert m.time(2) == pytest.approx(2.25)
    assert m.speedup(2) == pytest.approx(4 / 2.25)
    # closed form of eq. 3's first branch, A n / (A + s (n - 1) / 2) = 8 / 4.5
    assert m.speedup(2) == pytest.approx(8 / 4.5)
    # A <= n <= 2A - 1: T(n) = s (A - 1/2) / n + 1 - s/2 -> T(5) = 3.5/5 + 0.5 = 1.2
    assert m.time(5) == pytest.approx(1.2)
    # n >= 2A - 1 = 7: T = 1, S = A
    assert m.time(7) == 1.0 and m.speedup(100) == 4.0
    # the branches meet at n = A and n = 2A - 1
    assert (3.5 / 4 + 0.5) == pytest.approx(3.5 / 4 + 1 - 0.5)
    assert m.time(4) == pytest.approx(1.375)


def test_downey_high_variance_by_hand() -> None:
    m = DowneyHigh(average_parallelism=4, sigma=2.0)
    # width A + A s - s = 10; T(n) = s + 10 / n for n <= 10; T(1) = 12 = A (1 + s)
    assert m.time(1) == pytest.approx(12.0)
    assert m.time(5) == pytest.approx(4.0)
    assert m.speedup(5) == pytest.approx(3.0)
    # eq. 5: n A (s + 1) / (s (n + A - 1) + A) = 5*4*3 / (2*8 + 4) = 3
    assert m.speedup(5) == pytest.approx(60 / 20)
    assert m.speedup(10) == pytest.approx(4.0) and m.speedup(50) == pytest.approx(4.0)


def test_lina_overhead_model() -> None:
    m = LinaOverhead(overhead_fraction=0.1, reference_nodes=10)
    # T(n)/T(P) = 0.9 * 10 / n + 0.1 * n / 10: n = 20 -> 0.45 + 0.2 = 0.65
    assert m.runtime_s(100.0, 10, 20) == pytest.approx(65.0)
    # optimum near P sqrt(0.9 / 0.1) = 30
    assert best_size(m, 1, 100) == 30


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Amdahl(1.5), "parallel fraction"),
        (lambda: DowneyLow(0.5, 0.1), "A must be at least 1"),
        (lambda: DowneyLow(4, 1.5), "sigma <= 1"),
        (lambda: DowneyHigh(4, -1), "sigma must be at least 0"),
        (lambda: LinaOverhead(1.0, 4), "overhead_fraction"),
        (lambda: LinearResizeCost(-1.0), ">= 0"),
        (lambda: LinaResizeCost(alpha_s=-0.1), "alpha_s"),
    ],
)
def test_bad_parameters_are_refused(build, message: str) -> None:  # noqa: ANN001
    with pytest.raises(ValueError, match=message):
        build()


def test_speedup_needs_at_least_one_node() -> None:
    with pytest.raises(ValueError, match="1 node or more"):
        Linear().speedup(0)


def test_resize_costs_by_hand() -> None:
    assert NoResizeCost().cost_s(1, 100) == 0.0
    # Ghafoor: C |dp| + C_n = 0.002 * 6 + 0.0015
    assert LinearResizeCost(0.002, 0.0015).cost_s(10, 4) == pytest.approx(0.0135)
    assert LinearResizeCost(0.002, 0.0015).cost_s(4, 4) == 0.0
    # Lina: alpha |dp| + beta / (p1 + p2) + sigma + b |dp|, 4 -> 16
    cost = LinaResizeCost(alpha_s=0.01, beta_s=0.4, sync_s=0.05, process_s=0.1)
    assert cost.cost_s(4, 16) == pytest.approx(0.12 + 0.02 + 0.05 + 1.2)


def test_ramp_draws_stay_in_range_and_favour_low_values() -> None:
    rng = random.Random(3)
    draws = [ramp(rng, 1.0, 3.0) for _ in range(4000)]
    assert min(draws) >= 1.0 and max(draws) <= 3.0
    # mean of the ramp on [a, b] is a + (b - a) / 3
    assert sum(draws) / len(draws) == pytest.approx(1.0 + 2.0 / 3.0, abs=0.03)
    with pytest.raises(ValueError, match="empty range"):
        ramp(rng, 2.0, 1.0)


def test_cost_draws_are_seeded() -> None:
    assert lina_cost(random.Random(5)) == lina_cost(random.Random(5))
    assert ghafoor_cost(random.Random(5)) == LinearResizeCost(0.002, 0.0015)
    c = lina_cost(random.Random(5))
    assert 0.005 <= c.alpha_s <= 0.05 and 0.015 <= c.sync_s <= 0.1


def test_best_size_validates_its_range() -> None:
    with pytest.raises(ValueError, match="1 <= low <= high"):
        best_size(Linear(), 0, 4)
