"""The parsers of ``adapter/parse.py``: Slurm 22.05 recordings and hand-written edge cases."""

from __future__ import annotations

import json
import logging
import re
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from elastic_slurm.adapter import parse
from elastic_slurm.adapter.parse import AllocationRecord, SlurmJob, SlurmNode
from elastic_slurm.errors import SlurmOutputError
from elastic_slurm.model.snapshot import JobState, NodeState

if TYPE_CHECKING:
    from conftest import Golden

# ---------------------------------------------------------------------------------- state maps


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("PENDING", JobState.PENDING),
        ("REQUEUED", JobState.PENDING),
        ("REQUEUE_HOLD", JobState.PENDING),
        ("REQUEUE_FED", JobState.PENDING),
        ("SPECIAL_EXIT", JobState.PENDING),
        ("CONFIGURING", JobState.RUNNING),
        ("RUNNING", JobState.RUNNING),
        ("RESIZING", JobState.RUNNING),
        ("SUSPENDED", JobState.RUNNING),
        ("COMPLETING", JobState.COMPLETING),
        ("STAGE_OUT", JobState.COMPLETING),
        ("SIGNALING", JobState.COMPLETING),
        ("COMPLETED", JobState.ENDED),
        ("CANCELLED", JobState.ENDED),
        ("CANCELLED by 0", JobState.ENDED),
        ("CANCELLED by 1000", JobState.ENDED),
        ("FAILED", JobState.ENDED),
        ("TIMEOUT", JobState.ENDED),
        ("NODE_FAIL", JobState.ENDED),
        ("PREEMPTED", JobState.ENDED),
        ("BOOT_FAIL", JobState.ENDED),
        ("DEADLINE", JobState.ENDED),
        ("OUT_OF_MEMORY", JobState.ENDED),
        ("running", JobState.RUNNING),  # case does not matter
        ("  RUNNING  ", JobState.RUNNING),
        ("", JobState.UNKNOWN),
        ("   ", JobState.UNKNOWN),
        ("REVOKED", JobState.UNKNOWN),  # a real state the map does not know
        ("RUNNING_BUT_NEW", JobState.UNKNOWN),
    ],
)
def test_job_state(state: str, expected: JobState) -> None:
    assert parse.job_state(state) is expected


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("idle", NodeState.IDLE),
        ("IDLE", NodeState.IDLE),
        # any flag makes an idle node unavailable
        ("idle*", NodeState.UNAVAILABLE),
        ("idle~", NodeState.UNAVAILABLE),
        ("idle#", NodeState.UNAVAILABLE),
        ("idle!", NodeState.UNAVAILABLE),
        ("idle%", NodeState.UNAVAILABLE),
        ("idle$", NodeState.UNAVAILABLE),
        ("idle@", NodeState.UNAVAILABLE),
        ("idle^", NodeState.UNAVAILABLE),
        ("idle-", NodeState.UNAVAILABLE),
        ("allocated", NodeState.ALLOCATED),
        ("allocated+", NodeState.ALLOCATED),
        ("allocated*", NodeState.ALLOCATED),
        ("mixed", NodeState.ALLOCATED),
        ("mixed-", NodeState.ALLOCATED),
        ("completing", NodeState.ALLOCATED),
        ("down", NodeState.UNAVAILABLE),
        ("down*", NodeState.UNAVAILABLE),
        ("drained", NodeState.UNAVAILABLE),
        ("drained*", NodeState.UNAVAILABLE),
        ("draining", NodeState.UNAVAILABLE),
        ("drain", NodeState.UNAVAILABLE),
        ("fail", NodeState.UNAVAILABLE),
        ("failing", NodeState.UNAVAILABLE),
        ("maint", NodeState.UNAVAILABLE),
        ("reserved", NodeState.UNAVAILABLE),
        ("future", NodeState.UNAVAILABLE),
        ("inval", NodeState.UNAVAILABLE),
        ("planned", NodeState.UNAVAILABLE),
        ("powered_down", NodeState.UNAVAILABLE),
        ("powering_up", NodeState.UNAVAILABLE),
        ("powering_down", NodeState.UNAVAILABLE),
        ("reboot_issued", NodeState.UNAVAILABLE),
        ("reboot_requested", NodeState.UNAVAILABLE),
        ("unknown", NodeState.UNKNOWN),
        ("unknown*", NodeState.UNKNOWN),
        ("perfctrs", NodeState.UNKNOWN),  # not in the map
        ("", NodeState.UNKNOWN),
        ("*", NodeState.UNKNOWN),
    ],
)
def test_node_state(state: str, expected: NodeState) -> None:
    assert parse.node_state(state) is expected


