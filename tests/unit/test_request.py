"""``ElasticRequest`` validation and ``initial_nodes`` (``model/request.py``), and job specs
(``jobspec.py``): YAML read as Slurm reads the values, every number bounded."""

from __future__ import annotations

import re
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from elastic_slurm.errors import ConfigError, ElasticSlurmError, InvalidRequest
from elastic_slurm.jobspec import load_spec
from elastic_slurm.model.request import ElasticRequest, JobKind


def test_defaults() -> None:
    req = ElasticRequest(program=("app",))
    assert (req.kind, req.nodes_min, req.nodes_max, req.nodes_start) == (JobKind.RIGID, 1, 1, None)
    assert (req.walltime, req.ntasks_per_node, req.job_name) == (
        timedelta(minutes=30),
        1,
        "elastic",
    )
    assert (req.partition, req.extra_env, req.initial_nodes) == (None, (), 1)


@pytest.mark.parametrize(
    ("kind", "resizable"),
    [
        (JobKind.RIGID, False),
        (JobKind.MOLDABLE, False),
        (JobKind.MALLEABLE, True),
        (JobKind.EVOLVING, True),
    ],
)
def test_kind_resizable(kind: JobKind, resizable: bool) -> None:
    assert kind.resizable is resizable
    assert JobKind(kind.value) is kind


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"program": ()}, "the job has no program to run: give a command"),
        ({"nodes_min": 0, "nodes_max": 0}, "nodes_min must be at least 1, got 0"),
        ({"nodes_min": -3, "nodes_max": 2}, "nodes_min must be at least 1, got -3"),
        (
            {"kind": JobKind.MOLDABLE, "nodes_min": 5, "nodes_max": 3},
            "impossible node range 5-3: the minimum (5) is larger than the maximum (3); "
            "swap them or use --nodes=MIN-MAX with MIN <= MAX",
        ),
        (
            {"nodes_min": 2},  # rigid, and nodes_max defaults to 1
            "impossible node range 2-1: the minimum (2) is larger than the maximum (1)",
        ),
        (
            {"kind": JobKind.RIGID, "nodes_min": 2, "nodes_max": 4},
            "a rigid job has one size, got the range 2-4: give one node count, or choose the "
            "moldable, malleable or evolving kind",
        ),
        (
            {"kind": JobKind.MALLEABLE, "nodes_min": 2, "nodes_max": 4, "nodes_start": 5},
            "start size 5 is outside the node range 2-4",
        ),
        (
            {"kind": JobKind.MALLEABLE, "nodes_min": 2, "nodes_max": 4, "nodes_start": 1},
            "start size 1 is outside the node range 2-4",
        ),
        (
            {"kind": JobKind.EVOLVING, "nodes_min": 2, "nodes_max": 4, "nodes_start": 0},
            "start size 0 is outside the node range 2-4",
        ),
        ({"ntasks_per_node": 0}, "ntasks_per_node must be at least 1, got 0"),
        ({"ntasks_per_node": -2}, "ntasks_per_node must be at least 1, got -2"),
        ({"walltime": timedelta(0)}, "the time limit must be positive, got 0:00:00"),
        (
            {"walltime": timedelta(minutes=-5)},
            "the time limit must be positive, got -1 day, 23:55:00",
        ),
        # issue 14: every number bounded, grace periods finite
        ({"grace_period_s": float("inf")}, "the grace period must be a positive, finite"),
        ({"grace_period_s": float("nan")}, "the grace period must be a positive, finite"),
        ({"grace_period_s": 1e9}, "the grace period must be a positive, finite"),
        ({"nodes_max": 10**7, "nodes_min": 10**7}, "nodes_max 10000000 is above 1000000"),
        ({"ntasks_per_node": 10**6}, "ntasks_per_node 1000000 is above 65534"),
        ({"walltime": timedelta(days=400)}, "is longer than 365 days"),
        ({"array": "0-9999999"}, "task ids go up to 4000000 at most"),
        ({"array": "0-3", "array_max_running": 10**9}, "array_max_running needs an array"),
        ({"job_name": "a\n#SBATCH --uid=0"}, "holds a control character"),
        ({"program": ("a\0b",)}, "NUL character"),
        ({"nodes_min": "2", "nodes_max": 2}, "nodes_min must be an integer, got '2'"),
        ({"nodes_min": True, "nodes_max": True}, "nodes_min must be an integer, got True"),
    ],
)
def test_invalid_requests(fields: dict[str, Any], message: str) -> None:
    args = {"program": ("app",), **fields}
    with pytest.raises(InvalidRequest, match=re.escape(message)) as info:
        ElasticRequest(**args)
    assert isinstance(info.value, ElasticSlurmError)


@pytest.mark.parametrize(
    ("fields", "initial"),
    [
        ({}, 1),
        ({"nodes_min": 3, "nodes_max": 3}, 3),
        ({"kind": JobKind.MOLDABLE, "nodes_min": 2, "nodes_max": 4}, 2),
        ({"kind": JobKind.MALLEABLE, "nodes_min": 2, "nodes_max": 4}, 2),
        ({"kind": JobKind.MALLEABLE, "nodes_min": 2, "nodes_max": 4, "nodes_start": 3}, 3),
        ({"kind": JobKind.MALLEABLE, "nodes_min": 2, "nodes_max": 4, "nodes_start": 4}, 4),
        ({"kind": JobKind.EVOLVING, "nodes_min": 1, "nodes_max": 8, "nodes_start": 1}, 1),
        ({"kind": JobKind.RIGID, "nodes_min": 2, "nodes_max": 2, "nodes_start": 2}, 2),
    ],
)
def test_initial_nodes(fields: dict[str, Any], initial: int) -> None:
    assert ElasticRequest(program=("app",), **fields).initial_nodes == initial


