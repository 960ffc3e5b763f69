"""Network and hostname namespaces for the local cluster's hosts.

Each host (the head and every node) gets a network namespace with a veth pair whose outer end
joins a bridge the cluster creates, and runs its daemons in a UTS namespace of its own, so that
Open MPI and Slurm see distinct hostnames and traffic between nodes crosses a (virtual)
network. Namespaces are entered with :func:`enter_host` (``setns(2)``, like ``nsenter --net``):
``ip netns exec`` remounts sysfs, and slurmd then fails to initialise its cgroup plugin
(SLURM-FACTS.md).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import ipaddress
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from elastic_slurm.adapter.transport.base import Transport
from elastic_slurm.errors import ClusterError

CLONE_NEWUTS = 0x04000000
CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/run/netns")


@dataclass(frozen=True)
class HostNet:
    """One host of the local cluster: its hostname, namespace name, address and veth names."""

    hostname: str
    netns: str
    address: ipaddress.IPv4Address
    veth_outer: str

    @property
    def netns_path(self) -> Path:
        """The namespace's bind mount under ``/run/netns``."""
        return NETNS_DIR / self.netns


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def enter_host(netns_path: Path, hostname: str) -> Callable[[], None]:
    """Return a ``preexec_fn`` that moves the child into a host's namespaces.

    The child joins the network namespace at ``netns_path``, gets a new UTS namespace and sets
    its hostname to ``hostname``, before it executes the daemon.

    Raises
    ------
    OSError
        In the child (reported by :mod:`subprocess` as a failure to start) if a system call fails.
    """
    name = hostname.encode()

    def _enter() -> None:
        libc = _libc()
        fd = os.open(netns_path, os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"setns({netns_path}): {os.strerror(err)}")
        finally:
            os.close(fd)
        if libc.unshare(CLONE_NEWUTS) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"unshare(CLONE_NEWUTS): {os.strerror(err)}")
        if libc.sethostname(name, len(name)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"sethostname({hostname}): {os.strerror(err)}")

    return _enter


def netns_inode(path: Path) -> int:
    """The inode that identifies a network namespace (bind mount or ``/proc/PID/ns/net``)."""
    return os.stat(path).st_ino


def pids_in_netns(path: Path) -> list[int]:
    """PIDs of all processes whose network namespace is the one at ``path``.

    Used by ``cluster down`` to end every process a node ran, including those that left
    Slurm's process tracking (only processes inside the cluster's own namespaces match).
    """
    try:
        target = netns_inode(path)
    except FileNotFoundError:
        return []
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.stat(entry / "ns" / "net").st_ino == target:
                pids.append(int(entry.name))
        except OSError:
            continue  # the process ended meanwhile, or is not ours to inspect
    return pids


class Network:
    """Creates and removes the bridge, namespaces and veth pairs of the local cluster.

    Parameters
    ----------
    transport
        Runs ``ip`` commands.
    bridge
        The bridge's name.
    bridge_address
        The bridge's address, with the subnet's prefix length.
    """

    def __init__(
        self, transport: Transport, bridge: str, bridge_address: ipaddress.IPv4Interface
    ) -> None:
        self.transport = transport
        self.bridge = bridge
        self.bridge_address = bridge_address

    def _ip(self, *args: str, netns: str | None = None, ok_if: str | None = None) -> None:
        argv = ["ip", *(["-n", netns] if netns else []), *args]
        res = self.transport.run(argv, timeout_s=15)
        if res.returncode != 0 and not (ok_if and ok_if in res.stderr):
            raise ClusterError(f"`{' '.join(argv)}` failed: {res.stderr.strip()}")

    def link_exists(self, name: str) -> bool:
        """True if a network interface of that name exists in this namespace."""
        return Path("/sys/class/net", name).exists()

    def create_bridge(self) -> None:
        """Create the bridge with its address, up (idempotent)."""
        if not self.link_exists(self.bridge):
            self._ip("link", "add", self.bridge, "type", "bridge")
        self._ip("addr", "replace", str(self.bridge_address), "dev", self.bridge)
        self._ip("link", "set", self.bridge, "up")

    def create_host(self, host: HostNet, prefixlen: int) -> None:
        """Create a host's namespace, veth pair and address (idempotent)."""
        if not host.netns_path.exists():
            self._ip("netns", "add", host.netns)
        self._ip("link", "set", "lo", "up", netns=host.netns)
        if not self.link_exists(host.veth_outer):
            self._ip(
                "link",
                "add",
                host.veth_outer,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                host.netns,
            )
        self._ip("link", "set", host.veth_outer, "master", self.bridge)
        self._ip("link", "set", host.veth_outer, "up")
        self._ip("addr", "replace", f"{host.address}/{prefixlen}", "dev", "eth0", netns=host.netns)
        self._ip("link", "set", "eth0", "up", netns=host.netns)
        gateway = str(self.bridge_address.ip)
        self._ip("route", "replace", "default", "via", gateway, netns=host.netns)

    def remove_host(self, host: HostNet) -> None:
        """Remove a host's veth pair and namespace (missing ones are fine)."""
        if self.link_exists(host.veth_outer):
            self._ip("link", "del", host.veth_outer, ok_if="Cannot find device")
        if host.netns_path.exists():
            self._ip("netns", "del", host.netns, ok_if="No such file")

    def remove_bridge(self) -> None:
        """Remove the bridge (a missing one is fine)."""
        if self.link_exists(self.bridge):
            self._ip("link", "del", self.bridge, ok_if="Cannot find device")
