"""Build the transport and the Slurm backend a site config describes.

The backend is chosen by ``SiteConfig.backend``:

* ``cli`` (the default): Slurm's command-line tools, over the site's transport.
* ``pyslurm``: :class:`~.pyslurm_backend.PyslurmBackend`, or a :class:`ConfigError` that says
  why it cannot be used (not installed, another Slurm version, an SSH site).
* ``auto``: pyslurm when it is available and matches the running Slurm's major.minor version
  exactly (:func:`~.pyslurm_backend.pyslurm_available`), else the command-line tools.

Over an SSH transport pyslurm is never used: it drives Slurm from this process, with this
machine's libslurm and ``slurm.conf``, and cannot reach a login node.
"""

from __future__ import annotations

import logging
import sys

from elastic_slurm.adapter.backend import SlurmBackend
from elastic_slurm.adapter.slurm_cli import SlurmCLI
from elastic_slurm.adapter.transport.base import Transport
from elastic_slurm.adapter.transport.local import LocalTransport
from elastic_slurm.config.schema import SiteConfig
from elastic_slurm.errors import ConfigError, SlurmCommandError

log = logging.getLogger(__name__)


def transport_for(site: SiteConfig) -> Transport:
    """The site's transport: a local subprocess (with its ``SLURM_CONF``) or SSH.

    A local cluster of a chroot flavour (``local-trixie.yaml``, ``local-forky.yaml``) is driven
    through a :class:`~.transport.chroot.ChrootTransport`: its Slurm commands must be the
    chroot's (a 22.05 client cannot talk to a 24.11 or 26.05 slurmctld).
    """
    if site.transport.kind == "ssh":
        from elastic_slurm.adapter.transport.ssh import SSHTransport  # paramiko: extra [ssh]

        return SSHTransport(site.transport)
    env = {"SLURM_CONF": str(site.slurm_conf)} if site.slurm_conf else {}
    cluster = site.local_cluster
    if cluster is not None and cluster.flavour != "bookworm":
        from elastic_slurm.adapter.transport.chroot import ChrootTransport

        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        return ChrootTransport(
            cluster.chroots_dir / cluster.flavour,
            env=env,
            default_timeout_s=site.transport.command_timeout_s,
        )
    return LocalTransport(env=env, default_timeout_s=site.transport.command_timeout_s)


def job_python(site: SiteConfig) -> str:
    """The Python that the site's jobs run elastic-slurm with (see ``SiteConfig.python``).

    >>> from elastic_slurm.config.schema import SiteConfig
    >>> job_python(SiteConfig(name="x", python="/opt/es/bin/python"))
    '/opt/es/bin/python'
    """
    if site.python:
        return site.python
    if site.local_cluster is not None and site.local_cluster.flavour != "bookworm":
        return "python3"  # the chroot's own, with elastic-slurm on its path
    return sys.executable


def _where(site: SiteConfig) -> str:
    return site.source or f"site {site.name!r}"


def slurm_for(site: SiteConfig) -> SlurmBackend:
    """The Slurm backend for ``site`` (see the module docstring for how it is chosen).

    Raises
    ------
    ConfigError
        ``backend: pyslurm`` and pyslurm cannot be used; the message says why.
    """
    if site.backend != "cli" and site.transport.kind == "ssh":
        if site.backend == "pyslurm":
            raise ConfigError(
                f"{_where(site)}: backend: pyslurm cannot be used with transport.kind: ssh: "
                "pyslurm drives Slurm from this process with this machine's libslurm and "
                "cannot reach a login node; use backend: cli (or auto)"
            )
        log.debug("%s: backend auto over SSH: the command-line tools", site.name)
    transport = transport_for(site)
    cli = SlurmCLI(
        transport,
        command_timeout_s=site.transport.command_timeout_s,
        retry_s=site.controller.slurm_retry_s,
    )
    if site.backend == "cli" or site.transport.kind == "ssh":
        return cli

    from elastic_slurm.adapter.pyslurm_backend import PyslurmBackend, pyslurm_available

    try:
        version = cli.version()
    except SlurmCommandError as exc:
        if site.backend == "pyslurm":
            raise ConfigError(
                f"{_where(site)}: backend: pyslurm: the running Slurm's version is needed to "
                f"check pyslurm against it, and `scontrol --version` failed: {exc}"
            ) from exc
        log.info("%s: backend auto: the command-line tools (no Slurm version: %s)", site.name, exc)
        return cli
    ok, why = pyslurm_available(version, site.slurm_conf)
    if ok:
        try:
            backend = PyslurmBackend(
                transport,
                slurm_conf=site.slurm_conf,
                command_timeout_s=site.transport.command_timeout_s,
                retry_s=site.controller.slurm_retry_s,
            )
        except (ConfigError, ImportError) as exc:
            ok, why = False, str(exc)
        else:
            log.info("%s: backend %s: pyslurm (%s)", site.name, site.backend, why)
            return backend
    if site.backend == "pyslurm":
        raise ConfigError(f"{_where(site)}: backend: pyslurm is not available here: {why}")
    log.info("%s: backend auto: the command-line tools (%s)", site.name, why)
    return cli
