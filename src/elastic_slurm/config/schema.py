"""The schema of a site config, as frozen pydantic models; units are in the field names."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_DAY_S = 86400.0


class _Frozen(BaseModel):
    #: ``allow_inf_nan=False``: ``.inf`` and ``.nan`` are refused by every float field.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


def _check_address(value: str | None) -> str | None:
    """``host:port`` with a port of 1-65535 (the pattern only bounds its digits)."""
    if value is not None and not 1 <= int(value.rsplit(":", 1)[1]) <= 65535:
        raise ValueError(f"port of {value!r} is not 1-65535")
    return value


class NetworkConfig(_Frozen):
    """The private network of the local cluster: a bridge and one address per host.

    The head (slurmctld, slurmdbd, MariaDB) takes the second address of ``subnet``, the bridge
    the first, node ``i`` (1-based) the address ``node_address_offset + i``.
    """

    bridge: str = Field("esbr0", max_length=15, pattern=r"^[A-Za-z0-9_-]+$")
    subnet: ipaddress.IPv4Network = ipaddress.IPv4Network("10.77.0.0/24")
    node_address_offset: int = Field(10, ge=2, le=65535)
    netns_prefix: str = Field("es-", max_length=6, pattern=r"^[a-z0-9-]+$")

    @field_validator("subnet")
    @classmethod
    def _private(cls, subnet: ipaddress.IPv4Network) -> ipaddress.IPv4Network:
        if not subnet.is_private:
            raise ValueError(
                f"subnet {subnet} is not a private range; nothing may leave "
                "the machine, so use 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16"
            )
        return subnet


class SchedulerConfig(_Frozen):
    """Slurm scheduler timing of the local cluster (seconds)."""

    sched_interval_s: int = Field(2, ge=1, le=3600)
    bf_interval_s: int = Field(2, ge=1, le=3600)


class LocalClusterConfig(_Frozen):
    """The local cluster: N slurmd nodes on this machine, each in its own namespaces.

    Paths are absolute. ``state_dir`` holds configuration, spool and database and is removed
    by ``cluster down``; ``run_dir`` holds sockets and PID files.

    ``select_type`` is ``linear`` (whole nodes) by default: with ``select/cons_tres``, Slurm
    22.05 leaves the CPUs of nodes merged into a job by an expand dependency unaccounted
    (``CPUAlloc=0``), and schedules other jobs onto them (seen here; see the README).
    """

    nodes: int = Field(4, ge=1, le=64)
    cpus_per_node: int = Field(1, ge=1, le=65534)
    real_memory_mib: int = Field(1024, ge=64, le=2**40)
    node_prefix: str = Field("n", pattern=r"^[a-z][a-z0-9]*$", max_length=8)
    head_hostname: str = Field("eshead", pattern=r"^[a-z][a-z0-9-]*$")
    partition: str = Field("debug", pattern=r"^[A-Za-z0-9_-]+$")
    state_dir: Path = Path("/var/lib/elastic-slurm/local")
    run_dir: Path = Path("/run/elastic-slurm/local")

    @field_validator("state_dir", "run_dir", "chroots_dir")
    @classmethod
    def _absolute(cls, value: Path) -> Path:
        if not value.is_absolute():
            raise ValueError(f"{value} must be an absolute path")
        if " " in str(value):
            raise ValueError(f"{value}: Slurm's configuration cannot hold paths with spaces")
        return value

    slurmctld_port: int = Field(6817, ge=1024, le=65535)
    slurmd_port: int = Field(6818, ge=1024, le=65535)
    slurmdbd_port: int = Field(6819, ge=1024, le=65535)
    mariadb_port: int = Field(13306, ge=1024, le=65535)
    select_type: Literal["linear", "cons_tres"] = "linear"
    permit_job_expansion: bool = True
    packages: tuple[str, ...] = (
        "slurm-wlm",
        "slurmdbd",
        "munge",
        "mariadb-server",
        "openmpi-bin",
        "libopenmpi-dev",
        "libpmix-dev",
        "iproute2",
    )
    network: NetworkConfig = NetworkConfig()
    scheduler: SchedulerConfig = SchedulerConfig()
    start_timeout_s: float = Field(180.0, gt=0, le=_DAY_S)
    #: ``bookworm``: this machine's own Slurm 22.05; ``trixie`` (Slurm 24.11) and ``forky``
    #: (Slurm 26.05): the same cluster inside a Debian chroot under ``chroots_dir`` (built once
    #: by ``cluster up``). A flavour needs its own state/run dirs, ports and network.
    flavour: Literal["bookworm", "trixie", "forky"] = "bookworm"
    chroots_dir: Path = Path("/var/lib/elastic-slurm/chroots")
    #: ``slurmdbd``: accounting in MariaDB (Slurm 22.05 resizes a job only once without it);
    #: ``none``: no accounting daemon (enough for Slurm 24.11 and later).
    accounting: Literal["slurmdbd", "none"] = "slurmdbd"

    @model_validator(mode="after")
    def _fits(self) -> LocalClusterConfig:
        hosts = self.network.subnet.num_addresses - 2
        if self.network.node_address_offset + self.nodes > hosts:
            raise ValueError(
                f"{self.nodes} nodes do not fit in {self.network.subnet} from offset "
                f"{self.network.node_address_offset}: use a larger subnet or fewer nodes"
            )
        if self.head_hostname in self.node_names():
            raise ValueError(
                f"head_hostname {self.head_hostname!r} is also a node's name: choose another"
            )
        return self

    def node_names(self, count: int | None = None) -> tuple[str, ...]:
        """Node names ``n1..nN`` for ``count`` nodes (default: ``nodes``)."""
        return tuple(f"{self.node_prefix}{i}" for i in range(1, (count or self.nodes) + 1))


class PolicyConfig(_Frozen):
    """The controller's policy: a registry name and its options (validated by the policy)."""

    name: str = "pending_first"
    options: dict[str, Any] = Field(default_factory=dict)


