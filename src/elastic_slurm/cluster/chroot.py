"""Debian chroots that hold a newer Slurm and Open MPI (the cluster flavours of issue 9).

A flavour other than ``bookworm`` (the host's own Slurm 22.05) runs its cluster inside a
chroot built once with ``debootstrap --variant=minbase`` from the Debian mirror apt already
uses, with that distribution's Slurm, munge, Open MPI, mpi4py and the Python packages
elastic-slurm needs. A build is cached: a marker file written last records what was built, and
a chroot that has it is not built again. The build happens in ``<dir>.partial`` and is renamed
into place only when complete, so an interrupted build never looks finished.

Package scripts must not start services inside the chroot (``cluster down`` could not stop
them): a ``policy-rc.d`` that exits 101 stays in the chroot. Forky's Release file may carry a
``Valid-Until`` already past, so apt in the chroot does not check it, and bookworm's debootstrap
has no ``forky`` script, so forky is built with the ``sid`` script (SLURM-FACTS.md).

Mounts into a chroot (``/proc``, ``/sys``, ``/dev``, and bind mounts of host directories) are
made by :func:`mount_into` and all removed by :func:`unmount_all`, which finds them in
``/proc/self/mountinfo`` (every mount below a chroot's root is one this module made).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from elastic_slurm.errors import ClusterError

CHROOTS_DIR = Path("/var/lib/elastic-slurm/chroots")
MARKER = ".elastic-slurm-chroot.json"
APT_SOURCES = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))
DEFAULT_MIRROR = "http://deb.debian.org/debian"
POLICY_RC_D = "#!/bin/sh\n# elastic-slurm: no service starts inside this chroot\nexit 101\n"
APT_CONF = 'Acquire::Check-Valid-Until "false";\nAPT::Install-Recommends "false";\n'

#: Debian packages for the cluster and for elastic-slurm's own Python code (its dependencies
#: come from the same distribution: compiled ones such as pydantic-core are tied to the
#: chroot's Python version, so the host venv's cannot be used).
PACKAGES: tuple[str, ...] = (
    "slurm-wlm",
    "munge",
    "openmpi-bin",
    "libopenmpi-dev",
    "libpmix-dev",
    "python3-mpi4py",
    "python3-numpy",
    "python3-pydantic",
    "python3-yaml",
    "python3-tenacity",
    "python3-rich",
    "python3-flask",
    "python3-requests",
    "iproute2",
    "procps",
)


@dataclass(frozen=True)
class Flavour:
    """A Debian release whose Slurm the cluster can run.

    Parameters
    ----------
    name
        ``bookworm``, ``trixie`` or ``forky``.
    suite
        The Debian suite debootstrap and apt install from.
    script
        The debootstrap script (bookworm's debootstrap has none for forky: ``sid``).
    slurm
        The Slurm major version the release ships (for messages; the probed one decides).
    """

    name: str
    suite: str
    script: str
    slurm: str

    @property
    def in_chroot(self) -> bool:
        """False for ``bookworm``, which runs on the host."""
        return self.name != "bookworm"


FLAVOURS: dict[str, Flavour] = {
    "bookworm": Flavour("bookworm", "bookworm", "bookworm", "22.05"),
    "trixie": Flavour("trixie", "trixie", "trixie", "24.11"),
    "forky": Flavour("forky", "forky", "sid", "26.05"),
}


def flavour(name: str) -> Flavour:
    """The flavour called ``name``.

    Raises
    ------
    ClusterError
        No such flavour.
    """
    try:
        return FLAVOURS[name]
    except KeyError:
        raise ClusterError(
            f"unknown cluster flavour {name!r}: choose one of {', '.join(FLAVOURS)}"
        ) from None


def chroot_dir(name: str, base: Path = CHROOTS_DIR) -> Path:
    """Where the chroot of flavour ``name`` lives."""
    return base / name


def host_mirror(paths: Sequence[Path] = APT_SOURCES) -> str:
    """The Debian mirror this machine's apt uses (not the security archive).

    Reads one-line ``deb URL suite`` entries and deb822 ``URIs:`` fields; falls back to
    ``deb.debian.org``.
    """
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files += sorted(f for f in p.iterdir() if f.suffix in (".list", ".sources"))
        elif p.is_file():
            files.append(p)
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        for url in mirror_urls(text):
            return url
    return DEFAULT_MIRROR


def mirror_urls(text: str) -> list[str]:
    """Debian mirror URLs named in an apt sources text (either format), security ones left out."""
    urls = []
    for line in text.splitlines():
        line = line.strip()
        m = re.match(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s", line) or re.match(r"^URIs:\s*(.+)$", line)
        if not m:
            continue
        for url in m.group(1).split():
            if "security" not in url and re.search(r"/debian/?$", url):
                urls.append(url.rstrip("/"))
    return urls


def read_marker(root: Path) -> dict[str, object] | None:
    """What the marker of a built chroot records, or ``None`` if the chroot is not built."""
    try:
        return dict(json.loads((root / MARKER).read_text()))
    except (OSError, ValueError):
        return None


def is_built(root: Path) -> bool:
    """True if the chroot at ``root`` was built completely."""
    return read_marker(root) is not None


def mounts_under(root: Path, mountinfo: str | None = None) -> list[Path]:
    """Mount points at or below ``root``, deepest first (from ``/proc/self/mountinfo``)."""
    if mountinfo is None:
        mountinfo = Path("/proc/self/mountinfo").read_text()
    base = str(root.resolve() if root.exists() else root).rstrip("/")
    points = []
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) < 5:
            continue
        point = fields[4].replace("\\040", " ")
        if point == base or point.startswith(base + "/"):
            points.append(Path(point))
    return sorted(set(points), key=lambda p: (-len(p.parts), str(p)))


def _run(argv: Sequence[str], log: Path, timeout_s: float, what: str) -> None:
    with open(log, "a") as out:
        out.write(f"\n$ {' '.join(argv)}\n")
        out.flush()
        try:
            res = subprocess.run(
                list(argv),
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=timeout_s,
                env={**os.environ, "DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C"},
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise ClusterError(f"{what} took longer than {timeout_s:.0f} s; see {log}") from exc
        except FileNotFoundError as exc:
            raise ClusterError(f"{what}: {argv[0]} is not installed ({exc})") from exc
    if res.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise ClusterError(f"{what} failed (exit {res.returncode}); {log} ends:\n{tail}")


def mount_into(root: Path, binds: Sequence[Path] = ()) -> list[Path]:
    """Mount ``/proc``, ``/sys`` (rbind, rslave), ``/dev`` (rbind, rslave) into the chroot.

    ``binds`` are host directories bind-mounted at the same path inside it (created on both
    sides when missing). Idempotent: what is mounted already is left alone.

    Returns
    -------
    list of Path
        The mount points made now.

    Raises
    ------
    ClusterError
        A mount failed (what was mounted stays: :func:`unmount_all` removes it).
    """
    have = set(mounts_under(root))
    made: list[Path] = []

    def mount(target: Path, *argv: str) -> None:
        if target in have:
            return
        target.mkdir(parents=True, exist_ok=True)
        res = subprocess.run(
            ["mount", *argv, str(target)], capture_output=True, text=True, check=False
        )
        if res.returncode != 0:
            raise ClusterError(f"mounting {target} failed: {res.stderr.strip()}")
        made.append(target)

    mount(root / "proc", "-t", "proc", "proc")
    for d in ("sys", "dev"):
        mount(root / d, "--rbind", f"/{d}")
        subprocess.run(["mount", "--make-rslave", str(root / d)], check=False)
    for src in binds:
        src.mkdir(parents=True, exist_ok=True)
        mount(root / str(src).lstrip("/"), "--bind", str(src))
    return made


def unmount_all(root: Path) -> int:
    """Unmount everything mounted at or below ``root`` (deepest first); return how many.

    Raises
    ------
    ClusterError
        A mount point stays mounted.
    """
    points = [p for p in mounts_under(root) if p != root]
    for point in points:
        res = subprocess.run(["umount", str(point)], capture_output=True, text=True, check=False)
        if res.returncode != 0 and point in mounts_under(root):
            # busy (a process still holds it): detach it, it goes when the last user does
            subprocess.run(["umount", "--lazy", str(point)], check=False)
    left = [p for p in mounts_under(root) if p != root]
    if left:
        raise ClusterError(f"could not unmount {', '.join(map(str, left))}")
    return len(points)


def chroot_ids(root: Path, user: str) -> tuple[int, int]:
    """The uid and gid of ``user`` in the chroot's own ``/etc/passwd``.

    Raises
    ------
    ClusterError
        The chroot has no such user.
    """
    for line in (root / "etc" / "passwd").read_text().splitlines():
        fields = line.split(":")
        if len(fields) >= 4 and fields[0] == user:
            return int(fields[2]), int(fields[3])
    raise ClusterError(f"the chroot {root} has no user {user!r}")


def build(
    name: str,
    base: Path = CHROOTS_DIR,
    *,
    mirror: str | None = None,
    packages: Sequence[str] = PACKAGES,
    rebuild: bool = False,
    progress: Callable[[str], None] = print,
) -> Path:
    """Build the chroot of flavour ``name`` unless it is built already; return its root.

    Parameters
    ----------
    name
        A flavour that runs in a chroot (``trixie``, ``forky``).
    base
        The directory that holds the chroots.
    mirror
        The Debian mirror (default: the one this machine's apt uses).
    packages
        Debian packages installed into the chroot.
    rebuild
        Build again even if a built chroot exists (it is replaced only when the new one is
        complete).
    progress
        Called with one line per step (with its time in seconds).

    Raises
    ------
    NotRootError
        Not running as root.
    ClusterError
        ``bookworm`` (it runs on the host), debootstrap could not be installed, or a step
        failed (the message quotes the end of the build log, kept beside the chroot).
    """
    from elastic_slurm.cluster.local import require_root

    fl = flavour(name)
    if not fl.in_chroot:
        raise ClusterError("the bookworm flavour runs on this machine itself: it has no chroot")
    root = chroot_dir(name, base)
    if is_built(root) and not rebuild:
        marker = read_marker(root) or {}
        progress(f"chroot {root} is built already: {marker.get('versions')}")
        return root
    require_root("build")
    if shutil.which("debootstrap") is None:  # a fresh machine: install it like Slurm's packages
        from elastic_slurm.adapter.transport.local import LocalTransport
        from elastic_slurm.cluster.packages import ensure_packages

        progress("installing debootstrap from Debian's packages ...")
        ensure_packages(LocalTransport(), ["debootstrap"])
    mirror = mirror or host_mirror()
    partial = root.with_name(root.name + ".partial")
    log = root.with_name(root.name + ".build.log")
    base.mkdir(parents=True, exist_ok=True)
    if partial.exists():
        if mounts_under(partial):
            unmount_all(partial)
        shutil.rmtree(partial)
    log.write_text(f"# elastic-slurm chroot build of {name} from {mirror}\n")
    t0 = time.monotonic()

    def step(what: str, argv: Sequence[str], timeout_s: float) -> None:
        t = time.monotonic()
        progress(f"{what} ...")
        _run(argv, log, timeout_s, what)
        progress(f"{what}: done in {time.monotonic() - t:.1f} s")

    step(
        f"debootstrap {fl.suite} (script {fl.script}) from {mirror}",
        [
            "debootstrap",
            "--variant=minbase",
            "--components=main",
            fl.suite,
            str(partial),
            mirror,
            f"/usr/share/debootstrap/scripts/{fl.script}",
        ],
        1200,
    )
    policy = partial / "usr" / "sbin" / "policy-rc.d"
    policy.write_text(POLICY_RC_D)
    os.chmod(policy, 0o755)
    (partial / "etc" / "apt" / "apt.conf.d" / "99elastic-slurm").write_text(APT_CONF)
    (partial / "etc" / "apt" / "sources.list").write_text(f"deb {mirror} {fl.suite} main\n")
    shutil.copyfile("/etc/resolv.conf", partial / "etc" / "resolv.conf")
    try:
        mount_into(partial)
        step(
            f"apt-get update in the {name} chroot",
            ["chroot", str(partial), "apt-get", "update"],
            600,
        )
        step(
            f"apt-get install {len(packages)} packages in the {name} chroot",
            ["chroot", str(partial), "apt-get", "install", "-y", "-q", *packages],
            1800,
        )
        _run(["chroot", str(partial), "apt-get", "clean"], log, 120, "apt-get clean")
    finally:
        unmount_all(partial)
    versions = installed_versions(partial, ("slurm-wlm", "openmpi-bin", "python3", "munge"))
    marker = {
        "flavour": name,
        "suite": fl.suite,
        "mirror": mirror,
        "packages": list(packages),
        "versions": versions,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "build_s": round(time.monotonic() - t0, 1),
    }
    (partial / MARKER).write_text(json.dumps(marker, indent=1) + "\n")
    if root.exists():
        if mounts_under(root):
            raise ClusterError(
                f"{root} has mounts (its cluster is up?): run `elastic-slurm cluster down "
                f"--flavour {name}` before rebuilding"
            )
        shutil.rmtree(root)
    partial.rename(root)
    progress(f"chroot {root} built in {time.monotonic() - t0:.1f} s: {versions}")
    return root


def installed_versions(root: Path, packages: Sequence[str]) -> dict[str, str]:
    """Installed versions of ``packages`` in the chroot (``dpkg-query`` inside it)."""
    res = subprocess.run(
        ["chroot", str(root), "dpkg-query", "-W", "-f=${Package} ${Version}\n", *packages],
        capture_output=True,
        text=True,
        check=False,
    )
    return dict(line.split(" ", 1) for line in res.stdout.splitlines() if " " in line)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m elastic_slurm.cluster.chroot FLAVOUR [--rebuild]``: build a chroot (root)."""
    import argparse
    import sys

    p = argparse.ArgumentParser(prog="python -m elastic_slurm.cluster.chroot")
    p.add_argument("flavour", choices=[n for n, f in FLAVOURS.items() if f.in_chroot])
    p.add_argument("--rebuild", action="store_true")
    p.add_argument("--base", type=Path, default=CHROOTS_DIR)
    args = p.parse_args(argv)
    try:
        build(args.flavour, args.base, rebuild=args.rebuild)
    except ClusterError as exc:
        print(f"elastic-slurm: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
