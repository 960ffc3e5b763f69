"""Fuzz tests: every input surface of :mod:`tests.fuzz.surfaces` against a few hundred cases.

Readers log warnings for what they refuse or skip; the fuzz tests silence them (thousands of
lines otherwise). The protocol surface's temporary job directory is removed at the end.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from .surfaces import _PROTOCOL


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


@pytest.fixture(scope="session", autouse=True)
def _protocol_cleanup() -> Iterator[None]:
    yield
    for proto in _PROTOCOL:
        proto.close()
