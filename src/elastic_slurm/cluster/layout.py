"""Where the local cluster keeps its files, and the address of each of its hosts."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from elastic_slurm.cluster.network import HostNet
from elastic_slurm.config.schema import LocalClusterConfig


@dataclass(frozen=True)
class Layout:
    """Paths and hosts of a local cluster of ``nodes`` nodes, derived from its config."""

    cfg: LocalClusterConfig
    nodes: int

    @property
    def etc(self) -> Path:
        """Configuration files."""
        return self.cfg.state_dir / "etc"

    @property
    def slurm_conf(self) -> Path:
        """``slurm.conf``."""
        return self.etc / "slurm.conf"

    @property
    def slurmdbd_conf(self) -> Path:
        """``slurmdbd.conf`` (mode 0600; it holds the database password)."""
        return self.etc / "slurmdbd.conf"

    @property
    def logs(self) -> Path:
        """Daemon logs."""
        return self.cfg.state_dir / "log"

    @property
    def munge_dir(self) -> Path:
        """The munge key and seed (owned by the munge user)."""
        return self.cfg.state_dir / "munge"

    @property
    def munge_socket_dir(self) -> Path:
        """The munge socket's directory (owned by the munge user)."""
        return self.cfg.run_dir / "munge"

    @property
    def munge_socket(self) -> Path:
        """The munge socket every Slurm daemon and command authenticates through."""
        return self.munge_socket_dir / "munge.socket"

    @property
    def mysql_dir(self) -> Path:
        """MariaDB's data directory."""
        return self.cfg.state_dir / "mysql"

    @property
    def mysql_socket(self) -> Path:
        """MariaDB's socket (used to create the accounting user)."""
        return self.cfg.run_dir / "mysqld.sock"

    @property
    def state_file(self) -> Path:
        """What ``cluster up`` created and started (read by ``status`` and ``down``)."""
        return self.cfg.state_dir / "cluster.json"

    @property
    def bridge_address(self) -> ipaddress.IPv4Interface:
        """The bridge's address: the first host address of the subnet."""
        net = self.cfg.network.subnet
        return ipaddress.IPv4Interface(f"{net.network_address + 1}/{net.prefixlen}")

    @property
    def head(self) -> HostNet:
        """The head host (slurmctld, slurmdbd, MariaDB)."""
        net = self.cfg.network
        return HostNet(
            hostname=self.cfg.head_hostname,
            netns=f"{net.netns_prefix}{self.cfg.head_hostname}",
            address=net.subnet.network_address + 2,
            veth_outer=f"{net.netns_prefix}h",
        )

    @property
    def node_hosts(self) -> tuple[HostNet, ...]:
        """The compute nodes ``n1..nN``."""
        net = self.cfg.network
        return tuple(
            HostNet(
                hostname=name,
                netns=f"{net.netns_prefix}{name}",
                address=net.subnet.network_address + net.node_address_offset + i,
                veth_outer=f"{net.netns_prefix}{i}",
            )
            for i, name in enumerate(self.cfg.node_names(self.nodes), start=1)
        )
