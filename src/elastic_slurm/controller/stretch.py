"""How far a shrink stretches a job's time limit.

Slurm ends a job at its time limit whatever its size, but a malleable job shrunk from ``n``
to ``m`` nodes computes more slowly: without a longer limit, a shrink the controller chose
can make a job that would have finished in time run out of time (seen in the 32-node soak:
jobs shrunk to one node ran past their limits and were lost). The simulator already models
this: a job's estimated run time follows its size through its speedup model
(:class:`elastic_slurm.simulator.cluster.VirtualCluster`).

The rule. Let ``S(k)`` be the job's speedup on ``k`` nodes, concave with ``S(0) = 0`` (every
speedup model of the project is: linear, Amdahl, Downey). Then ``S(k) / k`` does not grow
with ``k``, so for ``m < n``: ``S(n) / S(m) <= n / m``. Work that needed at most ``R`` more
seconds on ``n`` nodes needs at most ``R * n / m`` on ``m``. With ``R`` taken as what the
limit still allows (the controller does not know the work left), the stretched limit is

    elapsed + (limit - elapsed) * n / m

rounded up to whole minutes (Slurm's unit). A grow does not shorten the limit: nothing
bounds how little a job gains from more nodes. The limit never exceeds :data:`MAX_LIMIT_S`.
"""

from __future__ import annotations

import math

#: Longest time limit the controller ever sets (seconds): 365 days.
MAX_LIMIT_S = 365 * 86400.0


def stretched_limit_s(
    *, start_s: float, now_s: float, limit_s: float | None, before: int, after: int
) -> float | None:
    """A job's time limit after a shrink (seconds from its start), or ``None``: unchanged.

    Parameters
    ----------
    start_s, now_s
        When the job started and now (epoch seconds).
    limit_s
        Its time limit (seconds from its start); ``None`` or infinite: no limit.
    before, after
        Its node counts before and after the shrink (nodes, ``after >= 1``).

    Returns
    -------
    float | None
        Whole minutes, in seconds, at most :data:`MAX_LIMIT_S`; ``None`` if the job has no
        limit, the resize is not a shrink, its limit has already passed, or the stretched
        limit is not longer than today's.

    Raises
    ------
    ValueError
        ``after`` is less than 1, or a time is not finite.

    >>> stretched_limit_s(start_s=0, now_s=600, limit_s=3600, before=4, after=2) / 60
    110.0
    >>> stretched_limit_s(start_s=0, now_s=600, limit_s=3600, before=2, after=4) is None
    True
    """
    if after < 1:
        raise ValueError(f"a job keeps at least 1 node, got {after}")
    if not (math.isfinite(start_s) and math.isfinite(now_s)):
        raise ValueError(f"start {start_s} and now {now_s} must be finite")
    if limit_s is None or not math.isfinite(limit_s) or after >= before:
        return None
    elapsed = max(0.0, now_s - start_s)
    left = limit_s - elapsed
    if left <= 0:
        return None
    stretched = elapsed + left * before / after
    minutes = min(math.ceil(stretched / 60.0), MAX_LIMIT_S / 60.0)
    new = minutes * 60.0
    return new if new > limit_s else None


__all__ = ["MAX_LIMIT_S", "stretched_limit_s"]
