"""Where the controller listens, and which MUNGE socket its site uses."""

from __future__ import annotations

import socket

from elastic_slurm.config.schema import SiteConfig
from elastic_slurm.protocol.identity import munge_socket

#: The port the controller listens on unless the site config says otherwise.
DEFAULT_PORT = 7717


def default_address(site: SiteConfig) -> str:
    """Where the controller listens: ``controller.address``, else a cluster-internal address.

    On the local cluster that is its bridge (the nodes' network reaches the host there, and
    nothing outside this machine does); elsewhere the address this host's name resolves to.
    """
    if site.controller.address:
        return site.controller.address
    if site.local_cluster is not None:
        from elastic_slurm.cluster.layout import Layout

        layout = Layout(site.local_cluster, site.local_cluster.nodes)
        return f"{layout.bridge_address.ip}:{DEFAULT_PORT}"
    return f"{socket.gethostbyname(socket.gethostname())}:{DEFAULT_PORT}"


def site_munge_socket(site: SiteConfig) -> str | None:
    """The MUNGE socket of the site's Slurm (the local cluster has its own)."""
    if site.local_cluster is not None:
        from elastic_slurm.cluster.layout import Layout

        return str(Layout(site.local_cluster, site.local_cluster.nodes).munge_socket)
    return munge_socket()
