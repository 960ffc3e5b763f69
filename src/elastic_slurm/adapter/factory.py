"""Build the Slurm backend a site config describes."""

from __future__ import annotations

from elastic_slurm.adapter.slurm_cli import SlurmCLI
from elastic_slurm.adapter.transport.local import LocalTransport
from elastic_slurm.config.schema import SiteConfig


def slurm_for(site: SiteConfig) -> SlurmCLI:
    """The command-line backend for ``site``, over its transport, with its ``slurm.conf``."""
    env = {"SLURM_CONF": str(site.slurm_conf)} if site.slurm_conf else {}
    transport = LocalTransport(env=env, default_timeout_s=site.transport.command_timeout_s)
    return SlurmCLI(transport, command_timeout_s=site.transport.command_timeout_s)
