"""Where the controller listens, the URL jobs are given, and which MUNGE socket its site uses."""

from __future__ import annotations

import ipaddress
import re
import socket

from elastic_slurm.config.schema import SiteConfig
from elastic_slurm.errors import ConfigError
from elastic_slurm.protocol.identity import munge_socket

#: The port the controller listens on unless the site config says otherwise.
DEFAULT_PORT = 7717

#: A host name (RFC 1123 labels, dot-separated).
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*\.?$")


def parse_address(
    address: str, *, what: str = "the listen address", any_port: bool = False
) -> tuple[str, int]:
    """Split and check ``host:port`` (``[v6]:port`` for an IPv6 address).

    Parameters
    ----------
    address
        ``host:port``; the host is an IP address or a name that resolves here.
    what
        How the error message names the address (the config key, the option).
    any_port
        Also accept port 0 (the system picks a free port; tests do that).

    Returns
    -------
    tuple[str, int]
        The host (without brackets) and the port.

    Raises
    ------
    ConfigError
        Not ``host:port``, a port outside 1-65535, or a host that is neither an IP address
        nor a name that resolves.
    """
    text = address.strip() if isinstance(address, str) else ""
    m = re.fullmatch(r"\[([0-9A-Fa-f:.]+)\]:(\d{1,5})|([^\s:\[\]]+):(\d{1,5})", text)
    if m is None:
        raise ConfigError(f"{what} {address!r} is not host:port (e.g. 10.0.0.5:{DEFAULT_PORT})")
    host = m.group(1) or m.group(3)
    port = int(m.group(2) or m.group(4))
    if not (0 if any_port else 1) <= port <= 65535:
        raise ConfigError(f"{what} {address!r}: port {port} is not in 1-65535")
    try:
        ipaddress.ip_address(host)
        return host, port
    except ValueError:
        pass
    if _HOSTNAME.match(host) is None:
        raise ConfigError(f"{what} {address!r}: {host!r} is not a host name or an IP address")
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise ConfigError(f"{what} {address!r}: host {host!r} does not resolve ({exc})") from exc
    return host, port


def default_address(site: SiteConfig) -> str:
    """Where the controller listens: ``controller.address``, else a cluster-internal address.

    On the local cluster that is its bridge (the nodes' network reaches the host there, and
    nothing outside this machine does); elsewhere the address this host's name resolves to.

    Raises
    ------
    ConfigError
        ``controller.address`` is not a valid ``host:port`` (see :func:`parse_address`).
    """
    if site.controller.address:
        parse_address(site.controller.address, what="controller.address")
        return site.controller.address
    if site.local_cluster is not None:
        from elastic_slurm.cluster.layout import Layout

        layout = Layout(site.local_cluster, site.local_cluster.nodes)
        return f"{layout.bridge_address.ip}:{DEFAULT_PORT}"
    return f"{socket.gethostbyname(socket.gethostname())}:{DEFAULT_PORT}"


def service_controller(site: SiteConfig) -> str | None:
    """The URL of the site's controller when it runs as a service user, else ``None``.

    Such a controller (``controller.privilege: service``) keeps the jobs' orders: a size asked
    by hand (``elastic-slurm resize``) goes through it.

    Raises
    ------
    ConfigError
        Its address is not a valid ``host:port``.
    """
    return controller_url(site) if site.controller.privilege == "service" else None


def controller_url(site: SiteConfig, address: str | None = None) -> str:
    """The URL jobs are given: ``https://`` when the site serves TLS, else ``http://``.

    ``address`` (``host:port``) defaults to :func:`default_address`.

    Raises
    ------
    ConfigError
        The address is not a valid ``host:port``.
    """
    address = address or default_address(site)
    host, port = parse_address(address, what="the controller's address", any_port=True)
    scheme = "https" if site.controller.tls_cert is not None else "http"
    return f"{scheme}://{_bracket(host)}:{port}"


def _bracket(host: str) -> str:
    """``[v6]`` for an IPv6 address (as URLs write it), else the host as it is."""
    return f"[{host}]" if ":" in host else host


def site_munge_socket(site: SiteConfig) -> str | None:
    """The MUNGE socket of the site's Slurm (the local cluster has its own)."""
    if site.local_cluster is not None:
        from elastic_slurm.cluster.layout import Layout

        return str(Layout(site.local_cluster, site.local_cluster.nodes).munge_socket)
    return munge_socket()
