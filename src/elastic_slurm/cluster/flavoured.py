"""The local cluster of a newer Slurm: the same cluster, run inside a flavour's chroot.

:class:`ChrootCluster` is :class:`~elastic_slurm.cluster.local.LocalCluster` with these
differences:

- the software comes from the flavour's chroot (:mod:`elastic_slurm.cluster.chroot`), built
  on first use, instead of the host's packages;
- ``/proc``, ``/sys``, ``/dev`` and, at their own paths, the cluster's state and run
  directories and elastic-slurm's source tree are mounted into the chroot, so paths in
  ``slurm.conf`` are the same inside and outside, and the project's code runs inside with the
  chroot's Python and its Debian packages (``import elastic_slurm`` works there through a
  ``.pth`` file; pure-Python dependencies Debian lacks are copied from this environment);
- every daemon is started chrooted (after joining its host's namespaces) and every Slurm
  command runs through :class:`~elastic_slurm.adapter.transport.chroot.ChrootTransport`;
- the munge user is the chroot's; the hosts block goes into the chroot's ``/etc/hosts``;
- no MariaDB/slurmdbd (``accounting: none``: Slurm 24.11 and later resize without it), and a
  ``cgroup.conf`` that disables the cgroup plugin.

``down`` does what the host cluster's does, then removes every mount below the chroot.
"""

from __future__ import annotations

import ctypes
import importlib.metadata
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import elastic_slurm
from elastic_slurm.adapter.transport.chroot import BASE_ENV, ChrootTransport
from elastic_slurm.cluster import chroot
from elastic_slurm.cluster.layout import Layout
from elastic_slurm.cluster.local import ClusterState, LocalCluster, require_root
from elastic_slurm.cluster.network import CLONE_NEWNET, CLONE_NEWUTS, HostNet, _libc
from elastic_slurm.cluster.slurmconf import render_cgroup_conf
from elastic_slurm.config.schema import SiteConfig
from elastic_slurm.errors import ClusterError

#: Where, inside a chroot, pure-Python dependencies copied from this environment go.
CHROOT_PYTHON_DIR = "/opt/elastic-slurm/python"
#: Distributions elastic-slurm needs that the chroot's Debian does not package.
HOST_PURE_PYTHON = ("python-hostlist",)


def source_tree() -> Path:
    """The directory bind-mounted into chroots: the repository (or ``src``) holding the package."""
    src = Path(elastic_slurm.__file__).resolve().parents[1]
    repo = src.parent
    return repo if (repo / "pyproject.toml").exists() else src


def enter_chroot(
    root: Path, host: HostNet | None = None, uid: int | None = None, gid: int | None = None
) -> Callable[[], None]:
    """A ``preexec_fn`` that moves the child into ``host``'s namespaces, then into the chroot.

    The child joins ``host``'s network namespace and a new UTS namespace with ``host``'s
    hostname (if ``host`` is given), changes its root to ``root``, and then drops to
    ``uid``/``gid`` (if given; numbers from the chroot's own user database).

    Raises
    ------
    OSError
        In the child (reported by :mod:`subprocess` as a failure to start).
    """
    name = host.hostname.encode() if host else b""
    netns = str(host.netns_path) if host else None

    def _enter() -> None:
        libc = _libc()
        if netns is not None:
            fd = os.open(netns, os.O_RDONLY)
            try:
                if libc.setns(fd, CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns({netns}): {os.strerror(err)}")
            finally:
                os.close(fd)
            if libc.unshare(CLONE_NEWUTS) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"unshare(CLONE_NEWUTS): {os.strerror(err)}")
            if libc.sethostname(name, len(name)) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"sethostname: {os.strerror(err)}")
        os.chroot(root)
        os.chdir("/")
        if gid is not None:
            os.setgroups([])
            os.setgid(gid)
        if uid is not None:
            os.setuid(uid)

    return _enter


