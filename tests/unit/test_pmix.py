"""PMIx access without a job: the ctypes layer, the environment layout, ask-PMIx-first.

The real library is called where it is installed (outside a job ``PMIx_Init`` must fail with
-25 and be remembered); the server's answers inside a job are replaced by a fake client here
and exercised for real by ``tests/integration/test_pmix_live.py``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from elastic_slurm.adapter.capabilities import Capabilities, _pmix, pmix_probe_argv
from elastic_slurm.adapter.transport.base import Completed
from elastic_slurm.adapter.transport.local import LocalTransport
from elastic_slurm.mpi_runtime import layout, pmix

HEADERS = Path("/usr/lib/x86_64-linux-gnu/pmix2/include")


def _have_library() -> bool:
    try:
        ctypes.CDLL(pmix.LIBRARY)
    except OSError:
        return False
    return True


@pytest.fixture(autouse=True)
def _fresh_pmix():
    pmix._forget()
    yield
    pmix._forget()


# ------------------------------------------------------------------ the ctypes layer
@pytest.mark.skipif(
    not (HEADERS / "pmix_common.h").exists() or shutil.which("cc") is None,
    reason="PMIx headers or a C compiler missing (libpmix-dev)",
)
def test_struct_layouts_match_the_headers(tmp_path):
    src = tmp_path / "sz.c"
    src.write_text(
        "#include <stdio.h>\n#include <stddef.h>\n#include <pmix.h>\n"
        'int main(){printf("%zu %zu %zu %zu %zu\\n", sizeof(pmix_proc_t), '
        "sizeof(pmix_value_t), sizeof(pmix_info_t), offsetof(pmix_info_t, value), "
        "sizeof(pmix_query_t)); return 0;}\n"
    )
    subprocess.run(["cc", f"-I{HEADERS}", str(src), "-o", str(tmp_path / "sz")], check=True)
    out = subprocess.run([str(tmp_path / "sz")], capture_output=True, text=True, check=True)
    expected = [
        ctypes.sizeof(pmix.ProcT),
        ctypes.sizeof(pmix.ValueT),
        ctypes.sizeof(pmix.InfoT),
        pmix.InfoT.value.offset,
        ctypes.sizeof(pmix.QueryT),
    ]
    assert [int(x) for x in out.stdout.split()] == expected


def test_key_strings_are_the_headers():
    if not (HEADERS / "pmix_common.h").exists():
        pytest.skip("PMIx headers missing (libpmix-dev)")
    text = (HEADERS / "pmix_common.h").read_text()
    for name in ("PMIX_JOB_SIZE", "PMIX_HOSTNAME", "PMIX_LOCAL_PEERS", "PMIX_ALLOC_NUM_NODES"):
        assert f"#define {name}" in text
        assert f'"{getattr(pmix, name)}"' in text.split(f"#define {name} ", 1)[1].split("\n")[0]
    assert "#define PMIX_ERR_NOT_SUPPORTED                      -47" in text


@pytest.mark.skipif(not _have_library(), reason=f"{pmix.LIBRARY} not installed")
def test_outside_a_job_init_fails_fast_once_and_is_remembered(caplog, monkeypatch):
    calls = []
    real = pmix._load

    def counting_load():
        lib = real()
        calls.append(1)
        return lib

    monkeypatch.setattr(pmix, "_load", counting_load)
    with caplog.at_level("INFO", logger="elastic_slurm.mpi_runtime.pmix"):
        client, why = pmix.connect({})
        again, why2 = pmix.connect({})
    assert client is None and again is None
    assert "-25" in why and "UNREACH" in why and why2 == why
    assert len(calls) == 1  # PMIx_Init was tried once
    assert sum("PMIx not used" in r.message for r in caplog.records) == 1
    ms = float(why.split("after ")[1].split(" ms")[0])
    assert ms < 2000


def test_opt_out_loads_nothing(monkeypatch):
    monkeypatch.setattr(pmix, "_load", lambda: pytest.fail("library loaded despite opt-out"))
    client, why = pmix.connect({"ELASTIC_SLURM_PMIX": "0"})
    assert client is None and "ELASTIC_SLURM_PMIX=0" in why


def test_values_are_decoded():
    v = pmix.ValueT()
    v.type = pmix.PMIX_UINT32
    v.data.uint32 = 7
    assert pmix._value(v) == 7
    s = ctypes.create_string_buffer(b"n1,n2")
    v.type = pmix.PMIX_STRING
    v.data.string = ctypes.cast(s, ctypes.c_void_p).value
    assert pmix._value(v) == "n1,n2"
    v.type = 999
    assert pmix._value(v) is None


# ------------------------------------------------------------------ layout from the environment
def test_srun_block_and_cyclic():
    env = {
        "SLURM_PROCID": "2",
        "SLURM_STEP_NODELIST": "n[1-2]",
        "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
        "SLURM_STEP_NUM_TASKS": "4",
        "SLURM_JOB_NODELIST": "n[1-3]",
    }
    lay = layout.from_env(env, hostname="n2")
    assert (lay.scope, lay.size, lay.rank) == ("step", 4, 2)
    assert lay.rank_hosts == ("n1", "n1", "n2", "n2") and lay.nodes == ("n1", "n2")
    assert (lay.node_id, lay.local_ranks, lay.local_rank) == (1, (2, 3), 0)
    assert lay.allocation_nodes == ("n1", "n2", "n3")  # the job, not the step
    cyc = layout.from_env({**env, "SLURM_DISTRIBUTION": "cyclic"}, hostname="n1")
    assert cyc.rank_hosts == ("n1", "n2", "n1", "n2") and cyc.local_ranks == (0, 2)
    assert cyc.exact and not layout.from_env({**env, "SLURM_DISTRIBUTION": "plane"}).exact
    with pytest.raises(ValueError, match="add up"):
        layout.from_env({**env, "SLURM_STEP_NUM_TASKS": "5"})


def test_mpirun_under_the_elastic_launcher():
    env = {
        "OMPI_COMM_WORLD_SIZE": "4",
        "OMPI_COMM_WORLD_RANK": "1",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
        "ELASTIC_SLURM_NTASKS_PER_NODE": "2",
        "ELASTIC_SLURM_LAUNCH_HOST": "n3",
        "SLURM_JOB_NODELIST": "n[1,3]",
        "SLURM_STEP_NODELIST": "n1",  # the rsh agent's step: must not win
        "SLURM_PROCID": "0",
    }
    lay = layout.from_env(env, hostname="n3")
    assert (lay.scope, lay.nodes, lay.rank_hosts) == (
        "mpirun",
        ("n3", "n1"),
        ("n3",) * 2 + ("n1",) * 2,
    )
    assert (lay.node_id, lay.local_ranks, lay.exact) == (0, (0, 1), True)
    wrong = layout.from_env(env, hostname="n9")  # the guess cannot be right for this rank
    assert wrong.host == "n9" and wrong.exact is False


def test_singleton_and_task_counts():
    lay = layout.from_env({}, hostname="h")
    assert (lay.scope, lay.size, lay.nodes, lay.allocation_nodes) == ("singleton", 1, ("h",), ())
    assert layout.tasks_per_node("3,1(x2)") == [3, 1, 1]
    with pytest.raises(ValueError):
        layout.tasks_per_node("2(y3)")


class FakeClient:
    """Answers like Slurm's server for a 2-node, 4-rank step (rank 3)."""

    nspace = "slurm.pmix.9.0"
    rank = 3
    init_s = 0.01

    def __init__(self, alloc_status: int = pmix.PMIX_ERR_NOT_SUPPORTED) -> None:
        self.alloc_status = alloc_status
        self.alloc_calls: list[tuple[int, int]] = []

    def get(self, key, rank=None, *, missing=None):
        hosts = ["n1", "n1", "n2", "n2"]
        table = {pmix.PMIX_JOB_SIZE: 4, pmix.PMIX_LOCAL_PEERS: "2,3"}
        if key == pmix.PMIX_HOSTNAME:
            return hosts[rank]
        if key == pmix.PMIX_LOCAL_RANK:
            return rank - 2
        return table.get(key, missing)

    def allocation_request(self, directive, nodes):
        self.alloc_calls.append((directive, nodes))
        return self.alloc_status, {}

    def error_string(self, status):
        return {-47: "NOT-SUPPORTED", 0: "SUCCESS"}.get(status, str(status))


