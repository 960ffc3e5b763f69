"""The pure argv builders of ``adapter/commands.py``: exact argument lists, no shell."""

from __future__ import annotations

from datetime import timedelta

import pytest

from elastic_slurm.adapter import commands

HOSTILE = [
    "two words",
    'double "quotes"',
    "single 'quotes'",
    "semi;colon",
    "$(touch /tmp/pwned)",
    "`id`",
    "new\nline",
    "tab\there",
    "--nodes=99",
    "",
]


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (timedelta(seconds=1), "0-00:00:01"),
        (timedelta(seconds=59), "0-00:00:59"),
        (timedelta(seconds=60), "0-00:01:00"),
        (timedelta(minutes=30), "0-00:30:00"),
        (timedelta(hours=1, seconds=1), "0-01:00:01"),
        (timedelta(hours=23, minutes=59, seconds=59), "0-23:59:59"),
        (timedelta(hours=24), "1-00:00:00"),
        (timedelta(hours=25, minutes=3, seconds=7), "1-01:03:07"),
        (timedelta(days=365), "365-00:00:00"),
        (timedelta(seconds=90, milliseconds=900), "0-00:01:31"),  # rounded up to a second
    ],
)
def test_format_time_limit(limit: timedelta, expected: str) -> None:
    assert commands.format_time_limit(limit) == expected


@pytest.mark.parametrize(
    ("limit", "shown"),
    [
        (timedelta(0), "0:00:00"),
        (timedelta(seconds=-1), "-1 day, 23:59:59"),
        (timedelta(days=-2), "-2 days, 0:00:00"),
    ],
)
def test_format_time_limit_rejects_non_positive(limit: timedelta, shown: str) -> None:
    with pytest.raises(ValueError, match=f"a time limit must be positive, got {shown}"):
        commands.format_time_limit(limit)


def test_format_time_limit_rounds_sub_second_limits_up() -> None:
    # ElasticRequest accepts any positive walltime, so sbatch_argv must be able to format it.
    assert commands.format_time_limit(timedelta(milliseconds=500)) == "0-00:00:01"


def test_sbatch_minimal() -> None:
    argv = commands.sbatch(nodes="2", time_limit=timedelta(minutes=30), job_name="job")
    assert argv == [
        "sbatch",
        "--parsable",
        "--nodes=2",
        "--ntasks-per-node=1",
        "--time=0-00:30:00",
        "--job-name=job",
    ]


def test_sbatch_every_option() -> None:
    argv = commands.sbatch(
        nodes="2-4",
        time_limit=timedelta(hours=25, minutes=3, seconds=7),
        job_name="heat",
        ntasks_per_node=8,
        comment="elastic-slurm:kind=moldable;min=2;max=4",
        output="/work/out/heat-%j.out",
        partition="debug",
        chdir="/work/run dir",
    )
    assert argv == [
        "sbatch",
        "--parsable",
        "--nodes=2-4",
        "--ntasks-per-node=8",
        "--time=1-01:03:07",
        "--job-name=heat",
        "--comment=elastic-slurm:kind=moldable;min=2;max=4",
        "--output=/work/out/heat-%j.out",
        "--partition=debug",
        "--chdir=/work/run dir",
    ]


@pytest.mark.parametrize("empty", [None, ""])
def test_sbatch_leaves_out_empty_options(empty: str | None) -> None:
    argv = commands.sbatch(
        nodes="1",
        time_limit=timedelta(minutes=1),
        job_name="j",
        comment=empty,
        output=empty,
        partition=empty,
        chdir=empty,
    )
    assert [a.split("=")[0] for a in argv] == [
        "sbatch",
        "--parsable",
        "--nodes",
        "--ntasks-per-node",
        "--time",
        "--job-name",
    ]


@pytest.mark.parametrize("value", HOSTILE)
def test_sbatch_hostile_values_stay_single_arguments(value: str) -> None:
    argv = commands.sbatch(
        nodes="1",
        time_limit=timedelta(minutes=1),
        job_name=value,
        comment=value or None,
        output=value or None,
        partition=value or None,
        chdir=value or None,
    )
    expected_len = 6 if value == "" else 10
    assert len(argv) == expected_len
    assert argv[5] == f"--job-name={value}"
    if value:
        assert argv[6:] == [
            f"--comment={value}",
            f"--output={value}",
            f"--partition={value}",
            f"--chdir={value}",
        ]


def test_sbatch_rejects_non_positive_time_limit() -> None:
    with pytest.raises(ValueError, match="a time limit must be positive, got 0:00:00"):
        commands.sbatch(nodes="1", time_limit=timedelta(0), job_name="j")