@pytest.mark.parametrize(("fn", "kind"), [(parse.job_state, "job"), (parse.node_state, "node")])
def test_unknown_state_is_logged_once(fn: Any, kind: str, caplog: pytest.LogCaptureFixture) -> None:
    weird = f"weird_{uuid.uuid4().hex[:8]}"
    with caplog.at_level(logging.WARNING, logger="elastic_slurm.adapter.parse"):
        first = fn(weird)
        second = fn(weird)
    assert (first.value, second.value) == ("unknown", "unknown")
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [f"unknown Slurm {kind} state {weird!r}, treated as unknown"]


def test_model_state_properties() -> None:
    job = SlurmJob(1, "j", "CANCELLED by 0", (), 1, "", 0.0, None, None, "", "", "", "", "", "")
    assert job.model_state is JobState.ENDED
    assert SlurmNode("n1", "down*", 1).model_state is NodeState.UNAVAILABLE


# ---------------------------------------------------------------------------------- squeue --json


def test_parse_squeue_json_recording(golden: Golden) -> None:
    jobs = parse.parse_squeue_json(golden.recorded("squeue_running_pending_expander.json"))
    assert [(j.job_id, j.name, j.state) for j in jobs] == [
        (1, "heat2d-malleable", "COMPLETED"),
        (2, "expand:1", "COMPLETED"),
        (3, "heat2d-rigid", "COMPLETED"),
        (4, 'heat "2d"; x', "RUNNING"),
        (5, "expand:4", "RUNNING"),
        (6, "wrap", "PENDING"),
    ]
    by_id = {j.job_id: j for j in jobs}
    assert by_id[4] == SlurmJob(
        job_id=4,
        name='heat "2d"; x',
        state="RUNNING",
        nodes=("n1", "n2"),
        node_count=2,
        comment="elastic-slurm:kind=malleable;min=1;max=4",
        submit_time_s=1795312853.0,
        start_time_s=1795312854.0,
        batch_host="n1",
        workdir="/tmp",
        user="root",
        partition="debug",
        account="root",
        qos="normal",
        reason="None",
        end_time_s=1826848854.0,
        time_limit_s=525600 * 60.0,  # the partition's limit: 365 days
    )
    assert by_id[1].time_limit_s == 15 * 60.0
    expander = by_id[5]
    assert (expander.nodes, expander.node_count, expander.comment) == (("n3",), 1, "")
    assert expander.model_state is JobState.RUNNING
    pending = by_id[6]
    assert pending.nodes == ()
    assert pending.node_count == 3
    assert pending.start_time_s is None
    assert pending.end_time_s is None  # end_time 0 means "not set"
    assert pending.batch_host is None  # "" in the recording
    assert pending.reason == "Resources"
    assert pending.model_state is JobState.PENDING
    # an ended expander whose nodes were merged away: no nodes, so no start time either
    assert (by_id[2].nodes, by_id[2].start_time_s, by_id[2].node_count) == ((), None, 2)
    assert [j.model_state for j in jobs[:3]] == [JobState.ENDED] * 3


def test_parse_squeue_json_recording_after_cancel(golden: Golden) -> None:
    jobs = parse.parse_squeue_json(golden.recorded("squeue_invalid_job.json"))
    states = {j.job_id: (j.state, j.model_state, j.nodes) for j in jobs}
    assert states[4] == ("CANCELLED", JobState.ENDED, ("n1",))
    assert states[6] == ("CANCELLED", JobState.ENDED, ("n2", "n3", "n4"))
    assert states[7] == ("CANCELLED", JobState.ENDED, ())
    assert states[9] == ("PENDING", JobState.PENDING, ())


