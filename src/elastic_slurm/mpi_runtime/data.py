"""Distributed data an elastic application registers, and how it follows a resize.

An application registers each big array once (:meth:`ElasticComm.array
<elastic_slurm.mpi_runtime.session.ElasticComm.array>`), with its global shape, dtype and
distribution of axis 0 over the ranks:

* :class:`Block` -- contiguous blocks of rows (a 1-D block distribution of a vector; a 2-D
  row-block distribution of a matrix); the first ``rows % ranks`` ranks hold one extra row.
* :class:`BlockCyclic` -- blocks of ``block`` rows dealt to the ranks in turn (ScaLAPACK's 1-D
  block-cyclic distribution).
* :class:`Block2D` -- axes 0 and 1 split in blocks over a ``P x Q`` process grid.
* :class:`BlockCyclic2D` -- ScaLAPACK's 2-D block-cyclic distribution: ``MB x NB`` blocks
  dealt over a ``P x Q`` grid in both dimensions (ScaLAPACK Users' Guide, section 4.3).

The 2-D ones choose the grid from the rank count (:func:`~.distribution.grid_shape`: as
square as possible, ``P <= Q``; 4 ranks are ``2 x 2``, 6 are ``2 x 3``, 3 are ``1 x 3``), so
the same object describes the array before and after a resize.

At a resize the runtime moves every registered array to the new rank count with ``Alltoallv``
(spawn) or through a checkpoint file (restart), and the application finds its new rows in
``array.local``. Other state travels through user hooks (:class:`StateHooks`): ``pack`` runs on
every rank before the resize, the list of what every old rank packed (rank order) is handed to
``unpack`` on every rank after it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from elastic_slurm.mpi_runtime.distribution import (
    BlockCyclicRows,
    BlockRows,
    Grid2D,
    block_2d,
    block_cyclic_2d,
    grid_shape,
)


@dataclass(frozen=True)
class Block:
    """Contiguous blocks of rows: rank ``r`` of ``p`` holds ``BlockRows(rows, p).rows_of(r)``."""

    def layout(self, global_rows: int, parts: int) -> Any:
        """The distribution object for ``global_rows`` rows over ``parts`` ranks."""
        return BlockRows(global_rows, parts)

    def layout_of(self, global_shape: tuple[int, ...], parts: int) -> BlockRows:
        """The distribution object for an array of ``global_shape`` over ``parts`` ranks."""
        return BlockRows(_axes(global_shape, 1, self)[0], parts)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able description."""
        return {"kind": "block"}


