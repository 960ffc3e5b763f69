"""The controller's logs: a level, and text or JSON lines (``python-json-logger``) on stderr.

``controller run`` calls :func:`setup_logging` once, from ``--log-level``/``--log-format`` or
the site config's ``controller.log_level``/``log_format``. In JSON, each record is one object a
line with ``time`` (ISO 8601, UTC), ``level``, ``logger``, ``message`` and the record's extra
fields (``job_id``, ``seq``, ...: pass them with ``log.warning(..., extra={"job_id": 7})``); a
traceback goes in ``exc_info``. A service manager (journald) adds its own time stamps to text
lines, and a log collector parses the JSON ones.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import IO

#: The levels an operator can choose, as the site config spells them.
LEVELS = ("debug", "info", "warning", "error")
#: The formats an operator can choose.
FORMATS = ("text", "json")

_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def formatter(fmt: str) -> logging.Formatter:
    """The formatter of ``fmt`` (``text`` or ``json``).

    Raises
    ------
    ValueError
        ``fmt`` is not one of :data:`FORMATS`.
    """
    if fmt == "text":
        return logging.Formatter(_TEXT)
    if fmt == "json":
        from pythonjsonlogger.json import JsonFormatter  # only the controller's service needs it

        out = JsonFormatter(
            "%(asctime)s %(levelname)s %(name)s %(message)s",
            rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
            datefmt="%Y-%m-%dT%H:%M:%SZ",
        )
        out.converter = time.gmtime  # type: ignore[assignment]
        return out
    raise ValueError(f"log format {fmt!r}: choose one of {', '.join(FORMATS)}")


def setup_logging(level: str = "info", fmt: str = "text", stream: IO[str] | None = None) -> None:
    """Send elastic-slurm's logs at ``level`` and above to ``stream`` (stderr) as ``fmt``.

    Replaces a handler an earlier call installed (calling it twice does not log twice).

    Raises
    ------
    ValueError
        ``level`` is not one of :data:`LEVELS`, or ``fmt`` not one of :data:`FORMATS`.
    """
    if level not in LEVELS:
        raise ValueError(f"log level {level!r}: choose one of {', '.join(LEVELS)}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(formatter(fmt))
    handler.set_name("elastic-slurm")
    logger = logging.getLogger("elastic_slurm")
    for old in [h for h in logger.handlers if h.get_name() == "elastic-slurm"]:
        logger.removeHandler(old)
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False
