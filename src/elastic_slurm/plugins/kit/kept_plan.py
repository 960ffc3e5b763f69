"""One cycle's reservations, kept so that the next cycle need not recompute them all.

Conservative backfilling (Mu'alem and Feitelson, IEEE TPDS 12(6), 2001, section 2) and the
policies built like it (``coorm_equipartition``'s step 1, ``klein_perez``'s Algorithm 2 in
its fast path) place a queue in order, each job at the earliest time it fits. Placed again
from scratch, every job placed last cycle gets the same place again if

1. the holds from now on are last cycle's with its starts added (jobs ended when their
   estimates said, none was resized), on the same machine and with the same estimates;
2. the queue is last cycle's minus its starts, plus arrivals at the end; and
3. no place was for a time now past.

Each place is the earliest that fits; the new holds before a job are never lower (only jobs
later in the queue were started and added), and its old place still fits. :meth:`KeptPlan.follows`
checks (1)-(3) exactly; otherwise the policy places everything again. Schedules are identical
either way: ``tests/sim`` compares every cycle's decisions with a full recomputation.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

INFINITY = float("inf")


class Profile(Protocol):
    """What a kept plan needs of a profile.

    A hold profile (:class:`~.occupancy.Occupancy`) or a free-node one
    (:class:`~.backfill.FreeProfile`).
    """

    def after(self, t: float, /) -> Any:
        """A copy that begins at ``t`` (seconds)."""
        ...

    def same(self, other: Any, /) -> bool:
        """Whether ``other`` describes the same profile."""
        ...


P = TypeVar("P", bound=Profile)


@dataclass
class KeptPlan(Generic[P]):
    """Last cycle's places, and what must hold for a cycle to keep them.

    Parameters
    ----------
    now
        The cycle's time, seconds.
    basis
        What the places depend on besides the holds and the queue: the machine size (nodes)
        or the estimates object. Compared with ``is``, then ``==``.
    base
        The holds (or free profile) with the cycle's starts added: what the next cycle's
        should be, from its own time on.
    final
        The profile after every place made (what the next cycle continues from).
    keep
        The queue's jobs (or items) still waiting, in order; held, so that no id is reused
        while the plan is kept.
    places
        When each of the first ``len(places)`` of them starts (seconds; ``inf`` when it
        never fits).
    ident
        How an entry of ``keep`` is named (its ``id()`` by default): :attr:`ids`.
    """

    now: float
    basis: object
    base: P
    final: P
    keep: Sequence[object]
    places: list[float]
    ident: Callable[[Any], int] = field(default=id, repr=False)

    @functools.cached_property
    def ids(self) -> list[int]:
        """The names of ``keep``'s entries (by ``ident``), in order; made when first asked."""
        return _names(self.keep, self.ident)

    @classmethod
    def of(
        cls,
        now: float,
        basis: object,
        base: P,
        final: P,
        queue: Sequence[Any],
        places: list[float],
        ident: Callable[[Any], int] = id,
    ) -> KeptPlan[P]:
        """The plan of a cycle whose waiting queue is ``queue`` (its starts already removed)."""
        return cls(now, basis, base, final, queue, places, ident)

    def follows(
        self,
        now: float,
        basis: object,
        base: P,
        queue: Sequence[Any],
        ident: Callable[[Any], int] = id,
    ) -> bool:
        """Whether a cycle at ``now`` with these holds and this queue may keep the places.

        Conditions (1)-(3) of the module's docstring; ``ident`` names a queue entry as
        :meth:`of` did.
        """
        n = len(self.keep)
        return (
            now >= self.now
            and (basis is self.basis or basis == self.basis)
            and len(queue) >= n
            and same_entries(queue[:n], self.keep, ident)
            and min(self.places, default=INFINITY) >= now
            and self.base.after(now).same(base)
        )


class IdOf:
    """Names queue entries by the ``id()`` of one of their fields: ``IdOf(2)(e) == id(e[2])``.

    An ``ident`` for :meth:`KeptPlan.of` and :meth:`KeptPlan.follows` that names a whole
    queue without a Python call per entry.

    >>> a, b = object(), object()
    >>> IdOf(1)((0, a)) == id(a), _names([(0, a), (0, b)], IdOf(1)) == [id(a), id(b)]
    (True, True)
    """

    def __init__(self, index: int) -> None:
        self._field = operator.itemgetter(index)

    def __call__(self, entry: Any) -> int:
        """The ``id()`` of the entry's field."""
        return id(self._field(entry))

    def names(self, queue: Sequence[Any]) -> list[int]:
        """Every entry's name, in order."""
        return list(map(id, map(self._field, queue)))

    def fields(self, queue: Sequence[Any]) -> Iterator[Any]:
        """Every entry's field, in order."""
        return map(self._field, queue)


def _names(queue: Sequence[Any], ident: Callable[[Any], int]) -> list[int]:
    """``[ident(e) for e in queue]``."""
    return ident.names(queue) if isinstance(ident, IdOf) else list(map(ident, queue))


def same_entries(queue: Sequence[Any], keep: Sequence[Any], ident: Callable[[Any], int]) -> bool:
    """Whether ``queue`` and ``keep`` (of one length) name the same entries in order.

    ``_names(queue, ident) == _names(keep, ident)``; the entries compared object by object
    first (the same entries have the same names), then, for :class:`IdOf`, their fields (the
    objects are alive, held by ``keep`` and ``queue``: the same ``id`` is the same object).
    """
    if queue is keep and type(queue) is tuple:
        return True
    if all(map(operator.is_, queue, keep)):  # the same entries, so the same names
        return True
    if ident is id:
        return False
    if isinstance(ident, IdOf):
        return all(map(operator.is_, ident.fields(queue), ident.fields(keep)))
    return _names(queue, ident) == _names(keep, ident)
