"""Properties of the pure block distribution and transfer plan (no MPI)."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic_slurm.mpi_runtime import distribution
from elastic_slurm.mpi_runtime.distribution import BlockRows, Transfer, transfer_plan

rows_st = st.integers(min_value=0, max_value=5000)
parts_st = st.integers(min_value=1, max_value=300)


@given(rows_st, parts_st)
def test_counts_follow_the_uneven_division_rule(rows: int, parts: int) -> None:
    d = BlockRows(rows, parts)
    counts = d.counts()
    assert len(counts) == parts
    assert sum(counts) == rows
    base, extra = divmod(rows, parts)
    assert counts == tuple([base + 1] * extra + [base] * (parts - extra))
    assert max(counts) - min(counts) <= 1


@given(rows_st, parts_st)
def test_offsets_and_ranges_agree_with_counts(rows: int, parts: int) -> None:
    d = BlockRows(rows, parts)
    counts, offsets = d.counts(), d.offsets()
    assert len(offsets) == parts
    assert offsets[0] == 0
    stop = 0
    for p in range(parts):
        start, stop_p = d.rows_of(p)
        assert start == offsets[p] == stop  # contiguous, in part order
        assert stop_p - start == counts[p]
        stop = stop_p
    assert stop == rows


@given(rows_st, parts_st)
def test_ranges_match_numpy_array_split(rows: int, parts: int) -> None:
    # numpy.array_split uses the same rule (first rows % parts pieces are one longer).
    pieces = np.array_split(np.arange(rows), parts)
    d = BlockRows(rows, parts)
    for p, piece in enumerate(pieces):
        start, stop = d.rows_of(p)
        assert np.array_equal(piece, np.arange(start, stop))


@given(rows_st, parts_st, parts_st)
def test_plan_moves_every_row_exactly_once(rows: int, src_parts: int, dst_parts: int) -> None:
    plan = transfer_plan(rows, src_parts, dst_parts)
    src, dst = BlockRows(rows, src_parts), BlockRows(rows, dst_parts)
    hits_dst = np.zeros(rows, dtype=np.int64)
    for t in plan:
        assert isinstance(t, Transfer)
        assert t.rows == t.stop - t.start >= 1
        s_start, s_stop = src.rows_of(t.src)
        d_start, d_stop = dst.rows_of(t.dst)
        # a transfer is exactly the overlap of its two blocks
        assert (t.start, t.stop) == (max(s_start, d_start), min(s_stop, d_stop))
        hits_dst[t.start : t.stop] += 1
    assert np.all(hits_dst == 1)
    assert list(plan) == sorted(plan, key=lambda t: (t.src, t.dst))
    # tiles 0..rows in order
    assert [t.start for t in plan] == ([0] + [t.stop for t in plan[:-1]] if plan else [])
    assert len(plan) <= src_parts + dst_parts - 1


@given(rows_st, parts_st, parts_st)
def test_plan_lists_every_nonempty_overlap(rows: int, src_parts: int, dst_parts: int) -> None:
    src, dst = BlockRows(rows, src_parts), BlockRows(rows, dst_parts)
    pairs = {(t.src, t.dst) for t in transfer_plan(rows, src_parts, dst_parts)}
    # brute force on a sample of pairs keeps this cheap for 300 x 300
    for s in range(0, src_parts, max(1, src_parts // 17)):
        for d in range(0, dst_parts, max(1, dst_parts // 17)):
            (a, b), (c, e) = src.rows_of(s), dst.rows_of(d)
            assert ((s, d) in pairs) == (max(a, c) < min(b, e))


@given(rows_st, parts_st, parts_st)
def test_row_counts_sent_and_received_match_blocks(rows: int, src_parts: int, dst_parts: int):
    plan = transfer_plan(rows, src_parts, dst_parts)
    sent = [0] * src_parts
    received = [0] * dst_parts
    for t in plan:
        sent[t.src] += t.rows
        received[t.dst] += t.rows
    assert tuple(sent) == BlockRows(rows, src_parts).counts()
    assert tuple(received) == BlockRows(rows, dst_parts).counts()


@pytest.mark.parametrize(
    ("rows", "src", "dst", "expected"),
    [
        (0, 1, 1, ()),
        (0, 3, 5, ()),
        (1, 1, 1, ((0, 0, 0, 1),)),
        (1, 3, 2, ((0, 0, 0, 1),)),
        (2, 1, 4, ((0, 0, 0, 1), (0, 1, 1, 2))),
        (2, 4, 1, ((0, 0, 0, 1), (1, 0, 1, 2))),
        (7, 7, 1, tuple((p, 0, p, p + 1) for p in range(7))),
        (7, 1, 7, tuple((0, p, p, p + 1) for p in range(7))),
        (6, 3, 3, ((0, 0, 0, 2), (1, 1, 2, 4), (2, 2, 4, 6))),
        (10, 2, 3, ((0, 0, 0, 4), (0, 1, 4, 5), (1, 1, 5, 7), (1, 2, 7, 10))),
        (13, 5, 3, ((0, 0, 0, 3), (1, 0, 3, 5), (1, 1, 5, 6), (2, 1, 6, 9), (3, 2, 9, 11),
                    (4, 2, 11, 13))),
    ],
)  # fmt: skip
def test_plan_table(rows: int, src: int, dst: int, expected: tuple) -> None:
    assert transfer_plan(rows, src, dst) == tuple(Transfer(*t) for t in expected)


def test_rows_fewer_than_parts_leaves_trailing_parts_empty() -> None:
    d = BlockRows(3, 5)
    assert d.counts() == (1, 1, 1, 0, 0)
    assert d.rows_of(3) == (3, 3)
    assert d.rows_of(4) == (3, 3)
    assert d.offsets() == (0, 1, 2, 3, 3)


def test_numpy_integers_are_accepted_and_normalised() -> None:
    d = BlockRows(np.int64(9), np.int32(2))
    assert type(d.global_rows) is int and type(d.parts) is int
    assert d == BlockRows(9, 2)
    assert d.rows_of(np.int64(1)) == (5, 9)


def test_is_frozen_and_hashable() -> None:
    d = BlockRows(4, 2)
    with pytest.raises(AttributeError):
        d.parts = 3  # type: ignore[misc]
    assert {d, BlockRows(4, 2)} == {d}


@pytest.mark.parametrize(
    ("rows", "parts", "match"),
    [
        (-1, 1, r"global_rows must be >= 0, got -1"),
        (5, 0, r"parts must be >= 1, got 0"),
        (5, -3, r"parts must be >= 1, got -3"),
    ],
)
def test_invalid_sizes_raise_value_error(rows: int, parts: int, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        BlockRows(rows, parts)


@pytest.mark.parametrize(
    ("rows", "src", "dst", "match"),
    [
        (-2, 1, 1, r"global_rows must be >= 0, got -2"),
        (4, 0, 1, r"parts must be >= 1, got 0"),
        (4, 1, 0, r"parts must be >= 1, got 0"),
    ],
)
def test_invalid_plan_arguments_raise_value_error(rows: int, src: int, dst: int, match: str):
    with pytest.raises(ValueError, match=match):
        transfer_plan(rows, src, dst)


@pytest.mark.parametrize("bad", [2.0, "3", None, True])
def test_non_integers_raise_type_error(bad: object) -> None:
    with pytest.raises(TypeError, match="must be an integer"):
        BlockRows(bad, 2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be an integer"):
        BlockRows(4, bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("part", [-1, 3, 100])
def test_rows_of_rejects_parts_out_of_range(part: int) -> None:
    with pytest.raises(ValueError, match=r"part must be in 0\.\.2 for 3 parts, got"):
        BlockRows(10, 3).rows_of(part)


def test_doctests() -> None:
    result = doctest.testmod(distribution, raise_on_error=False)
    assert result.attempted > 0
    assert result.failed == 0
