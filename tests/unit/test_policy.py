"""Building a policy from a site's options: ``plugins/policy.py:Policy.from_options``."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import pytest

from elastic_slurm.errors import PolicyError
from elastic_slurm.model.decisions import Decision
from elastic_slurm.model.snapshot import ClusterSnapshot
from elastic_slurm.model.triggers import Trigger
from elastic_slurm.plugins.policy import NoOptions, Policy


class Bare(Policy):
    name: ClassVar[str] = "bare"

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        return []


class Tuned(Policy):
    name: ClassVar[str] = "tuned"

    @dataclasses.dataclass(frozen=True)
    class Config:
        factor: float = 1.5
        mode: str = "fast"

        def __post_init__(self) -> None:
            if self.factor <= 0:
                raise ValueError(f"factor must be positive, got {self.factor}")
            if not isinstance(self.mode, str):
                raise TypeError(f"mode must be a string, got {self.mode!r}")

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        return []


@pytest.mark.parametrize("options", [None, {}])
def test_defaults(options: dict[str, object] | None) -> None:
    assert Tuned.from_options(options).config == Tuned.Config(1.5, "fast")
    assert isinstance(Bare.from_options(options).config, NoOptions)


def test_options_are_applied() -> None:
    policy = Tuned.from_options({"factor": 2.0})
    assert isinstance(policy, Tuned)
    assert policy.config == Tuned.Config(2.0, "fast")


def test_unknown_option_lists_known_ones_with_defaults() -> None:
    with pytest.raises(PolicyError) as info:
        Tuned.from_options({"speed": 1, "colour": "red", "mode": "slow"})
    assert str(info.value) == (
        "policy 'tuned' has no option(s) colour, speed; "
        "its options: factor (default 1.5), mode (default 'fast')"
    )


def test_unknown_option_of_a_policy_without_options() -> None:
    with pytest.raises(PolicyError) as info:
        Bare.from_options({"x": 1})
    assert str(info.value) == "policy 'bare' has no option(s) x; its options: none"


def test_value_refused_by_config() -> None:
    with pytest.raises(PolicyError) as info:
        Tuned.from_options({"factor": -1})
    assert str(info.value) == (
        "policy 'tuned': bad options {'factor': -1}: factor must be positive, got -1"
    )
    assert isinstance(info.value.__cause__, ValueError)


def test_type_refused_by_config() -> None:
    with pytest.raises(PolicyError) as info:
        Tuned.from_options({"mode": 3})
    assert (
        str(info.value) == "policy 'tuned': bad options {'mode': 3}: mode must be a string, got 3"
    )
    assert isinstance(info.value.__cause__, TypeError)


class Listy(Policy):
    name: ClassVar[str] = "listy"

    @dataclasses.dataclass(frozen=True)
    class Config:
        weights: list[int] = dataclasses.field(default_factory=lambda: [1, 2])

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        return []


def test_unknown_option_shows_default_factory_values() -> None:
    with pytest.raises(PolicyError) as info:
        Listy.from_options({"x": 1})
    assert (
        str(info.value)
        == "policy 'listy' has no option(s) x; its options: weights (default [1, 2])"
    )
