"""Block distributions of axis 0 and the plan for moving rows between two of them.

This module is pure (no MPI, no NumPy, no I/O): it only does integer arithmetic, so the same plan
is computed identically and without communication on every rank, in the controller and in tests.

A global array of shape ``(global_rows, *trailing)`` is split along axis 0 (its rows) into
``parts`` contiguous blocks, one per owner, in owner order. When the rows do not divide evenly,
the first ``global_rows % parts`` owners get one extra row; so block sizes differ by at most one
row, and owners at the end get 0 rows when ``global_rows < parts``. Owner ``p`` is the MPI rank
``p`` of the communicator that holds the data.

>>> BlockRows(global_rows=10, parts=4).counts()
(3, 3, 2, 2)
>>> for t in transfer_plan(10, src_parts=2, dst_parts=3):
...     print(t)
Transfer(src=0, dst=0, start=0, stop=4)
Transfer(src=0, dst=1, start=4, stop=5)
Transfer(src=1, dst=1, start=5, stop=7)
Transfer(src=1, dst=2, start=7, stop=10)
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["BlockRows", "Transfer", "transfer_plan"]


def _as_int(value: object, what: str) -> int:
    """Return ``value`` as a Python int; ``bool`` and non-integers raise :class:`TypeError`."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an integer, got the bool {value!r}")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError as exc:
        raise TypeError(f"{what} must be an integer, got {type(value).__name__} {value!r}") from exc


@dataclass(frozen=True)
class BlockRows:
    """A 1-D block distribution of axis 0 of a global array over ``parts`` owners.

    Part ``p`` owns the global rows ``rows_of(p) == (start, stop)``, a half-open range; its local
    array has shape ``(stop - start, *trailing)`` where ``trailing`` is the global shape without
    axis 0. The first ``global_rows % parts`` parts own ``global_rows // parts + 1`` rows, the
    others ``global_rows // parts`` (0 when ``global_rows < parts``).

    Parameters
    ----------
    global_rows
        Length of axis 0 of the global array, in rows; ``>= 0``.
    parts
        Number of owners (ranks) the rows are split over; ``>= 1``.

    Raises
    ------
    ValueError
        If ``global_rows < 0`` or ``parts < 1``.
    TypeError
        If either is not an integer (``bool`` included); NumPy integers are accepted.

    Examples
    --------
    >>> d = BlockRows(global_rows=7, parts=3)
    >>> d.counts(), d.offsets(), d.rows_of(2)
    ((3, 2, 2), (0, 3, 5), (5, 7))
    >>> BlockRows(global_rows=2, parts=4).counts()
    (1, 1, 0, 0)
    """

    global_rows: int
    parts: int

    def __post_init__(self) -> None:
        rows = _as_int(self.global_rows, "global_rows")
        parts = _as_int(self.parts, "parts")
        if rows < 0:
            raise ValueError(f"global_rows must be >= 0, got {rows}")
        if parts < 1:
            raise ValueError(f"parts must be >= 1, got {parts} (a distribution needs an owner)")
        object.__setattr__(self, "global_rows", rows)
        object.__setattr__(self, "parts", parts)

    def counts(self) -> tuple[int, ...]:
        """Return the number of rows of each part, in part order.

        Returns
        -------
        tuple of int
            ``parts`` entries summing to ``global_rows``; entry ``p`` is
            ``global_rows // parts + (p < global_rows % parts)``.
        """
        base, extra = divmod(self.global_rows, self.parts)
        return tuple(base + 1 if p < extra else base for p in range(self.parts))

    def offsets(self) -> tuple[int, ...]:
        """Return the first global row of each part, in part order.

        Returns
        -------
        tuple of int
            ``parts`` entries (no trailing total): ``offsets()[p] == rows_of(p)[0]``. An empty
            part's offset equals the offset of the next part (or ``global_rows`` at the end).
        """
        return tuple(self.rows_of(p)[0] for p in range(self.parts))

    def rows_of(self, part: int) -> tuple[int, int]:
        """Return the half-open global row range ``(start, stop)`` owned by ``part``.

        Parameters
        ----------
        part
            Owner index, ``0 <= part < parts``.

        Returns
        -------
        tuple of int
            ``(start, stop)`` with ``0 <= start <= stop <= global_rows``; ``stop - start`` is the
            part's row count (possibly 0).

        Raises
        ------
        ValueError
            If ``part`` is outside ``0 .. parts - 1``.
        """
        p = _as_int(part, "part")
        if not 0 <= p < self.parts:
            raise ValueError(f"part must be in 0..{self.parts - 1} for {self.parts} parts, got {p}")
        base, extra = divmod(self.global_rows, self.parts)
        start = p * base + min(p, extra)
        return start, start + base + (1 if p < extra else 0)


class Transfer(NamedTuple):
    """Rows ``start .. stop - 1`` (global indices) move from source part ``src`` to ``dst``."""

    src: int
    dst: int
    start: int
    stop: int

    @property
    def rows(self) -> int:
        """Number of rows moved; always ``>= 1`` in a plan."""
        return self.stop - self.start


def transfer_plan(global_rows: int, src_parts: int, dst_parts: int) -> tuple[Transfer, ...]:
    """Return the rows each source part sends to each destination part.

    The source is ``BlockRows(global_rows, src_parts)``, the destination
    ``BlockRows(global_rows, dst_parts)``. For each pair whose row ranges overlap, the plan holds
    one :class:`Transfer` with the overlap (a non-empty half-open range of global rows); pairs
    without overlap are left out. The transfers are sorted by ``(src, dst)`` and their ranges tile
    ``0 .. global_rows`` exactly, in order, so every row is moved exactly once; a pair with
    ``src == dst`` is a row range that stays on its rank. The plan has at most
    ``src_parts + dst_parts - 1`` entries and costs ``O(src_parts + dst_parts)``.

    Parameters
    ----------
    global_rows
        Length of axis 0 of the global array, in rows; ``>= 0`` (0 gives an empty plan).
    src_parts, dst_parts
        Number of owners before and after; each ``>= 1``.

    Returns
    -------
    tuple of Transfer
        The non-empty overlaps, sorted by ``(src, dst)``.

    Raises
    ------
    ValueError
        If ``global_rows < 0`` or a part count is ``< 1``.
    TypeError
        If an argument is not an integer.

    Examples
    --------
    >>> transfer_plan(5, src_parts=1, dst_parts=2)
    (Transfer(src=0, dst=0, start=0, stop=3), Transfer(src=0, dst=1, start=3, stop=5))
    >>> transfer_plan(2, src_parts=3, dst_parts=1)  # part 2 of the source is empty
    (Transfer(src=0, dst=0, start=0, stop=1), Transfer(src=1, dst=0, start=1, stop=2))
    """
    src = BlockRows(global_rows, src_parts)
    dst = BlockRows(global_rows, dst_parts)
    plan: list[Transfer] = []
    s = d = 0
    s_start, s_stop = src.rows_of(0)
    d_start, d_stop = dst.rows_of(0)
    # Sweep both partitions of 0..global_rows at once; empty parts are skipped on the way.
    while s < src.parts and d < dst.parts:
        start, stop = max(s_start, d_start), min(s_stop, d_stop)
        if start < stop:
            plan.append(Transfer(s, d, start, stop))
        if s_stop <= d_stop:
            s += 1
            if s < src.parts:
                s_start, s_stop = src.rows_of(s)
        else:
            d += 1
            if d < dst.parts:
                d_start, d_stop = dst.rows_of(d)
    return tuple(plan)