class ControllerConfig(_Frozen):
    """How the controller observes and acts (seconds).

    ``min_resize_interval_s``: a job is not resized again (nor right after it starts) until
    this long has passed: it keeps jobs from thrashing, and Slurm's accounting keys a job's
    allocation records by the second, so two size changes within one second would leave one.
    ``address`` is where the controller listens for running jobs (``host:port``); by default
    a cluster-internal address: on the local cluster its bridge, elsewhere the address of this
    host's name, port 7717 (see :mod:`elastic_slurm.protocol.address`). ``on_overdue``: what
    happens to a job that does not follow an order or answer an offer within its grace period
    (``keep`` its nodes, ``force`` the shrink in Slurm, or ``requeue`` it; see
    :mod:`elastic_slurm.controller.actuate`). ``offer_cooldown_s``: a job that rejected an
    offer gets no new one for this long. ``operators``: users who may act on any job through
    the controller (besides each job's own user). ``sizes_moldable``: moldable jobs are
    submitted held and the controller's policy chooses their start size, then releases them
    (Huang et al.), unless the user says ``--sized-by slurm``; off: Slurm picks the size.
    """

    poll_interval_s: float = Field(0.5, gt=0, le=3600)
    resize_timeout_s: float = Field(120.0, gt=0, le=7 * _DAY_S)
    grant_timeout_s: int = Field(30, ge=1, le=86400)
    min_resize_interval_s: float = Field(2.0, ge=0, le=_DAY_S)
    on_overdue: Literal["keep", "force", "requeue"] = "keep"
    address: str | None = Field(None, pattern=r"^[^\s:]+:\d{1,5}$")
    offer_cooldown_s: float = Field(30.0, ge=0, le=_DAY_S)
    operators: tuple[str, ...] = ("root",)
    sizes_moldable: bool = False
    policy: PolicyConfig = PolicyConfig()
    #: Where the journal (SQLite) lives; ``controller run --journal`` overrides it.
    journal: Path = Path("/var/lib/elastic-slurm/controller/journal.sqlite")
    #: Cap on every duration a user supplies (grace periods, deadlines): longer ones are refused
    #: at submission and clamped when read back from Slurm (seconds).
    max_grace_period_s: float = Field(3600.0, gt=0, le=7 * 86400)
    #: How long a user command keeps retrying a transient Slurm error before it gives up, and
    #: the controller's wait between checks while slurmctld does not answer (seconds). The
    #: controller itself never gives up on an outage: it stops deciding until Slurm is back.
    slurm_retry_s: float = Field(20.0, gt=0, le=3600)
    slurm_outage_poll_s: float = Field(5.0, gt=0, le=300)
    #: After a shrink, stretch the job's time limit by what it loses in speed (see
    #: :mod:`elastic_slurm.controller.stretch`); needs Slurm operator rights.
    stretch_time_limit: bool = True
    #: A size set by hand (``elastic-slurm resize``) is left alone by the policy this long.
    manual_hold_s: float = Field(600.0, ge=0, le=7 * 86400)
    #: The controller stops (exit 1, for the service manager to restart it with back-off) after
    #: this many cycles in a row ended with an unexpected error.
    max_failed_cycles: int = Field(20, ge=1, le=10_000)
    #: Largest request body the protocol server reads (bytes); larger ones get 413.
    max_body_bytes: int = Field(65536, ge=1024, le=16 * 1024 * 1024)
    #: TLS for the protocol server (PEM files of the site's certificate and key); both or none.
    tls_cert: Path | None = None
    tls_key: Path | None = None
    #: Prometheus metrics (``host:port``; ``None``: not served).
    metrics_address: str | None = Field(None, pattern=r"^[^\s:]+:\d{1,5}$")
    #: ``debug``, ``info``, ``warning`` or ``error``; ``json`` logs one JSON object a line.
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_format: Literal["text", "json"] = "text"
    #: Who does the Slurm side of a resize (``docs/protocol.md``, "Least privilege").
    #: ``root``: the controller runs as root, grants and gives back nodes itself, and keeps
    #: each job's protocol files in the job's directory (handed to the job's user).
    #: ``service``: it runs as an unprivileged service user, keeps each job's protocol files
    #: under ``spool`` (its own), never writes a user's directory, and each job grants and
    #: gives back its own nodes as its user (jobs must talk to it over ``address``).
    privilege: Literal["root", "service"] = "root"
    #: Where a ``service`` controller keeps each job's protocol files (``job-<id>/``).
    spool: Path = Path("/var/lib/elastic-slurm/controller/jobs")
    #: A job's ``job-<id>/`` in ``spool`` is removed once Slurm no longer lists the job and
    #: nothing was written there for this long (seconds; the journal keeps its resizes).
    spool_retention_s: float = Field(_DAY_S, ge=0, le=365 * _DAY_S)

    _ports = field_validator("address", "metrics_address")(_check_address)

    @model_validator(mode="after")
    def _tls_pair(self) -> ControllerConfig:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together: give both or neither")
        return self