class ChrootCluster(LocalCluster):
    """The local cluster of flavour ``site.local_cluster.flavour``, inside its chroot.

    Parameters
    ----------
    site
        A site config whose ``local_cluster`` names a chroot flavour (``local-trixie.yaml``).
    progress
        Called with one line of text per step.

    Raises
    ------
    ClusterError
        The flavour is ``bookworm`` (use :class:`LocalCluster`), or accounting is not ``none``.
    """

    def __init__(self, site: SiteConfig, progress: Callable[[str], None] | None = None) -> None:
        super().__init__(site, progress)
        self.flavour = chroot.flavour(self.cfg.flavour)
        if not self.flavour.in_chroot:
            raise ClusterError("the bookworm flavour runs on the host: use LocalCluster")
        if self.cfg.accounting != "none":
            raise ClusterError(
                f"{site.source}: local_cluster.accounting must be `none` for the "
                f"{self.flavour.name} flavour (its chroot has no MariaDB/slurmdbd)"
            )
        self.root = chroot.chroot_dir(self.flavour.name, self.cfg.chroots_dir)
        self.transport = ChrootTransport(self.root, self.slurm_env, default_timeout_s=60)
        self.hosts_file = self.root / "etc" / "hosts"

    @property
    def slurm_env(self) -> dict[str, str]:
        """Environment of commands in the chroot: ``SLURM_CONF``, ``PYTHONPATH``, MPI as root."""
        return {
            "SLURM_CONF": str(self.layout().slurm_conf),
            "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        }

    # ----------------------------------------------------------------- software
    def _ensure_software(self) -> None:
        chroot.build(self.flavour.name, self.cfg.chroots_dir, progress=self.progress)
        self._provision_python()
        _hosts_from_files_only(self.root)
        binds = [self.cfg.state_dir, self.cfg.run_dir, source_tree()]
        made = chroot.mount_into(self.root, binds)
        if made:
            self.progress(f"mounted {len(made)} file systems into {self.root}")

    def _provision_python(self) -> None:
        """Make ``import elastic_slurm`` work with the chroot's ``python3`` (idempotent).

        Pure-Python distributions Debian lacks are copied from this environment into
        :data:`CHROOT_PYTHON_DIR`; a ``.pth`` file in the chroot's ``dist-packages`` names that
        directory and the source tree's ``src``; ``/usr/local/bin/elastic-slurm`` runs the CLI.

        Raises
        ------
        ClusterError
            A distribution is missing here, or holds compiled code.
        """
        target = self.root / CHROOT_PYTHON_DIR.lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        for dist_name in HOST_PURE_PYTHON:
            try:
                dist = importlib.metadata.distribution(dist_name)
            except importlib.metadata.PackageNotFoundError as exc:
                raise ClusterError(
                    f"{dist_name} is not installed in this environment, so it cannot be copied "
                    "into the chroot"
                ) from exc
            for f in dist.files or ():
                if f.suffix in (".so", ".pyd"):
                    raise ClusterError(f"{dist_name} holds compiled code ({f}): not copied")
                if f.parts[0] == ".." or f.suffix == ".pyc":
                    continue  # scripts outside site-packages, caches
                src = Path(str(dist.locate_file(f)))
                dst = target / f
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)
        tree = source_tree()
        src_dir = tree / "src" if (tree / "src").is_dir() else tree
        pth = self.root / "usr" / "lib" / "python3" / "dist-packages" / "elastic_slurm.pth"
        pth.write_text(f"{CHROOT_PYTHON_DIR}\n{src_dir}\n")
        cli = self.root / "usr" / "local" / "bin" / "elastic-slurm"
        cli.write_text(
            "#!/usr/bin/python3\n"
            "from elastic_slurm.cli.main import main\n"
            "raise SystemExit(main())\n"
        )
        os.chmod(cli, 0o755)

    # ----------------------------------------------------------------- daemons
    def _spawn_options(self, host: HostNet | None, user: str | None) -> dict[str, Any]:
        uid = gid = None
        if user is not None:
            uid, gid = chroot.chroot_ids(self.root, user)
        return {
            "preexec_fn": enter_chroot(self.root, host, uid, gid),
            "env": {**BASE_ENV, **self.slurm_env},
        }

    def _chown_munge(self, path: Path) -> None:
        uid, gid = chroot.chroot_ids(self.root, "munge")
        os.chown(path, uid, gid)

    def _prepare_files(self, layout: Layout) -> None:
        super()._prepare_files(layout)
        (layout.etc / "cgroup.conf").write_text(render_cgroup_conf())
        self._mpi_network()

    def _mpi_network(self) -> None:
        """Let Open MPI's TCP transport use the nodes' network (the cluster's subnet).

        Debian forky's Open MPI 6.0.0rc2 package ships ``btl_tcp_if_include=lo`` in
        ``/etc/openmpi/openmpi-mca-params.conf``: ranks on different nodes then find no
        interface pair ("Unable to find reachable pairing between local and remote
        interfaces") and MPI across nodes fails. A site sets its own network there; the local
        cluster sets its subnet (a no-op on trixie, whose file names no interface).
        """
        path = self.root / "etc" / "openmpi" / "openmpi-mca-params.conf"
        if not path.exists():
            return
        text = path.read_text()
        lines = [ln for ln in text.splitlines() if not _sets_tcp_interfaces(ln)]
        want = f"btl_tcp_if_include={self.cfg.network.subnet}"
        if text.splitlines() == [*lines, MCA_MARK, want]:
            return
        path.write_text("\n".join([*lines, MCA_MARK, want]) + "\n")
        self.progress(f"Open MPI: {want} in the chroot's {path.relative_to(self.root)}")

    def _start_mariadb(self, layout: Layout, state: ClusterState) -> None:
        """No database: accounting is ``none``."""

    def _start_slurmdbd(self, layout: Layout, state: ClusterState) -> None:
        """No slurmdbd: accounting is ``none``."""

    def _link_system_conf(self, layout: Layout, state: ClusterState) -> None:
        """Point the chroot's ``/etc/slurm/slurm.conf`` at ours (never the host's)."""
        link = self.root / "etc" / "slurm" / "slurm.conf"
        if link.parent.is_dir() and not link.exists() and not link.is_symlink():
            link.symlink_to(layout.slurm_conf)
            state.slurm_conf_link = str(link)
            self._save(layout, state)

    # ----------------------------------------------------------------- down
    def down(self, keep_logs: bool = False) -> list[str]:
        """Stop and remove what ``up`` made (see :meth:`LocalCluster.down`), then unmount.

        Raises
        ------
        ClusterError
            A mount below the chroot could not be removed.
        """
        require_root("down")
        done = super().down(keep_logs=keep_logs)
        n = chroot.unmount_all(self.root)
        if n:
            line = f"unmounted {n} file systems from {self.root}"
            self.progress(line)
            done.append(line)
        return done


