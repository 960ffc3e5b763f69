"""The local cluster: build, start, inspect and remove a real Slurm cluster on this machine.

``up`` installs what is missing, writes the configuration, creates a bridge and one network
and hostname namespace per host, and starts munge, MariaDB, slurmdbd and slurmctld on the head
and one slurmd per node. Everything it creates and every process it starts is recorded in a
state file as soon as it exists, so ``down`` can remove exactly that, even after a failed
``up``. ``down`` stops processes by PID (checked against their start time) and, on each node,
every process left inside that node's own network namespace (job processes that escaped
Slurm's tracking), then removes namespaces, bridge, hosts entries and files.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elastic_slurm.adapter import commands
from elastic_slurm.adapter.factory import job_python
from elastic_slurm.adapter.parse import parse_scontrol_config, slurmctld_up
from elastic_slurm.adapter.transport.base import Transport
from elastic_slurm.adapter.transport.local import LocalTransport
from elastic_slurm.cluster import hosts, processes
from elastic_slurm.cluster.layout import Layout
from elastic_slurm.cluster.network import (
    NETNS_DIR,
    HostNet,
    Network,
    enter_host,
    pids_in_netns,
)
from elastic_slurm.cluster.packages import ensure_packages
from elastic_slurm.cluster.processes import DaemonRecord
from elastic_slurm.cluster.slurmconf import render_slurm_conf, render_slurmdbd_conf
from elastic_slurm.cluster.users import job_python_problem
from elastic_slurm.config.schema import SiteConfig
from elastic_slurm.errors import ClusterError, NotRootError
from elastic_slurm.waiting import DeadlineExceeded, wait_for

log = logging.getLogger(__name__)

HOSTS_FILE = Path("/etc/hosts")
SLURM_SIDE = Path(__file__).resolve().parents[1] / "plugins" / "slurm_side"
SYSTEM_SLURM_CONF = Path("/etc/slurm/slurm.conf")


@dataclass
class ClusterState:
    """What ``up`` created, persisted as JSON in the state directory.

    ``daemons`` are in start order; ``down`` stops them in reverse.
    """

    nodes: int
    daemons: list[DaemonRecord] = field(default_factory=list)
    netns: list[str] = field(default_factory=list)
    veths: list[str] = field(default_factory=list)
    bridge: str | None = None
    hosts_block: bool = False
    slurm_conf_link: str | None = None
    overrides: dict[str, bool] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {
            "nodes": self.nodes,
            "daemons": [d.to_json() for d in self.daemons],
            "netns": self.netns,
            "veths": self.veths,
            "bridge": self.bridge,
            "hosts_block": self.hosts_block,
            "slurm_conf_link": self.slurm_conf_link,
            "overrides": self.overrides,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClusterState:
        """The inverse of :meth:`to_json`."""
        return cls(
            nodes=int(data["nodes"]),
            daemons=[DaemonRecord.from_json(d) for d in data.get("daemons", [])],
            netns=list(data.get("netns", [])),
            veths=list(data.get("veths", [])),
            bridge=data.get("bridge"),
            hosts_block=bool(data.get("hosts_block")),
            slurm_conf_link=data.get("slurm_conf_link"),
            overrides={str(k): bool(v) for k, v in dict(data.get("overrides", {})).items()},
        )


@dataclass(frozen=True)
class ClusterStatus:
    """The answer of ``cluster status``: daemons alive or not, and Slurm's view of the nodes."""

    up: bool
    nodes: int
    daemons: dict[str, bool]
    sinfo: str
    slurm_conf: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict."""
        return {
            "up": self.up,
            "nodes": self.nodes,
            "daemons": self.daemons,
            "sinfo": self.sinfo,
            "slurm_conf": self.slurm_conf,
        }


def require_root(action: str) -> None:
    """Raise :class:`NotRootError` unless this process runs as root."""
    if os.geteuid() != 0:
        raise NotRootError(
            f"`elastic-slurm cluster {action}` must run as root: it installs packages, creates "
            "network namespaces and starts Slurm's daemons. Run it with sudo, or as root."
        )


class LocalCluster:
    """A Slurm cluster of ``nodes`` slurmd nodes on this machine.

    Parameters
    ----------
    site
        A site config with a ``local_cluster`` section (``site_configs/local.yaml``).
    progress
        Called with one line of text per step (the CLI prints them).
    """

    def __init__(self, site: SiteConfig, progress: Callable[[str], None] | None = None) -> None:
        if site.local_cluster is None:
            raise ClusterError(
                f"site {site.name!r} ({site.source}) has no local_cluster section: it describes "
                "a real site, not a cluster this machine can build"
            )
        self.site = site
        self.cfg = site.local_cluster
        #: runs this machine's commands (``ip``, apt, MariaDB's tools)
        self.host_transport = LocalTransport(default_timeout_s=60)
        #: runs Slurm's commands (the same as ``host_transport`` here)
        self.transport: Transport = self.host_transport
        self.progress = progress or (lambda line: log.info("%s", line))
        self.hosts_file = HOSTS_FILE

    # ----------------------------------------------------------------- state
    def layout(self, nodes: int | None = None) -> Layout:
        """The layout for ``nodes`` nodes (default: the config's)."""
        return Layout(self.cfg, nodes or self.cfg.nodes)

    def load_state(self) -> ClusterState | None:
        """The recorded state, or ``None`` if no cluster was brought up."""
        path = self.layout().state_file
        if not path.exists():
            return None
        try:
            return ClusterState.from_json(json.loads(path.read_text()))
        except (ValueError, KeyError) as exc:
            raise ClusterError(
                f"the cluster state file {path} is unreadable ({exc}); remove what it names by "
                "hand, then delete it"
            ) from exc

    def _save(self, layout: Layout, state: ClusterState) -> None:
        layout.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = layout.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state.to_json(), indent=1))
        tmp.replace(layout.state_file)

    @property
    def slurm_env(self) -> dict[str, str]:
        """Environment that points Slurm's commands at this cluster."""
        return {"SLURM_CONF": str(self.layout().slurm_conf)}

    def _slurm(self, *argv: str, timeout_s: float = 15) -> Any:
        return self.transport.run(argv, timeout_s=timeout_s, env=self.slurm_env)

    # ----------------------------------------------------------------- status
    def status(self) -> ClusterStatus:
        """Which daemons run, and ``sinfo``'s view (no root needed)."""
        state = self.load_state()
        if state is None:
            return ClusterStatus(False, 0, {}, "", str(self.layout().slurm_conf))
        daemons = {d.name: processes.is_alive(d) for d in state.daemons}
        sinfo = ""
        if daemons and all(daemons.values()):
            res = self.transport.run(
                ["sinfo", "-N", "-o", "%N %T %c %P"], timeout_s=10, env=self.slurm_env
            )
            sinfo = res.stdout if res.returncode == 0 else res.stderr
        up = bool(daemons) and all(daemons.values())
        return ClusterStatus(
            up, state.nodes, daemons, sinfo, str(self.layout(state.nodes).slurm_conf)
        )

    def healthy(self, nodes: int) -> bool:
        """True if a cluster of ``nodes`` nodes is up with every daemon alive and nodes usable."""
        st = self.status()
        if not st.up or st.nodes != nodes:
            return False
        states = [line.split()[1] for line in st.sinfo.splitlines()[1:] if line.split()]
        return len(states) == nodes and all(
            s.rstrip("*~#!%$@^-") in ("idle", "allocated", "mixed", "completing") for s in states
        )

    # ----------------------------------------------------------------- up
    def up(self, nodes: int | None = None) -> ClusterStatus:
        """Bring the cluster up with ``nodes`` nodes (idempotent).

        If the same cluster is already up, nothing changes. A cluster in a broken state
        (a daemon died) is taken down and started afresh.

        Raises
        ------
        NotRootError
            Not running as root.
        ClusterError
            Up with a different number of nodes (take it down first), a package that cannot be
            installed, or a daemon that does not start: the message quotes its log. What was
            started is stopped again.
        """
        require_root("up")
        nodes = nodes or self.cfg.nodes
        layout = self.layout(nodes)
        if nodes + self.cfg.network.node_address_offset > self.cfg.network.subnet.num_addresses - 2:
            raise ClusterError(f"{nodes} nodes do not fit in subnet {self.cfg.network.subnet}")
        state = self.load_state()
        if state is not None:
            if state.nodes != nodes and self.status().up:
                raise ClusterError(
                    f"the local cluster is up with {state.nodes} nodes, not {nodes}; run "
                    "`elastic-slurm cluster down` first"
                )
            if self.healthy(nodes):
                self.progress(f"cluster already up with {nodes} nodes")
                self._note_job_python()
                return self.status()
            self.progress("cluster state is incomplete: taking it down to start afresh")
            self.down()
        self._ensure_software()
        state = ClusterState(nodes=nodes)
        self._save(layout, state)
        try:
            self._prepare_files(layout)
            self._network(layout, state)
            self._start_munge(layout, state)
            self._start_mariadb(layout, state)
            self._start_slurmdbd(layout, state)
            self._start_slurmctld(layout, state)
            self._start_slurmds(layout, state)
            self._link_system_conf(layout, state)
        except ClusterError as exc:
            self.progress("start failed: stopping what was started")
            self.down(keep_logs=True)
            raise ClusterError(
                f"{exc}\nThe cluster was taken down again; the daemons' logs are kept in "
                f"{layout.logs}. Fix the cause and run `elastic-slurm cluster up` again."
            ) from exc
        except BaseException:
            self.progress("start interrupted: stopping what was started")
            self.down(keep_logs=True)
            raise
        self.progress(f"cluster up: {nodes} nodes, SLURM_CONF={layout.slurm_conf}")
        self._note_job_python()
        return self.status()

    def _note_job_python(self) -> None:
        """Say so when other users' jobs could not run the site's job Python (pyenv's, say).

        Their nodes share this machine's accounts, munge socket and files, so that is what
        most often keeps an unprivileged user's job from running here.
        """
        problem = job_python_problem(job_python(self.site))
        if problem:
            self.progress(f"note: {problem}")

    def _ensure_software(self) -> None:
        """Install the Debian packages the cluster needs that are missing."""
        installed = ensure_packages(self.transport, self.cfg.packages)
        if installed:
            self.progress(f"installed {' '.join(installed)}")

    def reconfigure(
        self, *, permit_job_expansion: bool | None = None, job_submit_lua: bool | None = None
    ) -> None:
        """Change settings of the running cluster (``None`` leaves a setting as it is).

        ``permit_job_expansion`` turns merges on or off; ``job_submit_lua`` installs
        elastic-slurm's ``job_submit.lua`` beside ``slurm.conf`` and loads it
        (``JobSubmitPlugins=lua``), or unloads it. ``slurm.conf`` is rewritten and slurmctld
        rereads it (``scontrol reconfigure``); the settings last until the cluster is taken
        down.

        Raises
        ------
        ClusterError
            The cluster is not up, or slurmctld did not take the change.
        """
        require_root("reconfigure")
        state = self.load_state()
        if state is None or not self.status().up:
            raise ClusterError("the local cluster is not up: run `elastic-slurm cluster up`")
        layout = self.layout(state.nodes)
        if permit_job_expansion is not None:
            state.overrides["permit_job_expansion"] = permit_job_expansion
        if job_submit_lua is not None:
            state.overrides["job_submit_lua"] = job_submit_lua
            if job_submit_lua:
                shutil.copyfile(SLURM_SIDE / "job_submit.lua", layout.etc / "job_submit.lua")
        self._save(layout, state)
        layout.slurm_conf.write_text(self._render(layout, state))
        res = self._slurm("scontrol", "reconfigure", timeout_s=60)
        if res.returncode != 0:
            raise ClusterError(f"scontrol reconfigure failed: {res.stderr.strip()}")
        permit = state.overrides.get("permit_job_expansion", self.cfg.permit_job_expansion)
        lua = state.overrides.get("job_submit_lua", False)

        def applied() -> bool:
            config = parse_scontrol_config(self._slurm("scontrol", "show", "config").stdout)
            return ("permit_job_expansion" in config.get("SchedulerParameters", "")) == permit and (
                "lua" in config.get("JobSubmitPlugins", "")
            ) == lua

        try:
            wait_for(applied, timeout_s=30, what="slurmctld to apply the new configuration")
        except DeadlineExceeded as exc:
            raise ClusterError(str(exc)) from exc
        self.progress(
            f"permit_job_expansion {'on' if permit else 'off'}, "
            f"job_submit.lua {'loaded' if lua else 'not loaded'}"
        )

    def _render(self, layout: Layout, state: ClusterState) -> str:
        return render_slurm_conf(
            layout,
            self.site.cluster_name,
            permit_job_expansion=state.overrides.get("permit_job_expansion"),
            job_submit_lua=bool(state.overrides.get("job_submit_lua", False)),
        )

    def _prepare_files(self, layout: Layout) -> None:
        cfg = self.cfg
        for d in (layout.etc, layout.logs, cfg.state_dir / "slurmctld", cfg.run_dir):
            d.mkdir(parents=True, exist_ok=True)
        for host in layout.node_hosts:
            (cfg.state_dir / "slurmd" / host.hostname).mkdir(parents=True, exist_ok=True)
            (cfg.state_dir / "tmp" / host.hostname).mkdir(parents=True, exist_ok=True)
        layout.slurm_conf.write_text(render_slurm_conf(layout, self.site.cluster_name))
        password = secrets.token_hex(16)
        layout.slurmdbd_conf.write_text(render_slurmdbd_conf(layout, password))
        os.chmod(layout.slurmdbd_conf, 0o600)
        (layout.etc / "db-password").write_text(password)
        os.chmod(layout.etc / "db-password", 0o600)
        self.progress(f"wrote {layout.slurm_conf}")

    def _network(self, layout: Layout, state: ClusterState) -> None:
        net = Network(self.host_transport, self.cfg.network.bridge, layout.bridge_address)
        state.bridge = self.cfg.network.bridge
        self._save(layout, state)
        net.create_bridge()
        for host in (layout.head, *layout.node_hosts):
            state.netns.append(host.netns)
            state.veths.append(host.veth_outer)
            self._save(layout, state)
            net.create_host(host, self.cfg.network.subnet.prefixlen)
        entries = [(str(h.address), h.hostname) for h in (layout.head, *layout.node_hosts)]
        state.hosts_block = True
        self._save(layout, state)
        bridge = self.cfg.network.bridge
        hosts.write_in_place(
            self.hosts_file,
            hosts.with_block(
                self.hosts_file.read_text(), bridge, hosts.render_block(bridge, entries)
            ),
        )
        self.progress(
            f"network: bridge {self.cfg.network.bridge} {layout.bridge_address}, "
            f"{layout.head.hostname} {layout.head.address}, "
            + ", ".join(f"{h.hostname} {h.address}" for h in layout.node_hosts)
        )

    def _start(
        self,
        layout: Layout,
        state: ClusterState,
        name: str,
        argv: list[str],
        host: HostNet | None = None,
        user: str | None = None,
    ) -> DaemonRecord:
        rec = processes.start_daemon(
            name,
            argv,
            layout.logs / f"{name.replace('@', '-')}.out",
            **self._spawn_options(host, user),
        )
        state.daemons.append(rec)
        self._save(layout, state)
        return rec

    def _spawn_options(self, host: HostNet | None, user: str | None) -> dict[str, Any]:
        """Keyword arguments of :func:`processes.start_daemon` for a daemon on ``host``.

        The daemon gets this process's environment without job variables (``SLURM_*`` other
        than ``SLURM_CONF``, ``PMI*``, ``OMPI_*``), runs in ``host``'s namespaces (``None``:
        this machine's) and as ``user`` (``None``: root).
        """
        env = {**os.environ, **self.slurm_env}
        for var in [v for v in env if v.startswith(("SLURM_", "PMI", "OMPI_"))]:
            if var != "SLURM_CONF":
                del env[var]
        return {
            "preexec_fn": enter_host(host.netns_path, host.hostname) if host else None,
            "env": env,
            "user": user,
            "group": user,
        }

    def _chown_munge(self, path: Path) -> None:
        """Give ``path`` to the munge user."""
        shutil.chown(path, "munge", "munge")

    def _wait(self, rec: DaemonRecord, check: Callable[[], object], what: str) -> None:
        def ready() -> object:
            if not processes.is_alive(rec):
                raise ClusterError(f"{rec.name} exited while starting:\n{_tail(rec.log)}")
            return check()

        try:
            wait_for(ready, timeout_s=self.cfg.start_timeout_s, what=what)
        except DeadlineExceeded as exc:
            raise ClusterError(f"{exc}; {rec.name}'s log ends:\n{_tail(rec.log)}") from exc

    def _start_munge(self, layout: Layout, state: ClusterState) -> None:
        key = layout.munge_dir / "munge.key"
        for d, mode in ((layout.munge_dir, 0o700), (layout.munge_socket_dir, 0o755)):
            d.mkdir(parents=True, exist_ok=True)
            self._chown_munge(d)
            os.chmod(d, mode)
        if not key.exists():
            key.write_bytes(secrets.token_bytes(1024))
        self._chown_munge(key)
        os.chmod(key, 0o400)
        rec = self._start(
            layout,
            state,
            "munged",
            [
                "munged",
                "--foreground",
                "--num-threads=4",
                f"--key-file={key}",
                f"--socket={layout.munge_socket}",
                f"--pid-file={layout.munge_socket_dir}/munged.pid",
                f"--seed-file={layout.munge_dir}/munged.seed",
                f"--log-file={layout.logs}/munged.log",
            ],
            user="munge",
        )
        self._wait(rec, layout.munge_socket.exists, "the munge socket")
        self.progress("munged up")

    def _start_mariadb(self, layout: Layout, state: ClusterState) -> None:
        datadir, sockdir = layout.mysql_dir, layout.mysql_socket.parent / "mysql"
        sock = sockdir / "mysqld.sock"
        for d in (datadir, sockdir):
            d.mkdir(parents=True, exist_ok=True)
            shutil.chown(d, "mysql", "mysql")
        if not (datadir / "mysql").exists():
            res = self.transport.run(
                [
                    "mariadb-install-db",
                    "--no-defaults",
                    "--user=mysql",
                    f"--datadir={datadir}",
                    "--auth-root-authentication-method=socket",
                    "--skip-test-db",
                ],
                timeout_s=120,
            )
            if res.returncode != 0:
                raise ClusterError(f"mariadb-install-db failed:\n{res.stdout[-1500:]}{res.stderr}")
        rec = self._start(
            layout,
            state,
            "mariadbd",
            [
                "mariadbd",
                "--no-defaults",
                "--user=mysql",
                f"--datadir={datadir}",
                f"--socket={sock}",
                f"--pid-file={sockdir}/mariadbd.pid",
                f"--port={self.cfg.mariadb_port}",
                "--bind-address=127.0.0.1",
                "--innodb-buffer-pool-size=64M",
                "--innodb-lock-wait-timeout=900",
                "--skip-log-bin",
            ],
            host=layout.head,
        )
        self._wait(rec, sock.exists, "MariaDB's socket")
        password = (layout.etc / "db-password").read_text().strip()
        sql = (
            "CREATE DATABASE IF NOT EXISTS slurm_acct_db;"
            f"CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}';"
            f"ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}';"
            "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
        )

        def sql_ok() -> bool:
            res = self.transport.run(
                ["mariadb", "--no-defaults", f"--socket={sock}", "-u", "root"],
                input_text=sql,
                timeout_s=30,
            )
            return res.returncode == 0

        self._wait(rec, sql_ok, "MariaDB to accept the accounting user")
        self.progress("MariaDB up")

    def _start_slurmdbd(self, layout: Layout, state: ClusterState) -> None:
        rec = self._start(layout, state, "slurmdbd", ["slurmdbd", "-D"], host=layout.head)
        self._wait(
            rec,
            lambda: _port_open(str(layout.head.address), self.cfg.slurmdbd_port),
            "slurmdbd to listen",
        )
        have = self._slurm("sacctmgr", "-n", "-P", "list", "cluster", "format=cluster")
        if self.site.cluster_name not in have.stdout.split():
            res = self._slurm("sacctmgr", "-i", "add", "cluster", self.site.cluster_name)
            if res.returncode != 0:
                raise ClusterError(f"sacctmgr add cluster failed: {res.stderr.strip()}")
        self.progress("slurmdbd up (accounting in MariaDB)")

    def _start_slurmctld(self, layout: Layout, state: ClusterState) -> None:
        rec = self._start(layout, state, "slurmctld", ["slurmctld", "-D", "-i"], host=layout.head)
        self._wait(
            rec,
            lambda: slurmctld_up(self._slurm(*commands.ping()).stdout),
            "slurmctld to answer `scontrol ping`",
        )
        self.progress("slurmctld up")

    def _start_slurmds(self, layout: Layout, state: ClusterState) -> None:
        recs = [
            self._start(
                layout, state, f"slurmd@{h.hostname}", ["slurmd", "-D", "-N", h.hostname], host=h
            )
            for h in layout.node_hosts
        ]
        names = {h.hostname for h in layout.node_hosts}

        def all_idle() -> bool:
            for rec in recs:
                if not processes.is_alive(rec):
                    raise ClusterError(f"{rec.name} exited while starting:\n{_tail(rec.log)}")
            res = self._slurm("sinfo", "-h", "-N", "-o", "%N %T")
            seen = dict(line.split() for line in res.stdout.splitlines() if line.strip())
            return set(seen) == names and all(s == "idle" for s in seen.values())

        try:
            wait_for(all_idle, timeout_s=self.cfg.start_timeout_s, what="all nodes to be idle")
        except DeadlineExceeded as exc:
            sinfo = self._slurm("sinfo", "-N", "-o", "%N %T %E").stdout
            raise ClusterError(f"{exc}\n{sinfo}\nfirst slurmd log:\n{_tail(recs[0].log)}") from exc
        self.progress(f"{len(recs)} slurmd nodes up and idle: {', '.join(sorted(names))}")

    def _link_system_conf(self, layout: Layout, state: ClusterState) -> None:
        """Point ``/etc/slurm/slurm.conf`` at ours when the machine has none."""
        if SYSTEM_SLURM_CONF.parent.is_dir() and not SYSTEM_SLURM_CONF.exists():
            SYSTEM_SLURM_CONF.symlink_to(layout.slurm_conf)
            state.slurm_conf_link = str(SYSTEM_SLURM_CONF)
            self._save(layout, state)

    # ----------------------------------------------------------------- down
    def down(self, keep_logs: bool = False) -> list[str]:
        """Stop what ``up`` started and remove what it created.

        Only processes recorded by ``up`` (by PID and start time) and processes inside the
        cluster's own network namespaces are signalled.

        Returns
        -------
        list of str
            One line per step taken (empty if no cluster was up).
        """
        require_root("down")
        state = self.load_state()
        if state is None:
            return []
        layout = self.layout(state.nodes)
        done: list[str] = []
        # the nodes' slurmd first, then whatever is left inside the cluster's namespaces (job
        # processes and slurmstepd that escaped tracking), then the other daemons, newest first
        recorded = {d.pid for d in state.daemons}
        slurmds = [d for d in state.daemons if d.name.startswith("slurmd@")]
        killed = processes.stop(reversed(slurmds), timeout_s=10)
        namespaces = [NETNS_DIR / ns for ns in state.netns]
        n = processes.stop_pids(
            {p for ns in namespaces for p in pids_in_netns(ns) if p not in recorded}
        )
        if n:
            done.append(f"stopped {n} leftover process(es) inside the nodes' namespaces")
        others = [d for d in state.daemons if not d.name.startswith("slurmd@")]
        killed += processes.stop(reversed(others), timeout_s=15)
        done.append(f"stopped {len(state.daemons)} daemon(s)")
        if killed:
            done.append(f"needed SIGKILL: {', '.join(killed)}")
        net = Network(
            self.host_transport, state.bridge or self.cfg.network.bridge, layout.bridge_address
        )
        hostnets = {h.netns: h for h in (layout.head, *layout.node_hosts)}
        for ns, veth in zip(state.netns, state.veths, strict=False):
            host = hostnets.get(ns) or HostNet(ns, ns, layout.head.address, veth)
            net.remove_host(host)
        if state.bridge:
            net.remove_bridge()
        done.append("removed network namespaces and bridge")
        if state.hosts_block:
            hosts.write_in_place(
                self.hosts_file,
                hosts.remove_block(self.hosts_file.read_text(), self.cfg.network.bridge),
            )
        if state.slurm_conf_link:
            link = Path(state.slurm_conf_link)
            if link.is_symlink() and Path(os.readlink(link)) == layout.slurm_conf:
                link.unlink()
        shutil.rmtree(self.cfg.run_dir, ignore_errors=True)
        if keep_logs:
            for entry in self.cfg.state_dir.iterdir():
                if entry != layout.logs:
                    _remove(entry)
        else:
            shutil.rmtree(self.cfg.state_dir, ignore_errors=True)
        done.append(f"removed {self.cfg.state_dir}" + (" (kept logs)" if keep_logs else ""))
        for line in done:
            self.progress(line)
        return done


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def _tail(path: str, lines: int = 15) -> str:
    try:
        text = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join("    " + line for line in text[-lines:])
