"""Building a policy from a site's options: ``plugins/policy.py:Policy.from_options``."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Literal

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


def test_plain_types_are_checked_before_the_config_is_built() -> None:
    with pytest.raises(PolicyError) as info:
        Tuned.from_options({"mode": 3})
    assert str(info.value) == "policy 'tuned': option mode must be a string, got 3"
    with pytest.raises(PolicyError) as info:
        Tuned.from_options({"factor": "abc"})  # not a Python error from the comparison
    assert str(info.value) == "policy 'tuned': option factor must be a number, got 'abc'"
    for bad in ("2", True, None):
        with pytest.raises(PolicyError, match="option factor must be a number"):
            Tuned.from_options({"factor": bad})
    assert Tuned.from_options({"factor": 2}).config.factor == 2  # a whole number is a number


class Typed(Policy):
    name: ClassVar[str] = "typed"

    @dataclasses.dataclass(frozen=True)
    class Config:
        flag: bool = False
        count: int = 1
        limit: float | None = None
        level: Literal["low", "high"] = "low"

    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        return []


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"flag": 1}, "option flag must be true or false, got 1"),
        ({"count": 1.5}, "option count must be a whole number, got 1.5"),
        ({"count": False}, "option count must be a whole number, got False"),
        ({"limit": "x"}, "option limit must be a number or null, got 'x'"),
    ],
)
def test_each_plain_type_is_named(options: dict[str, object], message: str) -> None:
    with pytest.raises(PolicyError) as info:
        Typed.from_options(options)
    assert str(info.value) == f"policy 'typed': {message}"


def test_other_types_are_left_to_the_config() -> None:
    config = Typed.from_options({"flag": True, "limit": None, "level": "high"}).config
    assert (config.flag, config.limit, config.level) == (True, None, "high")
    assert Typed.from_options({"level": "nope"}).config.level == "nope"  # not checked here


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
