"""Render the local cluster's ``slurm.conf`` and ``slurmdbd.conf`` (pure functions).

The settings are the working ones of SLURM-FACTS.md: one slurmd per node with per-node spool,
PID, log and ``TmpFS`` paths (``%n``), ``proctrack/linuxproc``, ``task/none``,
``select/linear`` (whole nodes; ``cons_tres`` double-books nodes merged into a job),
``sched/backfill`` with ``permit_job_expansion``, ``MpiDefault=pmix``, and
accounting through slurmdbd (without it Slurm 22.05 allows only one resize per job; the
chroot flavours, Slurm 24.11 and later, may run without: ``accounting: none``). Daemons run
in the foreground and log to standard error, which the cluster sends to one file per daemon.
"""

from __future__ import annotations

from elastic_slurm.cluster.layout import Layout


def render_slurm_conf(
    layout: Layout,
    cluster_name: str,
    permit_job_expansion: bool | None = None,
    job_submit_lua: bool = False,
) -> str:
    """The text of ``slurm.conf`` for ``layout``.

    ``permit_job_expansion`` overrides the config's (``None``: keep it): without it Slurm
    refuses merges, and jobs grow by sibling allocations. ``job_submit_lua`` loads
    ``job_submit.lua`` from beside ``slurm.conf``.
    """
    permit = layout.cfg.permit_job_expansion
    if permit_job_expansion is not None:
        permit = permit_job_expansion
    cfg, head = layout.cfg, layout.head
    state, run = cfg.state_dir, cfg.run_dir
    sched = cfg.scheduler
    names = cfg.node_names(layout.nodes)
    node_range = names[0] if layout.nodes == 1 else f"{cfg.node_prefix}[1-{layout.nodes}]"
    lines = [
        "# Written by `elastic-slurm cluster up`; removed by `elastic-slurm cluster down`.",
        f"ClusterName={cluster_name}",
        f"SlurmctldHost={head.hostname}({head.address})",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"SlurmctldPort={cfg.slurmctld_port}",
        f"SlurmdPort={cfg.slurmd_port}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={layout.munge_socket}",
        f"StateSaveLocation={state}/slurmctld",
        f"SlurmdSpoolDir={state}/slurmd/%n",
        f"TmpFS={state}/tmp/%n",
        f"SlurmctldPidFile={run}/slurmctld.pid",
        f"SlurmdPidFile={run}/slurmd-%n.pid",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        f"SelectType=select/{cfg.select_type}",
        *(["SelectTypeParameters=CR_CPU"] if cfg.select_type == "cons_tres" else []),
        "SchedulerType=sched/backfill",
        "SchedulerParameters="
        + ("permit_job_expansion," if permit else "")
        + f"sched_interval={sched.sched_interval_s},bf_interval={sched.bf_interval_s}",
        "SlurmdParameters=config_overrides",
        "MpiDefault=pmix",
        *(["JobSubmitPlugins=lua"] if job_submit_lua else []),
        *(
            [
                "AccountingStorageType=accounting_storage/slurmdbd",
                f"AccountingStorageHost={head.hostname}",
                f"AccountingStoragePort={cfg.slurmdbd_port}",
                # with slurmdbd this names the munge socket of connections to it
                f"AccountingStoragePass={layout.munge_socket}",
            ]
            if cfg.accounting == "slurmdbd"
            else ["AccountingStorageType=accounting_storage/none"]
        ),
        "ReturnToService=2",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=60",
        "InactiveLimit=0",
        "KillWait=5",
        "MinJobAge=600",
        "MessageTimeout=20",
        "",
    ]
    for host in layout.node_hosts:
        lines.append(
            f"NodeName={host.hostname} NodeHostname={host.hostname} NodeAddr={host.address} "
            f"CPUs={cfg.cpus_per_node} RealMemory={cfg.real_memory_mib} State=UNKNOWN"
        )
    lines.append(
        f"PartitionName={cfg.partition} Nodes={node_range} Default=YES MaxTime=INFINITE "
        "State=UP OverSubscribe=NO"
    )
    return "\n".join(lines) + "\n"


def render_slurmdbd_conf(layout: Layout, db_password: str) -> str:
    """The text of ``slurmdbd.conf`` (to be written with mode 0600)."""
    cfg, head = layout.cfg, layout.head
    return "\n".join(
        [
            "# Written by `elastic-slurm cluster up`; removed by `elastic-slurm cluster down`.",
            "AuthType=auth/munge",
            f"AuthInfo=socket={layout.munge_socket}",
            f"DbdHost={head.hostname}",
            f"DbdAddr={head.address}",
            f"DbdPort={cfg.slurmdbd_port}",
            "SlurmUser=root",
            f"PidFile={cfg.run_dir}/slurmdbd.pid",
            "StorageType=accounting_storage/mysql",
            "StorageHost=127.0.0.1",
            f"StoragePort={cfg.mariadb_port}",
            "StorageUser=slurm",
            f"StoragePass={db_password}",
            "StorageLoc=slurm_acct_db",
            "",
        ]
    )


def render_cgroup_conf() -> str:
    """The text of ``cgroup.conf`` for the chroot flavours (Slurm 24.11 and later).

    Their slurmd initialises a cgroup plugin even with ``proctrack/linuxproc`` and
    ``task/none``, and fails on cgroup v1 and hybrid hosts; ``CgroupPlugin=disabled`` turns
    it off (SLURM-FACTS.md). Slurm reads the file from ``slurm.conf``'s directory.
    """
    return (
        "# Written by `elastic-slurm cluster up`; removed by `elastic-slurm cluster down`.\n"
        "CgroupPlugin=disabled\n"
    )