MCA_MARK = "# elastic-slurm: MPI between the local cluster's nodes uses its subnet"


def _sets_tcp_interfaces(line: str) -> bool:
    """Whether an MCA params line chooses the TCP interfaces (ours or the package's).

    >>> _sets_tcp_interfaces("btl_tcp_if_include=lo"), _sets_tcp_interfaces("# note")
    (True, False)
    """
    key = line.split("=", 1)[0].strip()
    return key in ("btl_tcp_if_include", "btl_tcp_if_exclude") or line.strip() == MCA_MARK


def _hosts_from_files_only(root: Path) -> None:
    """Resolve host names in the chroot from ``/etc/hosts`` only (idempotent).

    The nodes' namespaces cannot reach a DNS server (nothing leaves the machine), and Slurm
    24.11's slurmctld looks up its clients' addresses: with ``dns`` in ``nsswitch.conf`` every
    request waited for the resolver's timeout and ``scontrol ping`` timed out.
    """
    path = root / "etc" / "nsswitch.conf"
    lines = path.read_text().splitlines()
    new = ["hosts:          files" if line.startswith("hosts:") else line for line in lines]
    if new != lines:
        path.write_text("\n".join(new) + "\n")


def make_cluster(site: SiteConfig, progress: Callable[[str], None] | None = None) -> LocalCluster:
    """The cluster object for ``site``'s flavour (:class:`LocalCluster` for ``bookworm``)."""
    if site.local_cluster is not None and site.local_cluster.flavour != "bookworm":
        return ChrootCluster(site, progress)
    return LocalCluster(site, progress)
