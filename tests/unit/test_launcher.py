"""The pure helpers of ``elastic-slurm run``: ``mpi_runtime/launcher.py``."""

from __future__ import annotations

import pytest

from elastic_slurm.mpi_runtime import launcher
from elastic_slurm.mpi_runtime.launcher import mpirun_argv, mpirun_env, program_argv

PY = "/venv/bin/python"


@pytest.mark.parametrize(
    ("program", "argv"),
    [
        (["app.py", "-n", "3"], [PY, "-m", "mpi4py", "app.py", "-n", "3"]),
        (("examples/heat2d.py",), [PY, "-m", "mpi4py", "examples/heat2d.py"]),
        (["/bin/hostname"], ["/bin/hostname"]),
        (["./solver", "x.py"], ["./solver", "x.py"]),  # only the program itself counts
        (["APP.PY"], ["APP.PY"]),
        (["python3", "app.py"], ["python3", "-m", "mpi4py", "app.py"]),
        (["/usr/bin/python3", "-u", "app.py"], ["/usr/bin/python3", "-u", "app.py"]),
        (["python3"], ["python3"]),
    ],
)
def test_program_argv(program: list[str], argv: list[str]) -> None:
    assert program_argv(program, python=PY) == argv


@pytest.mark.parametrize("program", [[], ()])
def test_program_argv_needs_a_program(program: list[str]) -> None:
    with pytest.raises(ValueError, match=r"no application given: elastic-slurm run APP \[ARGS\]"):
        program_argv(program, python=PY)


@pytest.mark.parametrize(
    ("nodes", "per_node", "program", "argv"),
    [
        (
            ["n1", "n2"],
            1,
            ["python", "app.py"],
            ["mpirun", "-n", "2", "--host", "n1:1,n2:1", "--bind-to", "none", "python", "app.py"],
        ),
        (
            ("n3", "n1", "n2"),
            4,
            ["a b", "$(x)"],
            ["mpirun", "-n", "12", "--host", "n3:4,n1:4,n2:4", "--bind-to", "none", "a b", "$(x)"],
        ),
        (["n1"], 2, ["x"], ["mpirun", "-n", "2", "--host", "n1:2", "--bind-to", "none", "x"]),
    ],
)
def test_mpirun_argv(nodes: list[str], per_node: int, program: list[str], argv: list[str]) -> None:
    assert mpirun_argv(nodes, per_node, program) == argv


BASE_ENV = {
    "OMPI_MCA_plm": "rsh",
    "OMPI_MCA_plm_rsh_agent": f"{PY} -m elastic_slurm.mpi_runtime.rsh_agent",
    "OMPI_MCA_plm_rsh_no_tree_spawn": "1",
    "OMPI_MCA_orte_leave_session_attached": "1",
    "PRTE_MCA_plm": "ssh",
    "PRTE_MCA_plm_ssh_agent": f"{PY} -m elastic_slurm.mpi_runtime.rsh_agent",
    "PRTE_MCA_plm_ssh_no_tree_spawn": "1",
    "PRTE_MCA_prte_elastic_mode": "1",
    "PRTE_MCA_ras": "^slurm",
}
ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def test_mpirun_env_not_root() -> None:
    assert mpirun_env(PY, as_root=False) == BASE_ENV


def test_mpirun_env_root() -> None:
    assert mpirun_env(PY, as_root=True) == {**BASE_ENV, **ROOT_ENV}


@pytest.mark.parametrize(("euid", "extra"), [(0, ROOT_ENV), (1000, {})])
def test_mpirun_env_detects_root(
    monkeypatch: pytest.MonkeyPatch, euid: int, extra: dict[str, str]
) -> None:
    monkeypatch.setattr(launcher.os, "geteuid", lambda: euid)
    assert mpirun_env(PY) == {**BASE_ENV, **extra}


class _Steps:
    """Slurm as the launcher sees it: the job's steps (none left on any node)."""

    def steps(self, job_id: int) -> dict[str, list[str]]:
        return {f"{job_id}.batch": ["n1"]}

    def elastic_nodes(self, job_id: int) -> dict[str, int]:
        return {"n1": job_id, "n2": job_id}


