"""Install the Debian packages the local cluster needs, when they are missing.

Package scripts must not start services behind our back (``cluster down`` could not stop them),
so while apt runs, a ``policy-rc.d`` that forbids starting services is put in place if the
machine has none, and removed afterwards.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from elastic_slurm.adapter.transport.base import Transport
from elastic_slurm.errors import ClusterError

log = logging.getLogger(__name__)

POLICY_RC_D = Path("/usr/sbin/policy-rc.d")
_POLICY_TEXT = (
    "#!/bin/sh\n# elastic-slurm: no service starts during package installation\nexit 101\n"
)


def missing_packages(transport: Transport, packages: Sequence[str]) -> list[str]:
    """The subset of ``packages`` that dpkg does not report as installed."""
    res = transport.run(
        ["dpkg-query", "-W", "-f=${Package} ${db:Status-Abbrev}\n", *packages], timeout_s=30
    )
    installed = set()
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1].startswith("ii"):
            installed.add(parts[0].split(":")[0])
    return [p for p in packages if p not in installed]


def ensure_packages(transport: Transport, packages: Sequence[str]) -> list[str]:
    """Install whatever of ``packages`` is missing; return what was installed.

    Raises
    ------
    ClusterError
        apt failed; the message quotes its last lines.
    """
    missing = missing_packages(transport, packages)
    if not missing:
        return []
    log.info("installing %s from Debian's packages", " ".join(missing))
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    placed = False
    if not POLICY_RC_D.exists():
        POLICY_RC_D.write_text(_POLICY_TEXT)
        os.chmod(POLICY_RC_D, 0o755)
        placed = True
    try:
        update = transport.run(["apt-get", "update", "-q"], timeout_s=600, env=env)
        if update.returncode != 0:
            raise ClusterError(f"apt-get update failed:\n{update.stderr.strip()[-2000:]}")
        res = transport.run(
            ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing],
            timeout_s=1800,
            env=env,
        )
        if res.returncode != 0:
            raise ClusterError(
                f"apt-get install {' '.join(missing)} failed:\n{res.stderr.strip()[-2000:]}"
            )
    finally:
        if placed:
            POLICY_RC_D.unlink(missing_ok=True)
    return missing


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m elastic_slurm.cluster.packages PKG...``: install what is missing (root)."""
    import sys

    from elastic_slurm.adapter.transport.local import LocalTransport

    packages = list(sys.argv[1:] if argv is None else argv)
    try:
        installed = ensure_packages(LocalTransport(), packages)
    except ClusterError as exc:
        print(f"elastic-slurm: error: {exc}", file=sys.stderr)
        return 2
    print(f"installed: {' '.join(installed)}" if installed else "all installed already")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
