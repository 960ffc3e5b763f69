"""Site configs: a valid SiteConfig (ports 1-65535, finite durations) or a ConfigError."""

from __future__ import annotations

from hypothesis import example, given

from .surfaces import SITE_CONFIG, check, suite_settings


@suite_settings()
@given(SITE_CONFIG.strategy)
@example(b"cluster_name: caf\xe9\n")
@example(b"controller:\n  policy:\n    options:\n      a: " + b"[" * 100_000 + b"\n")
@example(b"controller:\n  address: head:99999\n")
@example(b"controller:\n  poll_interval_s: .inf\n")
def test_site_configs(data: bytes) -> None:
    check(SITE_CONFIG, data)