def test_a_successor_the_application_gave_up_on_is_stopped_before_the_order_fails(
    tmp_path, monkeypatch
) -> None:
    import subprocess
    import time

    from elastic_slurm.model.resize_order import AckStatus
    from elastic_slurm.mpi_runtime import handover
    from elastic_slurm.mpi_runtime.launcher import Launcher, _Generation

    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    (tmp_path / "mpirun").write_text("#!/bin/sh\n")
    (tmp_path / "mpirun").chmod(0o755)
    env = {"SLURM_JOB_ID": "7", "PATH": f"{tmp_path}:/usr/bin:/bin"}
    env["ELASTIC_SLURM_JOB_DIR"] = str(tmp_path / "job")
    launcher = Launcher(["app.py"], env=env, slurm=_Steps())  # type: ignore[arg-type]
    launcher.jobdir.create()
    current = _Generation(subprocess.Popen(["sleep", "30"]), ("n1",), 0, [], time.monotonic())
    waiting = _Generation(
        subprocess.Popen(["sleep", "30"]), ("n1", "n2"), 1, [], time.monotonic(), successor=1
    )
    try:
        assert launcher._tend_successor(current, waiting) is waiting  # nothing asked yet
        assert launcher.jobdir.read_ack(1, AckStatus.FAILED) is None
        handover.cancel(launcher.jobdir, 1, "the next generation was not ready within 0.3 s")
        assert launcher._tend_successor(current, waiting) is None
        assert waiting.proc.poll() is not None  # stopped ...
        ack = launcher.jobdir.read_ack(1, AckStatus.FAILED)  # ... and only then failed
        assert ack is not None and "not ready" in ack.reason and ack.nodes == ("n1",)
        assert current.proc.poll() is None  # the running generation goes on
    finally:
        for gen in (current, waiting):
            gen.proc.kill()
            gen.proc.wait()


def test_a_stopped_generation_takes_what_it_started_along(tmp_path, monkeypatch) -> None:
    """``mpirun`` may end on SIGTERM before the ``srun`` it started for a daemon has made its
    step; that ``srun`` must not live on and make it on a node the job gives back."""
    import sys
    from pathlib import Path

    from elastic_slurm.mpi_runtime.launcher import Launcher
    from elastic_slurm.waiting import wait_for

    monkeypatch.setattr(launcher.os, "isatty", lambda fd: False)  # a batch job's input
    env = {"SLURM_JOB_ID": "7", "ELASTIC_SLURM_JOB_DIR": str(tmp_path / "job")}
    srun_pid = tmp_path / "srun.pid"
    # Open MPI's mpirun starts each daemon's srun in a process group of its own
    mpirun = (
        "import pathlib, signal, subprocess, sys\n"
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
        "srun = subprocess.Popen(['sleep', '60'], process_group=0)\n"
        f"pathlib.Path('{srun_pid}').write_text(str(srun.pid))\n"
        "signal.pause()\n"
    )
    gen = Launcher(["app.py"], env=env, slurm=_Steps())._popen(  # type: ignore[arg-type]
        [sys.executable, "-c", mpirun], {"PATH": "/usr/bin:/bin"}, 1
    )
    started = wait_for(
        lambda: srun_pid.exists() and srun_pid.read_text(), timeout_s=20, what="the srun's pid"
    )
    pid = int(started)
    launcher._stop(gen)
    assert gen.returncode == 0  # the "mpirun" ended on SIGTERM (its handler) ...
    stat = Path(f"/proc/{pid}/stat")  # ... and the "srun" with it (gone, or a zombie)
    assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"


class _Helpers(_Steps):
    """Slurm with one sibling allocation; ``cancel`` notes whether ``mpirun`` had ended."""

    def __init__(self, stopped: object) -> None:
        self.stopped = stopped
        self.cancelled: list[tuple[tuple[int, ...], bool]] = []

    def helpers(self, job_id: int) -> list[object]:
        from types import SimpleNamespace

        return [SimpleNamespace(job_id=8)] if not self.cancelled else []

    def cancel(self, *ids: int) -> None:
        self.cancelled.append((ids, self.stopped.exists()))  # type: ignore[attr-defined]


