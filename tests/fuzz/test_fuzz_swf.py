"""SWF traces: jobs within bounds, or a TraceError naming the line; never a crash or hang."""

from __future__ import annotations

from hypothesis import example, given

from .surfaces import SWF, check, suite_settings

LINE = b"1 0 10 100 4 -1 -1 4 200 -1 1 7 3 -1 1 -1 -1 -1\n"


@suite_settings()
@given(SWF.strategy)
@example((LINE.replace(b"200", b"1e400"), "raise", False))
@example((LINE.replace(b"100", b"-5"), "skip", False))
@example((LINE.replace(b"200", b"9" * 5000), "raise", True))
@example((b"; MaxProcs: \xe9\n" + LINE, "raise", True))
def test_traces(case: tuple[bytes, str, bool]) -> None:
    check(SWF, case)
