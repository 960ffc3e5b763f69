"""``ec.state``: the scalars carried across resizes, checked when they are set.

A value that cannot be carried (a list, an array, an object) is refused where the program sets
it, with the key named, rather than at the first resize on the cluster (where the old runtime
found out). The rule is :func:`~.checkpoint.save_state`'s: ``None``, ``bool``, ``int``,
``float`` or ``str`` under ``str`` keys (NumPy scalars are converted).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from elastic_slurm.mpi_runtime.checkpoint import _check_state

#: What a program should use for what ``ec.state`` cannot carry.
INSTEAD = (
    "register an array with ec.array(...); carry other objects with ec.on_resize(pack, unpack)"
)


class ResizeState(dict[str, Any]):
    """A dict whose items are checked as they are set.

    Raises
    ------
    ValueError
        From any setter: a key that is not ``str`` or a value that is not a JSON scalar (the
        message names the key and says what to use instead).
    """

    def __init__(
        self, items: Mapping[str, Any] | Iterable[tuple[str, Any]] = (), **kw: Any
    ) -> None:
        super().__init__()
        self.update(items, **kw)

    def __setitem__(self, key: str, value: Any) -> None:
        super().update(_check_state({key: value}, INSTEAD))

    def update(self, items: Any = (), /, **kw: Any) -> None:  # type: ignore[override]
        """Like ``dict.update``, each item checked."""
        super().update(_check_state(dict(items, **kw), INSTEAD))

    def setdefault(self, key: str, default: Any = None) -> Any:
        """Like ``dict.setdefault``, the default checked."""
        if key not in self:
            self[key] = default
        return self[key]

    def __ior__(self, other: Any) -> ResizeState:  # type: ignore[override,misc]
        self.update(other)
        return self
