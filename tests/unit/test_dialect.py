"""The Slurm dialect: version parsing and the per-version answers."""

from __future__ import annotations

import json

import pytest

from elastic_slurm.adapter.dialect import (
    Dialect,
    dialect_for,
    observed_json_shape,
    parse_version,
    probe_dialect,
    version_from_json_meta,
)
from elastic_slurm.adapter.transport.base import Completed, Transport
from elastic_slurm.errors import SlurmCommandError


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("slurm-wlm 22.05.8\n", (22, 5, 8)),
        ("slurm-wlm 24.11.5", (24, 11, 5)),
        ("slurm 26.05.5", (26, 5, 5)),
        ("slurm 24.11.0-0rc1", (24, 11, 0)),
    ],
)
def test_parse_version(text: str, version: tuple[int, int, int]) -> None:
    assert parse_version(text) == version


def test_parse_version_rejects_text_without_version() -> None:
    with pytest.raises(ValueError, match="no Slurm version"):
        parse_version("scontrol: command not found")


def test_json_meta_version() -> None:
    meta = {"meta": {"slurm": {"version": {"major": "26", "minor": "05", "micro": "5"}}}}
    assert version_from_json_meta(meta) == (26, 5, 5)
    assert version_from_json_meta({"meta": {}}) is None
    assert version_from_json_meta({}) is None


def test_2205_answers() -> None:
    d = dialect_for("slurm-wlm 22.05.8")
    assert d.series == "22.05" and d.release == "22.05.8"
    assert d.squeue_json and not d.scontrol_json
    assert not d.json_numbers_wrapped and not d.job_state_is_list
    assert d.resizes_allowed("accounting_storage/none") == 1
    assert d.resizes_allowed("accounting_storage/slurmdbd") is None
    assert d.reconfigure_after_nodelist_shrink("select/linear")
    assert not d.reconfigure_after_nodelist_shrink("select/cons_tres")


@pytest.mark.parametrize("text", ["slurm-wlm 24.11.5", "slurm 26.05.5"])
def test_newer_answers(text: str) -> None:
    d = dialect_for(text)
    assert d.scontrol_json and d.json_numbers_wrapped and d.job_state_is_list
    assert d.resizes_allowed("accounting_storage/none") is None
    assert not d.reconfigure_after_nodelist_shrink("select/linear")


def test_numbers_and_states() -> None:
    d = Dialect((24, 11, 5))
    assert d.numeric({"set": True, "infinite": False, "number": 4}) == 4
    assert d.numeric({"set": True, "infinite": True, "number": 0}) is None
    assert d.job_states(["RUNNING"]) == ("RUNNING",)
    assert Dialect((22, 5, 8)).job_states("RUNNING") == ("RUNNING",)


def test_transient_update_error() -> None:
    d = Dialect((22, 5, 8))
    assert d.update_error_is_transient(
        "Job update not available right now, the DB index is being set, try again in a bit"
    )
    assert not d.update_error_is_transient("Invalid job id specified")


def test_observed_json_shape() -> None:
    new = {"jobs": [{"job_state": ["RUNNING"], "node_count": {"set": True, "number": 2}}]}
    old = {"jobs": [{"job_state": "RUNNING", "node_count": 2}]}
    assert observed_json_shape(json.dumps(new)) == {
        "numbers_wrapped": True,
        "job_state_is_list": True,
    }
    assert observed_json_shape(json.dumps(old)) == {
        "numbers_wrapped": False,
        "job_state_is_list": False,
    }
    assert observed_json_shape('{"jobs": []}') == {}
    with pytest.raises(ValueError):
        observed_json_shape('{"errors": []}')


class _Fake(Transport):
    def __init__(self, rc: int, out: str) -> None:
        self.rc, self.out = rc, out

    def run(self, argv, *, timeout_s=None, env=None, input_text=None):  # type: ignore[no-untyped-def]
        return Completed(tuple(argv), self.rc, self.out, "boom" if self.rc else "", 0.01)


def test_probe_dialect() -> None:
    assert probe_dialect(_Fake(0, "slurm 26.05.5\n")).version == (26, 5, 5)
    with pytest.raises(SlurmCommandError):
        probe_dialect(_Fake(1, ""))
