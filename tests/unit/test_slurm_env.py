"""A job's Slurm variables after a resize: ``mpi_runtime/slurm_env.py``."""

from __future__ import annotations

import pytest

from elastic_slurm.mpi_runtime.slurm_env import (
    STALE,
    cpus_per_node_expr,
    resized_env,
    without_allocation_size,
)

OLD = {
    "SLURM_JOB_ID": "4",
    "SLURM_NNODES": "2",
    "SLURM_JOB_NUM_NODES": "2",
    "SLURM_NODELIST": "n[1-2]",
    "SLURM_JOB_NODELIST": "n[1-2]",
    "SLURM_NTASKS": "2",
    "SLURM_NPROCS": "2",
    "SLURM_TASKS_PER_NODE": "1(x2)",
    "SLURM_JOB_CPUS_PER_NODE": "1(x2)",
    "HOME": "/root",
}


@pytest.mark.parametrize(
    ("cpus", "expr"),
    [
        ([], ""),
        ([1], "1"),
        ([1, 1], "1(x2)"),
        ([1, 1, 1, 1], "1(x4)"),
        ([1, 1, 2], "1(x2),2"),
        ([2, 1, 1, 2], "2,1(x2),2"),
        ([4, 8, 4], "4,8,4"),  # only neighbours are merged
        ((3, 3), "3(x2)"),
    ],
)
def test_cpus_per_node_expr(cpus: list[int], expr: str) -> None:
    assert cpus_per_node_expr(cpus) == expr


def test_resized_env_without_tasks() -> None:
    env = resized_env(OLD, ["n1", "n2", "n3"], 1)
    assert env == {
        "SLURM_JOB_ID": "4",
        "HOME": "/root",
        "SLURM_NODELIST": "n[1-3]",
        "SLURM_JOB_NODELIST": "n[1-3]",
        "SLURM_NNODES": "3",
        "SLURM_JOB_NUM_NODES": "3",
        "SLURM_JOB_CPUS_PER_NODE": "1(x3)",
    }
    assert OLD["SLURM_NNODES"] == "2"  # the input is not changed


def test_resized_env_with_tasks() -> None:
    env = resized_env({"X": "y"}, ["n4", "n2"], 2, tasks_per_node=3)
    assert env == {
        "X": "y",
        "SLURM_NODELIST": "n[2,4]",
        "SLURM_JOB_NODELIST": "n[2,4]",
        "SLURM_NNODES": "2",
        "SLURM_JOB_NUM_NODES": "2",
        "SLURM_JOB_CPUS_PER_NODE": "2(x2)",
        "SLURM_TASKS_PER_NODE": "3(x2)",
        "SLURM_NTASKS": "6",
        "SLURM_NPROCS": "6",
    }


def test_resized_env_one_node() -> None:
    env = resized_env(OLD, ["n1"], 4, tasks_per_node=1)
    assert (env["SLURM_JOB_NODELIST"], env["SLURM_JOB_CPUS_PER_NODE"], env["SLURM_NTASKS"]) == (
        "n1",
        "4",
        "1",
    )


@pytest.mark.parametrize("nodes", [[], ()])
def test_resized_env_needs_a_node(nodes: list[str]) -> None:
    with pytest.raises(ValueError, match="an allocation has at least one node"):
        resized_env(OLD, nodes, 1)


def test_without_allocation_size() -> None:
    assert without_allocation_size(OLD) == {"SLURM_JOB_ID": "4", "HOME": "/root"}
    assert set(STALE) == set(OLD) - {"SLURM_JOB_ID", "HOME"}
