"""What a policy worked out from a job's view, kept across cycles by the view's identity.

A snapshot's job views (:class:`~elastic_slurm.model.snapshot.JobView`) are immutable, and the
simulator and the controller hand a policy the same view object for a job until something
about the job changes. So whatever depends on a view alone (a job's request, its release time,
its role in a cycle) can be worked out once and looked up by ``id(view)`` in later cycles.
Two things make that safe, and :class:`ViewMemo` does both:

* every entry is a tuple whose first item is the view itself: while the entry lives, the view
  lives, so its ``id`` cannot be given to another object;
* :meth:`ViewMemo.forget_others` drops the entries of views no longer shown once the memo has
  grown well past the views of one cycle, so its size stays proportional to a cycle's jobs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from elastic_slurm.model.snapshot import JobView


class ViewMemo(dict[int, tuple[Any, ...]]):
    """A dict from ``id(view)`` to ``(view, *facts)``, bounded by the views shown lately.

    Hot loops read it as the dict it is (``memo.get(id(view))``, ``None`` when not known);
    :meth:`remember` adds an entry. Both take fixed arguments, which keeps their calls cheap
    in hot loops (no ``*args``). :meth:`forget_others` keeps it bounded: it prunes only
    once the memo holds more than ``factor`` times the entries it kept at its last pruning
    plus ``slack`` (entries), so a cycle's call costs a comparison and pruning is O(1) per
    cycle amortised; the memo never holds more than ``factor`` times the most views shown in
    one call plus ``slack``, and about one cycle's entries after a pruning.

    >>> from elastic_slurm.model.snapshot import JobKind, JobState
    >>> a, b = (JobView(i, JobKind.RIGID, JobState.PENDING, (), 4, 4, 4, 0.0) for i in (1, 2))
    >>> memo = ViewMemo(factor=1, slack=1)
    >>> memo.remember((a, 3))[1], memo.get(id(a))[1], memo.get(id(b))
    (3, 3, None)
    >>> _ = memo.remember((b, 4))
    >>> memo.forget_others([b]); list(memo.values()) == [(b, 4)]
    True
    """

    __slots__ = ("bound", "factor", "slack")

    def __init__(self, factor: int = 4, slack: int = 256) -> None:
        super().__init__()
        self.factor, self.slack = factor, slack
        self.bound = slack  # the size above which forget_others prunes

    def remember(self, entry: tuple[Any, ...]) -> tuple[Any, ...]:
        """Keep ``entry``, a tuple ``(view, *facts)``, for its view; return it."""
        self[id(entry[0])] = entry
        return entry

    def forget_others(self, shown: Sequence[JobView], more: Sequence[JobView] = ()) -> None:
        """Drop the entries of views neither in ``shown`` nor in ``more``, once grown enough.

        ``shown`` and ``more``: the views of this cycle (for example the running and the
        pending jobs).
        Nothing is dropped while the memo holds at most :attr:`bound` entries; after a
        pruning, the bound is ``factor`` times the entries kept plus ``slack``.
        """
        if len(self) <= self.bound:
            return
        keep = {*map(id, shown), *map(id, more)}
        for key in [key for key in self if key not in keep]:
            del self[key]
        self.bound = self.factor * len(self) + self.slack


__all__ = ["ViewMemo"]
