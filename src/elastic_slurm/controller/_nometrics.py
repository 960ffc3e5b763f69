"""Stand-ins for ``prometheus_client`` where it is not installed: every record is dropped.

Jobs import the command-line entry point, which imports the controller's modules; on a node
whose Python has no ``prometheus_client`` (a flavour's chroot uses Debian's packages) the
metrics are then recorded nowhere. The controller itself depends on the real package.
"""

from __future__ import annotations

from typing import Any


class CollectorRegistry:
    """No registry: nothing is collected."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass


class _Metric:
    """A metric that records nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def labels(self, *args: Any, **kwargs: Any) -> _Metric:
        """The same metric (no labels are kept)."""
        return self

    def inc(self, amount: float = 1) -> None:
        """Record nothing."""

    def set(self, value: float) -> None:
        """Record nothing."""

    def observe(self, value: float) -> None:
        """Record nothing."""


Counter = Gauge = Histogram = _Metric


def start_http_server(*args: Any, **kwargs: Any) -> None:
    """Refuse: the controller's metrics need ``prometheus_client``.

    Raises
    ------
    OSError
        Always (the caller reports it as an unusable metrics address).
    """
    raise OSError("prometheus_client is not installed (pip install prometheus-client)")
