"""``elastic-slurm submit`` reads sbatch's language (``cli/submit.py``, ``batch_script.py``).

Slurm is replaced by a transport that records what ``sbatch`` would receive (its argument
list and the batch script on its standard input) and answers like sbatch; the command line,
the batch-script reader, the job spec, :func:`elastic_slurm.api.submit` and the renderer are
the real ones. The live counterpart is ``tests/integration/test_submit_live.py``.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from elastic_slurm.adapter import factory
from elastic_slurm.adapter.slurm_cli import SlurmCLI
from elastic_slurm.adapter.transport.base import Completed, Transport
from elastic_slurm.cli.main import main


class SbatchRecorder(Transport):
    """Answers ``sinfo`` with four idle nodes and ``sbatch`` with a job id; records sbatch."""

    def __init__(self, answer: str = "4242", returncode: int = 0, stderr: str = "") -> None:
        self.answer, self.returncode, self.stderr = answer, returncode, stderr
        self.sbatch: list[tuple[list[str], str]] = []

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float | None = None,
        env: Mapping[str, str] | None = None,
        input_text: str | None = None,
    ) -> Completed:
        argv = list(argv)
        if argv[0] == "sinfo":
            out = "".join(f"n{i}|idle|2\n" for i in range(1, 5))
            return Completed(tuple(argv), 0, out, "", 0.0)
        if argv[0] == "sbatch":
            self.sbatch.append((argv, input_text or ""))
            out = self.answer + "\n" if self.returncode == 0 else ""
            return Completed(tuple(argv), self.returncode, out, self.stderr, 0.0)
        if argv[0] == "test":  # the program exists where it is looked for
            return Completed(tuple(argv), 0 if os.path.exists(argv[-1]) else 1, "", "", 0.0)
        return Completed(tuple(argv), 0, "", "", 0.0)  # command -v: on PATH


@pytest.fixture
def slurm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> SbatchRecorder:
    recorder = SbatchRecorder()
    monkeypatch.setattr(factory, "slurm_for", lambda site: SlurmCLI(recorder, retry_s=0.1))
    monkeypatch.chdir(tmp_path)
    return recorder


def submitted(slurm: SbatchRecorder) -> tuple[list[str], str]:
    (call,) = slurm.sbatch
    return call


def options(argv: list[str]) -> dict[str, str]:
    """sbatch's options as name -> value, the last one winning, as in sbatch."""
    out: dict[str, str] = {}
    for word in argv[1:]:
        name, _, value = word.partition("=")
        out[name] = value
    return out


SCRIPT = """\
#!/bin/bash
# a comment before the directives
#SBATCH --nodes=2 -J from-script
#SBATCH --mem=2G --time=5   # a comment after them
#SBATCH --export=ALL,FOO=1
#SBATCHX --mem=99G is a comment, not a directive

echo "args: $# $1 $2"
#SBATCH --mem=77G after the first command: sbatch does not read it
"""


def test_a_script_is_named_after_its_file_like_sbatch_s(
    slurm: SbatchRecorder, tmp_path: Path
) -> None:
    (tmp_path / "run.sh").write_text("#!/bin/sh\nsrun hostname\n")
    assert main(["submit", "run.sh"]) == 0
    assert options(submitted(slurm)[0])["--job-name"] == "run.sh"


def test_a_batch_script_with_sbatch_lines(
    slurm: SbatchRecorder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "job.sh").write_text(SCRIPT)
    assert main(["submit", "--time=10", "job.sh", "a b", "c"]) == 0
    assert capsys.readouterr().out == "Submitted batch job 4242\n"
    argv, script = submitted(slurm)
    got = options(argv)
    assert got["--nodes"] == "2" and got["--job-name"] == "from-script"
    assert got["--time"] == "0-00:10:00"  # the command line overrides the script
    assert got["--mem"] == "2G" and got["--export"] == "ALL,FOO=1"  # passed through
    assert "--mem=77G" not in argv and "--mem=99G" not in argv
    assert script.startswith("#!/bin/bash\n# elastic-slurm: rigid job, nodes 2")
    assert SCRIPT.split("\n", 1)[1] in script  # the user's lines, unchanged
    # a command comes before the user's #SBATCH lines: sbatch does not read them a second time
    first_command = next(
        ln for ln in script.splitlines()[1:] if ln.strip() and not ln.startswith("#")
    )
    assert script.index(first_command) < script.index("#SBATCH --nodes=2")
    # the arguments reach the script as $1 $2
    bash = shutil.which("bash")
    assert bash is not None
    (tmp_path / "rendered.sh").write_text(script)
    out = subprocess.run([bash, "rendered.sh"], capture_output=True, text=True, check=True)
    assert out.stdout == "args: 2 a b c\n"


