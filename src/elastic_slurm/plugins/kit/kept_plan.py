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

from collections.abc import Callable, Sequence
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
    ids
        The ``id()`` of the queue's jobs (or items) still waiting, in order.
    places
        When each of the first ``len(places)`` of them starts (seconds; ``inf`` when it
        never fits).
    keep
        What ``ids`` identify, held so that no id is reused while the plan is kept.
    """

    now: float
    basis: object
    base: P
    final: P
    ids: list[int]
    places: list[float]
    keep: Sequence[object] = field(default=(), repr=False)

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
        return cls(now, basis, base, final, list(map(ident, queue)), places, queue)

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
        n = len(self.ids)
        return (
            now >= self.now
            and (basis is self.basis or basis == self.basis)
            and len(queue) >= n
            and list(map(ident, queue[:n])) == self.ids
            and min(self.places, default=INFINITY) >= now
            and self.base.after(now).same(base)
        )
