"""The shipped systemd unit of the controller: what an operator relies on is in it."""

from __future__ import annotations

import configparser
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from elastic_slurm.config.schema import ControllerConfig

UNIT = Path(__file__).resolve().parents[2] / "packaging/systemd/elastic-slurm-controller.service"
ROOT_DROP_IN = UNIT.parent / f"{UNIT.name}.d" / "root.conf"


def parse_unit(text: str) -> configparser.ConfigParser:
    """The unit as sections of settings (a repeated setting keeps its last value)."""
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    parser.optionxform = str  # systemd's keys are case-sensitive
    parser.read_string(text)
    return parser


@pytest.fixture(scope="module")
def unit() -> configparser.ConfigParser:
    return parse_unit(UNIT.read_text())


def test_it_runs_the_controller_of_a_site_config_until_sigterm(unit):
    service = unit["Service"]
    assert service["Type"] == "exec"
    argv = shlex.split(service["ExecStart"])
    assert Path(argv[0]).is_absolute() and argv[0].endswith("/bin/elastic-slurm")
    assert argv[1] == "--site" and Path(argv[2]).is_absolute()
    assert argv[3:] == ["controller", "run"]  # no --journal: the site config's place
    assert service["KillSignal"] == "SIGTERM"
    assert service["KillMode"] == "mixed"  # the cycle's Slurm commands are not signalled
    assert float(service["TimeoutStopSec"]) >= 30
    assert service["User"] == service["Group"] == "elastic-slurm"  # not root


def test_it_restarts_a_failed_controller_with_a_back_off(unit):
    service, section = unit["Service"], unit["Unit"]
    assert service["Restart"] == "on-failure"
    assert int(service["RestartSec"].removesuffix("s")) >= 5
    # the start limit belongs in [Unit] (systemd ignores it in [Service])
    assert int(section["StartLimitIntervalSec"]) >= 60 and int(section["StartLimitBurst"]) >= 1
    assert "StartLimitIntervalSec" not in service


def test_its_state_directory_holds_the_journals_default_place(unit):
    service = unit["Service"]
    state = Path("/var/lib") / service["StateDirectory"]
    assert ControllerConfig().journal.parent == state
    assert service["WorkingDirectory"] == "%S/" + service["StateDirectory"]
    assert service["StateDirectoryMode"] == "0700"


def test_it_logs_to_the_journal(unit):
    service = unit["Service"]
    assert service["StandardOutput"] == service["StandardError"] == "journal"
    assert service["SyslogIdentifier"] == "elastic-slurm-controller"


def test_it_is_hardened(unit):
    service = unit["Service"]
    for key in (
        "NoNewPrivileges",
        "PrivateTmp",
        "ProtectKernelTunables",
        "ProtectKernelModules",
        "ProtectControlGroups",
        "RestrictSUIDSGID",
        "LockPersonality",
        "RestrictNamespaces",
    ):
        assert service[key] == "yes", key
    assert service["ProtectSystem"] == "strict"
    # it never reads or writes a job's directory: homes are hidden, no capability at all
    assert service["ProtectHome"] == "yes" and "ReadWritePaths" not in service
    assert service["CapabilityBoundingSet"] == "" and service["AmbientCapabilities"] == ""
    # the Slurm probe's cache would otherwise go to root's home, read-only under ProtectSystem
    assert service["Environment"] == "XDG_CACHE_HOME=%C" and service["CacheDirectory"]


def test_the_root_drop_in_gives_back_root_with_four_capabilities_only():
    # controller.privilege: root, the older way: it writes jobs' orders into their homes
    merged = parse_unit(UNIT.read_text() + "\n" + ROOT_DROP_IN.read_text())["Service"]
    assert merged["User"] == "root" and merged["UMask"] == "0022"
    assert merged["ProtectHome"] == "no" and "-/home" in merged["ReadWritePaths"].split()
    caps = set(merged["CapabilityBoundingSet"].split())
    assert caps == {"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER"}, caps
    assert merged["NoNewPrivileges"] == "yes"  # the rest of the sandbox stays


def test_the_parser_sees_a_missing_setting():  # so the checks above can fail
    text = re.sub(r"(?m)^KillSignal=.*\n", "", UNIT.read_text())
    assert "KillSignal" not in parse_unit(text)["Service"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_accepts_every_setting(tmp_path):
    # verify checks that ExecStart's program exists: point it at one that does. It reports
    # unknown keys and bad values on its error output, with exit status 0.
    program = Path(sys.executable).parent / "elastic-slurm"
    if not program.exists():
        program = Path(shutil.which("true") or "/bin/true")
    text = UNIT.read_text().replace("/opt/elastic-slurm/bin/elastic-slurm", str(program))
    assert str(program) in text
    copy = tmp_path / UNIT.name
    for variant in (text, text + "\n" + ROOT_DROP_IN.read_text()):  # as shipped, and as root
        copy.write_text(variant)
        res = subprocess.run(
            ["systemd-analyze", "verify", str(copy)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert res.returncode == 0 and res.stderr.strip() == "", res.stderr
    copy.write_text(text.replace("ProtectSystem=strict", "ProtectSystem=strikt"))
    bad = subprocess.run(
        ["systemd-analyze", "verify", str(copy)], capture_output=True, text=True, timeout=60
    )
    assert "strikt" in bad.stderr  # verify does report what it cannot parse
