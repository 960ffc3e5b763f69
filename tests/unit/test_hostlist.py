"""Slurm hostlist expressions: ``adapter/hostlist.py``."""

from __future__ import annotations

import pytest

from elastic_slurm.adapter.hostlist import compress, expand


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("n1", ("n1",)),
        ("n[1-3,7]", ("n1", "n2", "n3", "n7")),
        ("n[1-2],m[3-4]", ("n1", "n2", "m3", "m4")),
        ("n1,n2", ("n1", "n2")),
        ("n[01-03]", ("n01", "n02", "n03")),  # zero padding is kept
        ("n[9-11]", ("n9", "n10", "n11")),
        ("n[1-2]x", ("n1x", "n2x")),
        ("eshead", ("eshead",)),
        ("", ()),
        (None, ()),
        ("(null)", ()),
        ("None assigned", ()),  # sacct's "no nodes"
        ("None", ("None",)),  # a node may be called None
    ],
)
def test_expand(expr: str | None, names: tuple[str, ...]) -> None:
    assert expand(expr) == names


@pytest.mark.parametrize(
    ("expr", "why"),
    [
        ("n[1-", "unbalanced brackets"),
        ("n]1[", "unbalanced brackets"),
        ("n[3-1]", "start > stop"),
        ("n[a-b]", "bad range"),
    ],
)
def test_expand_malformed(expr: str, why: str) -> None:
    with pytest.raises(ValueError) as info:
        expand(expr)
    assert str(info.value) == f"malformed Slurm hostlist {expr!r}: {why}"
    assert info.value.__cause__ is not None  # raised from the library's error


@pytest.mark.parametrize(
    ("names", "expr"),
    [
        ([], ""),
        (["n1"], "n1"),
        (["n1", "n2", "n3", "n7"], "n[1-3,7]"),
        (["n3", "n1", "n2"], "n[1-3]"),  # sorted
        (["n1", "n1", "n2"], "n[1-2]"),  # duplicates dropped
        (["n9", "n10"], "n[9-10]"),  # numeric, not lexical
        (["n01", "n02"], "n[01-02]"),
        (["eshead", "n1", "n2"], "eshead,n[1-2]"),
        (("n2", "n4"), "n[2,4]"),
        (iter(["n5", "n6"]), "n[5-6]"),  # any iterable
    ],
)
def test_compress(names: list[str], expr: str) -> None:
    assert compress(names) == expr


@pytest.mark.parametrize(
    "names",
    [("n1",), ("n1", "n2", "n3"), ("n1", "n3", "n4", "n10"), ("a1", "b1", "b2")],
)
def test_round_trip(names: tuple[str, ...]) -> None:
    assert expand(compress(names)) == names
