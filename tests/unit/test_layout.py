"""Paths, addresses and namespace names of the local cluster: ``cluster/layout.py``."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from pydantic import ValidationError

from elastic_slurm.cluster.layout import Layout
from elastic_slurm.cluster.network import NETNS_DIR, HostNet
from elastic_slurm.config.schema import LocalClusterConfig, NetworkConfig

IP = ipaddress.IPv4Address


def test_paths() -> None:
    cfg = LocalClusterConfig(state_dir=Path("/s"), run_dir=Path("/r"))
    layout = Layout(cfg, 2)
    assert layout.etc == Path("/s/etc")
    assert layout.slurm_conf == Path("/s/etc/slurm.conf")
    assert layout.slurmdbd_conf == Path("/s/etc/slurmdbd.conf")
    assert layout.logs == Path("/s/log")
    assert layout.munge_dir == Path("/s/munge")
    assert layout.munge_socket_dir == Path("/r/munge")
    assert layout.munge_socket == Path("/r/munge/munge.socket")
    assert layout.mysql_dir == Path("/s/mysql")
    assert layout.mysql_socket == Path("/r/mysqld.sock")
    assert layout.state_file == Path("/s/cluster.json")


def test_default_hosts() -> None:
    layout = Layout(LocalClusterConfig(), 3)
    assert layout.bridge_address == ipaddress.IPv4Interface("10.77.0.1/24")
    assert layout.head == HostNet("eshead", "es-eshead", IP("10.77.0.2"), "es-h")
    assert layout.node_hosts == (
        HostNet("n1", "es-n1", IP("10.77.0.11"), "es-1"),
        HostNet("n2", "es-n2", IP("10.77.0.12"), "es-2"),
        HostNet("n3", "es-n3", IP("10.77.0.13"), "es-3"),
    )
    assert layout.head.netns_path == NETNS_DIR / "es-eshead" == Path("/run/netns/es-eshead")


def test_layout_node_count_may_differ_from_config() -> None:
    layout = Layout(LocalClusterConfig(nodes=4), 1)
    assert [h.hostname for h in layout.node_hosts] == ["n1"]


def test_custom_network() -> None:
    cfg = LocalClusterConfig(
        node_prefix="cn",
        head_hostname="ctl",
        network=NetworkConfig(subnet="192.168.50.0/28", node_address_offset=2, netns_prefix="t-"),
    )
    layout = Layout(cfg, 2)
    assert layout.bridge_address == ipaddress.IPv4Interface("192.168.50.1/28")
    assert layout.head == HostNet("ctl", "t-ctl", IP("192.168.50.2"), "t-h")
    assert [(h.netns, h.address) for h in layout.node_hosts] == [
        ("t-cn1", IP("192.168.50.3")),
        ("t-cn2", IP("192.168.50.4")),
    ]


def test_veth_names_stay_short_with_long_hostnames() -> None:
    cfg = LocalClusterConfig(
        head_hostname="averyveryverylonghead", network=NetworkConfig(netns_prefix="abcdef")
    )
    head = Layout(cfg, 1).head
    assert head.netns == "abcdefaveryveryverylonghead"
    assert head.veth_outer == "abcdefh"


def test_every_address_is_distinct() -> None:
    layout = Layout(LocalClusterConfig(nodes=64), 64)
    addresses = [layout.bridge_address.ip, layout.head.address]
    addresses += [h.address for h in layout.node_hosts]
    assert len(set(addresses)) == 66


def test_veth_names_are_unique_for_every_valid_config() -> None:
    cfg = LocalClusterConfig(
        nodes=12, node_prefix="nodeabcd", network=NetworkConfig(netns_prefix="abcdef")
    )
    hosts = Layout(cfg, 12).node_hosts
    names = [h.veth_outer for h in hosts]
    assert all(len(n) <= 15 for n in names)
    assert len(set(names)) == 12


def test_head_hostname_must_differ_from_node_names() -> None:
    with pytest.raises(ValidationError):
        LocalClusterConfig(head_hostname="n1")