def test_pmix_and_environment_layouts_agree():
    env = {
        "SLURM_PROCID": "3",
        "SLURM_STEP_NODELIST": "n[1-2]",
        "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
        "SLURM_JOB_NODELIST": "n[1-4]",
    }
    a = layout.from_pmix(FakeClient(), env)
    b = layout.from_env(env, hostname="n2")
    assert a.source == "pmix" and b.source == "env"
    assert a.same_placement(b) and a.allocation_nodes == b.allocation_nodes
    c = layout.from_env({**env, "SLURM_PROCID": "2"}, hostname="n2")
    assert not a.same_placement(c)


# ------------------------------------------------------------------ ask PMIx first
class FakeComm:
    rank = 0
    size = 2


class FakeChannel:
    def __init__(self) -> None:
        self.requests: list[tuple[int, int]] = []

    def request(self, delta, ranks):
        self.requests.append((delta, ranks))
        return len(self.requests)


def _ec(tmp_path):
    pytest.importorskip("mpi4py")
    from elastic_slurm.mpi_runtime.session import ElasticComm
    from elastic_slurm.protocol.jobdir import JobDir

    return ElasticComm(FakeComm(), jobdir=JobDir(tmp_path), channel=FakeChannel())


def test_not_supported_falls_back_and_is_remembered_across_restarts(tmp_path, monkeypatch):
    client = FakeClient()
    monkeypatch.setattr(pmix, "connect", lambda env=None: (client, ""))
    ec = _ec(tmp_path)
    assert ec.request_nodes(2) == 1
    assert ec.request_nodes(-1) == 2
    assert client.alloc_calls == [(pmix.PMIX_ALLOC_EXTEND, 2)]  # asked once only
    assert ec.channel.requests == [(2, 2), (-1, 2)]
    restarted = _ec(tmp_path)  # a new generation of the same job
    assert restarted.request_nodes(1) == 1
    assert client.alloc_calls == [(pmix.PMIX_ALLOC_EXTEND, 2)]
    events = [e for e in ec.jobdir.events() if e["event"] == "pmix"]
    assert len(events) == 1 and events[0]["status"] == -47
    memo = json.loads((tmp_path / "pmix.json").read_text())
    assert memo["directive"] == "EXTEND" and memo["status"] == -47


