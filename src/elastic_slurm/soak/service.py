"""The soak's controller as an unprivileged service user (``controller.privilege: service``).

As the shipped systemd unit runs it: as its own user, with no capability and no new
privileges (``setpriv``), its journal and its spool in a directory of that user only. The
soak's site config is copied with ``controller.privilege: service`` and ``controller.spool``
set; the jobs (the soak's own, submitted as root) learn at registration and from their orders
that they do the Slurm side of their resizes themselves. The user gets Slurm operator rights
(:func:`make_operator`), as ``docs/install-site.md`` says a site gives them when it stretches
time limits after shrinks (the default): the soak's trace jobs have tight limits.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from elastic_slurm import yamlsafe
from elastic_slurm.cluster.users import SEARCH, closed_to_others, ensure_user
from elastic_slurm.errors import ClusterError, InvalidRequest


@dataclass(frozen=True)
class ServiceController:
    """Where a service controller's files go, and how it is started.

    Parameters
    ----------
    site_file
        The soak's site config with ``privilege: service`` (readable by every user).
    journal
        Its journal, in its own directory.
    run_as
        The command prefix that runs it as the user.
    env
        Its environment on top of the soak's: the user's ``HOME``, ``USER``, and a cache it
        may write (``XDG_CACHE_HOME``: Slurm's probe).
    """

    site_file: Path
    journal: Path
    run_as: tuple[str, ...]
    env: dict[str, str]


def prepare(user: str, site_file: Path, out_dir: Path) -> ServiceController:
    """Make ``user`` (if missing), its state directory under ``out_dir``, and its site config.

    Raises
    ------
    InvalidRequest
        No ``setpriv``, or this Python cannot be run by other users (a venv made from an
        interpreter in a private directory: run the soak with one every user can run).
    elastic_slurm.errors.ClusterError
        ``useradd`` failed.
    """
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise InvalidRequest("no setpriv (util-linux) to run the controller as another user")
    blocked = closed_to_others(Path(sys.executable), SEARCH)
    if blocked is not None:
        raise InvalidRequest(
            f"--service-user: {sys.executable} cannot be run by other users ({blocked} is "
            "closed): run the soak with a Python every user can run"
        )
    who = ensure_user(user)
    state = out_dir / "controller"
    state.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chown(state, who.pw_uid, who.pw_gid)
    raw = yamlsafe.load_file(site_file) or {}
    raw.setdefault("controller", {}).update(privilege="service", spool=str(state / "jobs"))
    raw.setdefault("name", site_file.stem)
    copy = out_dir / "site.yaml"
    copy.write_text(yaml.safe_dump(raw, sort_keys=False))
    copy.chmod(0o644)
    run_as = (
        setpriv,
        f"--reuid={who.pw_uid}",
        f"--regid={who.pw_gid}",
        "--init-groups",
        "--inh-caps=-all",
        "--bounding-set=-all",
        "--no-new-privs",
        "--",
    )
    env = {
        "HOME": who.pw_dir,
        "USER": user,
        "LOGNAME": user,
        "XDG_CACHE_HOME": str(state / "cache"),
    }
    return ServiceController(copy, state / "journal.sqlite", run_as, env)


def make_operator(user: str, slurm_conf: Path) -> None:
    """Give ``user`` Slurm operator rights in the soak cluster's accounting (``sacctmgr``).

    Raises
    ------
    ClusterError
        ``sacctmgr`` refused; the message quotes it.
    """
    env = {**os.environ, "SLURM_CONF": str(slurm_conf)}
    for argv in (
        ["sacctmgr", "-i", "add", "user", user, "account=root"],
        ["sacctmgr", "-i", "modify", "user", user, "set", "adminlevel=operator"],
    ):
        res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        said = res.stdout + res.stderr
        already = "Nothing new added" in said or "Nothing modified" in said
        if res.returncode != 0 and not already:
            raise ClusterError(f"{' '.join(argv)} failed: {(res.stderr or res.stdout).strip()}")
