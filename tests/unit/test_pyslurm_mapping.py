"""The pyslurm backend's pure parts: mapping pyslurm's records, states, errors and options.

No Slurm is needed. pyslurm's objects are stood in for by plain objects with its attribute
names, filled the way pyslurm 22.5 fills them (``None`` for an empty string or a zero time).
Node states are checked against libslurm's own string functions (loaded with ctypes) when
libslurm is installed.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import types
import weakref
from pathlib import Path
from types import SimpleNamespace

import pytest

from elastic_slurm.adapter import parse, pyslurm_backend
from elastic_slurm.adapter.factory import slurm_for
from elastic_slurm.adapter.pyslurm_backend import (
    PyslurmBackend,
    command_error,
    job_from_pyslurm,
    node_state_bits,
    node_state_long,
    pyslurm_available,
    step_nodes,
    submit_description,
)
from elastic_slurm.adapter.slurm_cli import SlurmCLI
from elastic_slurm.adapter.transport.ssh import SSHTransport
from elastic_slurm.config.schema import SiteConfig, SSHTransportConfig
from elastic_slurm.errors import ConfigError
from elastic_slurm.model.snapshot import NodeState

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "22.05"


def _libslurm() -> ctypes.CDLL | None:
    try:
        lib = ctypes.CDLL("libslurm.so.38")
    except OSError:
        return None
    for fn in ("slurm_node_state_string", "slurm_node_state_string_complete"):
        getattr(lib, fn).restype = ctypes.c_char_p
        getattr(lib, fn).argtypes = [ctypes.c_uint32]
    return lib


LIBSLURM = _libslurm()
needs_libslurm = pytest.mark.skipif(LIBSLURM is None, reason="libslurm.so.38 is not installed")


# ---------------------------------------------------------------------------- jobs


def _as_pyslurm(j: dict) -> SimpleNamespace:
    """What pyslurm 22.5's ``Job`` shows for a record ``squeue --json`` printed."""
    return SimpleNamespace(
        id=j["job_id"],
        name=j["name"] or None,
        state=j["job_state"],
        allocated_nodes=j["nodes"] or None,
        num_nodes=j["node_count"] or None,
        comment=j["comment"] or None,
        submit_time=j["submit_time"] or None,
        start_time=j["start_time"] or None,
        end_time=j["end_time"] or None,
        time_limit=j["time_limit"] or None,  # minutes; None when unlimited
        batch_host=j["batch_host"] or None,
        working_directory=j["current_working_directory"] or None,
        user_name=j["user_name"] or None,
        partition=j["partition"] or None,
        account=j["account"] or None,
        qos=j["qos"] or None,
        state_reason=j["state_reason"],
        array_id=j["array_job_id"] or None,
        array_tasks_waiting=(j["array_task_string"] or "").split("%")[0] or None,
        array_tasks_parallel=j["array_max_tasks"] or None,
    )


def test_jobs_map_to_what_the_cli_parser_gives():
    text = (GOLDEN / "squeue_running_pending_expander.json").read_text()
    expected = parse.parse_squeue_json(text)
    records = json.loads(text)["jobs"]
    assert len(records) == len(expected) > 3
    for record, want in zip(records, expected, strict=True):
        assert job_from_pyslurm(_as_pyslurm(record)) == want


@pytest.mark.parametrize(
    ("fields", "nodes", "start", "end"),
    [
        # pending: pyslurm gives the expected start, squeue's parser none; no nodes yet
        ({"state": "PENDING", "allocated_nodes": None, "start_time": 200}, (), None, 900.0),
        # a merged expander ends with no nodes and so without a start time
        ({"state": "COMPLETED", "allocated_nodes": None, "start_time": 100}, (), None, 900.0),
        ({"state": "RUNNING", "allocated_nodes": "n[1,3]"}, ("n1", "n3"), 100.0, 900.0),
        ({"state": "COMPLETING", "allocated_nodes": "n2"}, ("n2",), 100.0, 900.0),
        ({"state": "RUNNING", "allocated_nodes": "n1", "end_time": None}, ("n1",), 100.0, None),
    ],
)
def test_job_fields(fields, nodes, start, end):
    base = dict(
        id=7,
        name=None,
        state="RUNNING",
        allocated_nodes="n1",
        num_nodes=None,
        comment=None,
        submit_time=50,
        start_time=100,
        end_time=900,
        time_limit=None,
        batch_host=None,
        working_directory=None,
        user_name="root",
        partition="debug",
        account=None,
        qos=None,
        state_reason="None",
        array_id=None,
        array_tasks_waiting=None,
        array_tasks_parallel=None,
    )
    job = job_from_pyslurm(SimpleNamespace(**{**base, **fields}))
    assert (job.nodes, job.start_time_s, job.end_time_s) == (nodes, start, end)
    assert job.node_count == len(nodes)  # pyslurm's None node count falls back to the nodes
    assert (job.name, job.comment, job.workdir, job.account, job.qos) == ("",) * 5
    assert job.batch_host is None and job.submit_time_s == 50.0


