"""How an application's run time depends on its size: speedup models and the cost of a resize.

Pure functions of node counts, shared by policies (a moldable policy picks a start size from
a job's speedup model; a malleable one ranks victims by their resize cost) and the simulator
(which runs jobs by them). One processor in the papers is one node here.

Speedup models (Huang et al., "Moldable Job Scheduling for HPC as a Service with Application
Speedup Model and Execution Time Information", section 3, eqs. 2-5, and section 3's linear and
Amdahl models; Lina, Ghafoor and Hines, "Scheduling of Elastic Message Passing Applications on
HPC Systems", section 3, for the parallel-overhead model):

* :class:`Linear`: ``S(n) = n``;
* :class:`Amdahl`: ``S(n) = 1 / ((1 - p) + p / n)``;
* :class:`DowneyLow`, :class:`DowneyHigh`: Downey's low- and high-variance models;
* :class:`LinaOverhead`: computation shrinks as ``1/n``, parallel overhead grows as ``n``.

A job's run time at size ``m``, given its run time ``t`` at size ``n``, is
``t * S(n) / S(m)`` (:meth:`SpeedupModel.runtime_s`): the work is the same, only the rate
changes. The simulator uses the same ratio for the part of the work still to do after a
resize (work conservation).

Resize costs (seconds the job spends changing size, doing no useful work):

* :class:`NoResizeCost`: zero (the default);
* :class:`LinearResizeCost`: Ghafoor's adaptation cost ``C * |p1 - p2|`` (thesis eq. 3.16)
  plus a fixed negotiation cost ``C_n`` (section 3.3.4);
* :class:`LinaResizeCost`: Lina et al. section 3: data redistribution
  ``alpha * |dp| + beta / (p1 + p2)``, synchronisation ``sigma`` and process creation or
  termination ``b * |dp|``.

>>> Linear().runtime_s(100.0, 4, 8)
50.0
>>> round(Amdahl(0.9).speedup(10), 4)
5.2632
>>> LinearResizeCost(per_node_s=2.0, fixed_s=0.5).cost_s(4, 7)
6.5
"""

from __future__ import annotations

import abc
from dataclasses import dataclass


def _check_nodes(n: float) -> None:
    if not n >= 1:  # also rejects NaN
        raise ValueError(f"a speedup is defined for 1 node or more, got {n}")


class SpeedupModel(abc.ABC):
    """How much faster a job runs on ``n`` nodes than on one: ``S(n) = T(1) / T(n)``.

    Subclasses are frozen dataclasses (hashable, comparable, safe to share between jobs) that
    implement :meth:`speedup`.
    """

    @abc.abstractmethod
    def speedup(self, n: float) -> float:
        """The speedup on ``n`` nodes (``n >= 1``); ``S(1) = 1``.

        Raises
        ------
        ValueError
            When ``n < 1``.
        """

    def runtime_s(self, runtime_s: float, from_nodes: float, to_nodes: float) -> float:
        """The run time (seconds) on ``to_nodes`` of work taking ``runtime_s`` on ``from_nodes``.

        ``runtime_s * S(from_nodes) / S(to_nodes)``; exactly ``runtime_s`` when the sizes are
        equal.

        Raises
        ------
        ValueError
            When a node count is below 1.
        """
        if from_nodes == to_nodes:
            if not from_nodes >= 1:
                _check_nodes(from_nodes)
            return runtime_s
        return runtime_s * self.speedup(from_nodes) / self.speedup(to_nodes)

    def efficiency(self, n: float) -> float:
        """``S(n) / n``: the fraction of ``n`` nodes' time that is useful work."""
        return self.speedup(n) / n


@dataclass(frozen=True)
class Linear(SpeedupModel):
    """Perfect speedup, ``S(n) = n`` (Huang et al. section 3, the "linear speedup model").

    >>> Linear().speedup(16)
    16.0
    """

    def speedup(self, n: float) -> float:
        """``n``."""
        if not n >= 1:  # tested inline: a call per speedup would cost more than the speedup
            _check_nodes(n)
        return float(n)


