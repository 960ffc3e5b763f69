"""2-D process grids (Grid2D), their axis pieces, and the 2-D distributions of data.py (no MPI)."""

from __future__ import annotations

import doctest
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_slurm.mpi_runtime import distribution
from elastic_slurm.mpi_runtime.data import (
    Block,
    Block2D,
    BlockCyclic,
    BlockCyclic2D,
    DistArray,
    distribution_from_json,
)
from elastic_slurm.mpi_runtime.distribution import (
    BlockCyclicRows,
    BlockRows,
    Grid2D,
    axis_pieces,
    block_2d,
    block_cyclic_2d,
    grid_shape,
)


def test_doctests_pass() -> None:
    assert doctest.testmod(distribution).failed == 0


@given(st.integers(1, 500))
def test_grid_shape_is_the_squarest_factorisation(parts: int) -> None:
    p, q = grid_shape(parts)
    assert p * q == parts and p <= q
    assert not any(parts % d == 0 for d in range(p + 1, int(parts**0.5) + 1))


def test_grid_shape_examples_of_the_issue() -> None:
    assert (grid_shape(4), grid_shape(6), grid_shape(3)) == ((2, 2), (2, 3), (1, 3))
    with pytest.raises(ValueError, match="parts must be >= 1"):
        grid_shape(0)


@st.composite
def axis_pair(draw):
    n = draw(st.integers(0, 60))

    def one():
        parts = draw(st.integers(1, 6))
        if draw(st.booleans()):
            return BlockCyclicRows(n, parts, draw(st.integers(1, 7)))
        return BlockRows(n, parts)

    return one(), one()


@settings(max_examples=300)
@given(axis_pair())
def test_axis_pieces_move_every_index_once_to_its_place(pair) -> None:
    src, dst = pair
    pieces = axis_pieces(src, dst)
    seen = np.zeros(src.global_rows, dtype=int)
    for s, d, s0, d0, n in pieces.tolist():
        assert n >= 1
        g_src = src.indices(s)[s0 : s0 + n]
        g_dst = dst.indices(d)[d0 : d0 + n]
        assert len(g_src) == n and np.array_equal(g_src, g_dst)  # the same global indices
        seen[g_src] += 1
    assert np.all(seen == 1)
    # maximal: no two pieces of one pair continue each other in both local arrays
    for a, b in itertools.pairwise(pieces.tolist()):
        if a[:2] == b[:2]:
            assert not (b[2] == a[2] + a[4] and b[3] == a[3] + a[4])


def test_grid2d_is_scalapacks_block_cyclic_layout() -> None:
    # ScaLAPACK Users' Guide 4.3.2: element (i, j) of an M x N matrix in MB x NB blocks lives on
    # process ((i // MB) % P, (j // NB) % Q); locally it is at
    # ((i // (MB * P)) * MB + i % MB, (j // (NB * Q)) * NB + j % NB).
    m, n, p, q, mb, nb = 11, 13, 2, 3, 2, 3
    g = block_cyclic_2d((m, n), (p, q), (mb, nb))
    for i, j in itertools.product(range(m), range(n)):
        pp, qq = (i // mb) % p, (j // nb) % q
        rank = pp * q + qq
        assert g.coords(rank) == (pp, qq)
        li = (i // (mb * p)) * mb + i % mb
        lj = (j // (nb * q)) * nb + j % nb
        assert g.rows.indices(pp)[li] == i and g.cols.indices(qq)[lj] == j
    assert sum(g.counts()) == m * n
    assert g.local_shape(0) == (len(g.rows.indices(0)), len(g.cols.indices(0)))


def test_grid2d_checks_its_axes_and_parts() -> None:
    with pytest.raises(TypeError, match="Grid2D.rows must be a BlockRows or BlockCyclicRows"):
        Grid2D(np.arange(3), BlockRows(3, 1))  # type: ignore[arg-type]
    g = block_2d((5, 7), (2, 3))
    assert g.parts == 6 and g.grid == (2, 3) and g.global_shape == (5, 7)
    with pytest.raises(ValueError, match="part must be in 0..5"):
        g.coords(6)
    assert g.with_parts(4).grid == (2, 2)


@pytest.mark.parametrize(
    "dist", [Block(), BlockCyclic(3), Block2D(), BlockCyclic2D(2, 5), BlockCyclic2D(1, 1)]
)
def test_every_distribution_round_trips_through_json(dist) -> None:
    assert distribution_from_json(dist.to_json()) == dist


def test_unknown_distribution_json_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown distribution"):
        distribution_from_json({"kind": "hexagonal"})
    with pytest.raises(ValueError, match="at least 1 x 1"):
        BlockCyclic2D(0, 2)


@pytest.mark.parametrize("size", [1, 2, 3, 4, 6])
def test_distarray_local_shapes_tile_the_global_array(size: int) -> None:
    shape = (10, 7, 2)
    for dist in (Block2D(), BlockCyclic2D(3, 2)):
        covered = np.zeros(shape[:2], dtype=int)
        for rank in range(size):
            arr = DistArray("u", shape, np.dtype(np.float64), dist, np.empty(0), rank, size)
            rows, cols = arr.grid_indices()
            assert arr.local_shape() == (len(rows), len(cols), 2)
            covered[np.ix_(rows, cols)] += 1
            assert arr.meta()["dist"] == dist.to_json()
            assert isinstance(arr.layout(), Grid2D) and arr.layout().grid == grid_shape(size)
            with pytest.raises(TypeError, match="use grid_indices"):
                arr.indices()
        assert np.all(covered == 1)


def test_2d_distribution_needs_two_axes() -> None:
    arr = DistArray("v", (10,), np.dtype(np.float64), Block2D(), np.empty(0), 0, 2)
    with pytest.raises(ValueError, match="distributes 2 axes but the array has shape"):
        arr.local_shape()
    with pytest.raises(TypeError, match="distributes two axes"):
        Block2D().layout(10, 2)


def test_row_distributions_keep_their_local_shapes() -> None:
    arr = DistArray("w", (10, 3), np.dtype(np.int32), BlockCyclic(2), np.empty(0), 1, 3)
    assert arr.local_shape() == (4, 3)  # blocks 1 and 4: rows 2, 3, 8, 9
    assert arr.indices().tolist() == [2, 3, 8, 9]
    assert arr.grid_indices()[1].tolist() == [0, 1, 2]