@pytest.mark.parametrize(
    ("value", "nodes"),
    [
        (["n[1-3]"], ("n1", "n2", "n3")),
        (["n[1", "4-5]"], ("n1", "n4", "n5")),  # the hostlist split at its commas
        (["n1", "n7"], ("n1", "n7")),
        ("n[2-3]", ("n2", "n3")),
        ([], ()),
        (None, ()),
    ],
)
def test_step_nodes(value, nodes):
    assert step_nodes(value) == nodes


@pytest.mark.parametrize(
    ("minutes", "seconds"), [(7, 420.0), (525600, 31536000.0), (None, None), (0xFFFFFFFE, None)]
)
def test_time_limit(minutes, seconds):
    base = _as_pyslurm(
        json.loads((GOLDEN / "squeue_running_pending_expander.json").read_text())["jobs"][0]
    )
    base.time_limit = minutes
    assert job_from_pyslurm(base).time_limit_s == seconds


# ---------------------------------------------------------------------------- nodes


@needs_libslurm
@pytest.mark.parametrize("base", [0, 1, 2, 3, 4, 5, 6])
def test_node_state_names_round_trip_through_libslurm(base):
    for bit in [0, *pyslurm_backend._NODE_FLAGS.values()]:
        bits = base | bit
        complete = LIBSLURM.slurm_node_state_string_complete(bits).decode()
        assert node_state_bits(complete) == bits, complete


def _state_string(bits: int) -> bytes:
    return LIBSLURM.slurm_node_state_string(bits)


@needs_libslurm
@pytest.mark.parametrize(
    ("complete", "alloc", "total", "sinfo", "model"),
    [
        ("IDLE", 0, 2, "idle", NodeState.IDLE),
        ("ALLOCATED", 2, 2, "allocated", NodeState.ALLOCATED),
        ("ALLOCATED", 1, 2, "mixed", NodeState.ALLOCATED),  # sinfo's view of a part-used node
        ("MIXED", 1, 2, "mixed", NodeState.ALLOCATED),
        ("IDLE+DRAIN", 0, 1, "drained", NodeState.UNAVAILABLE),
        ("ALLOCATED+DRAIN", 1, 1, "draining", NodeState.UNAVAILABLE),
        ("IDLE+NOT_RESPONDING", 0, 1, "idle*", NodeState.UNAVAILABLE),
        ("DOWN+NOT_RESPONDING", 0, 1, "down*", NodeState.UNAVAILABLE),
        ("IDLE+POWERED_DOWN", 0, 1, "idle~", NodeState.UNAVAILABLE),
        ("IDLE+COMPLETING", 0, 1, "completing", NodeState.ALLOCATED),
        ("IDLE+MAINTENANCE", 0, 1, "maint", NodeState.UNAVAILABLE),
        ("IDLE+CLOUD+?", 0, 1, "idle", NodeState.IDLE),
        ("FUTURE", 0, 1, "future", NodeState.UNAVAILABLE),
    ],
)
def test_node_states_read_as_sinfo_prints_them(complete, alloc, total, sinfo, model):
    state = node_state_long(complete, alloc, total, _state_string)
    assert state == sinfo
    assert parse.node_state(state) is model


def test_unknown_node_state_is_kept_for_the_parser_to_flag():
    state = node_state_long("WEIRD+NEW_FLAG", 0, 1, lambda bits: pytest.fail("not called"))
    assert state == "weird+new_flag"
    assert parse.node_state(state) is NodeState.UNKNOWN


# ---------------------------------------------------------------------------- submit options


@pytest.mark.parametrize("kind", ["rigid", "moldable", "malleable"])
def test_submit_description_translates_every_rendered_option(kind):
    argv = json.loads((GOLDEN / f"render_{kind}_sbatch_argv.txt").read_text())
    desc = submit_description(argv)
    nodes = next(a for a in argv if a.startswith("--nodes=")).removeprefix("--nodes=")
    assert desc["nodes"] == nodes
    assert desc["ntasks"] == int(nodes.split("-")[0]) * desc["ntasks_per_node"]
    # every option but --parsable has its keyword, with sbatch's value
    assert len(desc) == len(argv) - 2 + 1  # minus sbatch and --parsable, plus ntasks
    assert desc["working_directory"] == "/work/run dir"