class LocalTransportConfig(_Frozen):
    """Slurm's commands run on this machine, as subprocesses."""

    kind: Literal["local"] = "local"
    command_timeout_s: float = Field(30.0, gt=0, le=_DAY_S)


class SSHTransportConfig(_Frozen):
    """Slurm's commands run on a login node reached over SSH (paramiko).

    The login node is reached as ``ssh HOST`` would: ``host`` may be an alias of the SSH
    config (``ssh_config``, default ``~/.ssh/config`` then ``/etc/ssh/ssh_config``), whose
    ``User``, ``Port``, ``IdentityFile``, ``ProxyJump`` and ``ProxyCommand`` apply; values
    written here win. Host keys are checked against ``known_hosts`` (default: the files OpenSSH
    reads): an unknown or changed host key is refused (add it first, e.g. with ``ssh-keyscan``).
    Login is by key: ``key_file``, the SSH config's ``IdentityFile``, the ssh-agent or
    ``~/.ssh/id_*``. Paths may start with ``~``. ``remote_env`` is set for every command on the
    login node (for example ``SLURM_CONF``).
    """

    kind: Literal["ssh"]
    host: str = Field(min_length=1)
    port: int = Field(22, ge=1, le=65535)
    user: str | None = Field(None, min_length=1)
    key_file: Path | None = None
    known_hosts: Path | None = None
    ssh_config: Path | None = None
    connect_timeout_s: float = Field(10.0, gt=0, le=_DAY_S)
    command_timeout_s: float = Field(30.0, gt=0, le=_DAY_S)
    remote_env: dict[str, str] = Field(default_factory=dict)


