"""A tile of equally spaced runs as a few strided views: one NumPy copy instead of many.

A grid redistribution moves tiles: the product of row runs and column runs of a 2-D array
(``[start, length]`` pairs, in rows and in bytes). Block-cyclic distributions make many runs
(one per block), so copying a tile rectangle by rectangle costs one NumPy call per pair of
runs: about 6 us each here, which made a 256 MiB ``2x2 -> 1x3`` block-cyclic move spend most
of its time in Python. But such runs are *regular*: equally long and equally spaced. A regular
set of ``n`` runs of length ``L`` every ``S`` rows is one strided view of shape ``(n, L, ...)``,
so a tile whose row runs (or column runs, or both) are regular is copied with one call per run
of the other axis (or one call in all).

:func:`choose` picks the cheapest way for the tiles that must match (a packed buffer's, or
another array's), :func:`views` makes the views. Runs given to these functions are sorted,
do not overlap, and have positive lengths.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.lib.stride_tricks import as_strided

#: How a tile is cut into views: one view in all (``both`` axes regular), one per column run
#: (``rows`` regular), one per row run (``cols`` regular), or ``None``: one per rectangle.
Mode = Literal["both", "rows", "cols"] | None

Regular = tuple[int, int, int, int]
"""``(first start, step, length, count)`` of a regular set of runs."""


def merged(runs: np.ndarray) -> np.ndarray:
    """``[start, length]`` runs with adjacent ones joined (the same positions, in order).

    >>> merged(np.array([[0, 2], [2, 3], [7, 1]])).tolist()
    [[0, 5], [7, 1]]
    """
    if len(runs) < 2:
        return runs
    ends = runs[:-1, 0] + runs[:-1, 1]
    first = np.concatenate([[0], np.flatnonzero(ends != runs[1:, 0]) + 1])
    if len(first) == len(runs):
        return runs
    return np.column_stack([runs[first, 0], np.add.reduceat(runs[:, 1], first)])


def regular(runs: np.ndarray) -> Regular | None:
    """``(start, step, length, count)`` if the runs are equally long and spaced, else None.

    At least two runs; ``step`` is at least ``length`` (runs do not overlap).

    >>> regular(np.array([[1, 2], [5, 2], [9, 2]]))
    (1, 4, 2, 3)
    >>> regular(np.array([[1, 2], [5, 2], [10, 2]])) is None
    True
    """
    if len(runs) < 2:
        return None
    length = int(runs[0, 1])
    steps = np.diff(runs[:, 0])
    step = int(steps[0])
    if step < length or (runs[:, 1] != length).any() or (steps != step).any():
        return None
    return int(runs[0, 0]), step, length, len(runs)


def packed(runs: np.ndarray) -> np.ndarray:
    """The same lengths, one after the other from 0: where the runs go in a packed buffer.

    >>> packed(np.array([[3, 2], [9, 4]])).tolist()
    [[0, 2], [2, 4]]
    """
    starts = np.concatenate([[0], np.cumsum(runs[:-1, 1])]) if len(runs) else runs[:, 0]
    return np.column_stack([starts, runs[:, 1]]).astype(runs.dtype)


def choose(rows: Sequence[np.ndarray], cols: Sequence[np.ndarray]) -> Mode:
    """The way to cut tiles that must match view for view (the fewest NumPy calls).

    ``rows[i]``/``cols[i]`` are the runs of the ``i``-th tile (the same lengths in the same
    order on every tile, as a tile and its packed buffer, or its two places). An axis counts as
    regular only if it is regular with the same ``(length, count)`` on every tile.
    """
    n_rows, n_cols = len(rows[0]), len(cols[0])

    def same(axis: Sequence[np.ndarray]) -> bool:
        shapes = set()
        for runs in axis:
            reg = regular(runs)
            if reg is None:
                return False
            shapes.add(reg[2:])
        return len(shapes) == 1

    r_ok, c_ok = same(rows), same(cols)
    costs: dict[Mode, int] = {None: n_rows * n_cols}
    if r_ok and c_ok:
        costs["both"] = 1
    if r_ok:
        costs["rows"] = n_cols
    if c_ok:
        costs["cols"] = n_rows
    best = min(costs.values())
    return next(m for m, c in costs.items() if c == best)


def views(a: np.ndarray, rows: np.ndarray, cols: np.ndarray, mode: Mode) -> list[np.ndarray]:
    """The tile ``rows x cols`` of the 2-D array ``a`` as views, in packed order.

    ``mode`` from :func:`choose` (``None`` is not accepted here: use slices). The views write
    through to ``a``. Two tiles with the same run lengths give views of the same shapes, in
    the same order, for every mode.

    >>> a = np.arange(24).reshape(4, 6)
    >>> rows, cols = np.array([[0, 1], [2, 1]]), np.array([[0, 2], [3, 2]])
    >>> (whole,) = views(a, rows, cols, "both")
    >>> whole.tolist()
    [[[[0, 1], [3, 4]]], [[[12, 13], [15, 16]]]]
    """
    s0, s1 = a.strides
    if mode == "both":
        r0, rs, rl, rn = _req(rows)
        c0, cs, cl, cn = _req(cols)
        return [as_strided(a[r0:, c0:], (rn, rl, cn, cl), (rs * s0, s0, cs * s1, s1))]
    if mode == "rows":
        r0, rs, rl, rn = _req(rows)
        return [as_strided(a[r0:, c0:], (rn, rl, m), (rs * s0, s0, s1)) for c0, m in cols.tolist()]
    if mode == "cols":
        c0, cs, cl, cn = _req(cols)
        return [as_strided(a[r0:, c0:], (n, cn, cl), (s0, cs * s1, s1)) for r0, n in rows.tolist()]
    raise ValueError(f"views needs a mode from choose(), got {mode!r}")


def _req(runs: np.ndarray) -> Regular:
    reg = regular(runs)
    if reg is None:
        raise ValueError("these runs are not regular")
    return reg


__all__ = ["Mode", "choose", "merged", "packed", "regular", "views"]
