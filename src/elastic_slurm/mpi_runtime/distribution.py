"""Distributions of a global array over ranks (rows, or 2-D process grids) and move plans.

A global array of shape ``(global_rows, *trailing)`` is split along axis 0 (its rows) over
``parts`` owners; owner ``p`` is the MPI rank ``p`` of the communicator that holds the data.
Part ``p``'s local array holds the rows :meth:`RowDistribution.indices` gives, *in increasing
global order*, so its shape is ``(count(p), *trailing)``. Every distribution here follows the
small :class:`RowDistribution` protocol; two implementations are provided:

* :class:`BlockRows` -- one contiguous block of rows per owner, in owner order. When the rows do
  not divide evenly, the first ``global_rows % parts`` owners get one extra row; so block sizes
  differ by at most one row, and owners at the end get 0 rows when ``global_rows < parts``.
* :class:`BlockCyclicRows` -- the ScaLAPACK-style 1-D block-cyclic distribution: block ``b``
  (rows ``b * block .. (b + 1) * block - 1``; the last block may be short) goes to owner
  ``b % parts``.

The three layouts the runtime registers map onto these: a *1-D block* or *1-D block-cyclic*
array is the case ``trailing == ()`` (one row per element); a *2-D row-block* array of shape
``(n, m)`` is ``BlockRows(n, parts)`` (whole rows of ``m`` elements per owner).

Two-dimensional process grids (:class:`Grid2D`) distribute axes 0 *and* 1 as ScaLAPACK does
(ScaLAPACK Users' Guide, Blackford et al., SIAM 1997, section 4.3, "The Two-dimensional Block
Cyclic Distribution"): the ranks form a ``P x Q`` grid, row-major, and each axis is spread by
its own 1-D distribution over the process rows or columns (:func:`block_2d`,
:func:`block_cyclic_2d`; :func:`grid_shape` picks the grid for a rank count).
:func:`axis_pieces` gives, for one axis, the runs of indices that move between two
distributions, contiguous in both local arrays; the product of a row and a column piece is a
rectangle that travels in one piece.

How it degrades: this module needs neither MPI nor I/O. The integer methods (``counts``,
``rows_of`` ...) and :func:`transfer_plan` use plain Python integers and work without NumPy;
the methods that return index arrays (``indices``, ``runs``, ``owners``) and
:func:`exchange_plan` import NumPy on first use (``ImportError`` if it is missing). Every plan is
computed identically and without communication on every rank, in the controller and in tests.

>>> BlockRows(global_rows=10, parts=4).counts()
(3, 3, 2, 2)
>>> BlockCyclicRows(global_rows=10, parts=3, block=2).counts()
(4, 4, 2)
>>> for t in transfer_plan(10, src_parts=2, dst_parts=3):
...     print(t)
Transfer(src=0, dst=0, start=0, stop=4)
Transfer(src=0, dst=1, start=4, stop=5)
Transfer(src=1, dst=1, start=5, stop=7)
Transfer(src=1, dst=2, start=7, stop=10)
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "AxisDistribution",
    "BlockCyclicRows",
    "BlockRows",
    "ExchangePlan",
    "Grid2D",
    "RowDistribution",
    "Transfer",
    "axis_pieces",
    "block_2d",
    "block_cyclic_2d",
    "exchange_plan",
    "grid_shape",
    "transfer_plan",
]


def _as_int(value: object, what: str) -> int:
    """Return ``value`` as a Python int; ``bool`` and non-integers raise :class:`TypeError`."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an integer, got the bool {value!r}")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError as exc:
        raise TypeError(f"{what} must be an integer, got {type(value).__name__} {value!r}") from exc


def _numpy() -> Any:
    """Import NumPy on first use, so the integer-only parts of this module work without it."""
    import numpy

    return numpy


def _check_part(part: object, parts: int) -> int:
    """Return ``part`` as an int in ``0 .. parts - 1`` or raise TypeError/ValueError."""
    p = _as_int(part, "part")
    if not 0 <= p < parts:
        raise ValueError(f"part must be in 0..{parts - 1} for {parts} parts, got {p}")
    return p


