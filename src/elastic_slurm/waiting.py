"""Wait for a condition with a deadline (never a fixed sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class DeadlineExceeded(TimeoutError):
    """A condition did not hold within its deadline; the message says what was awaited."""


def wait_for(
    check: Callable[[], T | None | bool],
    *,
    timeout_s: float,
    what: str,
    interval_s: float = 0.1,
    max_interval_s: float = 1.0,
) -> T:
    """Call ``check`` until it returns a truthy value, and return that value.

    The interval starts at ``interval_s`` seconds and doubles up to ``max_interval_s``.

    Raises
    ------
    DeadlineExceeded
        ``check`` stayed falsy for ``timeout_s`` seconds; the message names ``what``.
    """
    deadline = time.monotonic() + timeout_s
    delay = interval_s
    while True:
        value = check()
        if value:
            return value  # type: ignore[return-value]
        now = time.monotonic()
        if now >= deadline:
            raise DeadlineExceeded(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(min(delay, deadline - now))
        delay = min(delay * 2, max_interval_s)
