"""Distributed data an elastic application registers, and how it follows a resize.

An application registers each big array once (:meth:`ElasticComm.array
<elastic_slurm.mpi_runtime.session.ElasticComm.array>`), with its global shape, dtype and
distribution of axis 0 over the ranks:

* :class:`Block` -- contiguous blocks of rows (a 1-D block distribution of a vector; a 2-D
  row-block distribution of a matrix); the first ``rows % ranks`` ranks hold one extra row.
* :class:`BlockCyclic` -- blocks of ``block`` rows dealt to the ranks in turn (ScaLAPACK's 1-D
  block-cyclic distribution).

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

from elastic_slurm.mpi_runtime.distribution import BlockRows


@dataclass(frozen=True)
class Block:
    """Contiguous blocks of rows: rank ``r`` of ``p`` holds ``BlockRows(rows, p).rows_of(r)``."""

    def layout(self, global_rows: int, parts: int) -> Any:
        """The distribution object for ``global_rows`` rows over ``parts`` ranks."""
        return BlockRows(global_rows, parts)

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
        from elastic_slurm.mpi_runtime.distribution import BlockCyclicRows

        return BlockCyclicRows(global_rows, parts, self.block)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able description."""
        return {"kind": "block_cyclic", "block": self.block}


Distribution = Block | BlockCyclic


def distribution_from_json(data: dict[str, Any]) -> Distribution:
    """The inverse of ``to_json`` of :class:`Block` and :class:`BlockCyclic`."""
    if data.get("kind") == "block":
        return Block()
    if data.get("kind") == "block_cyclic":
        return BlockCyclic(int(data["block"]))
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
        """The distribution object for the current rank count."""
        return self.dist.layout(self.global_shape[0], self._size)

    def indices(self) -> np.ndarray:
        """Global row numbers of ``local``'s rows, in order (int64)."""
        layout = self.layout()
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
        return (int(len(self.indices())), *self.global_shape[1:])

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