TransportConfig = Annotated[LocalTransportConfig | SSHTransportConfig, Field(discriminator="kind")]


class SiteConfig(_Frozen):
    """One site: where its Slurm is, how to reach it, and how elastic jobs behave there.

    Parameters
    ----------
    name, cluster_name
        The site's name (default: the file's stem) and Slurm's ``ClusterName``.
    partition, partitions
        The default partition of elastic jobs, and every partition they may use (empty: any).
    account, qos
        Default account and QOS of elastic jobs (``None``: Slurm's defaults).
    grow_path
        How jobs grow: ``merge`` (expander merged into the job; needs
        ``permit_job_expansion``), ``sibling`` (a second allocation beside the job) or
        ``auto`` (what ``elastic-slurm doctor`` finds possible).
    backend
        ``cli`` (Slurm's commands; the default), ``pyslurm`` (its exact Slurm version only),
        or ``auto``.
    slurm_conf
        ``SLURM_CONF`` for Slurm's commands (local transport), if not the system's.
    local_cluster
        Set only for the embedded cluster that ``elastic-slurm cluster up`` builds here.
    python
        The Python interpreter with elastic-slurm installed, as the nodes see it (what batch
        scripts run). Default: this interpreter, or the chroot's ``python3`` for a local
        cluster of a newer flavour (:func:`elastic_slurm.adapter.factory.job_python`).
    mpi_env
        MPI parameters (``OMPI_MCA_<name>``, ``PRTE_MCA_<name>``, ``PMIX_MCA_<name>``: string
        values) that every elastic job's MPI launch gets; a job spec's ``env:`` overrides
        them (:mod:`elastic_slurm.mca`). The local cluster sets
        ``OMPI_MCA_mpi_yield_when_idle: "1"`` (its nodes share this machine's cores).
    """

    name: str
    cluster_name: str = "elastic"
    partition: str | None = None
    partitions: tuple[str, ...] = ()
    account: str | None = None
    qos: str | None = None
    grow_path: Literal["auto", "merge", "sibling"] = "auto"
    backend: Literal["auto", "cli", "pyslurm"] = "cli"
    slurm_conf: Path | None = None
    transport: TransportConfig = LocalTransportConfig()
    controller: ControllerConfig = ControllerConfig()
    local_cluster: LocalClusterConfig | None = None
    python: str | None = None
    mpi_env: dict[str, str] = Field(default_factory=dict)
    source: str = ""  # the file this config came from (set by the loader)

    @field_validator("mpi_env")
    @classmethod
    def _mca_params(cls, value: dict[str, str]) -> dict[str, str]:
        from elastic_slurm import mca

        return mca.check(value)

    @model_validator(mode="after")
    def _partition_allowed(self) -> SiteConfig:
        if self.partition and self.partitions and self.partition not in self.partitions:
            raise ValueError(
                f"partition {self.partition!r} is not among partitions {list(self.partitions)}"
            )
        return self
