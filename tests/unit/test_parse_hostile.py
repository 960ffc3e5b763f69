"""Slurm's answers as hostile input: mutated recordings either parse to valid values or raise
:class:`SlurmCommandError`, never a crash (TypeError, KeyError...) or a silently wrong value.

The mutations start from outputs recorded from Slurm 22.05 (``tests/golden/22.05``): a field
gets another JSON type, a huge or negative number, null, or disappears; a job becomes a list;
the text is cut short.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from elastic_slurm.adapter import parse
from elastic_slurm.adapter.parse import MAX_EPOCH_S, MAX_U32, SlurmJob, SlurmNode
from elastic_slurm.adapter.pyslurm_backend import job_from_pyslurm
from elastic_slurm.errors import SlurmCommandError, SlurmOutputError
from elastic_slurm.model.snapshot import JobState, NodeState

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "22.05"
RECORDED = [
    json.loads((GOLDEN / name).read_text())
    for name in ("squeue_running_pending_expander.json", "squeue_invalid_job.json")
]
SINFO = (GOLDEN / "sinfo_nodes.txt").read_text()
KEYS = sorted({k for data in RECORDED for job in data["jobs"] for k in job})
READ = [
    "job_id",
    "name",
    "job_state",
    "nodes",
    "node_count",
    "comment",
    "submit_time",
    "start_time",
    "end_time",
    "time_limit",
    "array_job_id",
    "array_task_string",
    "array_max_tasks",
    "batch_host",
    "current_working_directory",
    "user_name",
    "partition",
    "account",
    "qos",
    "state_reason",
]

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([-1, 0, 2**31, 2**32 - 2, 2**32 - 1, 2**32, 2**63, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["n[1-", "n[3-1]", "(null)", "n[1-99999999]", "RUNNING", "", "1"]),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(["set", "infinite", "number", "error_number", "error", "source"]),
            inner,
            max_size=3,
        ),
    ),
    max_leaves=6,
)


def _check_job(job: SlurmJob) -> None:
    """The invariants every parsed job holds."""
    assert isinstance(job.job_id, int) and 0 < job.job_id <= MAX_U32
    assert isinstance(job.node_count, int) and 0 <= job.node_count <= MAX_U32
    assert isinstance(job.nodes, tuple) and all(isinstance(n, str) and n for n in job.nodes)
    for text in (job.name, job.comment, job.workdir, job.user, job.partition, job.account):
        assert isinstance(text, str)
    for text in (job.qos, job.reason, job.array_pending):
        assert isinstance(text, str)
    assert isinstance(job.state, str) and job.state.strip()
    assert isinstance(job.model_state, JobState)
    assert job.batch_host is None or isinstance(job.batch_host, str)
    assert isinstance(job.submit_time_s, float) and 0 <= job.submit_time_s <= MAX_EPOCH_S
    for t in (job.start_time_s, job.end_time_s, job.time_limit_s):
        assert t is None or (isinstance(t, float) and math.isfinite(t) and t > 0)
    for n in (job.array_job_id, job.array_throttle):
        assert n is None or (isinstance(n, int) and 0 < n <= MAX_U32)


def _parse(text: str) -> None:
    try:
        jobs = parse.parse_squeue_json(text)
    except SlurmCommandError:
        return
    assert isinstance(jobs, list)
    for job in jobs:
        _check_job(job)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.integers(0, len(RECORDED) - 1),
    index=st.integers(0, 20),
    key=st.sampled_from(sorted({*READ, *KEYS})),
    value=json_values,
    delete=st.booleans(),
)
def test_a_mutated_field(which: int, index: int, key: str, value: Any, delete: bool) -> None:
    data = json.loads(json.dumps(RECORDED[which]))
    job = data["jobs"][index % len(data["jobs"])]
    if delete:
        job.pop(key, None)
    else:
        job[key] = value
    _parse(json.dumps(data))


@settings(max_examples=150, deadline=None)
@given(
    which=st.integers(0, len(RECORDED) - 1),
    where=st.sampled_from(["jobs", "errors", "job", "root"]),
    value=json_values,
)
def test_a_mutated_structure(which: int, where: str, value: Any) -> None:
    data: Any = json.loads(json.dumps(RECORDED[which]))
    if where == "job":
        data["jobs"][0] = value
    elif where == "root":
        data = value
    else:
        data[where] = value
    _parse(json.dumps(data))


@settings(max_examples=100, deadline=None)
@given(which=st.integers(0, len(RECORDED) - 1), cut=st.floats(0, 1), junk=st.text(max_size=5))
def test_a_cut_answer(which: int, cut: float, junk: str) -> None:
    text = json.dumps(RECORDED[which])
    _parse(text[: int(len(text) * cut)] + junk)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("node_count", -1, r"jobs\[0\].node_count: -1 is outside \[0, 4294967293\]"),
        ("node_count", 10**30, r"jobs\[0\].node_count: 10{30} is outside"),
        ("node_count", "2", r'jobs\[0\].node_count: a whole number expected, got str "2"'),
        ("node_count", True, r"jobs\[0\].node_count: a whole number expected, got bool true"),
        ("job_id", None, r"jobs\[0\].job_id: missing, null or 0"),
        ("job_id", 4294967294, r"jobs\[0\].job_id: 4294967294 is outside"),
        ("name", 7, r"jobs\[0\].name: a string expected, got int 7"),
        ("comment", ["x"], r"jobs\[0\].comment: a string expected, got list"),
        ("user_name", {"a": 1}, r"jobs\[0\].user_name: a string expected, got dict"),
        ("nodes", "n[1-", r"jobs\[0\].nodes: malformed Slurm hostlist 'n\[1-'"),
        ("nodes", 3, r"jobs\[0\].nodes: a string expected, got int 3"),
        ("job_state", 3, r"jobs\[0\].job_state: a state name expected, got int 3"),
        ("job_state", [1], r"jobs\[0\].job_state: a list of strings expected"),
        ("submit_time", 2**63, r"jobs\[0\].submit_time: 9223372036854775808 is outside"),
        ("submit_time", float("inf"), r"jobs\[0\].submit_time: a whole number expected"),
        ("time_limit", -5, r"jobs\[0\].time_limit: -5 is outside"),
    ],
)
def test_type_shifted_fields_are_named(key: str, value: Any, message: str) -> None:
    data = json.loads(json.dumps(RECORDED[0]))
    data["jobs"][0][key] = value
    with pytest.raises(SlurmOutputError, match=message):
        parse.parse_squeue_json(json.dumps(data))


@pytest.mark.parametrize("key", ["job_id", "job_state", "nodes", "comment", "user_name"])
def test_missing_fields_are_named(key: str) -> None:
    data = json.loads(json.dumps(RECORDED[0]))
    del data["jobs"][0][key]
    with pytest.raises(SlurmOutputError, match=rf"jobs\[0\].{key}: missing"):
        parse.parse_squeue_json(json.dumps(data))


def test_a_huge_integer_is_refused_not_a_crash() -> None:
    text = json.dumps(RECORDED[0]).replace('"node_count": 2', '"node_count": ' + "9" * 5000, 1)
    with pytest.raises(SlurmOutputError, match="not JSON"):
        parse.parse_squeue_json(text)  # Python refuses ints of more than 4300 digits


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(
        st.one_of(
            st.sampled_from(SINFO.splitlines()),
            st.text(alphabet=st.sampled_from("n1|idle*~-²٣ \t[]0"), max_size=20),
            st.builds(
                lambda a, b, c: f"{a}|{b}|{c}",
                st.text(max_size=6),
                st.text(max_size=6),
                st.one_of(st.integers(-5, 2**40).map(str), st.text(max_size=4)),
            ),
        ),
        max_size=6,
    )
)
def test_sinfo_lines(lines: list[str]) -> None:
    try:
        nodes = parse.parse_sinfo_nodes("\n".join(lines))
    except SlurmCommandError:
        return
    for node in nodes:
        assert isinstance(node, SlurmNode) and node.name and node.state
        assert 0 <= node.cpus <= MAX_U32 and isinstance(node.model_state, NodeState)


@settings(max_examples=200, deadline=None)
@given(
    text=st.lists(
        st.builds(
            lambda *f: "|".join(f),
            st.just("7"),
            st.text(max_size=8),
            st.text(max_size=3),
            st.one_of(st.sampled_from(["n[1-2]", "n[1-", "None assigned", ""]), st.text()),
            st.one_of(st.integers(-5, 2**70).map(str), st.text(max_size=4)),
            st.text(max_size=4),
        ),
        max_size=4,
    ).map("\n".join)
)
def test_sacct_records(text: str) -> None:
    try:
        records = parse.parse_sacct_allocations(text, 7)
    except SlurmCommandError:
        return
    for r in records:
        assert r.state and all(isinstance(n, str) for n in r.nodes)
        for t in (r.start_s, r.end_s):
            assert t is None or 0 < t <= MAX_EPOCH_S


PYSLURM_JOB = dict(
    id=7,
    name="j",
    state="RUNNING",
    allocated_nodes="n[1-2]",
    num_nodes=2,
    comment=None,
    submit_time=50,
    start_time=100,
    end_time=900,
    time_limit=10,
    batch_host="n1",
    working_directory="/tmp",
    user_name="root",
    partition="debug",
    account=None,
    qos=None,
    state_reason="None",
    array_id=None,
    array_tasks_waiting=None,
    array_tasks_parallel=None,
)


@settings(max_examples=300, deadline=None)
@given(changes=st.dictionaries(st.sampled_from(sorted(PYSLURM_JOB)), json_scalars, max_size=3))
@example(changes={"state": "\r"})  # a blank state: refused, as in squeue's JSON
def test_pyslurm_records(changes: dict[str, Any]) -> None:
    try:
        job = job_from_pyslurm(SimpleNamespace(**{**PYSLURM_JOB, **changes}), "root")
    except SlurmCommandError:
        return
    _check_job(job)
