"""Job specs, as YAML files and as option dicts, and ElasticRequest as the API builds it:
accepted (a valid request) or ConfigError / InvalidRequest with a message; never another
exception, never a hang."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given

from .surfaces import JOBSPEC_DICT, JOBSPEC_YAML, REQUEST, check, suite_settings


@suite_settings()
@given(JOBSPEC_YAML.strategy)
@example(b"program: [app]\ntime: 1:00:00\nnodes: 010\n")
@example(b"a: &a [x, x]\nb: [*a, *a]\nprogram: [app]\n")
@example(b"program: [app]\nenv: " + b"[" * 5000 + b"\n")
@example(b"program: [caf\xe9]\n")
@example(b"program: [app]\nnodes: " + b"9" * 5000 + b"\n")
def test_job_files(data: bytes) -> None:
    check(JOBSPEC_YAML, data)


@suite_settings()
@given(JOBSPEC_DICT.strategy)
@example({"program": ["app"], "grace_period_s": float("inf")})
@example({"program": ["app"], "nodes": "\u0663"})
@example({"program": ["app"], "time": "9" * 5000})
@example({"program": ["app"], "array": "0-3%" + "9" * 900})
def test_job_options(overrides: dict[str, Any]) -> None:
    check(JOBSPEC_DICT, overrides)


@suite_settings()
@given(REQUEST.strategy)
@example({"program": ("app",), "nodes_min": float("inf"), "nodes_max": float("inf")})
@example({"program": ("app",), "ntasks_per_node": 2**31})
@example({"program": ("app",), "extra_env": (("A",),)})
@example({"program": ("app",), "grace_period_s": float("nan")})
def test_requests(kwargs: dict[str, Any]) -> None:
    check(REQUEST, kwargs)