def _job(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "job_id": 1,
        "name": "j",
        "job_state": "RUNNING",
        "nodes": "n1",
        "node_count": 1,
        "comment": "",
        "submit_time": 100,
        "start_time": 105,
        "current_working_directory": "/tmp",
        "user_name": "alice",
    }
    return {**base, **fields}


def _one(*jobs: dict[str, Any]) -> SlurmJob:
    (parsed,) = parse.parse_squeue_json(json.dumps({"jobs": list(jobs)}))
    return parsed


def test_parse_squeue_json_later_slurm_shape() -> None:
    job = _one(
        _job(
            job_id=12,
            job_state=["RUNNING"],
            nodes="n[2-3]",
            node_count={"set": True, "infinite": False, "number": 2},
            submit_time={"set": True, "infinite": False, "number": 100},
            start_time={"set": True, "infinite": False, "number": 105},
            end_time={"set": True, "infinite": True, "number": 0},
            batch_host="n2",
            comment="elastic-slurm:kind=malleable;min=1;max=4",
        )
    )
    assert (job.job_id, job.state, job.nodes, job.node_count) == (12, "RUNNING", ("n2", "n3"), 2)
    assert (job.submit_time_s, job.start_time_s, job.end_time_s) == (100.0, 105.0, None)
    assert job.model_state is JobState.RUNNING


@pytest.mark.parametrize(
    ("job_state", "state", "model"),
    [
        (["PENDING"], "PENDING", JobState.PENDING),
        (["RUNNING", "RESIZING"], "RUNNING", JobState.RUNNING),  # flags after the base state
        (["CANCELLED"], "CANCELLED", JobState.ENDED),
        ([], "UNKNOWN", JobState.UNKNOWN),
        ("CANCELLED by 0", "CANCELLED by 0", JobState.ENDED),
    ],
)
def test_parse_squeue_json_job_state_shapes(job_state: Any, state: str, model: JobState) -> None:
    job = _one(_job(job_state=job_state))
    assert (job.state, job.model_state) == (state, model)


@pytest.mark.parametrize(
    ("node_count", "nodes", "expected"),
    [
        (3, "n[1-3]", 3),
        ({"set": True, "number": 3}, "n[1-3]", 3),
        ({"set": False, "number": 0}, "n[1-2]", 2),  # unset: count the nodes
        (None, "n[1-2]", 2),
        (0, "n1", 1),
    ],
)
def test_parse_squeue_json_node_count(node_count: Any, nodes: str, expected: int) -> None:
    assert _one(_job(node_count=node_count, nodes=nodes)).node_count == expected


def test_parse_squeue_json_pending_job_ignores_its_nodes_field() -> None:
    job = _one(_job(job_state="PENDING", nodes="n[1-2]", node_count=2, start_time=1000))
    assert (job.nodes, job.node_count, job.start_time_s) == ((), 2, None)


@pytest.mark.parametrize("nodes", ["", None, "(null)"])
def test_parse_squeue_json_no_nodes(nodes: str | None) -> None:
    job = _one(_job(job_state="COMPLETED", nodes=nodes, node_count=2, start_time=5))
    assert (job.nodes, job.start_time_s) == ((), None)


def test_parse_squeue_json_missing_optional_fields() -> None:
    job = _one(_job(job_id=8, job_state="PENDING", nodes="", node_count=2, submit_time=0))
    assert job == SlurmJob(
        job_id=8,
        name="j",
        state="PENDING",
        nodes=(),
        node_count=2,
        comment="",
        submit_time_s=0.0,
        start_time_s=None,
        batch_host=None,
        workdir="/tmp",
        user="alice",
        partition="",
        account="",
        qos="",
        reason="",
        end_time_s=None,
    )


def test_parse_squeue_json_empty_job_list() -> None:
    assert parse.parse_squeue_json('{"jobs": [], "errors": []}') == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "squeue --json` failed, its output is unusable:\n    not JSON"),
        ("squeue: error: Invalid job id specified", "not JSON"),
        ('{"jobs": [', "not JSON"),
        ("[]", r"an object expected, got list \[\]"),
        ('"jobs"', r'an object expected, got str "jobs"'),
        ("{}", r"jobs: a list expected, got NoneType null"),
        ('{"jobs": null}', r"jobs: a list expected, got NoneType null"),
        ('{"jobs": {}}', r"jobs: a list expected, got dict \{\}"),
        # only "no such job" errors: not an outage, but still no job list
        ('{"errors": [{"error": "Invalid job id specified"}]}', "jobs: a list expected"),
    ],
)
def test_parse_squeue_json_malformed(text: str, message: str) -> None:
    with pytest.raises(SlurmOutputError, match=message):
        parse.parse_squeue_json(text)


