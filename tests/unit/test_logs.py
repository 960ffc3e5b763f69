"""The controller as a service: its logs (``controller/logs.py``) and where its journal is."""

from __future__ import annotations

import argparse
import io
import json
import logging
from pathlib import Path

import pytest

from elastic_slurm.cli import controller as cli_controller
from elastic_slurm.config.schema import ControllerConfig, SiteConfig
from elastic_slurm.controller.logs import setup_logging


@pytest.fixture(autouse=True)
def _restore_logging():  # noqa: ANN202
    logger = logging.getLogger("elastic_slurm")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = saved[0], saved[1], saved[2]


def test_json_logs_are_one_object_a_line_with_extra_fields() -> None:
    out = io.StringIO()
    setup_logging("info", "json", out)
    log = logging.getLogger("elastic_slurm.controller.daemon")
    log.warning("job %d left out of this cycle: %s", 7, "bad file", extra={"job_id": 7})
    log.debug("not shown at info")
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("cycle failed")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert {k: first[k] for k in ("level", "logger", "message", "job_id")} == {
        "level": "WARNING",
        "logger": "elastic_slurm.controller.daemon",
        "message": "job 7 left out of this cycle: bad file",
        "job_id": 7,
    }
    assert first["time"].endswith("Z") and "T" in first["time"]
    assert "ValueError: boom" in second["exc_info"]


def test_text_logs_and_levels() -> None:
    out = io.StringIO()
    setup_logging("warning", "text", out)
    setup_logging("warning", "text", out)  # twice: still one handler
    log = logging.getLogger("elastic_slurm.x")
    log.info("quiet")
    log.warning("loud")
    assert out.getvalue().count("loud") == 1 and "quiet" not in out.getvalue()
    assert " WARNING elastic_slurm.x: loud" in out.getvalue()


def test_unknown_level_or_format_is_refused() -> None:
    with pytest.raises(ValueError, match="log level 'loud'"):
        setup_logging("loud", "text")
    with pytest.raises(ValueError, match="log format 'xml'"):
        setup_logging("info", "xml")


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli_controller.add_parser(parser.add_subparsers())
    return parser.parse_args(["controller", "run", *argv])


def test_the_journal_is_the_site_s_unless_given(tmp_path: Path) -> None:
    site = SiteConfig(name="x", controller=ControllerConfig(journal=tmp_path / "j.sqlite"))
    assert cli_controller.journal_path(_parse(), site) == tmp_path / "j.sqlite"
    given = _parse("--journal", str(tmp_path / "mine.sqlite"))
    assert cli_controller.journal_path(given, site) == tmp_path / "mine.sqlite"
    args = _parse("--log-level", "debug", "--log-format", "json")
    assert (args.log_level, args.log_format) == ("debug", "json")
    with pytest.raises(SystemExit):
        _parse("--log-format", "xml")
