"""``ElasticRequest`` validation and ``initial_nodes``: ``model/request.py``."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest

from elastic_slurm.errors import ElasticSlurmError, InvalidRequest
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