def test_parse_squeue_json_malformed_hostlist() -> None:
    with pytest.raises(
        SlurmOutputError, match=r"jobs\[0\].nodes: malformed Slurm hostlist 'n\[1-'"
    ):
        parse.parse_squeue_json(json.dumps({"jobs": [_job(nodes="n[1-")]}))


# ---------------------------------------------------------------------------------- sinfo


def test_parse_sinfo_nodes_recording(golden: Golden) -> None:
    nodes = parse.parse_sinfo_nodes(golden.recorded("sinfo_nodes.txt"))
    assert nodes == [
        SlurmNode("n1", "allocated", 1),
        SlurmNode("n2", "allocated", 1),
        SlurmNode("n3", "allocated", 1),
        SlurmNode("n4", "idle", 1),
    ]
    assert [n.model_state for n in nodes] == [NodeState.ALLOCATED] * 3 + [NodeState.IDLE]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("\n\n", []),
        ("n1|idle|4\n", [SlurmNode("n1", "idle", 4)]),
        ("  n1|down*|2  \n", [SlurmNode("n1", "down*", 2)]),
        ("n1|idle|1\n\nn2|mixed|8", [SlurmNode("n1", "idle", 1), SlurmNode("n2", "mixed", 8)]),
        # a node in two partitions is listed twice; the first line wins
        (
            "n1|idle|1\nn1|idle|1\nn2|idle|1",
            [SlurmNode("n1", "idle", 1), SlurmNode("n2", "idle", 1)],
        ),
    ],
)
def test_parse_sinfo_nodes_table(text: str, expected: list[SlurmNode]) -> None:
    assert parse.parse_sinfo_nodes(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("n1|idle", r"line 1 is not name\|state\|cpus: 'n1\|idle'"),
        ("n1|idle|1\n\nn2|idle|1|x", r"line 3 is not name\|state\|cpus: 'n2\|idle\|1\|x'"),
        ("NODELIST STATE CPUS", "line 1 is not name"),
        ("n1|idle|many", "many"),
        ("n1|idle|", "line 1: CPU count '' is not a number"),
        ("n1|idle|-1", "line 1: CPU count '-1' is not a number"),
        ("n1|idle|99999999999", "line 1: CPU count '99999999999' is not a number in"),
        ("n1|idle|²", "line 1: CPU count '²' is not a number"),
        ("n 1|idle|1", "line 1: node name 'n 1' is not one"),
        ("n1|12|1", "line 1: node state '12' is not one"),
        ("n1||1", "line 1: node state '' is not one"),
    ],
)
def test_parse_sinfo_nodes_malformed(text: str, message: str) -> None:
    with pytest.raises(SlurmOutputError, match=message):
        parse.parse_sinfo_nodes(text)


# ---------------------------------------------------------------------------------- sbatch, salloc


@pytest.mark.parametrize(
    ("text", "job_id"),
    [
        ("123", 123),
        ("123\n", 123),
        ("  7;elastic\n", 7),
        ("42;", 42),
        ("9;cluster;extra", 9),
    ],
)
def test_parse_sbatch_parsable(text: str, job_id: int) -> None:
    assert parse.parse_sbatch_parsable(text) == job_id


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n",
        "Submitted batch job 5",
        "-5",
        "5.0",
        ";elastic",
        "sbatch: error: Batch job submission failed",
        "0",
        "99999999999",
        "٣",
    ],
)
def test_parse_sbatch_parsable_no_job_id(text: str) -> None:
    with pytest.raises(SlurmOutputError, match=re.escape(f"no job id in {text.strip()!r}")):
        parse.parse_sbatch_parsable(text)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("salloc_granted.stderr", (5, True)),
        ("salloc_too_many.stderr", (7, False)),
        ("salloc_bad_dep.stderr", (None, False)),
    ],
)
def test_parse_salloc_job_id_recordings(golden: Golden, name: str, expected: tuple) -> None:
    assert parse.parse_salloc_job_id(golden.recorded(name)) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", (None, False)),
        ("salloc: Pending job allocation 9\nsalloc: Granted job allocation 9\n", (9, True)),
        ("salloc: Granted job allocation 123456\n", (123456, True)),
        ("salloc: error: Job submit/allocate failed: Invalid account\n", (None, False)),
    ],
)
def test_parse_salloc_job_id_edge_cases(text: str, expected: tuple) -> None:
    assert parse.parse_salloc_job_id(text) == expected