@dataclass(frozen=True)
class Amdahl(SpeedupModel):
    """Amdahl's law, ``S(n) = 1 / ((1 - p) + p / n)`` (Huang et al. section 3).

    Parameters
    ----------
    parallel_fraction
        ``p``, the fraction of the single-node run time that parallelises, ``0 <= p <= 1``.

    Raises
    ------
    ValueError
        When ``p`` is outside ``[0, 1]``.
    """

    parallel_fraction: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.parallel_fraction <= 1.0:
            raise ValueError(
                f"Amdahl's parallel fraction must be in [0, 1], got {self.parallel_fraction}"
            )

    def speedup(self, n: float) -> float:
        """``1 / ((1 - p) + p / n)``."""
        if not n >= 1:  # tested inline: a call per speedup would cost more than the speedup
            _check_nodes(n)
        p = self.parallel_fraction
        return 1.0 / ((1.0 - p) + p / n)


@dataclass(frozen=True)
class DowneyLow(SpeedupModel):
    """Downey's low-variance model (Huang et al. eqs. 2 and 3; Downey 1997).

    With average parallelism ``A`` and variance ``sigma`` (``0 <= sigma <= 1``), the run time
    normalised so that ``T(1) = A`` is (eq. 2)::

        T(n) = (A - sigma/2) / n + sigma/2            1 <= n <= A
        T(n) = sigma (A - 1/2) / n + 1 - sigma/2      A <= n <= 2A - 1
        T(n) = 1                                      n >= 2A - 1

    and ``S(n) = T(1) / T(n)``, that is ``A n / (A + sigma (n - 1) / 2)`` on the first branch.
    Eq. 3 as printed in Huang et al. has ``sigma / (2 (n - 1))`` in that denominator, which
    contradicts eq. 2 and Downey's report; we follow eq. 2 (the two other branches agree).

    Parameters
    ----------
    average_parallelism
        ``A >= 1``.
    sigma
        ``0 <= sigma <= 1``; 0 is linear speedup up to ``A``.

    Raises
    ------
    ValueError
        For ``A < 1`` or ``sigma`` outside ``[0, 1]``.

    >>> m = DowneyLow(average_parallelism=8, sigma=0.5)
    >>> round(m.speedup(4), 4), round(m.speedup(20), 4)
    (3.6571, 8.0)
    """

    average_parallelism: float
    sigma: float

    def __post_init__(self) -> None:
        if not self.average_parallelism >= 1:
            raise ValueError(f"A must be at least 1, got {self.average_parallelism}")
        if not 0.0 <= self.sigma <= 1.0:
            raise ValueError(f"the low-variance model needs 0 <= sigma <= 1, got {self.sigma}")

    def time(self, n: float) -> float:
        """Eq. 2: the run time on ``n`` nodes in units where ``T(1) = A``."""
        if not n >= 1:  # tested inline: a call per speedup would cost more than the speedup
            _check_nodes(n)
        a, s = self.average_parallelism, self.sigma
        if n <= a:
            return (a - s / 2.0) / n + s / 2.0
        if n <= 2.0 * a - 1.0:
            return s * (a - 0.5) / n + 1.0 - s / 2.0
        return 1.0

    def speedup(self, n: float) -> float:
        """``T(1) / T(n)`` (eq. 3, corrected as the class docstring says)."""
        return self.average_parallelism / self.time(n)


@dataclass(frozen=True)
class DowneyHigh(SpeedupModel):
    """Downey's high-variance model (Huang et al. eqs. 4 and 5; Downey 1997).

    A sequential part of duration ``sigma`` and a parallel part of duration 1 with parallelism
    ``A + A sigma - sigma`` (eq. 4)::

        T(n) = sigma + (A + A sigma - sigma) / n      1 <= n <= A + A sigma - sigma
        T(n) = sigma + 1                              otherwise

    and ``S(n) = T(1) / T(n) = n A (sigma + 1) / (sigma (n + A - 1) + A)`` (eq. 5), which
    saturates at ``A``. Downey uses this model for ``sigma >= 1``; any ``sigma >= 0`` is
    accepted here.

    Parameters
    ----------
    average_parallelism
        ``A >= 1``.
    sigma
        ``sigma >= 0``.

    Raises
    ------
    ValueError
        For ``A < 1`` or ``sigma < 0``.

    >>> m = DowneyHigh(average_parallelism=8, sigma=2.0)
    >>> round(m.speedup(4), 4), m.speedup(100)
    (3.2, 8.0)
    """

    average_parallelism: float
    sigma: float

    def __post_init__(self) -> None:
        if not self.average_parallelism >= 1:
            raise ValueError(f"A must be at least 1, got {self.average_parallelism}")
        if not self.sigma >= 0.0:
            raise ValueError(f"sigma must be at least 0, got {self.sigma}")

    def time(self, n: float) -> float:
        """Eq. 4: the run time on ``n`` nodes in units where ``T(1) = A (1 + sigma)``."""
        if not n >= 1:  # tested inline: a call per speedup would cost more than the speedup
            _check_nodes(n)
        a, s = self.average_parallelism, self.sigma
        width = a + a * s - s
        return s + (width / n if n <= width else 1.0)

    def speedup(self, n: float) -> float:
        """``T(1) / T(n)`` (eq. 5)."""
        a, s = self.average_parallelism, self.sigma
        return a * (1.0 + s) / self.time(n)