def test_submit_description_refuses_what_it_cannot_translate():
    with pytest.raises(ValueError, match="--exclusive"):
        submit_description(["sbatch", "--parsable", "--nodes=1", "--exclusive"])
    with pytest.raises(ValueError, match="not an sbatch"):
        submit_description(["salloc", "--nodes=1"])


def test_submit_description_array_and_site_options():
    desc = submit_description(
        ["sbatch", "--nodes=1", "--array=0-5%2", "--partition=p", "--account=a", "--qos=q"]
    )
    assert desc == {
        "nodes": "1",
        "array": "0-5%2",
        "partitions": "p",
        "account": "a",
        "qos": "q",
        "ntasks": 1,
    }


# ---------------------------------------------------------------------------- errors


class FakeRPCError(Exception):
    def __init__(self, msg: str, errno: int) -> None:
        super().__init__(msg)
        self.msg, self.errno = msg, errno


@pytest.mark.parametrize(
    ("exc", "errno", "transient"),
    [
        (FakeRPCError("Invalid job id specified", 2017), 2017, False),
        (ValueError(("Job/step already completing or completed", 2021)), 2021, False),
        (ValueError("Unable to contact slurm controller (connect failure)", 1800), 1800, True),
        (
            FakeRPCError(
                "Job update not available right now, the DB index is being set, try again in a bit",
                2080,
            ),
            2080,
            True,
        ),
        (FakeRPCError("Something new", 4242), 4242, True),  # transient by its number
        (ValueError("You need to provide a batch script."), None, False),
    ],
)
def test_errors_become_slurm_command_errors(exc, errno, transient):
    err = command_error(("pyslurm", "Job.modify", "JobId=5"), exc, frozenset({4242}))
    assert err.returncode == errno and err.transient is transient
    assert err.argv == ("pyslurm", "Job.modify", "JobId=5")
    assert err.stderr and err.stderr in str(err)
    assert ("retrying can help" in str(err)) is transient


# ---------------------------------------------------------------------------- availability


@pytest.fixture()
def fake_pyslurm(monkeypatch, tmp_path):
    """A stand-in pyslurm module (22.5.3 on libslurm 22.05.8) and a slurm.conf for it."""
    module = types.ModuleType("pyslurm")
    module.__version__ = "22.5.3"
    module.slurm_api_version = lambda: (22, 5, 8)
    module.calls = []
    module.slurm_fini = lambda: module.calls.append("fini")
    module.slurm_init = lambda path=None: module.calls.append(("init", path))
    monkeypatch.setitem(sys.modules, "pyslurm", module)
    monkeypatch.setattr(pyslurm_backend, "_init_conf", None)
    monkeypatch.setattr(pyslurm_backend, "_live", weakref.WeakSet())
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=fake\n")
    return module, conf


def test_available_when_versions_match(fake_pyslurm):
    module, conf = fake_pyslurm
    ok, why = pyslurm_available((22, 5, 8), conf)
    assert ok and "22.5.3" in why and "22.05.8" in why
    assert module.calls == ["fini", ("init", str(conf))]  # libslurm now reads this site's file
    assert pyslurm_available("slurm-wlm 22.05.2", conf)[0]
    assert module.calls == ["fini", ("init", str(conf))]  # the same file: not again


@pytest.mark.parametrize(
    ("version", "api", "words"),
    [
        ((23, 2, 7), (22, 5, 8), "major version"),
        ((24, 11, 5), (22, 5, 8), "major version"),
        ((22, 5, 8), (23, 2, 1), "libslurm 23.2.1"),
    ],
)
def test_unavailable_for_another_slurm(fake_pyslurm, version, api, words):
    module, conf = fake_pyslurm
    module.slurm_api_version = lambda: api
    ok, why = pyslurm_available(version, conf)
    assert not ok and words in why


def test_unavailable_without_pyslurm(monkeypatch):
    monkeypatch.delitem(sys.modules, "pyslurm", raising=False)
    monkeypatch.setattr(pyslurm_backend.importlib.util, "find_spec", lambda name: None)
    ok, why = pyslurm_available((22, 5, 8))
    assert not ok and "not installed" in why