@dataclass(frozen=True)
class BlockCyclic:
    """Blocks of ``block`` rows dealt to the ranks in turn (block ``b`` to rank ``b % p``)."""

    block: int

    def __post_init__(self) -> None:
        if self.block < 1:
            raise ValueError(f"a block-cyclic block has at least one row, got {self.block}")

    def layout(self, global_rows: int, parts: int) -> Any:
        """The distribution object for ``global_rows`` rows over ``parts`` ranks."""
        return BlockCyclicRows(global_rows, parts, self.block)

    def layout_of(self, global_shape: tuple[int, ...], parts: int) -> BlockCyclicRows:
        """The distribution object for an array of ``global_shape`` over ``parts`` ranks."""
        return BlockCyclicRows(_axes(global_shape, 1, self)[0], parts, self.block)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able description."""
        return {"kind": "block_cyclic", "block": self.block}


def _axes(global_shape: tuple[int, ...], needed: int, dist: object) -> tuple[int, ...]:
    """Return ``global_shape`` as ints, after checking it has at least ``needed`` axes."""
    shape = tuple(int(n) for n in global_shape)
    if len(shape) < needed:
        raise ValueError(
            f"{dist} distributes {needed} axes but the array has shape {shape}; "
            f"register an array of at least {needed} axes"
        )
    return shape


def _no_row_layout(dist: object) -> None:
    raise TypeError(
        f"{dist} distributes two axes: use layout_of(global_shape, parts) "
        "(and move_array, not redistribute, to move it)"
    )


@dataclass(frozen=True)
class Block2D:
    """Axes 0 and 1 in blocks over a ``P x Q`` process grid (``grid_shape(ranks)``).

    Rank ``r = p * Q + q`` holds rows ``BlockRows(M, P).rows_of(p)`` and columns
    ``BlockRows(N, Q).rows_of(q)`` of an ``(M, N, *trailing)`` array: a local array of shape
    ``(rows, cols, *trailing)``.
    """

    def layout(self, global_rows: int, parts: int) -> Any:
        """Not defined for a 2-D distribution (raises TypeError): see :meth:`layout_of`."""
        _no_row_layout(self)

    def layout_of(self, global_shape: tuple[int, ...], parts: int) -> Grid2D:
        """The :class:`~.distribution.Grid2D` for ``global_shape`` over ``parts`` ranks.

        Raises
        ------
        ValueError
            If the array has fewer than 2 axes or ``parts < 1``.
        """
        m, n = _axes(global_shape, 2, self)[:2]
        return block_2d((m, n), grid_shape(parts))

    def to_json(self) -> dict[str, Any]:
        """A JSON-able description."""
        return {"kind": "block_2d"}


@dataclass(frozen=True)
class BlockCyclic2D:
    """ScaLAPACK's 2-D block-cyclic distribution over a ``P x Q`` grid (``grid_shape(ranks)``).

    Blocks of ``mb x nb`` elements of axes 0 and 1; block ``(I, J)`` goes to process
    ``(I % P, J % Q)``, rank ``(I % P) * Q + J % Q`` (ScaLAPACK Users' Guide, Blackford et
    al., SIAM 1997, section 4.3.2, "The Two-dimensional Block Cyclic Distribution", with the
    first block on process ``(0, 0)``).

    Parameters
    ----------
    mb, nb
        Rows and columns per block, each ``>= 1``.

    Raises
    ------
    ValueError
        If a block side is ``< 1``.
    """

    mb: int
    nb: int

    def __post_init__(self) -> None:
        if self.mb < 1 or self.nb < 1:
            raise ValueError(f"a 2-D block has at least 1 x 1 elements, got {self.mb} x {self.nb}")

    def layout(self, global_rows: int, parts: int) -> Any:
        """Not defined for a 2-D distribution (raises TypeError): see :meth:`layout_of`."""
        _no_row_layout(self)

    def layout_of(self, global_shape: tuple[int, ...], parts: int) -> Grid2D:
        """The :class:`~.distribution.Grid2D` for ``global_shape`` over ``parts`` ranks.

        Raises
        ------
        ValueError
            If the array has fewer than 2 axes or ``parts < 1``.
        """
        m, n = _axes(global_shape, 2, self)[:2]
        return block_cyclic_2d((m, n), grid_shape(parts), (self.mb, self.nb))

    def to_json(self) -> dict[str, Any]:
        """A JSON-able description."""
        return {"kind": "block_cyclic_2d", "block": [self.mb, self.nb]}


Distribution = Block | BlockCyclic | Block2D | BlockCyclic2D


def distribution_from_json(data: dict[str, Any]) -> Distribution:
    """The inverse of ``to_json`` of every distribution here.

    Raises
    ------
    ValueError
        For a description of no known distribution.
    """
    kind = data.get("kind") if isinstance(data, dict) else None
    if kind == "block":
        return Block()
    if kind == "block_cyclic":
        return BlockCyclic(int(data["block"]))
    if kind == "block_2d":
        return Block2D()
    if kind == "block_cyclic_2d":
        mb, nb = data["block"]
        return BlockCyclic2D(int(mb), int(nb))
    raise ValueError(f"unknown distribution {data!r}")


@dataclass
class DistArray:
    """One registered array: this rank's rows of a global array.

    Attributes
    ----------
    name
        The name it was registered under.
    global_shape
        Shape of the whole array, ``(rows, *trailing)``.
    dtype
        Its dtype.
    dist
        How its rows are spread over the ranks.
    local
        This rank's rows, shape ``(len(indices()), *trailing)``. Replace it freely between
        resize points (e.g. a Jacobi sweep making a new array) as long as the shape stays.
    """

    name: str
    global_shape: tuple[int, ...]
    dtype: np.dtype
    dist: Distribution
    local: np.ndarray
    _rank: int = field(repr=False)
    _size: int = field(repr=False)

    def layout(self) -> Any:
        """The distribution object for the current rank count (a ``Grid2D`` for 2-D ones)."""
        return self.dist.layout_of(self.global_shape, self._size)

    def grid_indices(self) -> tuple[np.ndarray, np.ndarray]:
        """Global rows and columns of ``local``'s axes 0 and 1, in order (int64 each).

        For a row distribution the columns are all of them.
        """
        layout = self.layout()
        if isinstance(layout, Grid2D):
            p, q = layout.coords(self._rank)
            return (
                np.asarray(layout.rows.indices(p), dtype=np.int64),
                np.asarray(layout.cols.indices(q), dtype=np.int64),
            )
        if len(self.global_shape) < 2:
            raise TypeError(f"{self.name} has one axis: use indices()")
        return self.indices(), np.arange(self.global_shape[1], dtype=np.int64)

    def indices(self) -> np.ndarray:
        """Global row numbers of ``local``'s rows, in order (int64).

        Raises
        ------
        TypeError
            The array has a 2-D distribution: use :meth:`grid_indices`.
        """
        layout = self.layout()
        if isinstance(layout, Grid2D):
            raise TypeError(f"{self.name} is {self.dist}: use grid_indices()")
        if isinstance(layout, BlockRows):
            start, stop = layout.rows_of(self._rank)
            return np.arange(start, stop, dtype=np.int64)
        return np.asarray(layout.indices(self._rank), dtype=np.int64)

    def rows(self) -> tuple[int, int]:
        """``(start, stop)`` of this rank's rows (block distribution only).

        Raises
        ------
        TypeError
            The array is block-cyclic: use :meth:`indices`.
        """
        if not isinstance(self.dist, Block):
            raise TypeError(
                f"{self.name} is {self.dist}: its rows are not one range; use indices()"
            )
        return BlockRows(self.global_shape[0], self._size).rows_of(self._rank)

    def local_shape(self) -> tuple[int, ...]:
        """The shape ``local`` must have on this rank now."""
        layout = self.layout()
        if isinstance(layout, Grid2D):
            return (*layout.local_shape(self._rank), *self.global_shape[2:])
        return (layout.count(self._rank), *self.global_shape[1:])

    def meta(self) -> dict[str, Any]:
        """A JSON-able description (name, global shape, dtype, distribution)."""
        return {
            "name": self.name,
            "global_shape": list(self.global_shape),
            "dtype": np.dtype(self.dtype).str,
            "dist": self.dist.to_json(),
        }


@dataclass
class StateHooks:
    """User hooks for state other than registered arrays.

    ``pack()`` runs on every rank before a resize and returns any picklable object (what this
    rank must hand over); ``unpack(packed)`` runs on every rank after it, with the list of what
    the old ranks packed, in their rank order (the list's length is the old size).
    """

    pack: Callable[[], Any]
    unpack: Callable[[list[Any]], None]
