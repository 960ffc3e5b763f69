"""The policy registry, with entry points made by hand (some meant to fail)."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from elastic_slurm.cli import policies as policies_cli
from elastic_slurm.errors import PolicyError
from elastic_slurm.model import ClusterSnapshot, Decision, JobKind, Trigger
from elastic_slurm.plugins import registry
from elastic_slurm.plugins.policies.pending_first import PendingFirst
from elastic_slurm.plugins.policy import Policy
from elastic_slurm.plugins.registry import GROUP, PolicyInfo, Registry


class GoodPolicy(Policy):
    name = "good"

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        return []


class MisnamedPolicy(Policy):
    name = "something_else"

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        return []


class AbstractPolicy(Policy):
    name = "abstract"


NOT_A_POLICY = object()


def ep(name: str, target: str) -> EntryPoint:
    return EntryPoint(name=name, value=target, group=GROUP)


HERE = __name__  # this module, already in sys.modules, so EntryPoint.load() finds it
NEVER_LOADS = "elastic_slurm_no_such_package_for_tests.policies:Policy"


@pytest.fixture
def lazy_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module that defines policy ``lazy``, on sys.path but not imported; returns its name."""
    module = f"lazy_policy_{uuid.uuid4().hex}"
    (tmp_path / f"{module}.py").write_text(
        "from elastic_slurm.plugins.policy import Policy\n"
        "class Lazy(Policy):\n"
        "    name = 'lazy'\n"
        "    def decide(self, snapshot, trigger):\n"
        "        return []\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield module
    sys.modules.pop(module, None)


def test_good_policy_loads_and_is_built_from_options() -> None:
    reg = Registry([ep("good", f"{HERE}:GoodPolicy")])
    assert reg.load_policy_class("good") is GoodPolicy
    policy = reg.make_policy("good", None)
    assert isinstance(policy, GoodPolicy)
    with pytest.raises(PolicyError, match="no option"):
        reg.make_policy("good", {"speed": 3})


def test_loading_is_lazy(lazy_module: str) -> None:
    reg = Registry([ep("good", f"{HERE}:GoodPolicy"), ep("lazy", f"{lazy_module}:Lazy")])
    assert reg.names() == ["good", "lazy"]
    reg.load_policy_class("good")
    assert lazy_module not in sys.modules
    cls = reg.load_policy_class("lazy")
    assert lazy_module in sys.modules
    assert cls.name == "lazy" and cls is reg.load_policy_class("lazy")


def test_broken_policy_fails_only_when_requested_with_the_original_as_cause() -> None:
    reg = Registry([ep("good", f"{HERE}:GoodPolicy"), ep("broken", NEVER_LOADS)])
    assert reg.load_policy_class("good") is GoodPolicy  # the broken one does not get in the way
    for _ in range(2):  # the kept error is raised again on every request
        with pytest.raises(PolicyError, match="'broken' could not be loaded") as info:
            reg.load_policy_class("broken")
        assert isinstance(info.value.__cause__, ModuleNotFoundError)
        assert "elastic_slurm_no_such_package_for_tests" in str(info.value)
    with pytest.raises(PolicyError) as info:
        reg.make_policy("broken", {})
    assert isinstance(info.value.__cause__, ModuleNotFoundError)


def test_missing_attribute_is_a_load_error() -> None:
    reg = Registry([ep("gone", f"{HERE}:NoSuchClass")])
    with pytest.raises(PolicyError, match="could not be loaded") as info:
        reg.load_policy_class("gone")
    assert isinstance(info.value.__cause__, AttributeError)


def test_unknown_name_lists_the_known_ones() -> None:
    reg = Registry([ep("good", f"{HERE}:GoodPolicy"), ep("broken", NEVER_LOADS)])
    with pytest.raises(PolicyError, match=r"no scheduling policy named 'fast'.*broken, good"):
        reg.load_policy_class("fast")
    with pytest.raises(PolicyError, match="known policies: none"):
        Registry([]).load_policy_class("fast")


def test_duplicate_name_from_two_targets_names_both() -> None:
    reg = Registry(
        [
            ep("good", f"{HERE}:GoodPolicy"),
            ep("good", "other_package.policies:Good"),
            ep("lazy", f"{HERE}:GoodPolicy"),
        ]
    )
    with pytest.raises(PolicyError) as info:
        reg.load_policy_class("good")
    message = str(info.value)
    assert f"{HERE}:GoodPolicy" in message and "other_package.policies:Good" in message
    # The collision spoils only that name: "lazy" still fails on its own account.
    with pytest.raises(PolicyError, match="whose name is 'good'"):
        reg.load_policy_class("lazy")


def test_same_name_and_target_twice_counts_once() -> None:
    reg = Registry([ep("good", f"{HERE}:GoodPolicy"), ep("good", f"{HERE}:GoodPolicy")])
    assert reg.load_policy_class("good") is GoodPolicy
    assert len(reg.available()) == 1


@pytest.mark.parametrize(
    ("name", "target", "message"),
    [
        ("thing", f"{HERE}:NOT_A_POLICY", "not a subclass of"),
        ("policy_module", f"{HERE}:pytest", "not a subclass of"),
        ("good", f"{HERE}:MisnamedPolicy", "whose name is 'something_else'"),
        ("abstract", f"{HERE}:AbstractPolicy", "abstract: it does not implement decide"),
    ],
)
def test_objects_that_are_not_usable_policies_are_refused(
    name: str, target: str, message: str
) -> None:
    reg = Registry([ep(name, target)])
    with pytest.raises(PolicyError, match=message):
        reg.load_policy_class(name)


def test_available_reports_every_entry_with_its_status() -> None:
    reg = Registry(
        [
            ep("good", f"{HERE}:GoodPolicy"),
            ep("broken", NEVER_LOADS),
            ep("dup", "a.b:X"),
            ep("dup", "c.d:Y"),
        ]
    )
    infos = reg.available()
    assert [(i.name, i.target) for i in infos] == [
        ("broken", NEVER_LOADS),
        ("dup", "a.b:X"),
        ("dup", "c.d:Y"),
        ("good", f"{HERE}:GoodPolicy"),
    ]
    by_target = {i.target: i for i in infos}
    assert by_target[f"{HERE}:GoodPolicy"] == PolicyInfo("good", f"{HERE}:GoodPolicy")
    broken = by_target[NEVER_LOADS].error
    assert isinstance(broken, PolicyError)
    assert isinstance(broken.__cause__, ModuleNotFoundError)
    for target in ("a.b:X", "c.d:Y"):
        error = by_target[target].error
        assert error is not None and "a.b:X" in str(error) and "c.d:Y" in str(error)


def test_installed_pending_first_loads() -> None:
    assert "pending_first" in registry.installed_registry().names()
    assert registry.load_policy_class("pending_first") is PendingFirst
    policy = registry.make_policy("pending_first", {"expand_idle": False})
    assert isinstance(policy, PendingFirst)
    assert policy.config == PendingFirst.Config(expand_idle=False)
    info = [i for i in registry.available() if i.name == "pending_first"]
    assert info == [
        PolicyInfo(
            "pending_first",
            "elastic_slurm.plugins.policies.pending_first:PendingFirst",
            None,
            "elastic-slurm",
        )
    ]


def test_every_shipped_policy_describes_itself() -> None:
    # `elastic-slurm policies` shows each policy's summary, paper and section, job kinds,
    # options and whether it resizes; the backfilling baselines say they never resize.
    rows = {row["name"]: row for row in map(policies_cli.describe, registry.available())}
    assert len(rows) >= 9
    for name, row in rows.items():
        assert row["error"] is None, name
        assert row["summary"] and (row["paper"] or row["section"]), name
        assert row["job_kinds"] and set(row["job_kinds"]) <= {k.value for k in JobKind}, name
        assert isinstance(row["options"], dict), name
    for name in ("fcfs", "easy_backfill", "conservative_backfill"):
        assert rows[name]["resizes"] is False
    for name in ("pending_first", "coorm_equipartition", "lina_elastic", "klein_perez"):
        assert rows[name]["resizes"] is True
    assert rows["coorm_equipartition"]["options"] == {
        "smart": "default True",
        "preallocate": "default True",
    }


def test_policies_command_prints_metadata_as_json_and_as_a_table(capsys) -> None:
    import argparse

    assert policies_cli.run(argparse.Namespace(json=True)) == 0
    rows = json.loads(capsys.readouterr().out)
    easy = next(r for r in rows if r["name"] == "easy_backfill")
    assert easy["paper"].startswith("A. W. Mu'alem") and easy["resizes"] is False
    assert policies_cli.run(argparse.Namespace(json=False)) == 0
    table = capsys.readouterr().out
    assert "never" in table and "Mu'alem" in table and "preallocate" in table


def test_policies_command_module_loads_without_heavy_imports() -> None:
    code = (
        "import sys, elastic_slurm.cli.policies\n"
        "heavy = [m for m in ('numpy', 'matplotlib', 'rich', 'elastic_slurm.simulator') "
        "if m in sys.modules]\n"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_policy_that_failed_to_load_is_described_by_its_error() -> None:
    reg = Registry([ep("broken", NEVER_LOADS)])
    (info,) = reg.available()
    row = policies_cli.describe(info)
    assert row["name"] == "broken" and row["target"] == NEVER_LOADS
    assert "could not be loaded" in row["error"] and "summary" not in row
