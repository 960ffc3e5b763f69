"""A hostlist that names too many nodes is refused before it is expanded."""

from __future__ import annotations

import tracemalloc

import pytest

from elastic_slurm.adapter.hostlist import MAX_NAMES, count, expand


@pytest.mark.parametrize(
    "expr",
    [
        "n[0-999999999]",  # one huge range
        ",".join(f"r{i}n[0-99999]" for i in range(30)),  # many ranges, each under the library's cap
        "n[" + ",".join("0-99999" for _ in range(30)) + "]",  # many ranges in one bracket
        "a[0-999]b[0-999]c[0-999]",  # a product
    ],
)
def test_too_many_names_are_refused_in_one_line_without_expanding(expr):
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=f"names more than {MAX_NAMES} nodes") as err:
            expand(expr)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "\n" not in str(err.value) and len(str(err.value)) < 200
    assert peak < 1_000_000  # bytes: nothing was expanded (the 30 ranges take > 100 MB)


@pytest.mark.parametrize(
    ("expr", "n"),
    [
        ("n1", 1),
        ("n[1-3,7]", 4),
        ("n[01-10]x[1-2],m1", 21),
        ("n[3-1]", 1),  # malformed: left to expand() to report
        ("a,b,,c", 3),
    ],
)
def test_count(expr, n):
    assert count(expr) == n


def test_the_cap_itself_is_allowed():
    assert len(expand(f"n[1-{MAX_NAMES}]")) == MAX_NAMES
    with pytest.raises(ValueError, match="names more than"):
        expand(f"n[1-{MAX_NAMES}],m1")