def test_a_cancelled_job_cancels_its_helpers_before_stopping_mpirun(tmp_path, monkeypatch) -> None:
    """Slurm's SIGKILL follows SIGTERM after KillWait: the helpers must not wait for mpirun."""
    import os
    import signal
    import threading

    from elastic_slurm.mpi_runtime.launcher import Launcher

    stopped = tmp_path / "mpirun-stopped"
    # an mpirun that takes a while to stop, and notes when it has
    (tmp_path / "mpirun").write_text(
        f"#!/bin/sh\ntrap 'sleep 1; touch {stopped}; exit 143' TERM\nsleep 30 & wait\n"
    )
    (tmp_path / "mpirun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    env = {"SLURM_JOB_ID": "7", "PATH": f"{tmp_path}:/usr/bin:/bin"}
    env["ELASTIC_SLURM_JOB_DIR"] = str(tmp_path / "job")
    slurm = _Helpers(stopped)
    launcher = Launcher(["app.py"], env=env, slurm=slurm)  # type: ignore[arg-type]
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    try:
        assert launcher.run() == 128 + signal.SIGTERM
    finally:
        timer.cancel()
    assert slurm.cancelled == [((8,), False)]  # once, and while mpirun was still stopping
    assert stopped.exists()  # then mpirun was stopped
    events = [e["event"] for e in launcher.jobdir.events()]
    assert events.count("helpers_cancelled") == 1
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN  # restored


class _Unreachable(_Steps):
    """Slurm that stopped answering by the time the program ended."""

    def helpers(self, job_id: int) -> list[object]:
        from elastic_slurm.errors import SlurmUnavailableError

        raise SlurmUnavailableError(["squeue", "--json"], 0, "", "slurm_load_jobs failed")


def test_a_program_that_ended_well_is_not_failed_by_a_cleanup_slurm_could_not_do(
    tmp_path, monkeypatch, capsys
) -> None:
    from elastic_slurm.mpi_runtime.launcher import Launcher

    (tmp_path / "mpirun").write_text("#!/bin/sh\nexit 0\n")  # the program ends well at once
    (tmp_path / "mpirun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    env = {"SLURM_JOB_ID": "7", "PATH": f"{tmp_path}:/usr/bin:/bin"}
    env["ELASTIC_SLURM_JOB_DIR"] = str(tmp_path / "job")
    launcher = Launcher(["app.py"], env=env, slurm=_Unreachable())  # type: ignore[arg-type]
    assert launcher.run() == 0
    assert "warning: could not cancel the job's helper allocations" in capsys.readouterr().err


def test_a_job_s_own_slurm_calls_ride_out_a_slurmctld_restart() -> None:
    from elastic_slurm.mpi_runtime.slurm_env import JOB_SLURM_RETRY_S, job_slurm

    assert job_slurm({}).retry_s == JOB_SLURM_RETRY_S >= 120  # the soak's outage: 2 minutes
    assert job_slurm({"ELASTIC_SLURM_SLURM_RETRY_S": "30"}).retry_s == 30
    assert job_slurm({"ELASTIC_SLURM_SLURM_RETRY_S": "1e9"}).retry_s == 3600  # the cap


class _Outage(_Steps):
    """Slurm whose ``scontrol ping`` says DOWN ``down`` times, then UP."""

    retry_s = 30.0

    def __init__(self, down: int, unregistered: int = 0) -> None:
        from types import SimpleNamespace

        self.pings = 0
        self.unregistered = unregistered  # listings of the nodes before they register again
        self.listings = 0

        def run(argv: list[str], timeout_s: float | None = None) -> SimpleNamespace:
            assert argv == ["scontrol", "ping"]
            self.pings += 1
            state = "DOWN" if self.pings <= down else "UP"
            return SimpleNamespace(stdout=f"Slurmctld(primary) at head is {state}\n")

        self.transport = SimpleNamespace(run=run)

    def helpers(self, job_id: int) -> list[object]:
        return []

    def nodes(self) -> list[object]:
        from elastic_slurm.adapter.parse import SlurmNode

        self.listings += 1
        state = "unknown" if self.listings <= self.unregistered else "allocated"
        return [SlurmNode("n1", state, 1), SlurmNode("n2", "allocated", 1)]


def _mpirun(tmp_path, body: str) -> dict[str, str]:
    """A fake mpirun on PATH (it counts its calls in ``calls``); the launcher's environment."""
    calls = tmp_path / "calls"
    (tmp_path / "mpirun").write_text(f"#!/bin/sh\necho x >> {calls}\n{body}\n")
    (tmp_path / "mpirun").chmod(0o755)
    env = {"SLURM_JOB_ID": "7", "PATH": f"{tmp_path}:/usr/bin:/bin"}
    env["ELASTIC_SLURM_JOB_DIR"] = str(tmp_path / "job")
    return env


def test_a_generation_srun_could_not_start_runs_again_once_slurmctld_answers(
    tmp_path, monkeypatch, capsys
) -> None:
    # a soak lost a job that started as slurmctld stopped: srun could not start mpirun's
    # daemons ("Unable to confirm allocation"), mpirun failed, and the job with it
    from elastic_slurm.mpi_runtime.launcher import Launcher

    # the first mpirun fails before any rank runs; the second one ends well
    env = _mpirun(tmp_path, f'[ "$(wc -l < {tmp_path / "calls"})" -ge 2 ] || exit 1')
    monkeypatch.setenv("PATH", env["PATH"])
    slurm = _Outage(down=2)
    launcher = Launcher(["app.py"], env=env, slurm=slurm)  # type: ignore[arg-type]
    launcher.host = "n1"  # the batch host, one of the job's nodes
    assert launcher.run() == 0
    assert (tmp_path / "calls").read_text().count("x") == 2
    assert "while slurmctld did not answer" in capsys.readouterr().err
    events = [e["event"] for e in launcher.jobdir.events()]
    assert events == ["launch", "exit", "relaunch", "launch", "exit"]


def test_an_earlier_run_s_events_do_not_stop_a_relaunch(tmp_path, monkeypatch) -> None:
    # a requeued job keeps its directory: its first run's ranks logged `started` there
    from elastic_slurm.mpi_runtime.launcher import Launcher
    from elastic_slurm.protocol.jobdir import JobDir

    env = _mpirun(tmp_path, f'[ "$(wc -l < {tmp_path / "calls"})" -ge 2 ] || exit 1')
    monkeypatch.setenv("PATH", env["PATH"])
    earlier = JobDir(tmp_path / "job")
    earlier.create()
    earlier.log_event("launch", generation=0, nodes=["n1"], ranks=1)
    earlier.log_event("started", generation=0, ranks=1)
    earlier.log_event("exit", generation=0, status=0)
    launcher = Launcher(["app.py"], env=env, slurm=_Outage(down=2))  # type: ignore[arg-type]
    launcher.host = "n1"  # the batch host, one of the job's nodes
    assert launcher.run() == 0
    assert (tmp_path / "calls").read_text().count("x") == 2  # launched again
    assert [e["event"] for e in launcher.jobdir.events()][3:] == [
        "launch",
        "exit",
        "relaunch",
        "launch",
        "exit",
    ]


@pytest.mark.parametrize("ran, down", [(True, 1000), (False, 0)])
def test_a_failed_generation_runs_once_if_its_ranks_ran_or_slurmctld_answers(
    tmp_path, monkeypatch, ran, down
) -> None:
    from elastic_slurm.mpi_runtime.launcher import Launcher

    started = '{"event": "started", "generation": 0, "ranks": 2}'
    body = f"echo '{started}' >> \"$ELASTIC_SLURM_JOB_DIR/events.jsonl\"\n" if ran else ""
    env = _mpirun(tmp_path, body + "exit 3")
    monkeypatch.setenv("PATH", env["PATH"])
    launcher = Launcher(["app.py"], env=env, slurm=_Outage(down))  # type: ignore[arg-type]
    assert launcher.run() == 3  # the program's own failure stands
    assert (tmp_path / "calls").read_text().count("x") == 1


def test_the_launcher_does_not_start_mpi() -> None:
    """Importing mpi4py.MPI starts MPI: the launcher would become a singleton with a daemon of
    its own (``orted --hnp``) in the job's batch step, and pay a third of a second for it."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from elastic_slurm.cli import run\n"
        "from elastic_slurm.mpi_runtime import launcher\n"
        "print(sorted(m for m in sys.modules if m.startswith('mpi4py.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "mpi4py.MPI" not in out.stdout, out.stdout


class _Siblings(_Steps):
    """A job (7) on n1 and n2 with a sibling allocation (9) on n3; counts Slurm's listings."""

    def __init__(self) -> None:
        self.asked = 0
        self.down = False

    def elastic_nodes(self, job_id: int) -> dict[str, int]:
        from elastic_slurm.errors import SlurmUnavailableError

        self.asked += 1
        if self.down:
            raise SlurmUnavailableError(["squeue"], 1, "", "Unable to contact slurm controller")
        return {"n1": job_id, "n2": job_id, "n3": 9}

    def helpers(self, job_id: int) -> list[object]:
        return []


def test_mpirun_tells_its_launch_agents_which_allocation_holds_each_node(
    tmp_path, monkeypatch
) -> None:
    # every daemon's agent used to list the whole queue to find its node's allocation
    from elastic_slurm.mpi_runtime.launcher import Launcher

    seen = tmp_path / "holders"
    env = _mpirun(tmp_path, f'echo "$ELASTIC_SLURM_NODE_HOLDERS" > {seen}')
    monkeypatch.setenv("PATH", env["PATH"])
    slurm = _Siblings()
    launcher = Launcher(["app.py"], env=env, slurm=slurm)  # type: ignore[arg-type]
    launcher.host = "n1"
    assert launcher.run() == 0
    assert seen.read_text().strip() == "n1=7,n2=7,n3=9"
    assert slurm.asked == 1  # the launcher's own look at its nodes, reused


def test_the_holders_are_asked_again_when_old_or_incomplete_and_left_out_in_an_outage(
    tmp_path, monkeypatch
) -> None:
    from elastic_slurm.mpi_runtime import launcher as launcher_module
    from elastic_slurm.mpi_runtime.launcher import Launcher

    env = {"SLURM_JOB_ID": "7", "ELASTIC_SLURM_JOB_DIR": str(tmp_path / "job")}
    slurm = _Siblings()
    launcher = Launcher(["app.py"], env=env, slurm=slurm)  # type: ignore[arg-type]
    assert launcher.holders(["n1", "n3"]) == {"n1": 7, "n3": 9} and slurm.asked == 1
    assert launcher.holders(["n3"]) == {"n3": 9} and slurm.asked == 1  # fresh: reused
    assert launcher.holders(["n4"]) == {} and slurm.asked == 2  # not in the answer: asked
    monkeypatch.setattr(launcher_module, "HOLDERS_FRESH_S", 0.0)
    assert launcher.holders(["n2"]) == {"n2": 7} and slurm.asked == 3  # too old: asked
    slurm.down = True
    assert launcher.holders(["n2"]) == {} and slurm.asked == 4  # the agents ask themselves


def test_a_relaunch_after_an_outage_waits_for_the_nodes_to_register_again(
    tmp_path, monkeypatch
) -> None:
    # seen live: relaunched as soon as slurmctld answered, the daemon's srun was refused
    # ("Memory required by task is not available") while the nodes were still "unknown"
    from elastic_slurm.mpi_runtime import launcher as launcher_module
    from elastic_slurm.mpi_runtime.launcher import Launcher

    monkeypatch.setattr(launcher_module, "wait_for", _no_sleep_wait_for)
    env = _mpirun(tmp_path, f'[ "$(wc -l < {tmp_path / "calls"})" -ge 2 ] || exit 1')
    monkeypatch.setenv("PATH", env["PATH"])
    slurm = _Outage(down=2, unregistered=3)
    launcher = Launcher(["app.py"], env=env, slurm=slurm)  # type: ignore[arg-type]
    launcher.host = "n1"
    assert launcher.run() == 0
    assert slurm.listings == 4  # unknown three times, then registered: relaunched
    events = [e["event"] for e in launcher.jobdir.events()]
    assert events == ["launch", "exit", "relaunch", "launch", "exit"]


def test_a_node_that_never_registers_again_ends_the_job_after_the_retry_window(
    tmp_path, monkeypatch, capsys
) -> None:
    from elastic_slurm.mpi_runtime import launcher as launcher_module
    from elastic_slurm.mpi_runtime.launcher import Launcher

    monkeypatch.setattr(launcher_module, "wait_for", _no_sleep_wait_for)
    env = _mpirun(tmp_path, "exit 1")
    monkeypatch.setenv("PATH", env["PATH"])
    slurm = _Outage(down=2, unregistered=10**9)
    slurm.retry_s = 0.05
    launcher = Launcher(["app.py"], env=env, slurm=slurm)  # type: ignore[arg-type]
    launcher.host = "n1"
    assert launcher.run() == 1
    assert (tmp_path / "calls").read_text().count("x") == 1  # not launched again
    assert "mpirun exited with status 1" in capsys.readouterr().err


def _no_sleep_wait_for(check, timeout_s, what, interval_s=0.0, max_interval_s=0.0):  # noqa: ANN001, ANN202
    """``waiting.wait_for`` without its sleeps (the deadline still holds)."""
    from elastic_slurm.waiting import wait_for

    return wait_for(check, timeout_s=timeout_s, what=what, interval_s=0.001, max_interval_s=0.001)


def test_an_earlier_job_s_directory_with_the_same_id_is_moved_aside(tmp_path, capsys) -> None:
    # Slurm numbers jobs from 1 again after a reset of its state: a demo run twice with the
    # cluster recycled in between had its new job 1 follow the earlier job 1's orders at once
    from elastic_slurm.model.resize_order import ResizeAction, ResizeOrder
    from elastic_slurm.mpi_runtime.launcher import Launcher
    from elastic_slurm.protocol.jobdir import JobDir

    jobdir = JobDir(tmp_path / ".elastic-slurm" / "job-7")
    jobdir.write_secret("the-earlier-job-s")
    jobdir.write_order(ResizeOrder(1, ResizeAction.EXPAND, ("n1", "n2"), 1.0))
    env = {"SLURM_JOB_ID": "7", "ELASTIC_SLURM_JOB_DIR": str(jobdir.path)}
    requeued = Launcher(["app.py"], env={**env, "ELASTIC_SLURM_JOB_SECRET": "the-earlier-job-s"})
    assert requeued.jobdir.last_order_seq() == 1  # a requeued job keeps its secret: kept
    launcher = Launcher(["app.py"], env={**env, "ELASTIC_SLURM_JOB_SECRET": "this-job-s"})
    assert launcher.jobdir.read_secret() == "this-job-s"
    assert launcher.jobdir.last_order_seq() == 0
    earlier = JobDir(tmp_path / ".elastic-slurm" / "job-7.earlier-1")
    assert earlier.read_secret() == "the-earlier-job-s" and earlier.last_order_seq() == 1
    assert "belonged to an earlier job with id 7; moved it to" in capsys.readouterr().err
    Launcher(["app.py"], env={**env, "ELASTIC_SLURM_JOB_SECRET": "a-third-job-s"})
    assert (tmp_path / ".elastic-slurm" / "job-7.earlier-2").is_dir()


def test_a_job_directory_that_is_a_symlink_is_not_moved_nor_followed(tmp_path) -> None:
    import pytest

    from elastic_slurm.errors import JobInputError
    from elastic_slurm.mpi_runtime.launcher import Launcher
    from elastic_slurm.protocol.jobdir import JobDir

    target = JobDir(tmp_path / "elsewhere" / ".elastic-slurm" / "job-7")
    target.write_secret("someone-else-s")
    (tmp_path / ".elastic-slurm").mkdir()
    (tmp_path / ".elastic-slurm" / "job-7").symlink_to(target.path)
    env = {"SLURM_JOB_ID": "7", "ELASTIC_SLURM_JOB_SECRET": "this-job-s"}
    env["ELASTIC_SLURM_JOB_DIR"] = str(tmp_path / ".elastic-slurm" / "job-7")
    with pytest.raises(JobInputError, match="symlink"):
        Launcher(["app.py"], env=env)
    assert target.read_secret() == "someone-else-s"
    assert (tmp_path / ".elastic-slurm" / "job-7").is_symlink()