@dataclass(frozen=True)
class LinaOverhead(SpeedupModel):
    """Lina et al. section 3: computation scales as ``1/n``, parallel overhead as ``n``.

    At the reference size ``P`` a fraction ``x`` of the run time is parallel overhead and
    ``1 - x`` computation; on ``n`` nodes they become ``x T(P) n / P`` and
    ``(1 - x) T(P) P / n``. So ``T(n) / T(P) = (1 - x) P / n + x n / P`` and we define
    ``S(n) = 1 / ((1 - x) P / n + x n / P)`` (``S(P) = 1``: only ratios matter). The run time
    is smallest at ``n = P sqrt((1 - x) / x)``; beyond it more nodes slow the job down.

    Parameters
    ----------
    overhead_fraction
        ``x``, ``0 <= x < 1`` (Lina et al. section 5.2 draw it between 0.005 and 0.01).
    reference_nodes
        ``P``, the size at which ``x`` was measured (the job's requested size).

    Raises
    ------
    ValueError
        For ``x`` outside ``[0, 1)`` or ``P < 1``.

    >>> LinaOverhead(0.01, 10).runtime_s(100.0, 10, 20)
    51.5
    """

    overhead_fraction: float
    reference_nodes: float

    def __post_init__(self) -> None:
        if not 0.0 <= self.overhead_fraction < 1.0:
            raise ValueError(f"overhead_fraction must be in [0, 1), got {self.overhead_fraction}")
        if not self.reference_nodes >= 1:
            raise ValueError(f"reference_nodes must be at least 1, got {self.reference_nodes}")

    def speedup(self, n: float) -> float:
        """``1 / ((1 - x) P / n + x n / P)``."""
        if not n >= 1:  # tested inline: a call per speedup would cost more than the speedup
            _check_nodes(n)
        x, p = self.overhead_fraction, self.reference_nodes
        return 1.0 / ((1.0 - x) * p / n + x * n / p)


class ResizeCost(abc.ABC):
    """Seconds a job spends changing from ``from_nodes`` to ``to_nodes``, doing no useful work.

    Subclasses are frozen dataclasses that implement :meth:`cost_s`.
    """

    @abc.abstractmethod
    def cost_s(self, from_nodes: int, to_nodes: int) -> float:
        """The cost in seconds (``>= 0``) of going from ``from_nodes`` to ``to_nodes`` nodes."""


@dataclass(frozen=True)
class NoResizeCost(ResizeCost):
    """Resizes are instantaneous.

    >>> NoResizeCost().cost_s(2, 64)
    0.0
    """

    def cost_s(self, from_nodes: int, to_nodes: int) -> float:
        """0."""
        return 0.0


@dataclass(frozen=True)
class LinearResizeCost(ResizeCost):
    """Ghafoor's adaptation cost ``C * |p1 - p2|`` plus a negotiation cost ``C_n``.

    Thesis section 3.3.5, eq. 3.16 (adaptation, the same for shrinking and expanding) and
    section 3.3.4 (negotiation). The thesis counts negotiation as overhead of the scheduling
    cycle; here it is charged to the job resized, which waits for it.

    Parameters
    ----------
    per_node_s
        ``C``, seconds per node added or removed (``>= 0``).
    fixed_s
        ``C_n``, seconds per resize whatever its size (``>= 0``).

    Raises
    ------
    ValueError
        For a negative cost.
    """

    per_node_s: float = 0.0
    fixed_s: float = 0.0

    def __post_init__(self) -> None:
        if self.per_node_s < 0 or self.fixed_s < 0:
            raise ValueError(
                f"resize costs must be >= 0, got per_node_s={self.per_node_s}, "
                f"fixed_s={self.fixed_s}"
            )

    def cost_s(self, from_nodes: int, to_nodes: int) -> float:
        """``per_node_s * |from - to| + fixed_s``; 0 when the size does not change."""
        if from_nodes == to_nodes:
            return 0.0
        return self.per_node_s * abs(from_nodes - to_nodes) + self.fixed_s