def test_a_granting_server_is_used_instead_of_the_controller(tmp_path, monkeypatch):
    client = FakeClient(alloc_status=0)
    monkeypatch.setattr(pmix, "connect", lambda env=None: (client, ""))
    ec = _ec(tmp_path)
    assert ec.request_nodes(-1) == 0
    assert client.alloc_calls == [(pmix.PMIX_ALLOC_RELEASE, 1)]
    assert ec.channel.requests == [] and not (tmp_path / "pmix.json").exists()


def test_without_pmix_the_controller_is_asked(tmp_path, monkeypatch):
    monkeypatch.setattr(pmix, "connect", lambda env=None: (None, "no server"))
    ec = _ec(tmp_path)
    assert ec.request_nodes(1) == 1 and ec.channel.requests == [(1, 2)]
    assert not any(e["event"] == "pmix" for e in ec.jobdir.events())


# ------------------------------------------------------------------ the doctor's probe steps
class StepTransport(LocalTransport):
    def __init__(self, outputs):
        super().__init__()
        self.outputs = outputs
        self.argvs = []

    def run(self, argv, timeout_s=None, env=None, **kw):
        self.argvs.append(list(argv))
        launcher = "mpirun" if "mpirun" in argv else "srun"
        rc, out, err = self.outputs[launcher]
        return Completed(tuple(argv), rc, out, err, 0.0)


def test_doctor_pmix_facts_and_unknowns():
    report = {
        "available": True,
        "version": "OpenPMIx 4.2.2",
        "spawn": True,
        "allocation": False,
        "extend_status": -47,
    }
    transport = StepTransport(
        {
            "mpirun": (0, "noise\n" + json.dumps(report) + "\n", ""),
            "srun": (1, "", "srun: error: Unable to allocate resources: Requested nodes are busy"),
        }
    )
    version, spawn, allocation, detail = _pmix(transport, local=True)
    assert version == "OpenPMIx 4.2.2"
    assert spawn["mpirun"] is True and allocation["mpirun"] is False
    assert spawn["srun"].startswith("unknown: ") and "busy" in spawn["srun"]
    assert detail["mpirun"]["extend_status"] == -47
    assert transport.argvs[0][:2] == ["srun", "--mpi=pmix"]
    _v, spawn, _a, _d = _pmix(transport, local=False)
    assert spawn["srun"].startswith("unknown: not probed over SSH")
    with pytest.raises(ValueError):
        pmix_probe_argv("prun")


def test_old_caches_without_pmix_fields_still_load():
    caps = Capabilities.from_json(
        {
            k: v
            for k, v in Capabilities(
                "22.05.8",
                True,
                False,
                (),
                "",
                "",
                True,
                "",
                None,
                None,
                "",
                None,
                "",
                "merge",
                "r",
            )
            .to_json()
            .items()
            if not k.startswith("pmix")
        }
    )
    assert caps.pmix_spawn == {} and caps.pmix_version is None
