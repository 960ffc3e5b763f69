"""The managed blocks in ``/etc/hosts``: ``cluster/hosts.py`` (on temporary files only)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from elastic_slurm.cluster.hosts import remove_block, render_block, with_block, write_in_place

USER_TEXT = "127.0.0.1 localhost\n::1 localhost ip6-localhost\n# a user's comment\n10.0.0.5 nas\n"
BLOCK_A = render_block("esbr0", [("10.77.0.2", "eshead"), ("10.77.0.11", "n1")])
BLOCK_B = render_block("esbr01", [("10.78.0.2", "head2"), ("10.78.0.11", "m1")])


def test_render_block() -> None:
    assert BLOCK_A == (
        "# BEGIN elastic-slurm local cluster esbr0 (managed by `elastic-slurm cluster`)\n"
        "10.77.0.2 eshead\n"
        "10.77.0.11 n1\n"
        "# END elastic-slurm local cluster esbr0\n"
    )


def test_render_empty_block() -> None:
    assert render_block("b", []) == (
        "# BEGIN elastic-slurm local cluster b (managed by `elastic-slurm cluster`)\n"
        "# END elastic-slurm local cluster b\n"
    )


def test_two_clusters_coexist() -> None:
    text = with_block(with_block(USER_TEXT, "esbr0", BLOCK_A), "esbr01", BLOCK_B)
    assert text == USER_TEXT + BLOCK_A + BLOCK_B


@pytest.mark.parametrize(
    ("cluster", "expected"),
    [
        ("esbr0", USER_TEXT + BLOCK_B),
        ("esbr01", USER_TEXT + BLOCK_A),
        ("esbr", USER_TEXT + BLOCK_A + BLOCK_B),  # a prefix of a name matches nothing
        ("other", USER_TEXT + BLOCK_A + BLOCK_B),
    ],
)
def test_remove_one_block_keeps_the_rest(cluster: str, expected: str) -> None:
    assert remove_block(USER_TEXT + BLOCK_A + BLOCK_B, cluster) == expected


def test_remove_block_in_the_middle_keeps_text_on_both_sides() -> None:
    text = "head line\n" + BLOCK_A + "tail line\n" + BLOCK_B + "last\n"
    assert remove_block(text, "esbr0") == "head line\ntail line\n" + BLOCK_B + "last\n"
    assert remove_block(text, "esbr01") == "head line\n" + BLOCK_A + "tail line\nlast\n"


def test_replacing_a_block_moves_it_to_the_end() -> None:
    text = USER_TEXT + BLOCK_A + BLOCK_B
    new_a = render_block("esbr0", [("10.77.0.12", "n2")])
    assert with_block(text, "esbr0", new_a) == USER_TEXT + BLOCK_B + new_a


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", BLOCK_A),
        ("no newline at end", "no newline at end\n" + BLOCK_A),
        ("x\n", "x\n" + BLOCK_A),
    ],
)
def test_with_block_appends(text: str, expected: str) -> None:
    assert with_block(text, "esbr0", BLOCK_A) == expected


def test_with_block_is_idempotent() -> None:
    once = with_block(USER_TEXT, "esbr0", BLOCK_A)
    assert with_block(once, "esbr0", BLOCK_A) == once


def test_stray_end_marker_is_kept() -> None:
    stray = "# END elastic-slurm local cluster esbr0\n"
    assert remove_block(USER_TEXT + stray, "esbr0") == USER_TEXT + stray


def test_unterminated_block_does_not_eat_user_lines() -> None:
    begin = BLOCK_A.splitlines(keepends=True)[0]
    text = "a\n" + begin + "10.77.0.11 n1\n" + "10.0.0.5 nas\n"
    assert "10.0.0.5 nas\n" in remove_block(text, "esbr0")


def test_write_in_place_keeps_the_inode(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text(USER_TEXT)
    inode = os.stat(hosts).st_ino
    longer = with_block(USER_TEXT, "esbr0", BLOCK_A)
    write_in_place(hosts, longer)
    assert (hosts.read_text(), os.stat(hosts).st_ino) == (longer, inode)
    write_in_place(hosts, remove_block(longer, "esbr0"))  # shorter: the rest is truncated
    assert (hosts.read_text(), os.stat(hosts).st_ino) == (USER_TEXT, inode)


def test_write_in_place_needs_an_existing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_in_place(tmp_path / "missing", "x\n")