# ---------------------------------------------------------------------------------- scontrol


def test_parse_scontrol_oneline_recording(golden: Golden) -> None:
    rec = parse.parse_scontrol_oneline(golden.recorded("scontrol_show_job.txt"))
    assert rec["JobId"] == "4"
    assert rec["JobName"] == 'heat "2d"; x'  # a value with spaces, quotes and a semicolon
    assert rec["UserId"] == "root(0)"
    assert rec["JobState"] == "RUNNING"
    assert rec["NodeList"] == "n[1-3]"
    assert rec["NumNodes"] == "3"
    assert rec["BatchHost"] == "n1"
    assert rec["AllocNode:Sid"] == "localhost:1067"
    assert rec["ReqB:S:C:T"] == "0:0:*:*"
    assert rec["CPUs/Task"] == "1"
    assert rec["TRES"] == "cpu=3,node=3,billing=3"
    assert rec["Comment"] == "elastic-slurm:kind=malleable;min=1;max=4"
    assert rec["ReqNodeList"] == "(null)"
    assert rec["Power"] == ""
    assert rec["StdOut"] == "/dev/null"
    assert len(rec) == 62
    assert list(rec)[:3] == ["JobId", "JobName", "UserId"]
    assert list(rec)[-3:] == ["StdIn", "StdOut", "Power"]
    assert "min" not in rec and "node" not in rec  # inside values, not keys


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("   \n", {}),
        ("JobId=5", {"JobId": "5"}),
        ("JobId=5 Empty= Next=x", {"JobId": "5", "Empty": "", "Next": "x"}),
        ("JobId=5 Name=a  b   c", {"JobId": "5", "Name": "a  b   c"}),
        ("JobId=5 Expr=a=b", {"JobId": "5", "Expr": "a=b"}),
        ("JobId=5\nJobId=6 Name=x\n", {"JobId": "5"}),  # first record only
        ("no pairs here", {}),
    ],
)
def test_parse_scontrol_oneline_table(text: str, expected: dict[str, str]) -> None:
    assert parse.parse_scontrol_oneline(text) == expected


# ---------------------------------------------------------------------------------- errors, version


@pytest.mark.parametrize(
    ("stderr", "transient"),
    [
        ("Job update not available right now, the DB index is being set, try again", True),
        ("slurm_load_jobs error: Socket timed out on send/recv operation", True),
        ("squeue: error: Unable to contact slurm controller (connect failure)", True),
        ("error: Slurm backup controller in standby mode", True),
        ("Resource temporarily unavailable", True),
        ("error: Connection refused", True),
        ("Zero Bytes were transmitted or received", True),
        ("Communication connection failure", True),
        ("SOCKET TIMED OUT ON SEND/RECV", True),
        ("Requested operation not supported on this system", False),
        ("Invalid job id specified", False),
        ("salloc: error: Unable to allocate resources: Connection timed out", False),
        ("Job submit/allocate failed: Job dependency problem", False),
        ("", False),
    ],
)
def test_is_transient(stderr: str, transient: bool) -> None:
    assert parse.is_transient(stderr) is transient


def test_is_transient_on_recordings(golden: Golden) -> None:
    for name in ("salloc_too_many.stderr", "salloc_bad_dep.stderr", "salloc_granted.stderr"):
        assert parse.is_transient(golden.recorded(name)) is False, name


def test_parse_version_recording(golden: Golden) -> None:
    assert parse.parse_version(golden.recorded("scontrol_version.txt")) == (22, 5, 8)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("slurm 24.11.1\n", (24, 11, 1)),
        ("slurm-wlm 23.02.7-1ubuntu1", (23, 2, 7)),
        ("slurm 26.05.0rc1", (26, 5, 0)),
    ],
)
def test_parse_version(text: str, expected: tuple[int, int, int]) -> None:
    assert parse.parse_version(text) == expected


