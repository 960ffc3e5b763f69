"""Properties of the pure row distributions and their transfer/exchange plans (no MPI)."""

from __future__ import annotations

import doctest
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from elastic_slurm.mpi_runtime import distribution
from elastic_slurm.mpi_runtime.distribution import (
    BlockCyclicRows,
    BlockRows,
    RowDistribution,
    Transfer,
    exchange_plan,
    transfer_plan,
)

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


# ----------------------------------------------------------------------------------------------
# The RowDistribution protocol: BlockRows, BlockCyclicRows, and a custom implementation


@dataclass(frozen=True)
class ExplicitRows:
    """A custom distribution from an explicit owner per row (exercises the generic paths)."""

    owner: tuple[int, ...]
    parts: int

    @property
    def global_rows(self) -> int:
        return len(self.owner)

    def count(self, part: int) -> int:
        return self.owner.count(part)

    def counts(self) -> tuple[int, ...]:
        return tuple(self.owner.count(p) for p in range(self.parts))

    def indices(self, part: int) -> np.ndarray:
        return np.flatnonzero(np.array(self.owner, dtype=np.int64) == part).astype(np.int64)

    def runs(self, part: int) -> np.ndarray:
        return _runs_of(self.indices(part))

    def owners(self, rows: np.ndarray) -> np.ndarray:
        return np.array(self.owner, dtype=np.int64)[np.asarray(rows, dtype=np.int64)]


def _runs_of(idx: np.ndarray) -> np.ndarray:
    """Maximal [start, stop) ranges of a sorted index array (reference implementation)."""
    if idx.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    breaks = np.flatnonzero(np.diff(idx) != 1) + 1
    starts = idx[np.r_[0, breaks]]
    stops = idx[np.r_[breaks - 1, idx.size - 1]] + 1
    return np.stack([starts, stops], axis=1)


block_st = st.integers(min_value=1, max_value=40)
small_rows_st = st.integers(min_value=0, max_value=400)
small_parts_st = st.integers(min_value=1, max_value=12)


@st.composite
def distributions(draw: st.DrawFn, rows: int | None = None) -> RowDistribution:
    """A random BlockRows, BlockCyclicRows (block sizes that do and don't divide) or custom."""
    n = draw(small_rows_st) if rows is None else rows
    parts = draw(small_parts_st)
    kind = draw(st.sampled_from(["block", "cyclic", "cyclic", "explicit"]))
    if kind == "block":
        return BlockRows(n, parts)
    if kind == "cyclic":
        block = draw(st.one_of(block_st, st.sampled_from([1, 2, 3, 4, 6, 8, 12, 24, 64])))
        return BlockCyclicRows(n, parts, block)
    owner = draw(st.lists(st.integers(0, parts - 1), min_size=n, max_size=n))
    return ExplicitRows(tuple(owner), parts)


def _check_protocol(d: RowDistribution) -> None:
    """Every invariant the RowDistribution docstring promises."""
    assert isinstance(d, RowDistribution)
    counts = d.counts()
    assert len(counts) == d.parts and sum(counts) == d.global_rows
    seen = np.zeros(d.global_rows, dtype=np.int64)
    for p in range(d.parts):
        idx = d.indices(p)
        assert idx.dtype == np.int64 and idx.ndim == 1
        assert len(idx) == d.count(p) == counts[p]
        assert np.all(np.diff(idx) > 0)  # strictly increasing
        seen[idx] += 1
        runs = d.runs(p)
        assert runs.dtype == np.int64 and runs.shape == (len(runs), 2)
        assert np.array_equal(runs, _runs_of(idx))  # same rows, maximal, increasing
        assert np.all(d.owners(idx) == p)
    assert np.all(seen == 1)  # every global row owned exactly once
    owner = np.zeros(d.global_rows, dtype=np.int64)
    for p in range(d.parts):
        owner[d.indices(p)] = p
    assert d.owners(np.arange(d.global_rows)).tolist() == owner.tolist()


@given(small_rows_st, small_parts_st)
def test_block_rows_follows_the_protocol(rows: int, parts: int) -> None:
    _check_protocol(BlockRows(rows, parts))