@runtime_checkable
class RowDistribution(Protocol):
    """How the rows (axis 0) of a global array are spread over ``parts`` owners.

    This is the contract :func:`exchange_plan`, :func:`~.redistribute.redistribute` and the
    checkpoint functions rely on; :class:`BlockRows` and :class:`BlockCyclicRows` implement it,
    and so may any other class with these members (``isinstance(d, RowDistribution)`` checks
    that the members exist, not that they obey the invariants). Instances must be immutable and
    equal on every rank that uses them.

    Invariants, for every part ``p`` in ``0 .. parts - 1``:

    * ``indices(p)`` is a strictly increasing ``int64`` array of global rows of length
      ``count(p) == counts()[p]``; over all parts these arrays partition
      ``range(global_rows)`` (every row has exactly one owner);
    * ``runs(p)`` is the same set of rows as maximal half-open ranges ``[start, stop)``, an
      ``int64`` array of shape ``(n_runs, 2)`` in increasing order, none empty, no two adjacent;
    * ``owners(rows)[i] == p`` exactly when ``rows[i]`` is in ``indices(p)``;
    * part ``p``'s local array holds the rows ``indices(p)`` in that (increasing) order: shape
      ``(count(p), *trailing)`` for a global shape ``(global_rows, *trailing)``.

    Attributes
    ----------
    global_rows : int
        Length of axis 0 of the global array, ``>= 0``.
    parts : int
        Number of owners, ``>= 1``.
    """

    global_rows: int
    parts: int

    def count(self, part: int) -> int:
        """Number of rows ``part`` owns (``ValueError`` outside ``0 .. parts - 1``)."""
        ...

    def counts(self) -> tuple[int, ...]:
        """Rows per part, ``parts`` entries summing to ``global_rows``."""
        ...

    def indices(self, part: int) -> np.ndarray:
        """Global rows of ``part``, strictly increasing, ``int64``, shape ``(count(part),)``."""
        ...

    def runs(self, part: int) -> np.ndarray:
        """Rows of ``part`` as maximal ``[start, stop)`` ranges, ``int64``, shape ``(n, 2)``."""
        ...

    def owners(self, rows: np.ndarray) -> np.ndarray:
        """Owning part of each global row in ``rows`` (``int64``, same shape as ``rows``)."""
        ...


