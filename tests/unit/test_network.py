"""``cluster/network.py``: only what needs no root (the rest is covered by the live tests)."""

from __future__ import annotations

from pathlib import Path

from elastic_slurm.cluster.network import pids_in_netns


def test_pids_in_missing_netns(tmp_path: Path) -> None:
    assert pids_in_netns(tmp_path / "no-such-netns") == []
