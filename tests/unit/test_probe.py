"""Which join strategy a resize uses: every branch of ``mpi_runtime/probe.py:choose_join``."""

from __future__ import annotations

import pytest

from elastic_slurm.mpi_runtime.probe import RESTART, SPAWN, JoinChoice, choose_join, spawn_info

OMPI4 = ("Open MPI", (4, 1, 4))


@pytest.mark.parametrize(
    ("action", "hosts", "launch", "vendor", "forced", "expected"),
    [
        (
            "expand",
            ["n1", "n1"],
            "n1",
            OMPI4,
            None,
            JoinChoice(SPAWN, "all 2 rank(s) run on mpirun's node n1"),
        ),
        (
            "expand",
            ["n1"],
            "n1",
            OMPI4,
            "",
            JoinChoice(SPAWN, "all 1 rank(s) run on mpirun's node n1"),
        ),
        (
            "expand",
            ["n1"],
            "n1",
            OMPI4,
            "auto",
            JoinChoice(SPAWN, "all 1 rank(s) run on mpirun's node n1"),
        ),
        (
            "expand",
            ["n1"],
            "n1",
            OMPI4,
            "spawn",
            JoinChoice(SPAWN, "all 1 rank(s) run on mpirun's node n1"),
        ),
        (
            "expand",
            ["n1"],
            "n1",
            ("Open MPI", (4, 0, 7)),
            None,
            JoinChoice(SPAWN, "all 1 rank(s) run on mpirun's node n1"),
        ),
        (
            "expand",
            ["n1"],
            "n1",
            OMPI4,
            "restart",
            JoinChoice(RESTART, "checkpoint-restart forced by ELASTIC_SLURM_JOIN=restart"),
        ),
        (
            "shrink",
            ["n1"],
            "n1",
            OMPI4,
            "restart",
            JoinChoice(RESTART, "checkpoint-restart forced by ELASTIC_SLURM_JOIN=restart"),
        ),
        (
            "shrink",
            ["n1", "n1"],
            "n1",
            OMPI4,
            "spawn",  # a shrink always restarts
            JoinChoice(
                RESTART,
                "shrink: Open MPI's runtime cannot release the daemons on leaving nodes while "
                "mpirun runs, so the step is checkpointed and restarted on the nodes kept",
            ),
        ),
        (
            "expand",
            ["n1"],
            "n1",
            ("MPICH", (4, 0, 2)),
            None,
            JoinChoice(
                RESTART,
                "MPICH 4.0.2: spawning onto added nodes is supported here only with Open MPI 4.x "
                "under mpirun",
            ),
        ),
        (
            "expand",
            ["n1"],
            "n1",
            ("Open MPI", (5, 0, 3)),
            "spawn",
            JoinChoice(
                SPAWN,
                "ELASTIC_SLURM_JOIN=spawn on Open MPI 5.0.3 (PRRTE): all 1 rank(s) run on "
                "mpirun's node n1",
            ),
        ),
        (
            "expand",
            ["n1"],
            None,
            OMPI4,
            None,
            JoinChoice(RESTART, "ranks were not started by elastic-slurm's mpirun launcher"),
        ),
        (
            "expand",
            ["n1", "n3", "n2", "n3"],
            "n1",
            OMPI4,
            "spawn",
            JoinChoice(
                RESTART,
                "ranks run on node(s) n2, n3, not only on mpirun's node n1; Open MPI 4.1 spawns "
                "reliably only when all ranks run on mpirun's node "
                "(ELASTIC_SLURM_JOIN=spawn cannot be honoured)",
            ),
        ),
        (
            "expand",
            ["n2", "n2"],
            "n1",
            OMPI4,
            None,
            JoinChoice(
                RESTART,
                "ranks run on node(s) n2, not only on mpirun's node n1; Open MPI 4.1 spawns "
                "reliably only when all ranks run on mpirun's node",
            ),
        ),
    ],
)
def test_choose_join(
    action: str,
    hosts: list[str],
    launch: str | None,
    vendor: tuple[str, tuple[int, ...]],
    forced: str | None,
    expected: JoinChoice,
) -> None:
    assert choose_join(action, hosts, launch, vendor, forced) == expected


@pytest.mark.parametrize("forced", ["Spawn", "checkpoint", "none", " "])
def test_choose_join_bad_forced(forced: str) -> None:
    with pytest.raises(ValueError) as info:
        choose_join("expand", ["n1"], "n1", OMPI4, forced)
    assert str(info.value) == f"ELASTIC_SLURM_JOIN={forced!r}: use spawn, restart or auto"


@pytest.mark.parametrize("action", ["grow", "EXPAND", ""])
def test_choose_join_bad_action(action: str) -> None:
    with pytest.raises(ValueError) as info:
        choose_join(action, ["n1"], "n1", OMPI4, "restart")
    assert str(info.value) == f"unknown resize action {action!r}"


OMPI5 = ("Open MPI", (5, 0, 7))


def test_prrte_restarts_by_default_and_spawns_only_when_asked_from_mpiruns_node():
    default = choose_join("expand", ["n1"], "n1", OMPI5)
    assert default.strategy == RESTART and "ELASTIC_SLURM_JOIN=spawn to try" in default.reason
    asked = choose_join("expand", ["n1", "n1"], "n1", OMPI5, "spawn")
    assert asked.strategy == SPAWN and "PRRTE" in asked.reason
    spread = choose_join("expand", ["n1", "n2"], "n1", OMPI5, "spawn")
    assert spread.strategy == RESTART and "n2" in spread.reason
    assert choose_join("shrink", ["n1"], "n1", OMPI5, "spawn").strategy == RESTART


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ((4, 1, 4), {"add-host": "n3,n4", "host": "n3,n3,n4,n4"}),
        (
            (5, 0, 7),
            {
                "PMIX_ADD_HOST": "n3,n4",
                "host": "n3:2,n4:2",
                "map_by": "slot:oversubscribe",
                "bind_to": "none",
            },
        ),
        ((6, 0, 0), {"PMIX_ADD_HOST": "n3,n4", "host": "n3:2,n4:2"}),
    ],
)
def test_spawn_info_per_open_mpi_generation(version, expected):
    info = spawn_info(["n3", "n4"], 2, version)
    assert {k: info[k] for k in expected} == expected
    with pytest.raises(ValueError, match="needs hosts"):
        spawn_info([], 1, version)