def test_no_import_for_another_slurm(monkeypatch, tmp_path):
    """pyslurm made for another Slurm is not even imported (it would load the wrong API)."""
    monkeypatch.delitem(sys.modules, "pyslurm", raising=False)
    monkeypatch.setattr(pyslurm_backend.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(pyslurm_backend.importlib.metadata, "version", lambda name: "25.11.1")
    ok, why = pyslurm_available((22, 5, 8), tmp_path / "slurm.conf")
    assert not ok and "25.11.1" in why and "(25.11)" in why and "22.05.8" in why
    assert "pyslurm" not in sys.modules


def test_no_import_without_a_slurm_conf(monkeypatch, tmp_path):
    """libslurm ends the process when its slurm.conf is missing: pyslurm is not imported."""
    monkeypatch.delitem(sys.modules, "pyslurm", raising=False)
    monkeypatch.setattr(
        pyslurm_backend.importlib.util, "find_spec", lambda name: object()
    )  # "installed"
    missing = tmp_path / "none" / "slurm.conf"
    ok, why = pyslurm_available((22, 5, 8), missing)
    assert not ok and str(missing) in why
    assert "pyslurm" not in sys.modules


def test_one_slurm_conf_per_process(fake_pyslurm, tmp_path):
    module, conf = fake_pyslurm
    first = PyslurmBackend(slurm_conf=conf)
    other = tmp_path / "other.conf"
    other.write_text("ClusterName=other\n")
    with pytest.raises(ConfigError, match="one configuration per process"):
        PyslurmBackend(slurm_conf=other)
    assert first.slurm_conf == str(conf)
    del first  # once no backend uses the first file, another may be used
    import gc

    gc.collect()
    assert PyslurmBackend(slurm_conf=other).slurm_conf == str(other)
    assert module.calls[-1] == ("init", str(other))


# ---------------------------------------------------------------------------- the factory


def _ssh_site(backend: str) -> SiteConfig:
    return SiteConfig(
        name="remote",
        backend=backend,
        transport=SSHTransportConfig(
            kind="ssh",
            host="login.invalid",
            user="u",
            key_file=Path("/nonexistent/key"),
            known_hosts=Path("/nonexistent/known_hosts"),
        ),
    )


def test_pyslurm_is_never_used_over_ssh():
    with pytest.raises(ConfigError, match="transport.kind: ssh"):
        slurm_for(_ssh_site("pyslurm"))
    backend = slurm_for(_ssh_site("auto"))
    assert isinstance(backend, SlurmCLI) and isinstance(backend.transport, SSHTransport)
    with pytest.raises(ConfigError, match="SSHTransport"):
        PyslurmBackend(backend.transport)


def test_cli_backend_by_default():
    assert isinstance(slurm_for(SiteConfig(name="x")), SlurmCLI)


def test_an_imported_pyslurm_is_not_reinitialised_for_another_slurm(fake_pyslurm, monkeypatch):
    """Probing a newer flavour's Slurm from a process that uses pyslurm for 22.05 must leave
    libslurm alone (it re-initialised it with the other Slurm's file, seen in CI)."""
    module, conf = fake_pyslurm
    monkeypatch.setattr(pyslurm_backend.importlib.metadata, "version", lambda name: "22.5.3")
    ok, why = pyslurm_available((26, 5, 5), conf)
    assert not ok and "26.05.5" in why
    assert module.calls == []


def _c_getenv(name: str) -> str | None:
    libc = ctypes.CDLL(None)
    libc.getenv.restype = ctypes.c_char_p
    value = libc.getenv(name.encode())
    return None if value is None else value.decode()


@pytest.mark.parametrize("before", ["/etc/slurm/slurm.conf", None])
def test_reinitialising_libslurm_keeps_the_process_environment(fake_pyslurm, monkeypatch, before):
    """libslurm's slurm_init() setenv()s SLURM_CONF behind os.environ's back; children started
    without an explicit environment then drove the other Slurm (squeue hung in CI)."""
    module, conf = fake_pyslurm

    def slurm_init(path=None):  # what libslurm does (checked with the real one)
        module.calls.append(("init", path))
        os.putenv("SLURM_CONF", str(path))

    module.slurm_init = slurm_init
    if before is None:
        monkeypatch.delenv("SLURM_CONF", raising=False)
    else:
        monkeypatch.setenv("SLURM_CONF", before)
    assert pyslurm_available((22, 5, 8), conf)[0]
    assert module.calls == ["fini", ("init", str(conf))]
    assert _c_getenv("SLURM_CONF") == before


def test_a_passed_through_option_pyslurm_cannot_express_is_a_one_line_refusal() -> None:
    from elastic_slurm.adapter import pyslurm_backend
    from elastic_slurm.errors import InvalidRequest
    from elastic_slurm.model.request import ElasticRequest, JobKind

    backend = object.__new__(pyslurm_backend.PyslurmBackend)
    req = ElasticRequest(
        kind=JobKind.RIGID,
        nodes_min=1,
        nodes_max=1,
        program=("true",),
        sbatch_options=("--mem=4G",),
    )
    with pytest.raises(InvalidRequest, match="--mem=4G"):
        backend.submit(req, python="python3")
