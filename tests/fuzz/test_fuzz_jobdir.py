"""Job-directory files as the controller reads them: a value, ``None``, or JobInputError.

Random bytes, JSON of any shape, deep nesting, FIFOs, symlinks and directories in place of
the files a job writes: ``elastic_slurm.protocol.jobdir`` raises JobInputError for every
unusable file, never another exception, and never blocks.
"""

from __future__ import annotations

from hypothesis import given

from .surfaces import JOBDIR, check, suite_settings


@suite_settings()
@given(JOBDIR.strategy)
def test_job_directory_files(case: tuple[list[tuple[str, str, bytes]], str]) -> None:
    check(JOBDIR, case)