@dataclass(frozen=True)
class LinaResizeCost(ResizeCost):
    """Lina et al. section 3: redistribution, synchronisation and process creation.

    ``td + ts + tp`` with ``td = alpha |p1 - p2| + beta / (p1 + p2)``, ``ts = sigma`` and
    ``tp = b |p1 - p2|``. (The fourth term of their phase time, parallel overhead, belongs to
    the run time: :class:`LinaOverhead`.) Section 5.2 draws ``alpha`` and ``beta`` uniformly in
    ``[0.005, 0.05]`` and ``sigma`` in ``[0.015, 0.1]`` s; it gives no value for ``b``.

    Parameters
    ----------
    alpha_s
        Seconds per node of difference (redistribution).
    beta_s
        Seconds times nodes: redistribution gets cheaper with more nodes involved.
    sync_s
        ``sigma``, seconds per resize.
    process_s
        ``b``, seconds per process created or terminated.

    Raises
    ------
    ValueError
        For a negative parameter.

    >>> LinaResizeCost(alpha_s=0.01, beta_s=0.02, sync_s=0.05).cost_s(8, 16)  # doctest: +ELLIPSIS
    0.1308...
    """

    alpha_s: float = 0.0
    beta_s: float = 0.0
    sync_s: float = 0.0
    process_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("alpha_s", "beta_s", "sync_s", "process_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")

    def cost_s(self, from_nodes: int, to_nodes: int) -> float:
        """``(alpha + b) |dp| + beta / (p1 + p2) + sigma``; 0 when the size does not change."""
        if from_nodes == to_nodes:
            return 0.0
        diff = abs(from_nodes - to_nodes)
        return (
            self.alpha_s * diff
            + self.beta_s / (from_nodes + to_nodes)
            + self.sync_s
            + self.process_s * diff
        )


def best_size(model: SpeedupModel, low: int, high: int) -> int:
    """The smallest size in ``[low, high]`` with the highest speedup (fastest run).

    >>> best_size(LinaOverhead(0.01, 10), 1, 200)
    99
    >>> best_size(Linear(), 3, 7)
    7
    """
    if low < 1 or high < low:
        raise ValueError(f"need 1 <= low <= high, got {low}..{high}")
    best, best_s = low, model.speedup(low)
    for n in range(low + 1, high + 1):
        s = model.speedup(n)
        if s > best_s * (1.0 + 1e-12):
            best, best_s = n, s
    return best


__all__ = [
    "Amdahl",
    "DowneyHigh",
    "DowneyLow",
    "Linear",
    "LinaOverhead",
    "LinaResizeCost",
    "LinearResizeCost",
    "NoResizeCost",
    "ResizeCost",
    "SpeedupModel",
    "best_size",
]


def from_spec(text: str) -> SpeedupModel:
    """A speedup model from its text form: ``amdahl:P``, ``downey:A:SIGMA`` or ``linear``.

    Downey's low-variance model for ``SIGMA <= 1``, high-variance above.

    >>> from_spec("amdahl:0.95")
    Amdahl(parallel_fraction=0.95)

    Raises
    ------
    ValueError
        Unknown form, or values the model refuses.
    """
    parts = text.strip().split(":")
    if parts == ["linear"]:
        return Linear()
    if parts[0] == "amdahl" and len(parts) == 2:
        return Amdahl(float(parts[1]))
    if parts[0] == "downey" and len(parts) == 3:
        a, sigma = float(parts[1]), float(parts[2])
        return DowneyLow(a, sigma) if sigma <= 1 else DowneyHigh(a, sigma)
    raise ValueError(
        f"speedup model {text!r} is not amdahl:P (parallel fraction), downey:A:SIGMA (average "
        "parallelism, variance) or linear"
    )


def to_spec(model: SpeedupModel) -> str:
    """The text form of ``model`` (the inverse of :func:`from_spec`).

    >>> to_spec(DowneyLow(64.0, 0.5))
    'downey:64:0.5'

    Raises
    ------
    ValueError
        The model has no text form (e.g. :class:`LinaOverhead`).
    """
    if isinstance(model, Linear):
        return "linear"
    if isinstance(model, Amdahl):
        return f"amdahl:{model.parallel_fraction:g}"
    if isinstance(model, DowneyLow | DowneyHigh):
        return f"downey:{model.average_parallelism:g}:{model.sigma:g}"
    raise ValueError(f"no text form for speedup model {model!r}")
