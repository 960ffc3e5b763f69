"""Resize costs for simulated workloads: the models, and how the papers draw their parameters.

The cost models themselves live in :mod:`elastic_slurm.model.speedup` (policies read them from
``JobView.resize_cost``); they are re-exported here. This module adds the random draws the
papers use to give each application its own costs:

* Ghafoor's thesis, sections 3.3.4 and 3.3.5: negotiation and adaptation costs "low for most
  applications and high for a few", from a *random ramp* distribution whose density falls
  linearly from ``low`` to ``high`` (:func:`ramp`; :func:`ghafoor_cost`);
* Lina et al. section 5.2: ``alpha``, ``beta`` uniform in ``[0.005, 0.05]``, ``sigma`` uniform
  in ``[0.015, 0.1]`` s (:func:`lina_cost`; the same draws as
  :class:`~elastic_slurm.simulator.workload.LinaConversion`).
"""

from __future__ import annotations

import math
import random

from elastic_slurm.model.speedup import (
    LinaResizeCost,
    LinearResizeCost,
    NoResizeCost,
    ResizeCost,
)


def ramp(rng: random.Random, low: float, high: float) -> float:
    """A draw from the random ramp on ``[low, high]``: density ``2 (high - x) / (high - low)^2``.

    By inversion of the distribution function ``F(x) = 1 - ((high - x) / (high - low))^2``:
    ``x = high - (high - low) sqrt(1 - u)`` with ``u`` uniform in ``[0, 1)``.

    Raises
    ------
    ValueError
        When ``low > high``.

    >>> ramp(random.Random(1), 2.0, 2.0)
    2.0
    """
    if low > high:
        raise ValueError(f"empty range: low {low} > high {high}")
    return high - (high - low) * math.sqrt(1.0 - rng.random())


def ghafoor_cost(
    rng: random.Random,
    adaptation_s: tuple[float, float] = (0.002, 0.002),
    negotiation_s: tuple[float, float] = (0.0015, 0.0015),
) -> LinearResizeCost:
    """One application's costs after Ghafoor: ``C`` and ``C_n`` each drawn from a ramp.

    The defaults are the thesis' usual constants (chapter 6: adaptation 2 ms per processor,
    negotiation 1.5 ms); give ranges to draw per application.
    """
    return LinearResizeCost(per_node_s=ramp(rng, *adaptation_s), fixed_s=ramp(rng, *negotiation_s))


def lina_cost(
    rng: random.Random,
    alpha_beta_s: tuple[float, float] = (0.005, 0.05),
    sync_s: tuple[float, float] = (0.015, 0.1),
    process_s: float = 0.0,
) -> LinaResizeCost:
    """One application's resize cost after Lina et al. section 5.2 (uniform draws)."""
    return LinaResizeCost(
        alpha_s=rng.uniform(*alpha_beta_s),
        beta_s=rng.uniform(*alpha_beta_s),
        sync_s=rng.uniform(*sync_s),
        process_s=process_s,
    )


__all__ = [
    "LinaResizeCost",
    "LinearResizeCost",
    "NoResizeCost",
    "ResizeCost",
    "ghafoor_cost",
    "lina_cost",
    "ramp",
]
