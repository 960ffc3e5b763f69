"""Slurm's outputs, recorded from 22.05 and type-shifted or mangled: parsed, or refused with
SlurmCommandError. Today the parsers raise ValueError, TypeError or KeyError."""

from __future__ import annotations

from hypothesis import given

from .surfaces import SLURM_OUTPUTS, check, suite_settings


@suite_settings()
@given(SLURM_OUTPUTS.strategy)
def test_slurm_outputs(case: tuple[str, str]) -> None:
    check(SLURM_OUTPUTS, case)