@pytest.mark.parametrize(
    ("job_ids", "expected"),
    [
        ((), ["squeue", "--json"]),
        ([7], ["squeue", "--json", "--jobs", "7"]),
        ((3, 1, 2), ["squeue", "--json", "--jobs", "3,1,2"]),
    ],
)
def test_squeue_json(job_ids: tuple[int, ...], expected: list[str]) -> None:
    assert commands.squeue_json(job_ids) == expected


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (commands.sinfo_nodes(), ["sinfo", "--noheader", "--Node", "--format=%N|%T|%c"]),
        (commands.scontrol_show_job(42), ["scontrol", "--oneliner", "show", "job", "42"]),
        (commands.release_expander(5), ["scontrol", "update", "JobId=5", "NumNodes=0"]),
        (commands.absorb(4), ["scontrol", "update", "JobId=4", "NumNodes=ALL"]),
        (commands.scancel(4, 5), ["scancel", "4", "5"]),
        (commands.scancel(9), ["scancel", "9"]),
        (commands.scontrol_version(), ["scontrol", "--version"]),
        (
            commands.squeue_steps(4),
            ["squeue", "--steps", "--jobs=4", "--noheader", "--format=%i|%N"],
        ),
        (
            commands.sacct_allocations(4),
            [
                "sacct",
                "--jobs=4",
                "--allocations",
                "--noheader",
                "--parsable2",
                "--format=JobID,State,NNodes,NodeList,Start,End,Submit",
            ],
        ),
    ],
)
def test_simple_builders(argv: list[str], expected: list[str]) -> None:
    assert argv == expected


def test_epoch_times_env() -> None:
    assert commands.EPOCH_TIMES == {"SLURM_TIME_FORMAT": "%s"}


@pytest.mark.parametrize(
    ("keep", "nodelist"),
    [
        (["n1"], "n1"),
        (["n1", "n2"], "n[1-2]"),
        (["n3", "n1", "n2"], "n[1-3]"),
        (["n1", "n3", "n4", "n7"], "n[1,3-4,7]"),
        (("head", "n2"), "head,n2"),
    ],
)
def test_shrink_to(keep: list[str], nodelist: str) -> None:
    assert commands.shrink_to(12, keep) == [
        "scontrol",
        "update",
        "JobId=12",
        f"NodeList={nodelist}",
    ]


@pytest.mark.parametrize("keep", [[], ()])
def test_shrink_to_nothing_is_refused(keep: list[str]) -> None:
    with pytest.raises(ValueError, match="cannot be shrunk to zero nodes; cancel it instead"):
        commands.shrink_to(12, keep)


def test_expander_allocation() -> None:
    argv = commands.allocation(2, name="expand:4", immediate_s=30, dependency="expand:4")
    assert argv == [
        "salloc",
        "--no-shell",
        "--nodes=2",
        "--exclusive",
        "--immediate=30",
        "--job-name=expand:4",
        "--dependency=expand:4",
    ]


def test_sibling_allocation_has_a_time_limit_and_the_jobs_partition_account_qos() -> None:
    argv = commands.allocation(
        1,
        name="sibling:4",
        immediate_s=5,
        time_limit_min=17,
        partition="debug",
        account="proj 1",
        qos="$(id)",
    )
    assert argv[-4:] == ["--time=17", "--partition=debug", "--account=proj 1", "--qos=$(id)"]
    assert "--dependency" not in " ".join(argv)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"count": 0}, "at least one node, got 0"),
        ({"count": -1}, "at least one node, got -1"),
        ({"immediate_s": 0}, "at least 1 s, got 0"),
        ({"time_limit_min": 0}, "at least 1 minute, got 0"),
    ],
)
def test_allocation_refuses_impossible_values(kwargs: dict, message: str) -> None:
    args = {"count": 1, "name": "x", "immediate_s": 5, **kwargs}
    count = args.pop("count")
    with pytest.raises(ValueError, match=message):
        commands.allocation(count, **args)


def test_set_pending_size_and_array_throttle() -> None:
    # both ends: Slurm 22.05 reads NumNodes=3 on a pending 1-4 job as a new minimum only
    assert commands.set_pending_size(7, 3) == ["scontrol", "update", "JobId=7", "NumNodes=3-3"]
    assert commands.set_array_throttle(9, 2) == [
        "scontrol",
        "update",
        "JobId=9",
        "ArrayTaskThrottle=2",
    ]
    with pytest.raises(ValueError):
        commands.set_pending_size(7, 0)
    with pytest.raises(ValueError):
        commands.set_array_throttle(9, -1)
