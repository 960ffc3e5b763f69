"""Requests the application leaves for its launcher are checked before they are followed.

A restart request that cannot be used (a damaged ``restart.json``) stops the launcher with one
line naming the file and the field, not a traceback; a successor request that cannot be used
is ignored with one warning. Both are removed once read. Marked ``mpi``: a real ``mpirun``
runs the application, no cluster.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
from pathlib import Path

import pytest

from elastic_slurm.mpi_runtime import handover
from elastic_slurm.mpi_runtime.launcher import _Generation
from elastic_slurm.mpi_runtime.local_launcher import LocalLauncher, local_env
from elastic_slurm.protocol.jobdir import JobDir

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(120)]

APP = """
import json, os, pathlib
job = pathlib.Path(os.environ["ELASTIC_SLURM_JOB_DIR"])
request = {"seq": 1, "action": "grow", "nodes": ["local1"], "launch": 0}
(job / "restart.json").write_text(json.dumps(request))
"""


def _launcher(tmp_path: Path, program: list[str]) -> LocalLauncher:
    jobdir = JobDir(tmp_path / "job")
    jobdir.create()
    env = local_env(os.environ, point_timeout_s=10.0)
    return LocalLauncher(program, ranks=1, jobdir=jobdir, env=env, timeout_s=60)


def test_an_unusable_restart_request_stops_the_launcher_with_one_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    app = tmp_path / "app.py"
    app.write_text(APP)
    launcher = _launcher(tmp_path, [str(app)])
    assert launcher.run() == 1
    err = capfd.readouterr().err
    assert "the application's restart request is unusable" in err, err
    assert "restart.json: action must be expand or shrink, got 'grow'" in err, err
    assert "Traceback" not in err, err
    assert not launcher.jobdir.restart_path.exists()


def test_an_unusable_successor_request_is_ignored_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    launcher = _launcher(tmp_path, ["app.py"])
    current = _Generation(subprocess.Popen(["sleep", "30"]), ("local1",), 1, [], time.monotonic())
    request = launcher.jobdir.path / handover.REQUEST
    try:
        with caplog.at_level(logging.WARNING, logger=handover.__name__):
            for _ in range(3):  # the launcher's loop looks every 50 ms
                request.write_text(json.dumps({"seq": "2", "action": "expand", "launch": 1}))
                assert launcher._tend_successor(current, None) is None
                assert not request.exists()
        warnings = [r for r in caplog.records if "ignored the successor request" in r.message]
        assert len(warnings) == 1, caplog.text
        assert "successor.json: seq must be an integer" in warnings[0].message
    finally:
        current.proc.kill()
        current.proc.wait()
