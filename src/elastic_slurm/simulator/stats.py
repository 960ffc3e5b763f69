"""Statistics of simulation results: percentiles of per-job values, and means over seeds.

* :func:`percentiles`: the p-th percentiles of a sample, by linear interpolation between the
  closest ranks (Hyndman and Fan's definition 7: NumPy's default, R's ``quantile``, Excel's
  ``PERCENTILE.INC``; the arithmetic of :func:`statistics.quantiles` with ``method="inclusive"``,
  for the percentiles asked only);
* :func:`mean_ci`: the mean of a sample of independent runs (one per seed) and the half-width
  of its Student t confidence interval, ``t_{1-a/2, n-1} * s / sqrt(n)`` with ``s`` the sample
  standard deviation (Jain, "The Art of Computer Systems Performance Analysis", 1991,
  section 13.2). The t quantile comes from SciPy (``scipy.stats.t.ppf``); without SciPy
  :func:`mean_ci` raises :class:`ImportError` naming the extra to install.

Percentiles need only the standard library; SciPy is imported only when an interval is drawn.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The percentiles reported for per-job measures (wait, bounded slowdown).
PERCENTILES = (50, 95, 99)


def percentiles(
    values: Sequence[float], ps: Sequence[int] = PERCENTILES, *, ordered: bool = False
) -> dict[int, float]:
    """The ``ps``-th percentiles of ``values`` (linear interpolation between ranks).

    Parameters
    ----------
    values
        The sample (any order, unless ``ordered``); empty gives 0 for every percentile.
    ps
        Whole percentiles in ``[0, 100]``.
    ordered
        ``values`` need no sorting: each position the percentiles read (:func:`ranks`)
        already holds the value it has in the sorted sample (a sorted list, or a NumPy
        array partitioned at those ranks).

    Returns
    -------
    dict
        ``{p: value}`` for each ``p``.

    Raises
    ------
    ValueError
        For a percentile outside ``[0, 100]``.

    >>> percentiles([1.0, 2.0, 3.0, 4.0, 5.0], (0, 50, 95, 100))
    {0: 1.0, 50: 3.0, 95: 4.8, 100: 5.0}
    >>> percentiles([7.0])
    {50: 7.0, 95: 7.0, 99: 7.0}
    """
    for p in ps:
        if not (isinstance(p, int) and 0 <= p <= 100):
            raise ValueError(f"a percentile must be a whole number in [0, 100], got {p!r}")
    n = len(values)
    if n == 0:
        return {p: 0.0 for p in ps}
    if n == 1:
        return {p: float(values[0]) for p in ps}
    data = values if ordered else sorted(values)
    out = {}
    for p in ps:
        if p == 0:
            out[p] = float(min(values))
        elif p == 100:
            out[p] = float(max(values))
        else:  # statistics.quantiles(data, n=100, method="inclusive")[p - 1], alone
            j, delta = divmod(p * (n - 1), 100)
            low, high = float(data[j]), float(data[j + 1])  # Python's (NumPy's would warn)
            out[p] = (low * (100 - delta) + high * delta) / 100
    return out


def ranks(n: int, ps: Sequence[int] = PERCENTILES) -> list[int]:
    """The positions of a sorted sample of ``n >= 2`` values that :func:`percentiles` reads.

    For ``numpy.partition(sample, ranks(n, ps))``, which puts the values of those ranks in
    place in ``O(n)``, instead of sorting (then ``percentiles(..., ordered=True)``).

    >>> ranks(5, (50, 95))
    [2, 3, 4]
    """
    out = set()
    for p in ps:
        j = p * (n - 1) // 100
        out.update((j, min(j + 1, n - 1)))
    return sorted(out)


@dataclass(frozen=True)
class Estimate:
    """A mean over independent runs with its confidence interval.

    Attributes
    ----------
    mean
        The sample mean (the unit of the values).
    half_width
        Half-width of the confidence interval (same unit); ``None`` for fewer than two runs.
    n
        Number of runs.
    confidence
        The confidence level, for example 0.95.
    """

    mean: float
    half_width: float | None
    n: int
    confidence: float

    @property
    def low(self) -> float | None:
        """Lower end of the interval (``None`` without an interval)."""
        return None if self.half_width is None else self.mean - self.half_width

    @property
    def high(self) -> float | None:
        """Upper end of the interval (``None`` without an interval)."""
        return None if self.half_width is None else self.mean + self.half_width

    def as_dict(self) -> dict[str, float | int | None]:
        """``mean``, ``ci_low``, ``ci_high``, ``ci_half_width``, ``n``, ``confidence``."""
        return {
            "mean": self.mean,
            "ci_low": self.low,
            "ci_high": self.high,
            "ci_half_width": self.half_width,
            "n": self.n,
            "confidence": self.confidence,
        }


def t_quantile(probability: float, df: int) -> float:
    """The ``probability`` quantile of Student's t with ``df`` degrees of freedom (SciPy).

    Raises
    ------
    ImportError
        SciPy is not installed (the message names the extra).
    ValueError
        For ``df < 1`` or a probability outside ``(0, 1)``.

    For example ``t_quantile(0.975, 4)`` is 2.7764 (any t table).
    """
    if df < 1:
        raise ValueError(f"Student's t needs at least 1 degree of freedom, got {df}")
    if not 0 < probability < 1:
        raise ValueError(f"a quantile's probability must be in (0, 1), got {probability}")
    try:
        from scipy.stats import t
    except ImportError as exc:
        raise ImportError(
            "confidence intervals need SciPy (Student's t): pip install 'elastic-slurm[sim]' "
            "or pip install scipy"
        ) from exc
    return float(t.ppf(probability, df))


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> Estimate:
    """The mean of ``values`` and its Student t confidence interval.

    Parameters
    ----------
    values
        One value per independent run (seed).
    confidence
        The level, in ``(0, 1)``.

    Returns
    -------
    Estimate
        ``half_width`` is ``None`` for a single value, 0 when every value is the same.

    Raises
    ------
    ValueError
        For no values or a level outside ``(0, 1)``.
    ImportError
        For two values or more without SciPy.

    For ``[10, 12, 14]``: mean 12, ``s = 2``, ``t_{0.975, 2} = 4.303``, half-width
    ``4.303 * 2 / sqrt(3) = 4.968``. Without SciPy only the cases that need no t quantile
    work:

    >>> mean_ci([10.0]), mean_ci([3.0, 3.0]).half_width
    (Estimate(mean=10.0, half_width=None, n=1, confidence=0.95), 0.0)
    """
    if not 0 < confidence < 1:
        raise ValueError(f"the confidence level must be in (0, 1), got {confidence}")
    n = len(values)
    if n == 0:
        raise ValueError("a mean needs at least one value")
    mean = math.fsum(values) / n
    if n == 1:
        return Estimate(mean, None, 1, confidence)
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    if var == 0:
        return Estimate(mean, 0.0, n, confidence)
    t = t_quantile(0.5 + confidence / 2, n - 1)
    return Estimate(mean, t * math.sqrt(var / n), n, confidence)


def over_runs(
    summaries: Sequence[Mapping[str, Any]], keys: Sequence[str], confidence: float = 0.95
) -> dict[str, Estimate]:
    """Mean and confidence interval of each of ``keys`` over runs (one summary per seed).

    Parameters
    ----------
    summaries
        One dict per run (:meth:`~elastic_slurm.simulator.replay.SimResult.summary`).
    keys
        The numeric entries to aggregate (missing or non-numeric ones are left out).
    confidence
        The level of the intervals.

    Raises
    ------
    ValueError
        For no runs.
    ImportError
        For two runs or more without SciPy.

    >>> runs = [{"avg_wait_s": 12.0, "policy": "fcfs"}, {"avg_wait_s": 12.0, "policy": "fcfs"}]
    >>> over_runs(runs, ["avg_wait_s", "policy"])
    {'avg_wait_s': Estimate(mean=12.0, half_width=0.0, n=2, confidence=0.95)}
    """
    if not summaries:
        raise ValueError("no runs to aggregate")
    out = {}
    for key in keys:
        values = [s.get(key) for s in summaries]
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            out[key] = mean_ci([float(v) for v in values], confidence)  # type: ignore[arg-type]
    return out


__all__ = ["PERCENTILES", "Estimate", "mean_ci", "over_runs", "percentiles", "t_quantile"]