def test_command_line_options_override_the_script_s(slurm: SbatchRecorder, tmp_path: Path) -> None:
    (tmp_path / "job.sh").write_text(SCRIPT)
    assert main(["submit", "-N", "3", "--mem", "8G", "-J", "cli", "job.sh"]) == 0
    assert main(["submit", "--", "/bin/true"]) == 0
    (argv, _), (other, _) = slurm.sbatch
    assert options(other)["--job-name"] == "elastic"  # a program: the default name
    got = options(argv)
    assert (got["--nodes"], got["--job-name"], got["--mem"]) == ("3", "cli", "8G")
    assert argv.index("--mem=2G") < argv.index("--mem=8G")  # sbatch takes the last


def test_unknown_sbatch_options_pass_through_unchanged(slurm: SbatchRecorder) -> None:
    words = [
        "submit",
        "--mem",
        "4G",
        "-c",
        "2",
        "--gres=gpu:1",
        "--gpus",
        "1",
        "--constraint",
        "fast&big",
        "--dependency",
        "afterok:12",
        "--export=NONE",
        "--account=proj",
        "--mail-type",
        "END,FAIL",
        "--mail-user=a@b",
        "--exclusive",
        "--requeue",
        "--some-future-option",
        "v",
        "-N",
        "2",
        "--",
        "/bin/true",
    ]
    assert main(words) == 0
    argv, _ = submitted(slurm)
    assert options(argv)["--account"] == "proj"  # interpreted: the job's account
    assert argv[argv.index("--mem=4G") :] == [  # the others, after elastic-slurm's own
        "--mem=4G",
        "-c2",
        "--gres=gpu:1",
        "--gpus=1",
        "--constraint=fast&big",
        "--dependency=afterok:12",
        "--export=NONE",
        "--mail-type=END,FAIL",
        "--mail-user=a@b",
        "--exclusive",
        "--requeue",
        "--some-future-option=v",
    ]


def test_a_program_without_double_dash_is_a_program_not_yaml(
    slurm: SbatchRecorder, tmp_path: Path
) -> None:
    (tmp_path / "app.py").write_text("from mpi4py import MPI\nprint(MPI.COMM_WORLD.rank)\n")
    assert main(["submit", "--nodes=2-4", "--kind", "moldable", "app.py", "--n", "3"]) == 0
    argv, script = submitted(slurm)
    assert options(argv)["--nodes"] == "2-4"
    last = script.rstrip("\n").splitlines()[-1]
    assert last.startswith("exec srun ") and last.endswith(" app.py --n 3")