@dataclass(frozen=True)
class BlockRows:
    """A 1-D block distribution of axis 0 of a global array over ``parts`` owners.

    Part ``p`` owns the global rows ``rows_of(p) == (start, stop)``, a half-open range; its local
    array has shape ``(stop - start, *trailing)`` where ``trailing`` is the global shape without
    axis 0. The first ``global_rows % parts`` parts own ``global_rows // parts + 1`` rows, the
    others ``global_rows // parts`` (0 when ``global_rows < parts``). A 1-D block array is the
    case ``trailing == ()``; a 2-D row-block array of shape ``(n, m)`` is ``BlockRows(n, parts)``
    with ``trailing == (m,)``. Implements :class:`RowDistribution`.

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

    def count(self, part: int) -> int:
        """Return the number of rows ``part`` owns.

        Parameters
        ----------
        part
            Owner index, ``0 <= part < parts``.

        Returns
        -------
        int
            ``global_rows // parts + (part < global_rows % parts)``.

        Raises
        ------
        ValueError
            If ``part`` is outside ``0 .. parts - 1``.
        """
        start, stop = self.rows_of(part)
        return stop - start

    def indices(self, part: int) -> np.ndarray:
        """Return the global rows ``part`` owns, in increasing order.

        Parameters
        ----------
        part
            Owner index, ``0 <= part < parts``.

        Returns
        -------
        numpy.ndarray
            ``int64``, shape ``(count(part),)``: ``arange(start, stop)`` of :meth:`rows_of`.

        Raises
        ------
        ValueError
            If ``part`` is outside ``0 .. parts - 1``.
        """
        start, stop = self.rows_of(part)
        return _numpy().arange(start, stop, dtype="int64")

    def runs(self, part: int) -> np.ndarray:
        """Return the rows of ``part`` as half-open ranges: one, or none if it owns no rows.

        Returns
        -------
        numpy.ndarray
            ``int64``, shape ``(1, 2)`` holding ``[[start, stop]]``, or ``(0, 2)``.

        Raises
        ------
        ValueError
            If ``part`` is outside ``0 .. parts - 1``.
        """
        start, stop = self.rows_of(part)
        return _numpy().array([[start, stop]] if stop > start else [], "int64").reshape(-1, 2)

    def owners(self, rows: np.ndarray) -> np.ndarray:
        """Return the part that owns each of the global ``rows``.

        Parameters
        ----------
        rows
            Integer array (any shape) of global rows, each in ``0 .. global_rows - 1`` (not
            checked; other values give meaningless parts).

        Returns
        -------
        numpy.ndarray
            ``int64``, the shape of ``rows``; ``O(rows.size)`` time, two temporaries of that size.

        Examples
        --------
        >>> BlockRows(7, 3).owners([0, 2, 3, 4, 6]).tolist()
        [0, 0, 1, 1, 2]
        """
        np = _numpy()
        r = np.asarray(rows, dtype=np.int64)
        base, extra = divmod(self.global_rows, self.parts)
        big = extra * (base + 1)  # rows held by the parts that have one extra row
        return np.where(r < big, r // (base + 1), extra + (r - big) // max(base, 1))

    def with_parts(self, parts: int) -> BlockRows:
        """Return the block distribution of the same rows over ``parts`` owners (for resizes)."""
        return BlockRows(self.global_rows, parts)


@dataclass(frozen=True)
class BlockCyclicRows:
    """A 1-D block-cyclic distribution of axis 0 over ``parts`` owners (ScaLAPACK style).

    The rows are cut into ``ceil(global_rows / block)`` blocks of ``block`` rows, the last one
    short when ``block`` does not divide ``global_rows``; block ``b`` (global rows
    ``b * block .. min((b + 1) * block, global_rows) - 1``) goes to part ``b % parts``. Part
    ``p``'s local array is the concatenation of its blocks in increasing order, shape
    ``(count(p), *trailing)``. Parts beyond the number of blocks own 0 rows. With ``parts == 1``,
    or ``block >= ceil(global_rows / parts)``, every part owns at most one block. For a 1-D
    array (``trailing == ()``) a row is one element.

    Parameters
    ----------
    global_rows
        Length of axis 0 of the global array, in rows; ``>= 0``.
    parts
        Number of owners (ranks); ``>= 1``.
    block
        Rows per block; ``>= 1``. May exceed ``global_rows`` (then part 0 owns everything).

    Raises
    ------
    ValueError
        If ``global_rows < 0``, ``parts < 1`` or ``block < 1``.
    TypeError
        If any is not an integer (``bool`` included); NumPy integers are accepted.

    Examples
    --------
    >>> d = BlockCyclicRows(global_rows=10, parts=3, block=2)
    >>> d.counts(), d.indices(0).tolist(), d.runs(1).tolist()
    ((4, 4, 2), [0, 1, 6, 7], [[2, 4], [8, 10]])
    >>> BlockCyclicRows(7, 2, 3).counts()  # blocks [0,3) [3,6) [6,7): the last is short
    (4, 3)
    >>> BlockCyclicRows(3, 4, 1).counts()  # fewer rows than parts
    (1, 1, 1, 0)
    """

    global_rows: int
    parts: int
    block: int

    def __post_init__(self) -> None:
        rows = _as_int(self.global_rows, "global_rows")
        parts = _as_int(self.parts, "parts")
        block = _as_int(self.block, "block")
        if rows < 0:
            raise ValueError(f"global_rows must be >= 0, got {rows}")
        if parts < 1:
            raise ValueError(f"parts must be >= 1, got {parts} (a distribution needs an owner)")
        if block < 1:
            raise ValueError(f"block must be >= 1 row, got {block}")
        object.__setattr__(self, "global_rows", rows)
        object.__setattr__(self, "parts", parts)
        object.__setattr__(self, "block", block)

    @property
    def blocks(self) -> int:
        """Number of blocks, ``ceil(global_rows / block)`` (the last may be short)."""
        return -(-self.global_rows // self.block)

    def block_count(self, part: int) -> int:
        """Return how many blocks ``part`` owns: ``len(range(part, blocks, parts))``.

        Raises
        ------
        ValueError
            If ``part`` is outside ``0 .. parts - 1``.
        """
        p = _check_part(part, self.parts)
        return len(range(p, self.blocks, self.parts))

    def count(self, part: int) -> int:
        """Return the number of rows ``part`` owns.

        Parameters
        ----------
        part
            Owner index, ``0 <= part < parts``.

        Returns
        -------
        int
            ``block`` rows per owned block, less the shortfall of the last block if ``part``
            owns it.

        Raises
        ------
        ValueError
            If ``part`` is outside ``0 .. parts - 1``.
        """
        n = self.block_count(part) * self.block
        if self.blocks and (self.blocks - 1) % self.parts == part:
            n -= self.blocks * self.block - self.global_rows  # the last block is short
        return n

    def counts(self) -> tuple[int, ...]:
        """Return the number of rows of each part, in part order (sums to ``global_rows``)."""
        return tuple(self.count(p) for p in range(self.parts))

    def runs(self, part: int) -> np.ndarray:
        """Return the rows of ``part`` as maximal half-open ranges ``[start, stop)``.

        One range per owned block, except that adjacent blocks (all of them when
        ``parts == 1``) are merged into one range.

        Returns
        -------
        numpy.ndarray
            ``int64``, shape ``(n, 2)``, increasing; ``n <= block_count(part)``.

        Raises
        ------
        ValueError
            If ``part`` is outside ``0 .. parts - 1``.
        """
        np = _numpy()
        p = _check_part(part, self.parts)
        if self.parts == 1:
            rows = [[0, self.global_rows]] if self.global_rows else []
            return np.array(rows, dtype=np.int64).reshape(-1, 2)
        starts = np.arange(p, self.blocks, self.parts, dtype=np.int64) * self.block
        stops = np.minimum(starts + self.block, self.global_rows)
        return np.stack([starts, stops], axis=1)

    def indices(self, part: int) -> np.ndarray:
        """Return the global rows ``part`` owns, in increasing order.

        Returns
        -------
        numpy.ndarray
            ``int64``, shape ``(count(part),)``; ``O(count(part))`` time and memory.

        Raises
        ------
        ValueError
            If ``part`` is outside ``0 .. parts - 1``.
        """
        np = _numpy()
        p = _check_part(part, self.parts)
        starts = np.arange(p, self.blocks, self.parts, dtype=np.int64) * self.block
        rows = (starts[:, None] + np.arange(self.block, dtype=np.int64)).reshape(-1)
        return rows[: self.count(p)]  # only the last block can be short, and it comes last

    def owners(self, rows: np.ndarray) -> np.ndarray:
        """Return the part that owns each of the global ``rows``: ``(rows // block) % parts``.

        Parameters
        ----------
        rows
            Integer array (any shape) of global rows in ``0 .. global_rows - 1`` (not checked).

        Returns
        -------
        numpy.ndarray
            ``int64``, the shape of ``rows``.

        Examples
        --------
        >>> BlockCyclicRows(10, 3, 2).owners([0, 1, 2, 5, 6, 9]).tolist()
        [0, 0, 1, 2, 0, 1]
        """
        np = _numpy()
        r = np.asarray(rows, dtype=np.int64)
        return (r if self.block == 1 else r // self.block) % self.parts

    def with_parts(self, parts: int) -> BlockCyclicRows:
        """Return the distribution of the same rows in the same blocks over ``parts`` owners."""
        return BlockCyclicRows(self.global_rows, parts, self.block)


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


class ExchangePlan(NamedTuple):
    """One part's side of a redistribution from ``src`` to ``dst`` (see :func:`exchange_plan`).

    Counts and positions are in *units* of ``grain`` consecutive rows (``grain == 1`` unless
    both distributions are made of whole units; then the plan is ``grain`` times smaller).
    Every part sends its units to each destination part, and receives them from each source
    part, in increasing global row order.

    Attributes
    ----------
    grain : int
        Rows per unit, ``>= 1``; it divides every part's row count under both distributions.
    send_counts : numpy.ndarray
        ``int64``, shape ``(dst.parts,)``: units this part sends to each destination part
        (all 0 when it owns no part of ``src``).
    send_order : numpy.ndarray or None
        ``int64``, shape ``(src.count(part) // grain,)``: positions (in units) of this part's
        local source array in the order they are sent, grouped by destination part. ``None``
        when that order is the identity (the local array can be sent as it is).
    recv_counts : numpy.ndarray
        ``int64``, shape ``(src.parts,)``: units this part receives from each source part.
    recv_order : numpy.ndarray or None
        ``int64``, shape ``(dst.count(part) // grain,)``: for the ``k``-th unit received (source
        parts in order), its position (in units) in this part's new local array. ``None`` when
        that is the identity (the data can be received in place).
    send_pieces, recv_pieces : numpy.ndarray or None
        Only when asked for (``max_pieces``): the *pieces* of this part's rows, the maximal
        runs of consecutive global rows that have one source and one destination part, in
        increasing global order. ``int64``, shape ``(n, 3)``: ``[peer, first unit, units]``
        with positions in this part's local array (source array for ``send_pieces``, the new
        array for ``recv_pieces``); ``peer`` is the destination (resp. source) part. A piece is
        contiguous in both local arrays, so it can travel as one message; the ``k``-th piece
        from ``s`` to ``d`` in ``s``'s list is the ``k``-th from ``s`` in ``d``'s list. ``None``
        when there are more pieces than allowed.
    """

    grain: int
    send_counts: np.ndarray
    send_order: np.ndarray | None
    recv_counts: np.ndarray
    recv_order: np.ndarray | None
    send_pieces: np.ndarray | None = None
    recv_pieces: np.ndarray | None = None


def exchange_plan(
    src: RowDistribution,
    dst: RowDistribution,
    part: int,
    *,
    max_grain: int | None = None,
    max_pieces: tuple[int, int] = (0, 0),
) -> ExchangePlan:
    """Return what ``part`` sends and receives to move rows from ``src`` to ``dst``.

    ``part`` plays two roles: part ``part`` of ``src`` (if ``part < src.parts``) and part
    ``part`` of ``dst`` (if ``part < dst.parts``). The plan needs no communication: the plans
    of all parts fit together (what ``s`` sends to ``d`` is what ``d`` receives from ``s``, in
    the same order). Any pair of distributions of the same rows works, including custom
    :class:`RowDistribution` classes.

    Algorithm: the sender takes its global rows ``I = src.indices(part)`` and their destination
    parts ``o = dst.owners(I)``; ``send_counts = bincount(o)`` and ``send_order`` is a stable sort
    of ``o`` (one scan per peer when at most 16 peers get rows, else a radix sort of 16-bit
    keys when ``dst.parts <= 65536``, else a merge sort). The receiver does the same with
    ``J = dst.indices(part)`` and ``src.owners(J)``. A stable sort keeps increasing global order
    within each peer, which is the order both sides agree on. An order that is already sorted
    is returned as ``None`` (for example block to block-cyclic needs no reordering on the
    receiver, block-cyclic to block none on the sender).

    Before that, when both are built-in distributions whose every boundary between owners is a
    multiple of some ``g > 1`` (for example ``BlockCyclicRows`` with ``block`` 64 and 16 over
    ``global_rows`` a multiple of 16, or ``BlockRows`` with ``parts`` dividing ``global_rows``),
    the plan is made over units of ``g`` rows (``grain``), which divides its cost by ``g``.

    Parameters
    ----------
    src, dst
        Distributions before and after; they must have the same ``global_rows``.
    part
        This part (MPI rank), ``>= 0``; parts beyond both distributions get an empty plan.
    max_grain
        Largest ``grain`` allowed (the caller's message-size limit); ``None`` for no limit. A
        larger common grain falls back to 1.
    max_pieces
        ``(sending, receiving)``: also list the pieces on that side when there are at most this
        many (``O(count)`` more time, ``24`` bytes per piece); the default lists none.

    Returns
    -------
    ExchangePlan
        Counts in units; ``O(count)`` time and ``O(count)`` ``int64`` temporaries (``count`` the
        larger of ``part``'s two row counts, divided by ``grain``), plus ``O(src.parts +
        dst.parts)``.

    Raises
    ------
    ValueError
        If the global row counts differ, ``part < 0``, or a distribution breaks the protocol's
        invariants in a way this function notices (owners out of range, counts that do not add
        up).
    TypeError
        If ``part`` is not an integer.

    Examples
    --------
    Block over 2 parts to block-cyclic (block 2) over 3 parts, 8 rows::

        src: part 0 rows 0-3, part 1 rows 4-7
        dst: part 0 rows 0,1,6,7; part 1 rows 2,3; part 2 rows 4,5

    >>> plan = exchange_plan(BlockRows(8, 2), BlockCyclicRows(8, 3, 2), part=0)
    >>> plan.grain, plan.send_counts.tolist(), plan.send_order
    (2, [1, 1, 0], None)
    >>> plan.recv_counts.tolist(), plan.recv_order  # units: rows 0,1 from 0 and 6,7 from 1
    ([1, 1], None)

    One part to two, block 2, 12 rows: part 0 sends units (pairs of rows) 0, 2, 4 to part 0
    and 1, 3, 5 to part 1, and the way back it places what it receives in the same pattern:

    >>> plan = exchange_plan(BlockRows(12, 1), BlockCyclicRows(12, 2, 2), part=0)
    >>> plan.grain, plan.send_counts.tolist(), plan.send_order.tolist()
    (2, [3, 3], [0, 2, 4, 1, 3, 5])
    >>> exchange_plan(BlockCyclicRows(12, 2, 2), BlockRows(12, 1), part=0).recv_order.tolist()
    [0, 2, 4, 1, 3, 5]
    """
    np = _numpy()
    if src.global_rows != dst.global_rows:
        raise ValueError(
            f"the distributions cover different rows: src has {src.global_rows}, "
            f"dst has {dst.global_rows}"
        )
    p = _as_int(part, "part")
    if p < 0:
        raise ValueError(f"part must be >= 0, got {p}")
    grain = math.gcd(_grain(src), _grain(dst)) or 1
    if max_grain is not None and grain > max_grain:
        grain = 1
    coarse_src, coarse_dst = (
        (src, dst) if grain == 1 else (_coarse(src, grain), _coarse(dst, grain))
    )
    send_counts, send_order, send_pieces = _side(
        np, coarse_src, coarse_dst, p, "src", max_pieces[0]
    )
    recv_counts, recv_order, recv_pieces = _side(
        np, coarse_dst, coarse_src, p, "dst", max_pieces[1]
    )
    return ExchangePlan(
        grain, send_counts, send_order, recv_counts, recv_order, send_pieces, recv_pieces
    )


def _side(
    np: Any, mine: RowDistribution, other: RowDistribution, part: int, role: str, limit: int
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Counts per ``other`` part, the stable order of ``part``'s rows by owner, the pieces."""
    if part >= mine.parts:
        return np.zeros(other.parts, dtype=np.int64), None, np.zeros((0, 3), dtype=np.int64)
    rows = np.asarray(mine.indices(part), dtype=np.int64)
    owner = np.asarray(other.owners(rows), dtype=np.int64)
    pieces = _pieces(np, rows, owner, limit) if owner.shape == rows.shape else None
    del rows
    if owner.shape != (mine.count(part),):
        raise ValueError(
            f"{role} part {part}: indices()/owners() gave {owner.shape[0]} rows, "
            f"count() says {mine.count(part)}"
        )
    if owner.size and (owner.min() < 0 or owner.max() >= other.parts):
        raise ValueError(f"owners() returned parts outside 0..{other.parts - 1}")
    counts = np.bincount(owner, minlength=other.parts).astype(np.int64)
    if owner.size < 2 or bool(np.all(owner[1:] >= owner[:-1])):
        return counts, None, pieces
    # A stable sort by owner keeps increasing global order within each peer. With few peers,
    # one pass per peer is faster than sorting; otherwise 16-bit keys sort by radix.
    peers = np.flatnonzero(counts)
    if len(peers) <= _FEW_PEERS:
        order = np.concatenate([np.flatnonzero(owner == peer) for peer in peers.tolist()])
        return counts, order.astype(np.int64, copy=False), pieces
    keys = owner.astype(np.uint16) if other.parts <= 1 << 16 else owner
    return counts, np.argsort(keys, kind="stable").astype(np.int64, copy=False), pieces


_FEW_PEERS = 16  # up to this many peers, order rows by one scan per peer instead of a sort


def _pieces(np: Any, rows: np.ndarray, owner: np.ndarray, limit: int) -> np.ndarray | None:
    """``[peer, start, length]`` of each maximal run of consecutive rows with one owner.

    ``None`` if there are more than ``limit`` runs (counted before any are built).
    """
    if rows.size == 0:
        return np.zeros((0, 3), dtype=np.int64)
    if limit < 1:
        return None  # there is at least one piece
    cut = (owner[1:] != owner[:-1]) | (rows[1:] != rows[:-1] + 1)
    if int(np.count_nonzero(cut)) + 1 > limit:
        return None
    starts = np.concatenate([[0], np.flatnonzero(cut) + 1]).astype(np.int64)
    lengths = np.diff(np.concatenate([starts, [rows.size]]))
    return np.stack([owner[starts], starts, lengths], axis=1).astype(np.int64)


def _grain(d: RowDistribution) -> int:
    """Return a ``g`` dividing every owner boundary of ``d`` and its row count (0: no rows).

    Only the built-in classes are analysed (custom ones get 1, always valid).
    """
    rows = d.global_rows
    if rows == 0:
        return 0
    if type(d) is BlockRows:
        base, extra = divmod(rows, d.parts)
        return base if extra == 0 else 1  # counts base and base + 1 together force 1
    if type(d) is BlockCyclicRows:
        if d.parts == 1 or d.blocks <= 1:
            return rows  # one run: only the boundaries 0 and global_rows
        return math.gcd(d.block, rows)
    return 1


def _coarse(d: RowDistribution, grain: int) -> RowDistribution:
    """Return ``d`` over units of ``grain`` rows; ``grain`` must divide ``_grain(d)``."""
    if type(d) is BlockRows:
        return BlockRows(d.global_rows // grain, d.parts)
    if type(d) is BlockCyclicRows:
        # ceil keeps "one block holds everything" when grain does not divide block (one run)
        return BlockCyclicRows(d.global_rows // grain, d.parts, -(-d.block // grain))
    raise AssertionError(f"cannot coarsen {d!r}")  # pragma: no cover (_grain gives 1)


# ----------------------------------------------------------------------------------------------
# Two-dimensional process grids


def grid_shape(parts: int) -> tuple[int, int]:
    """Return the process grid ``(P, Q)`` used for ``parts`` ranks: as square as possible.

    ``P`` is the largest divisor of ``parts`` with ``P <= sqrt(parts)`` and ``Q = parts // P``,
    so ``P <= Q`` (ScaLAPACK's advice for most drivers is a grid "as square as possible, with
    ``Q`` slightly larger than ``P``"). A prime ``parts`` gives ``1 x parts``.

    Raises
    ------
    ValueError
        If ``parts < 1``.
    TypeError
        If ``parts`` is not an integer.

    Examples
    --------
    >>> [grid_shape(n) for n in (1, 2, 3, 4, 6, 8, 9, 12)]
    [(1, 1), (1, 2), (1, 3), (2, 2), (2, 3), (2, 4), (3, 3), (3, 4)]
    """
    n = _as_int(parts, "parts")
    if n < 1:
        raise ValueError(f"parts must be >= 1, got {n} (a grid needs a process)")
    p = math.isqrt(n)
    while n % p:
        p -= 1
    return p, n // p


AxisDistribution = BlockRows | BlockCyclicRows
"""The 1-D distributions a :class:`Grid2D` combines, one per axis."""


@dataclass(frozen=True)
class Grid2D:
    """A 2-D distribution of axes 0 and 1 of a global array over a ``P x Q`` process grid.

    The ScaLAPACK model (ScaLAPACK Users' Guide, Blackford et al., SIAM 1997, section 4.3,
    "The Two-dimensional Block Cyclic Distribution"): the processes form a ``P x Q`` grid,
    process ``(p, q)`` is part (rank) ``p * Q + q`` (row-major, BLACS' default ``"Row"``
    order), and the global element ``(i, j)`` lives on process ``(rows.owners(i),
    cols.owners(j))``: each axis is distributed on its own, ``rows`` over the ``P`` process
    rows and ``cols`` over the ``Q`` process columns. With
    ``rows = BlockCyclicRows(M, P, MB)`` and ``cols = BlockCyclicRows(N, Q, NB)`` this is
    exactly ScaLAPACK's block-cyclic distribution of an ``M x N`` matrix in ``MB x NB``
    blocks with the first block on process ``(0, 0)`` (``RSRC = CSRC = 0``); with
    :class:`BlockRows` on an axis it is a block distribution of that axis (the sizes differ by
    at most one, where ScaLAPACK's block distribution would use blocks of ``ceil(M / P)``).

    Part ``(p, q)`` holds the elements ``rows.indices(p) x cols.indices(q)`` in increasing
    global order along both axes: a local array of shape ``(rows.count(p), cols.count(q),
    *trailing)`` for a global shape ``(M, N, *trailing)`` (C order; ScaLAPACK stores the same
    local matrix in Fortran order).

    Parameters
    ----------
    rows
        Distribution of axis 0 (``M = rows.global_rows`` rows) over ``P = rows.parts`` process
        rows: :class:`BlockRows` or :class:`BlockCyclicRows`.
    cols
        Distribution of axis 1 (``N = cols.global_rows`` columns) over ``Q = cols.parts``
        process columns.

    Raises
    ------
    TypeError
        If ``rows`` or ``cols`` is not a :class:`BlockRows` or :class:`BlockCyclicRows`.

    Examples
    --------
    A 5 x 4 matrix in 2 x 2 blocks over a 2 x 2 grid:

    >>> g = block_cyclic_2d((5, 4), grid=(2, 2), block=(2, 2))
    >>> g.grid, g.parts, g.coords(1), g.local_shape(1), g.local_shape(3)
    ((2, 2), 4, (0, 1), (3, 2), (2, 2))
    >>> g.rows.indices(0).tolist(), g.cols.indices(1).tolist()
    ([0, 1, 4], [2, 3])
    """

    rows: AxisDistribution
    cols: AxisDistribution

    def __post_init__(self) -> None:
        for name in ("rows", "cols"):
            value = getattr(self, name)
            if type(value) not in (BlockRows, BlockCyclicRows):
                raise TypeError(
                    f"Grid2D.{name} must be a BlockRows or BlockCyclicRows, got "
                    f"{type(value).__name__} {value!r}"
                )

    @property
    def global_shape(self) -> tuple[int, int]:
        """``(M, N)``: the lengths of axes 0 and 1 of the global array."""
        return self.rows.global_rows, self.cols.global_rows

    @property
    def grid(self) -> tuple[int, int]:
        """``(P, Q)``: process rows and process columns."""
        return self.rows.parts, self.cols.parts

    @property
    def parts(self) -> int:
        """Number of parts (ranks), ``P * Q``."""
        return self.rows.parts * self.cols.parts

    def coords(self, part: int) -> tuple[int, int]:
        """Return the grid coordinates ``(p, q)`` of ``part``: ``divmod(part, Q)``.

        Raises
        ------
        ValueError
            If ``part`` is outside ``0 .. parts - 1``.
        """
        p = _check_part(part, self.parts)
        return divmod(p, self.cols.parts)

    def local_shape(self, part: int) -> tuple[int, int]:
        """Return ``(rows.count(p), cols.count(q))``, the local matrix of ``part = (p, q)``.

        Raises
        ------
        ValueError
            If ``part`` is outside ``0 .. parts - 1``.
        """
        p, q = self.coords(part)
        return self.rows.count(p), self.cols.count(q)

    def count(self, part: int) -> int:
        """Return the number of elements ``(i, j)`` that ``part`` owns."""
        r, c = self.local_shape(part)
        return r * c

    def counts(self) -> tuple[int, ...]:
        """Return the number of elements of each part, in part order (sums to ``M * N``)."""
        rc, cc = self.rows.counts(), self.cols.counts()
        return tuple(r * c for r in rc for c in cc)

    def with_parts(self, parts: int) -> Grid2D:
        """Return the same distribution over ``parts`` ranks, on the grid :func:`grid_shape`."""
        p, q = grid_shape(parts)
        return Grid2D(self.rows.with_parts(p), self.cols.with_parts(q))


def block_2d(shape: tuple[int, int], grid: tuple[int, int]) -> Grid2D:
    """Return the 2-D block distribution of an ``M x N`` array over a ``P x Q`` grid.

    Both axes use :class:`BlockRows` (the first ``M % P`` process rows get one extra row, and
    likewise for columns).

    Raises
    ------
    ValueError, TypeError
        As :class:`BlockRows` for a negative length, a grid side ``< 1`` or a non-integer.

    Examples
    --------
    >>> block_2d((5, 7), (2, 3)).local_shape(5)
    (2, 2)
    """
    (m, n), (p, q) = shape, grid
    return Grid2D(BlockRows(m, p), BlockRows(n, q))


def block_cyclic_2d(
    shape: tuple[int, int], grid: tuple[int, int], block: tuple[int, int]
) -> Grid2D:
    """Return ScaLAPACK's 2-D block-cyclic distribution: ``MB x NB`` blocks on a ``P x Q`` grid.

    Block ``(I, J)`` (rows ``I * MB ..``, columns ``J * NB ..``; the last ones may be short)
    goes to process ``(I % P, J % Q)`` (ScaLAPACK Users' Guide, section 4.3.2, with
    ``RSRC = CSRC = 0``).

    Raises
    ------
    ValueError, TypeError
        As :class:`BlockCyclicRows` for a negative length, a grid side or block ``< 1``, or a
        non-integer.

    Examples
    --------
    >>> block_cyclic_2d((9, 9), (2, 3), (2, 2)).local_shape(0)  # rows 0,1,4,5,8; cols 0,1,6,7
    (5, 4)
    """
    (m, n), (p, q), (mb, nb) = shape, grid, block
    return Grid2D(BlockCyclicRows(m, p, mb), BlockCyclicRows(n, q, nb))


def axis_pieces(src: RowDistribution, dst: RowDistribution) -> np.ndarray:
    """Return how the indices of one axis move from ``src`` to ``dst``, as local runs.

    A *piece* is a maximal run of indices with one source part and one destination part that is
    contiguous in both local arrays (merged across owner boundaries when the local positions
    continue, for example between blocks of an unchanged block-cyclic axis).

    Parameters
    ----------
    src, dst
        Distributions of the same axis (same ``global_rows``).

    Returns
    -------
    numpy.ndarray
        ``int64``, shape ``(n, 5)``: ``[src part, dst part, src local start, dst local start,
        length]``, sorted by source part, destination part and local position (both local
        positions increase within a pair). ``O(r log r)`` for ``r`` owner runs of both.

    Raises
    ------
    ValueError
        If the lengths differ.

    Examples
    --------
    >>> axis_pieces(BlockRows(6, 2), BlockRows(6, 3)).tolist()
    [[0, 0, 0, 0, 2], [0, 1, 2, 0, 1], [1, 1, 0, 1, 1], [1, 2, 1, 0, 2]]
    >>> axis_pieces(BlockCyclicRows(8, 2, 2), BlockCyclicRows(8, 2, 2)).tolist()
    [[0, 0, 0, 0, 4], [1, 1, 0, 0, 4]]
    """
    np = _numpy()
    n = src.global_rows
    if dst.global_rows != n:
        raise ValueError(f"the axis has {n} indices in src but {dst.global_rows} in dst")
    if n == 0:
        return np.zeros((0, 5), dtype=np.int64)
    edges = [np.array([0, n], dtype=np.int64)]
    for d in (src, dst):
        edges += [np.asarray(d.runs(p), dtype=np.int64).reshape(-1) for p in range(d.parts)]
    starts = np.unique(np.concatenate(edges))
    starts = starts[starts < n]
    lengths = np.diff(np.append(starts, n))
    s_own = np.asarray(src.owners(starts), dtype=np.int64)
    d_own = np.asarray(dst.owners(starts), dtype=np.int64)
    s_loc = _local_positions(np, src, starts, s_own)
    d_loc = _local_positions(np, dst, starts, d_own)
    order = np.lexsort((s_loc, d_own, s_own))
    s_own, d_own, s_loc, d_loc, lengths = (a[order] for a in (s_own, d_own, s_loc, d_loc, lengths))
    joins = (
        (s_own[1:] == s_own[:-1])
        & (d_own[1:] == d_own[:-1])
        & (s_loc[1:] == s_loc[:-1] + lengths[:-1])
        & (d_loc[1:] == d_loc[:-1] + lengths[:-1])
    )
    first = np.flatnonzero(np.concatenate([[True], ~joins]))
    merged = np.add.reduceat(lengths, first)
    return np.stack([s_own[first], d_own[first], s_loc[first], d_loc[first], merged], axis=1)


def _local_positions(np: Any, d: RowDistribution, rows: np.ndarray, owner: np.ndarray) -> Any:
    """Position of each global ``rows[i]`` in its owner's local array (``owner[i]``)."""
    if type(d) is BlockRows:
        base, extra = divmod(d.global_rows, d.parts)
        return rows - (owner * base + np.minimum(owner, extra))
    if type(d) is BlockCyclicRows:
        return (rows // (d.block * d.parts)) * d.block + rows % d.block
    out = np.empty_like(rows)
    for p in np.unique(owner).tolist():
        mask = owner == p
        out[mask] = np.searchsorted(np.asarray(d.indices(p), dtype=np.int64), rows[mask])
    return out
