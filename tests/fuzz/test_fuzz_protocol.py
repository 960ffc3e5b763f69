"""Protocol messages: any method, path, headers and body get a 2xx or 4xx, never a 5xx.

A Flask test client over a Gateway whose one job lives in a temporary directory. Today a
deeply nested JSON body is parsed before the secret is checked and answers 500
(RecursionError), and some ack bodies of the wrong types do too.
"""

from __future__ import annotations

from typing import Any

from hypothesis import example, given

from .surfaces import PROTOCOL, SECRET, check, suite_settings


@suite_settings()
@given(PROTOCOL.strategy)
@example(
    {
        "method": "POST",
        "path": "/v1/jobs/12/acks",
        "headers": {"Authorization": f"Bearer {SECRET}", "Content-Type": "application/json"},
        "body": b'{"a":' * 5000 + b"1" + b"}" * 5000,
    }
)
def test_protocol_messages(case: dict[str, Any]) -> None:
    check(PROTOCOL, case)
