"""A job's Python needs none of the controller's service packages.

Jobs run ``python -m elastic_slurm run``; on a flavour's chroot their Python has Debian's
packages only, without the protocol server (cheroot), Prometheus' client or the JSON logger.
"""

from __future__ import annotations

import subprocess
import sys

BLOCKED = ("cheroot", "prometheus_client", "pythonjsonlogger")

PROGRAM = f"""
import sys
for name in {BLOCKED!r}:
    sys.modules[name] = None  # importing it raises ImportError
from elastic_slurm.cli.main import main
from elastic_slurm.controller import metrics
metrics.cycle(0.1, "ok")
metrics.resize("expand", "done", {{"grant": 0.4}})
metrics.refusal(401)
try:
    metrics.serve("127.0.0.1:0")
except OSError as exc:
    print("serve:", exc)
print("imported")
"""


def test_the_entry_point_imports_without_the_controller_s_service_packages() -> None:
    res = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60, check=False
    )
    assert res.returncode == 0, res.stderr
    assert "imported" in res.stdout
    assert "prometheus_client is not installed" in res.stdout
