"""Build the transport and the Slurm backend a site config describes."""

from __future__ import annotations

from elastic_slurm.adapter.slurm_cli import SlurmCLI
from elastic_slurm.adapter.transport.base import Transport
from elastic_slurm.adapter.transport.local import LocalTransport
from elastic_slurm.config.schema import SiteConfig


def transport_for(site: SiteConfig) -> Transport:
    """The site's transport: a local subprocess (with its ``SLURM_CONF``) or SSH."""
    if site.transport.kind == "ssh":
        from elastic_slurm.adapter.transport.ssh import SSHTransport  # paramiko: extra [ssh]

        return SSHTransport(site.transport)
    env = {"SLURM_CONF": str(site.slurm_conf)} if site.slurm_conf else {}
    return LocalTransport(env=env, default_timeout_s=site.transport.command_timeout_s)


def slurm_for(site: SiteConfig) -> SlurmCLI:
    """The command-line backend for ``site``, over its transport."""
    return SlurmCLI(transport_for(site), command_timeout_s=site.transport.command_timeout_s)
