"""Slurm's daemons of the soak cluster, stopped and brought back as a failure would.

The local cluster records every daemon it started (:class:`~elastic_slurm.cluster.local.
ClusterState`); a daemon is stopped by its recorded PID and started again with its recorded
command, in its host's namespaces, and the record is replaced, so ``cluster down`` still stops
exactly what runs. (The cluster has no public call to restart one daemon; this module uses its
spawn options and state file. ``LocalCluster.restart_daemon(name)`` would be the place.)
"""

from __future__ import annotations

import signal
from pathlib import Path

from elastic_slurm.cluster import processes
from elastic_slurm.cluster.local import LocalCluster
from elastic_slurm.cluster.processes import DaemonRecord
from elastic_slurm.errors import ClusterError


class Daemons:
    """Stop and start the recorded daemons of ``cluster`` by name (``slurmctld``, ``slurmd@sk3``).

    Raises
    ------
    ClusterError
        From each method: the cluster is not up, or it has no such daemon.
    """

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster

    def _state(self):  # type: ignore[no-untyped-def]
        state = self.cluster.load_state()
        if state is None:
            raise ClusterError("the soak cluster is not up")
        return state

    def record(self, name: str) -> DaemonRecord:
        """The current record of daemon ``name``.

        Raises
        ------
        ClusterError
            No such daemon (or the cluster is not up).
        """
        for rec in self._state().daemons:
            if rec.name == name:
                return rec
        raise ClusterError(f"the soak cluster has no daemon {name!r}")

    def alive(self, name: str) -> bool:
        """True while daemon ``name`` runs."""
        return processes.is_alive(self.record(name))

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to daemon ``name`` and wait up to 30 s for it to exit."""
        rec = self.record(name)
        processes.signal_pid(rec.pid, sig)
        if processes._wait_gone([rec], 30.0):  # noqa: SLF001 (reaps our own children)
            processes.stop([rec], timeout_s=1.0)

    def start(self, name: str) -> DaemonRecord:
        """Start daemon ``name`` again with its recorded command, in its host's namespaces.

        Raises
        ------
        ClusterError
            It is still running, or no such daemon.
        """
        cluster = self.cluster
        state = self._state()
        layout = cluster.layout(state.nodes)
        old = self.record(name)
        if processes.is_alive(old):
            raise ClusterError(f"{name} is still running (pid {old.pid})")
        if name.startswith("slurmd@"):
            hosts = {h.hostname: h for h in layout.node_hosts}
            host = hosts[name.split("@", 1)[1]]
        else:
            host = layout.head
        options = cluster._spawn_options(host, None)  # noqa: SLF001 (see the module docstring)
        new = processes.start_daemon(name, old.argv, Path(old.log), **options)
        state.daemons = [new if d.name == name else d for d in state.daemons]
        cluster._save(layout, state)  # noqa: SLF001
        return new