def test_request_is_frozen() -> None:
    req = ElasticRequest(program=("app",))
    with pytest.raises(AttributeError):
        req.nodes_max = 4  # type: ignore[misc]


# ---------------------------------------------------------------- job specs (jobspec.py)


def _job(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "job.yaml"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def test_yaml_11_pitfalls_are_read_as_slurm_reads_them(tmp_path: Path) -> None:
    """Unquoted ``1:00:00`` is one hour (YAML 1.1: 60 h), ``010`` is ten (YAML 1.1: 8)."""
    text = "program: [app]\nnodes: 010\ntime: 1:00:00\njob_name: no\n"
    spec = load_spec(_job(tmp_path, text), {})
    req = spec.request()
    assert (req.nodes_min, req.nodes_max) == (10, 10)
    assert req.walltime == timedelta(hours=1)
    assert req.job_name == "no"  # YAML 1.1: False, which pydantic refused


@pytest.mark.parametrize(
    ("text", "minutes"),
    [("010", 10), ("1:30", 1.5), ("1-0", 1440), ("2:00:00", 120), ("'90'", 90)],
)
def test_time_values_as_slurm(tmp_path: Path, text: str, minutes: float) -> None:
    spec = load_spec(_job(tmp_path, f"program: [app]\ntime: {text}\n"), {})
    assert spec.request().walltime == timedelta(minutes=minutes)


def test_an_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    """Six levels of ten aliases under ``time``: 10^6 strings that ``str()`` used to build
    (1.3 s and 300 MB; nine levels hang ``submit``); now refused at the first anchor."""
    bomb = ["  - &a0 [x, x, x, x, x, x, x, x, x, x]"]
    bomb += [f"  - &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 7)]
    text = "program: [app]\ntime:\n" + "\n".join(bomb) + "\n"
    started = time.monotonic()
    with pytest.raises(ConfigError, match=r"job.yaml:3:5: not valid YAML: anchors and aliases"):
        load_spec(_job(tmp_path, text), {})
    assert time.monotonic() - started < 1.0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"program: [caf\xe9]\n", r"job.yaml:1: not UTF-8: byte 0xe9 at offset 13"),
        (b"program: " + b"[" * 10_000, r"nested deeper than 16 levels"),
        (b"program: [app]\nnodes: " + b"9" * 5000 + b"\n", r"integer of 5000 digits"),
    ],
)
def test_bad_job_files_are_one_line_errors(tmp_path: Path, body: bytes, message: str) -> None:
    started = time.monotonic()
    with pytest.raises(ConfigError, match=message) as info:
        load_spec(_job(tmp_path, body), {})
    assert time.monotonic() - started < 1.0
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"grace_period_s": float("inf")}, "grace_period_s: Input should be a finite number"),
        ({"grace_period_s": float("nan")}, "grace_period_s: Input should be a finite number"),
        ({"grace_period_s": 1e9}, "grace_period_s: Input should be less than or equal to"),
        ({"nodes": "9" * 40}, "nodes: String should have at most 30 characters"),
        ({"nodes": "2000000"}, "nodes: Value error, node count '2000000' is above 1000000"),
        ({"nodes": "\u0663"}, "nodes: Value error, node count"),  # an Arabic-Indic 3
        ({"time": "9999999999"}, "time: Value error, time limit '9999999999' is longer"),
        ({"time": "1:00:00:00"}, "time: Value error, time limit '1:00:00:00' is not"),
        ({"start_nodes": 10**12}, "start_nodes: Input should be less than or equal to"),
        ({"job_name": "x\ny"}, "job_name: Value error, holds a control character"),
    ],
)
def test_spec_bounds_name_the_key(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"the command line: {message}")):
        load_spec(None, {"program": ["app"], **overrides})


def test_grace_period_above_the_site_cap_is_refused() -> None:
    spec = load_spec(
        None, {"program": ["app"], "kind": "malleable", "nodes": "1-2", "grace_period_s": 900.0}
    )
    assert spec.request(max_grace_period_s=3600).grace_period_s == 900.0
    with pytest.raises(InvalidRequest, match=r"grace period 900 s is longer than this site"):
        spec.request(max_grace_period_s=600)


@pytest.mark.parametrize("array", ["0-3%\u00b2", "0-3%" + "9" * 5000])
def test_array_limit_is_decimal_and_bounded(array: str) -> None:
    spec = load_spec(None, {"program": ["app"], "array": array[:1000]})
    with pytest.raises(InvalidRequest, match=r"the %K limit must be a number"):
        spec.request()


@pytest.mark.parametrize("speedup", ["amdahl:nan", "downey:inf:0.5", "downey:1e300:2"])
def test_speedup_values_are_finite(speedup: str) -> None:
    spec = load_spec(None, {"program": ["app"], "speedup": speedup})
    with pytest.raises(InvalidRequest, match=r"is not a finite number"):
        spec.request()


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["--grace-period", "inf"], "grace_period_s: Input should be a finite number"),
        (
            ["--kind", "malleable", "-N", "1-2", "--grace-period", "99999"],
            "grace period 99999 s is longer than this site allows",
        ),
    ],
)
def test_submit_refuses_unbounded_grace_periods_before_slurm(
    words: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``submit --grace-period inf`` froze every decision (issue 14); now one line, exit 255."""
    from elastic_slurm.cli.main import main

    # 255: an error in the command line, as sbatch's; nothing reached Slurm
    assert main(["--site", "local", "submit", *words, "--", "/bin/true"]) == 255
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
