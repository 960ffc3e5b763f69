"""Slurm's probe is cached per site; a cache this user cannot write is a warning, not a failure.

A controller run as a service user may inherit a HOME it cannot write (root's): it must start
anyway, probing each time (seen when the soak first ran the controller as another user).
"""

from __future__ import annotations

import json
import logging

import pytest
from probed import GOOD

from elastic_slurm.adapter import capabilities
from elastic_slurm.adapter.capabilities import Capabilities
from elastic_slurm.adapter.transport.local import LocalTransport


@pytest.fixture()
def probes(monkeypatch) -> list[str]:
    calls: list[str] = []

    def probe(transport, *, preference="auto", test_pmix=False):  # type: ignore[no-untyped-def]
        calls.append(preference)
        return GOOD

    monkeypatch.setattr(capabilities, "probe", probe)
    return calls


def test_a_fresh_probe_is_cached_in_its_own_file(tmp_path, monkeypatch, probes) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    caps = capabilities.cached_probe(LocalTransport(), "mysite", refresh=True)
    assert caps == GOOD and probes == ["auto"]
    path = capabilities.cache_path("mysite")
    assert path == tmp_path / "elastic-slurm" / "mysite.json"
    assert Capabilities.from_json(json.loads(path.read_text())) == GOOD
    assert [p.name for p in path.parent.iterdir()] == ["mysite.json"]  # no temporary left


def test_a_cache_that_cannot_be_written_is_a_warning(tmp_path, monkeypatch, probes, caplog):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # mkdir below a file fails
    with caplog.at_level(logging.WARNING):
        caps = capabilities.cached_probe(LocalTransport(), "mysite")
    assert caps == GOOD and probes == ["auto"]
    assert "probe is not cached" in caplog.text and "XDG_CACHE_HOME" in caplog.text
