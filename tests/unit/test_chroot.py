"""Chroot flavours: mirror discovery, markers, mounts, the chroot transport, configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elastic_slurm.adapter.transport.chroot import chroot_argv
from elastic_slurm.cluster import chroot
from elastic_slurm.cluster.flavoured import ChrootCluster, make_cluster
from elastic_slurm.cluster.local import LocalCluster
from elastic_slurm.cluster.slurmconf import render_cgroup_conf, render_slurm_conf
from elastic_slurm.config import load_site
from elastic_slurm.errors import ClusterError


def test_flavours() -> None:
    assert not chroot.flavour("bookworm").in_chroot
    assert chroot.flavour("forky").script == "sid"
    with pytest.raises(ClusterError, match="unknown cluster flavour 'jessie'"):
        chroot.flavour("jessie")


def test_mirror_urls_both_formats() -> None:
    deb822 = (
        "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\n\n"
        "Types: deb\nURIs: http://deb.debian.org/debian-security\n"
    )
    assert chroot.mirror_urls(deb822) == ["http://deb.debian.org/debian"]
    one_line = "deb [arch=amd64] http://ftp.de.debian.org/debian/ bookworm main\n"
    assert chroot.mirror_urls(one_line) == ["http://ftp.de.debian.org/debian"]


def test_host_mirror_falls_back(tmp_path: Path) -> None:
    assert chroot.host_mirror([tmp_path / "none"]) == chroot.DEFAULT_MIRROR
    (tmp_path / "x.list").write_text("deb http://mirror.example/debian trixie main\n")
    assert chroot.host_mirror([tmp_path]) == "http://mirror.example/debian"


def test_marker(tmp_path: Path) -> None:
    assert not chroot.is_built(tmp_path)
    (tmp_path / chroot.MARKER).write_text(json.dumps({"flavour": "trixie"}))
    assert chroot.is_built(tmp_path)
    assert chroot.read_marker(tmp_path) == {"flavour": "trixie"}


def test_build_skips_a_built_chroot(tmp_path: Path) -> None:
    root = tmp_path / "trixie"
    root.mkdir()
    (root / chroot.MARKER).write_text(json.dumps({"versions": {"slurm-wlm": "24.11.5-4"}}))
    lines: list[str] = []
    assert chroot.build("trixie", tmp_path, progress=lines.append) == root
    assert "built already" in lines[0]
    with pytest.raises(ClusterError, match="bookworm"):
        chroot.build("bookworm", tmp_path)


def test_mounts_under_deepest_first() -> None:
    info = "\n".join(
        f"{i} 1 0:1 / {p} rw - x x rw"
        for i, p in enumerate(
            ["/", "/srv/c/proc", "/srv/c/dev", "/srv/c/dev/pts", "/srv/cc/proc", "/srv/c/a\\040b"]
        )
    )
    got = chroot.mounts_under(Path("/srv/c"), info)
    assert got[0] == Path("/srv/c/dev/pts")
    assert set(got) == {
        Path(p) for p in ("/srv/c/proc", "/srv/c/dev", "/srv/c/dev/pts", "/srv/c/a b")
    }


def test_chroot_ids(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "passwd").write_text("root:x:0:0::/root:/bin/sh\nmunge:x:101:102::/:\n")
    assert chroot.chroot_ids(tmp_path, "munge") == (101, 102)
    with pytest.raises(ClusterError, match="no user 'slurm'"):
        chroot.chroot_ids(tmp_path, "slurm")


def test_chroot_argv_clears_the_environment() -> None:
    argv = chroot_argv(Path("/c"), ["sinfo", "-h"], {"SLURM_CONF": "/x/slurm.conf"})
    assert argv == ["chroot", "/c", "/usr/bin/env", "-i", "SLURM_CONF=/x/slurm.conf", "sinfo", "-h"]
    with pytest.raises(ValueError):
        chroot_argv(Path("/c"), ["true"], {"A=B": "1"})


@pytest.mark.parametrize("flavour", ["trixie", "forky"])
def test_flavour_site_configs_do_not_collide_with_bookworm(flavour: str) -> None:
    base = load_site("local").local_cluster
    site = load_site(f"local-{flavour}")
    cfg = site.local_cluster
    assert base is not None and cfg is not None
    assert cfg.flavour == flavour and cfg.accounting == "none"
    assert cfg.network.bridge != base.network.bridge
    assert not cfg.network.subnet.overlaps(base.network.subnet)
    assert cfg.network.netns_prefix != base.network.netns_prefix
    ports = {base.slurmctld_port, base.slurmd_port, base.slurmdbd_port, base.mariadb_port}
    assert not ports & {cfg.slurmctld_port, cfg.slurmd_port}
    assert cfg.state_dir != base.state_dir and cfg.run_dir != base.run_dir
    assert isinstance(make_cluster(site), ChrootCluster)
    assert type(make_cluster(load_site("local"))) is LocalCluster


def test_accounting_none_and_cgroup_conf() -> None:
    from elastic_slurm.cluster.layout import Layout

    site = load_site("local-trixie")
    assert site.local_cluster is not None
    text = render_slurm_conf(Layout(site.local_cluster, 2), site.cluster_name)
    assert "AccountingStorageType=accounting_storage/none" in text
    assert "AccountingStorageHost" not in text and "SlurmctldPort=16817" in text
    assert "CgroupPlugin=disabled" in render_cgroup_conf()
    bookworm = load_site("local")
    assert bookworm.local_cluster is not None
    assert "accounting_storage/slurmdbd" in render_slurm_conf(
        Layout(bookworm.local_cluster, 2), bookworm.cluster_name
    )