@pytest.mark.parametrize("text", ["", "slurm 22.05", "scontrol: command not found\n"])
def test_parse_version_missing(text: str) -> None:
    with pytest.raises(ValueError, match=f"no Slurm version in {text.strip()!r}"):
        parse.parse_version(text)


# ---------------------------------------------------------------------------------- steps, sacct


def test_parse_squeue_steps_recording(golden: Golden) -> None:
    assert parse.parse_squeue_steps(golden.recorded("squeue_steps.txt")) == {
        "4.0": ("n1", "n2"),
        "4.batch": ("n1",),
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {}),
        ("\n\n", {}),
        ("12.extern|n[1-3]\n", {"12.extern": ("n1", "n2", "n3")}),
        ("  12.1|n4  \n", {"12.1": ("n4",)}),
        ("12.0|(null)\n", {"12.0": ()}),
        ("no separator line\n12.0|n1", {"12.0": ("n1",)}),
    ],
)
def test_parse_squeue_steps_table(text: str, expected: dict[str, tuple[str, ...]]) -> None:
    assert parse.parse_squeue_steps(text) == expected


def test_parse_squeue_steps_malformed_hostlist() -> None:
    with pytest.raises(ValueError, match="malformed Slurm hostlist"):
        parse.parse_squeue_steps("12.0|n[2-1]\n")


def test_parse_sacct_allocations_recording(golden: Golden) -> None:
    records = parse.parse_sacct_allocations(golden.recorded("sacct_allocations.txt"), 4)
    assert records == [
        AllocationRecord("RESIZING", ("n1", "n2"), 1795312854.0, 1795312855.0),
        AllocationRecord("RESIZING", ("n1", "n2", "n3"), 1795312855.0, 1795312856.0),
        AllocationRecord("CANCELLED", ("n1",), 1795312856.0, 1795312857.0),
    ]
    assert [len(r.nodes) for r in records] == [2, 3, 1]


def test_parse_sacct_allocations_other_job_is_ignored(golden: Golden) -> None:
    assert parse.parse_sacct_allocations(golden.recorded("sacct_allocations.txt"), 5) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        (
            "7|RUNNING|2|n[1-2]|100|Unknown",
            [AllocationRecord("RUNNING", ("n1", "n2"), 100.0, None)],
        ),
        ("7.batch|COMPLETED|1|n1|1|2\n7.0|COMPLETED|1|n1|1|2", []),  # steps are not allocations
        ("7|COMPLETED|1|n1|1|2|3|extra", []),  # wrong field count
        # with the submit time: a record Slurm gave the job's first start begins at its submit
        ("7|COMPLETED|1|n1|100|130|105", [AllocationRecord("COMPLETED", ("n1",), 105.0, 130.0)]),
        ("7|COMPLETED|1|n1|100|130|90", [AllocationRecord("COMPLETED", ("n1",), 100.0, 130.0)]),
        ("17|COMPLETED|1|n1|1|2", []),  # another job whose id starts with 7
        ("  7|FAILED|1|n2|5|-1  ", [AllocationRecord("FAILED", ("n2",), 5.0, None)]),
        ("7|COMPLETED|1|(null)|0|0", [AllocationRecord("COMPLETED", (), None, None)]),
    ],
)
def test_parse_sacct_allocations_table(text: str, expected: list[AllocationRecord]) -> None:
    assert parse.parse_sacct_allocations(text, 7) == expected


def test_parse_sacct_allocations_malformed_hostlist() -> None:
    with pytest.raises(ValueError, match=r"malformed Slurm hostlist 'n\[1-'"):
        parse.parse_sacct_allocations("7|COMPLETED|1|n[1-|1|2", 7)


def test_parse_sacct_allocations_job_cancelled_while_pending() -> None:
    records = parse.parse_sacct_allocations("7|CANCELLED by 0|1|None assigned|Unknown|1000", 7)
    assert records == [AllocationRecord("CANCELLED", (), None, 1000.0)]