@given(small_rows_st, small_parts_st, st.one_of(block_st, st.sampled_from([1, 64, 1000])))
def test_block_cyclic_follows_the_protocol(rows: int, parts: int, block: int) -> None:
    _check_protocol(BlockCyclicRows(rows, parts, block))


@given(small_rows_st, small_parts_st, block_st)
def test_block_cyclic_matches_brute_force_assignment(rows: int, parts: int, block: int) -> None:
    d = BlockCyclicRows(rows, parts, block)
    owner = []
    for b in range(0, rows, block):  # deal blocks round-robin, the last one possibly short
        owner += [len(owner) // block % parts] * min(block, rows - b)
    owner_arr = np.array(owner, dtype=np.int64)
    assert d.blocks == -(-rows // block)
    for p in range(parts):
        assert d.indices(p).tolist() == np.flatnonzero(owner_arr == p).tolist()
        assert d.block_count(p) == len(range(p, d.blocks, parts))
    assert d.owners(np.arange(rows)).tolist() == owner


@given(distributions())
def test_custom_test_distribution_follows_the_protocol(d: RowDistribution) -> None:
    _check_protocol(d)  # the reference the exchange-plan tests rely on


def _simulate_exchange(src: RowDistribution, dst: RowDistribution) -> None:
    """Run every part's exchange_plan like the Alltoallv does and check the result.

    The "data" are the global row numbers themselves, so every moved row is checked.
    """
    nparts = max(src.parts, dst.parts) + 1  # one idle part beyond both
    plans = [exchange_plan(src, dst, p, max_pieces=(10**9, 10**9)) for p in range(nparts)]
    grain = plans[0].grain
    assert all(pl.grain == grain for pl in plans)
    assert grain >= 1
    mailbox: dict[tuple[int, int], np.ndarray] = {}
    for p, pl in enumerate(plans):
        assert pl.send_counts.shape == (dst.parts,) and pl.recv_counts.shape == (src.parts,)
        if p >= src.parts:
            assert not pl.send_counts.any() and pl.send_order is None
            continue
        assert src.count(p) % grain == 0
        units = src.indices(p).reshape(-1, grain)
        if pl.send_order is not None:
            assert sorted(pl.send_order.tolist()) == list(range(len(units)))  # a permutation
            units = units[pl.send_order]
        assert pl.send_counts.sum() == len(units)
        pieces = np.split(units, np.cumsum(pl.send_counts)[:-1])
        for d, chunk in zip(range(dst.parts), pieces, strict=True):
            mailbox[(p, d)] = chunk
    for p, pl in enumerate(plans):
        if p >= dst.parts:
            assert not pl.recv_counts.any() and pl.recv_order is None
            continue
        got = [mailbox.get((s, p), np.zeros((0, grain), np.int64)) for s in range(src.parts)]
        assert [len(g) for g in got] == pl.recv_counts.tolist()  # sender and receiver agree
        received = np.concatenate(got) if got else np.zeros((0, grain), np.int64)
        placed = np.empty_like(received)
        if pl.recv_order is None:
            placed = received
        else:
            assert sorted(pl.recv_order.tolist()) == list(range(len(received)))
            placed[pl.recv_order] = received
        assert placed.reshape(-1).tolist() == dst.indices(p).tolist()
    _simulate_pieces(src, dst, plans)


def _simulate_pieces(src: RowDistribution, dst: RowDistribution, plans: list) -> None:
    """Move the rows piece by piece (one message per piece) and check the result."""
    grain = plans[0].grain
    messages: dict[tuple[int, int], list[np.ndarray]] = {}
    for p, pl in enumerate(plans):
        units = src.indices(p).reshape(-1, grain) if p < src.parts else np.zeros((0, grain))
        assert pl.send_pieces is not None and pl.send_pieces.shape[1:] == (3,)
        assert pl.send_pieces[:, 2].sum() == len(units) and np.all(pl.send_pieces[:, 2] >= 1)
        for peer, start, n in pl.send_pieces.tolist():
            piece = units[start : start + n].reshape(-1)
            assert np.array_equal(piece, np.arange(piece[0], piece[0] + len(piece)))  # consecutive
            messages.setdefault((p, peer), []).append(piece)
    for p, pl in enumerate(plans):
        new = np.full(dst.count(p) if p < dst.parts else 0, -1, dtype=np.int64)
        for peer, start, n in pl.recv_pieces.tolist():
            piece = messages[(peer, p)].pop(0)  # MPI keeps the order of messages of one pair
            assert len(piece) == n * grain
            new[start * grain : (start + n) * grain] = piece
        assert new.tolist() == (dst.indices(p).tolist() if p < dst.parts else [])
    assert not any(messages.values())  # every message was received


def test_pieces_are_left_out_above_the_limit() -> None:
    src, dst = BlockRows(12, 1), BlockCyclicRows(12, 2, 2)  # 6 pieces of one unit (2 rows)
    plan = exchange_plan(src, dst, 0, max_pieces=(5, 6))
    assert plan.send_pieces is None
    assert plan.recv_pieces is not None and plan.recv_pieces.tolist() == [
        [0, 0, 1],
        [0, 1, 1],
        [0, 2, 1],
    ]
    plan = exchange_plan(src, dst, 0, max_pieces=(6, 0))
    assert plan.send_pieces.tolist() == [
        [0, 0, 1],
        [1, 1, 1],
        [0, 2, 1],
        [1, 3, 1],
        [0, 4, 1],
        [1, 5, 1],
    ]
    assert plan.recv_pieces is None
    assert exchange_plan(src, dst, 0).send_pieces is None  # none unless asked for


@given(st.data())
def test_exchange_plan_delivers_every_row_to_its_new_owner(data: st.DataObject) -> None:
    # rows that are multiples of 24 make common grains > 1 likely (blocks 2, 3, 4, 6, 8, 12, 24)
    rows = data.draw(st.one_of(small_rows_st, st.integers(0, 16).map(lambda k: 24 * k)))
    src = data.draw(distributions(rows=rows))
    dst = data.draw(distributions(rows=rows))
    _simulate_exchange(src, dst)


@pytest.mark.parametrize(
    ("src", "dst", "grain", "send_identity", "recv_identity"),
    [
        (BlockRows(12, 3), BlockRows(12, 2), 2, True, True),
        (BlockRows(12, 1), BlockCyclicRows(12, 2, 2), 2, False, True),
        (BlockCyclicRows(12, 2, 2), BlockRows(12, 1), 2, True, False),
        (BlockCyclicRows(96, 3, 16), BlockCyclicRows(96, 4, 24), 8, None, None),
        (BlockCyclicRows(97, 3, 16), BlockCyclicRows(97, 4, 24), 1, None, None),  # short block
        (BlockRows(13, 2), BlockCyclicRows(13, 2, 4), 1, None, None),  # uneven blocks
        (BlockCyclicRows(10, 4, 64), BlockRows(10, 1), 10, True, True),  # one block in all
        (BlockRows(0, 3), BlockCyclicRows(0, 2, 5), 1, True, True),
    ],
)
def test_exchange_plan_grain_and_identity_orders(
    src: RowDistribution, dst: RowDistribution, grain: int, send_identity, recv_identity
) -> None:
    plan = exchange_plan(src, dst, 0)
    assert plan.grain == grain
    if send_identity is not None:
        assert (plan.send_order is None) == send_identity
    if recv_identity is not None:
        assert (plan.recv_order is None) == recv_identity
    _simulate_exchange(src, dst)


def test_exchange_plan_max_grain_falls_back_to_single_rows() -> None:
    src, dst = BlockCyclicRows(96, 3, 16), BlockCyclicRows(96, 4, 24)
    assert exchange_plan(src, dst, 1, max_grain=8).grain == 8
    assert exchange_plan(src, dst, 1, max_grain=7).grain == 1


def test_exchange_plan_rejects_mismatched_rows_and_parts() -> None:
    with pytest.raises(ValueError, match="src has 10, dst has 11"):
        exchange_plan(BlockRows(10, 2), BlockCyclicRows(11, 2, 3), 0)
    with pytest.raises(ValueError, match="part must be >= 0, got -1"):
        exchange_plan(BlockRows(10, 2), BlockRows(10, 3), -1)
    with pytest.raises(TypeError, match="part must be an integer"):
        exchange_plan(BlockRows(10, 2), BlockRows(10, 3), 1.0)  # type: ignore[arg-type]


def test_exchange_plan_notices_a_broken_custom_distribution() -> None:
    class Liar(ExplicitRows):
        def owners(self, rows: np.ndarray) -> np.ndarray:
            return np.full(np.shape(rows), self.parts, dtype=np.int64)  # out of range

    with pytest.raises(ValueError, match=r"owners\(\) returned parts outside 0\.\.1"):
        exchange_plan(BlockRows(4, 1), Liar((0, 1, 0, 1), 2), 0)


def test_block_cyclic_table() -> None:
    d = BlockCyclicRows(10, 3, 2)
    assert d.counts() == (4, 4, 2)
    assert [d.indices(p).tolist() for p in range(3)] == [[0, 1, 6, 7], [2, 3, 8, 9], [4, 5]]
    assert d.runs(0).tolist() == [[0, 2], [6, 8]]
    one = BlockCyclicRows(10, 1, 3)  # one part: adjacent blocks merge into one run
    assert one.runs(0).tolist() == [[0, 10]] and one.counts() == (10,)
    assert BlockCyclicRows(7, 2, 3).counts() == (4, 3)  # last block [6, 7) is short
    assert BlockCyclicRows(5, 3, 100).counts() == (5, 0, 0)  # block beyond the rows
    assert BlockCyclicRows(0, 3, 4).counts() == (0, 0, 0)
    assert BlockCyclicRows(0, 3, 4).runs(1).shape == (0, 2)
    assert BlockRows(0, 2).runs(0).shape == (0, 2)
    assert BlockRows(7, 3).runs(1).tolist() == [[3, 5]]


def test_with_parts_keeps_the_kind() -> None:
    assert BlockRows(10, 2).with_parts(5) == BlockRows(10, 5)
    assert BlockCyclicRows(10, 2, 3).with_parts(4) == BlockCyclicRows(10, 4, 3)


def test_block_cyclic_is_frozen_hashable_and_normalises_numpy_ints() -> None:
    d = BlockCyclicRows(np.int64(9), np.int32(2), np.int16(4))
    assert (type(d.global_rows), type(d.parts), type(d.block)) == (int, int, int)
    assert {d, BlockCyclicRows(9, 2, 4)} == {d}
    with pytest.raises(AttributeError):
        d.block = 3  # type: ignore[misc]
    assert isinstance(d, RowDistribution) and isinstance(BlockRows(3, 1), RowDistribution)
    assert not isinstance(object(), RowDistribution)


@pytest.mark.parametrize(
    ("args", "exc", "match"),
    [
        ((-1, 1, 1), ValueError, r"global_rows must be >= 0, got -1"),
        ((5, 0, 1), ValueError, r"parts must be >= 1, got 0"),
        ((5, 2, 0), ValueError, r"block must be >= 1 row, got 0"),
        ((5, 2, -4), ValueError, r"block must be >= 1 row, got -4"),
        ((5, 2, 2.0), TypeError, r"block must be an integer, got float 2.0"),
        ((5, True, 2), TypeError, r"parts must be an integer, got the bool True"),
        (("5", 2, 2), TypeError, r"global_rows must be an integer"),
    ],
)
def test_block_cyclic_invalid_arguments(args: tuple, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        BlockCyclicRows(*args)


@pytest.mark.parametrize("method", ["count", "indices", "runs", "block_count"])
@pytest.mark.parametrize("part", [-1, 3])
def test_block_cyclic_rejects_parts_out_of_range(method: str, part: int) -> None:
    with pytest.raises(ValueError, match=r"part must be in 0\.\.2 for 3 parts, got"):
        getattr(BlockCyclicRows(10, 3, 2), method)(part)


@pytest.mark.parametrize("method", ["count", "indices", "runs"])
def test_block_rows_new_methods_reject_parts_out_of_range(method: str) -> None:
    with pytest.raises(ValueError, match=r"part must be in 0\.\.2 for 3 parts, got 3"):
        getattr(BlockRows(10, 3), method)(3)
