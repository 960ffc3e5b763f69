"""Stop and restart the local cluster's slurmctld, for outage tests (root, under the lock).

The cluster records every daemon it started (:class:`~elastic_slurm.cluster.local.ClusterState`);
slurmctld is stopped by that record (SIGTERM: it saves its state), and started again the way
``cluster up`` starts it (same argv, in the head's namespaces, ``-i`` keeps the saved state), its
new record put in place of the old one so ``cluster status``/``down`` keep working.

Kept here rather than in ``cluster/local.py`` (not this area's file): a ``LocalCluster`` method
``restart_daemon(name)`` would be the place for it.
"""

from __future__ import annotations

import time

from elastic_slurm.adapter import commands
from elastic_slurm.adapter.parse import slurmctld_up
from elastic_slurm.cluster import processes
from elastic_slurm.cluster.local import LocalCluster
from elastic_slurm.config import load_site


def _cluster() -> LocalCluster:
    return LocalCluster(load_site(), progress=lambda line: None)


def _index(state) -> int:  # noqa: ANN001 - ClusterState
    (i,) = [k for k, d in enumerate(state.daemons) if d.name == "slurmctld"]
    return i


def slurmctld_alive() -> bool:
    """True while the recorded slurmctld runs."""
    state = _cluster().load_state()
    return state is not None and processes.is_alive(state.daemons[_index(state)])


def stop_slurmctld(timeout_s: float = 15.0) -> None:
    """Stop the recorded slurmctld (SIGTERM, SIGKILL after ``timeout_s`` seconds)."""
    state = _cluster().load_state()
    assert state is not None, "the local cluster is not up"
    processes.stop([state.daemons[_index(state)]], timeout_s=timeout_s)


def start_slurmctld(timeout_s: float = 60.0) -> None:
    """Start slurmctld again as ``cluster up`` does; wait until it answers and the nodes are back.

    A no-op when it runs. The new record replaces the old one in the cluster's state file.
    """
    cluster = _cluster()
    state = cluster.load_state()
    assert state is not None, "the local cluster is not up"
    i = _index(state)
    old = state.daemons[i]
    if processes.is_alive(old):
        return
    layout = cluster.layout(state.nodes)
    rec = processes.start_daemon(
        old.name,
        list(old.argv),
        layout.logs / "slurmctld.out",
        **cluster._spawn_options(layout.head, None),
    )
    state.daemons[i] = rec
    cluster._save(layout, state)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not processes.is_alive(rec):
            raise RuntimeError(f"slurmctld exited while starting; see {rec.log}")
        if slurmctld_up(cluster._slurm(*commands.ping()).stdout):
            break
        time.sleep(0.5)
    else:
        raise RuntimeError(f"slurmctld did not answer `scontrol ping` within {timeout_s:g} s")
    while time.monotonic() < deadline:  # the nodes register again: none left "unknown"
        states = cluster._slurm("sinfo", "-h", "-N", "-o", "%T").stdout.split()
        if states and not any(s.startswith("unk") for s in states):
            return
        time.sleep(0.5)
    raise RuntimeError(f"the nodes did not register with slurmctld within {timeout_s:g} s")
