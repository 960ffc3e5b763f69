"""The added nodes' check asks again when slurmd still holds the job's credential revoked."""

from __future__ import annotations

from pathlib import Path

from elastic_slurm.mpi_runtime import preflight


def _fake_srun(tmp_path: Path, failures: int) -> dict[str, str]:
    counter = tmp_path / "calls"
    counter.write_text("0")
    srun = tmp_path / "srun"
    srun.write_text(
        "#!/bin/sh\n"
        f"n=$(cat {counter}); n=$((n + 1)); echo $n > {counter}\n"
        f'if [ "$n" -le {failures} ]; then\n'
        '  echo "srun: error: Task launch for StepId=7.3 failed on node n3: '
        'Job credential revoked" >&2; exit 1\n'
        "fi\n"
        "exit 0\n"
    )
    srun.chmod(0o755)
    return {"PATH": f"{tmp_path}:/usr/bin:/bin"}


def test_a_revoked_credential_is_asked_again_and_passes(tmp_path: Path) -> None:
    env = _fake_srun(tmp_path, failures=1)
    assert preflight.unreachable({"n3": 7}, timeout_s=10, env=env) == {}
    assert (tmp_path / "calls").read_text().strip() == "2"


def test_a_credential_revoked_for_good_fails_the_node_with_slurm_s_words(tmp_path: Path) -> None:
    env = _fake_srun(tmp_path, failures=99)
    bad = preflight.unreachable({"n3": 7}, timeout_s=10, env=env)
    assert list(bad) == ["n3"] and "Job credential revoked" in bad["n3"]
    assert (tmp_path / "calls").read_text().strip() == str(preflight.REVOKED_RETRIES + 1)
