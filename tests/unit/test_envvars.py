"""The one reader of ``ELASTIC_SLURM_*`` variables: ``envvars.py``."""

from __future__ import annotations

import pytest

from elastic_slurm import envvars


@pytest.mark.parametrize(
    ("env", "default", "expected"),
    [
        ({}, None, None),
        ({}, "d", "d"),
        ({"ELASTIC_SLURM_JOIN": ""}, "d", "d"),  # empty counts as unset
        ({"ELASTIC_SLURM_JOIN": "spawn"}, "d", "spawn"),
        ({"ELASTIC_SLURM_JOIN": " x "}, None, " x "),
        ({"JOIN": "spawn"}, "d", "d"),  # the prefix is required
    ],
)
def test_get_str(env: dict[str, str], default: str | None, expected: str | None) -> None:
    assert envvars.get_str("JOIN", default, env) == expected


def test_get_str_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELASTIC_SLURM_TEST_ONLY_VAR", "from environ")
    assert envvars.get_str("TEST_ONLY_VAR") == "from environ"
    assert envvars.get_str("TEST_ONLY_VAR", None, {}) is None  # an explicit mapping wins


@pytest.mark.parametrize(
    ("raw", "expected"), [(None, 7), ("", 7), ("3", 3), ("-2", -2), (" 12 ", 12)]
)
def test_get_int(raw: str | None, expected: int) -> None:
    env = {} if raw is None else {"ELASTIC_SLURM_N": raw}
    assert envvars.get_int("N", 7, env) == expected


@pytest.mark.parametrize("raw", ["three", "1.5", "0x10"])
def test_get_int_malformed(raw: str) -> None:
    with pytest.raises(ValueError) as info:
        envvars.get_int("N", 7, {"ELASTIC_SLURM_N": raw})
    assert str(info.value) == f"ELASTIC_SLURM_N={raw!r} is not an integer"


@pytest.mark.parametrize(
    ("raw", "expected"), [(None, 1.5), ("", 1.5), ("60", 60.0), ("0.25", 0.25), ("1e3", 1000.0)]
)
def test_get_float(raw: str | None, expected: float) -> None:
    env = {} if raw is None else {"ELASTIC_SLURM_RESIZE_TIMEOUT_S": raw}
    assert envvars.get_float("RESIZE_TIMEOUT_S", 1.5, env) == expected


@pytest.mark.parametrize("raw", ["soon", "1,5", "60s"])
def test_get_float_malformed(raw: str) -> None:
    with pytest.raises(ValueError) as info:
        envvars.get_float("RESIZE_TIMEOUT_S", 1.0, {"ELASTIC_SLURM_RESIZE_TIMEOUT_S": raw})
    assert str(info.value) == f"ELASTIC_SLURM_RESIZE_TIMEOUT_S={raw!r} is not a number"


def test_names() -> None:
    assert envvars.names(job_id=4, job_dir="/w/.elastic-slurm/job-4", launch_host="n1") == {
        "ELASTIC_SLURM_JOB_ID": "4",
        "ELASTIC_SLURM_JOB_DIR": "/w/.elastic-slurm/job-4",
        "ELASTIC_SLURM_LAUNCH_HOST": "n1",
    }
    assert envvars.names() == {}
