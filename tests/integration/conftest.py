"""Fixtures of the integration tests: an SSH server, and backends over each transport."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from elastic_slurm.adapter.slurm_cli import SlurmCLI
from elastic_slurm.adapter.transport.local import LocalTransport
from elastic_slurm.config.schema import SSHTransportConfig

from .sshd import SSHServer, start_sshd


@pytest.fixture(scope="session")
def sshd() -> Iterator[SSHServer]:
    """A real OpenSSH server on loopback for the whole session."""
    try:
        server = start_sshd()
    except RuntimeError as exc:
        pytest.fail(str(exc))
    yield server
    server.stop()


def ssh_config(server: SSHServer, **extra) -> SSHTransportConfig:
    """A transport config that logs in to ``server`` with its client key."""
    return SSHTransportConfig(
        kind="ssh",
        host=server.host,
        port=server.port,
        user=server.user,
        key_file=server.key_file,
        known_hosts=server.known_hosts,
        **extra,
    )


@pytest.fixture(scope="module", params=["merge", "sibling"])
def grow_path(request, local_cluster) -> Iterator[str]:
    """The cluster with ``permit_job_expansion`` (merge path), then without it (sibling path).

    Tests that use it run once per path; the setting is restored at the end of each module
    (a session-wide fixture would leave later modules' tests on the sibling path).
    """
    from elastic_slurm.cluster.local import LocalCluster
    from elastic_slurm.config import load_site

    cluster = LocalCluster(load_site(), progress=lambda line: None)
    cluster.reconfigure(permit_job_expansion=request.param == "merge")
    yield request.param
    cluster.reconfigure(permit_job_expansion=True)


@pytest.fixture(params=["local", "ssh"])
def transport_slurm(request, local_cluster, sshd) -> Iterator[SlurmCLI]:
    """The command-line backend on the local cluster, once per transport."""
    if request.param == "local":
        yield SlurmCLI(LocalTransport(env=local_cluster))
        return
    from elastic_slurm.adapter.transport.ssh import SSHTransport

    transport = SSHTransport(ssh_config(sshd, remote_env=dict(local_cluster)))
    yield SlurmCLI(transport)
    transport.close()