def test_a_rigid_mpi_program_runs_with_its_ranks(slurm: SbatchRecorder, tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("print('hi')\n")
    assert main(["submit", "-N", "2", "--ntasks-per-node", "2", "--", "app.py"]) == 0
    _, script = submitted(slurm)
    python = factory.job_python(__import__("elastic_slurm.config").config.load_site(None))
    assert script.rstrip("\n").splitlines()[-1] == f"exec srun {python} app.py"


def test_a_yaml_job_file_stays_supported(slurm: SbatchRecorder, tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(
        "program: [/bin/true]\nnodes: 1-2\nkind: moldable\nsbatch_options: ['--mem 1G']\n"
    )
    (tmp_path / "jobfile").write_text("program: [/bin/true]\nnodes: 3\n")
    assert main(["submit", "--mem=3G", "job.yaml"]) == 0
    assert main(["submit", "jobfile"]) == 0
    (first, _), (second, _) = slurm.sbatch
    assert options(first)["--nodes"] == "1-2"
    assert first.index("--mem=1G") < first.index("--mem=3G")
    assert options(second)["--nodes"] == "3"


def test_options_and_the_program_after_a_job_file(
    slurm: SbatchRecorder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "job.yaml").write_text("program: [/bin/true]\nnodes: 2\n")
    assert main(["submit", "job.yaml", "-J", "late", "--mem=5G", "--", "/bin/echo", "hi"]) == 0
    argv, script = submitted(slurm)
    assert options(argv)["--job-name"] == "late" and options(argv)["--mem"] == "5G"
    assert script.rstrip("\n").endswith("exec srun /bin/echo hi")
    assert main(["submit", "job.yaml", "/bin/echo"]) == 255
    assert "give the program after --" in capsys.readouterr().err


def test_wrap(slurm: SbatchRecorder) -> None:
    assert main(["submit", "--wrap", "echo hi; hostname"]) == 0
    argv, script = submitted(slurm)
    assert options(argv)["--job-name"] == "wrap"  # as sbatch names it
    assert script.startswith("#!/bin/sh\n") and script.endswith("echo hi; hostname\n")


def test_ntasks_becomes_ranks_per_node(slurm: SbatchRecorder, capsys) -> None:
    assert main(["submit", "-N", "2", "-n", "4", "--", "/bin/true"]) == 0
    assert options(submitted(slurm)[0])["--ntasks-per-node"] == "2"
    assert main(["submit", "-N", "2", "-n", "3", "--", "/bin/true"]) == 255
    assert "--ntasks-per-node" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("answer", "words", "printed"),
    [
        ("4242", [], "4242\n"),
        ("4242;blue", ["-M", "blue"], "4242;blue\n"),
        ("4242;blue", ["--clusters=blue"], "4242;blue\n"),
    ],
)
def test_parsable_prints_jobid_and_cluster_like_sbatch(
    slurm: SbatchRecorder,
    answer: str,
    words: list[str],
    printed: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    slurm.answer = answer
    assert main(["submit", "--parsable", *words, "--", "/bin/true"]) == 0
    assert capsys.readouterr().out == printed


def test_site_after_the_subcommand(slurm: SbatchRecorder) -> None:
    assert main(["submit", "--site", "local", "--", "/bin/true"]) == 0
    assert main(["submit", "--site=local", "--", "/bin/true"]) == 0
    assert len(slurm.sbatch) == 2


def test_a_batch_script_on_standard_input(
    slurm: SbatchRecorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("#!/bin/sh\n#SBATCH -N 3 --mem=1G\nsrun x\n"))
    assert main(["submit", "--parsable"]) == 0
    argv, script = submitted(slurm)
    got = options(argv)
    assert (got["--nodes"], got["--mem"], got["--job-name"]) == ("3", "1G", "sbatch")
    assert script.endswith("set -- \n#SBATCH -N 3 --mem=1G\nsrun x\n")


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["-N", "abc", "--", "/bin/true"], "node count 'abc'"),
        (["--comment=x", "--", "/bin/true"], "--comment carries the elastic tag"),
        (["-t", "soon", "--", "/bin/true"], "time limit 'soon'"),
        (["--mem"], "option --mem needs a value"),
        ([], "give a batch script, a program or a YAML job file"),
        (["--kind", "malleable", "-N", "1-2", "job.sh"], "not a batch script"),
        (["--kind", "malleable", "-N", "3", "--", "/bin/true"], "needs a node range to grow"),
        (["--kind", "evolving", "--", "/bin/true"], "got 1, which fixes its size"),
    ],
)
def test_usage_errors_exit_255_in_one_line(
    slurm: SbatchRecorder,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    words: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "job.sh").write_text("#!/bin/bash\nsrun app\n")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # no script there either
    assert main(["submit", *words]) == 255
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert slurm.sbatch == []  # nothing reached Slurm


def test_an_elastic_sweep_is_malleable_with_one_node_per_task(slurm: SbatchRecorder) -> None:
    """A malleable array changes its throttle, not its tasks' size: one count is right."""
    assert (
        main(["submit", "--array=0-11%1", "--kind", "malleable", "-N", "1", "--", "/bin/true"]) == 0
    )
    argv, _script = submitted(slurm)
    assert options(argv)["--nodes"] == "1" and options(argv)["--array"] == "0-11%1"


def test_slurm_errors_exit_1(
    slurm: SbatchRecorder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slurm.returncode, slurm.stderr = 1, "sbatch: error: invalid partition specified: nosuch\n"
    assert main(["submit", "--", "/bin/true"]) == 1
    assert "invalid partition" in capsys.readouterr().err
    assert main(["submit", "missing.sh"]) == 1  # as sbatch's "Unable to open file"
    assert main(["submit", "-N", "9", "--", "/bin/true"]) == 1  # more nodes than the cluster
    assert len(slurm.sbatch) == 1


def test_sbatch_refusing_a_passed_option_is_a_usage_error(
    slurm: SbatchRecorder, capsys: pytest.CaptureFixture[str]
) -> None:
    slurm.returncode, slurm.stderr = 255, "sbatch: error: Invalid --mem specification\n"
    assert main(["submit", "--mem=lots", "--", "/bin/true"]) == 255
    assert capsys.readouterr().err == (
        "elastic-slurm: error: sbatch: error: Invalid --mem specification\n"
    )


def test_an_elastic_program_without_double_dash(slurm: SbatchRecorder, tmp_path: Path) -> None:
    (tmp_path / "heat.py").write_text("print('hi')\n")
    words = ["submit", "--kind", "malleable", "--nodes=1-4", "--start-nodes", "2", "heat.py"]
    assert main([*words, "--n", "256"]) == 0
    argv, script = submitted(slurm)
    assert options(argv)["--nodes"] == "2"
    assert script.rstrip("\n").endswith(
        "-m elastic_slurm run --ntasks-per-node=1 -- heat.py --n 256"
    )
