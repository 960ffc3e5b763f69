"""Find scheduling policies by name among the entry points of group ``elastic_slurm.policies``.

A package registers a policy in its ``pyproject.toml``::

    [project.entry-points."elastic_slurm.policies"]
    pending_first = "elastic_slurm.plugins.policies.pending_first:PendingFirst"

Loading is lazy: a policy's module is imported only when that policy is requested (or when
:func:`available` is asked for the status of every policy).

How it degrades: a policy that fails to import, is not a
:class:`~elastic_slurm.plugins.policy.Policy` subclass, is abstract, or whose ``name`` differs
from its entry-point name does not break the others. Its error is kept with its entry, shown by
:func:`available`, and raised as a :class:`~elastic_slurm.errors.PolicyError` (``from`` the
original exception) each time that policy is requested. Two entry points with the same name and
different targets make that one name unusable, with an error naming both targets; the same name
and target seen twice (a package visible twice on ``sys.path``) counts once.
"""

from __future__ import annotations

import importlib.metadata
import inspect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from elastic_slurm.errors import PolicyError
from elastic_slurm.plugins.policy import Policy

GROUP = "elastic_slurm.policies"
"""The entry-point group policies register under."""


@dataclass(frozen=True)
class PolicyInfo:
    """One registered policy and its status, as :func:`available` reports it.

    Parameters
    ----------
    name
        The entry-point name, which is also the policy's ``name`` and what ``--policy`` takes.
    target
        What the entry point points at, ``"module:attr"``.
    error
        ``None`` when the policy loads and checks out; otherwise the :class:`PolicyError` that
        requesting it raises, whose ``__cause__`` is the original exception (for example the
        ``ImportError``) when there is one.
    distribution
        The installed distribution that declares the entry point, ``None`` when unknown
        (entry points built by hand, as in tests).
    policy_class
        The loaded class (its metadata: :meth:`Policy.describe`); ``None`` when it failed.
        Not compared: two infos are equal when name, target, error and distribution are.
    """

    name: str
    target: str
    error: PolicyError | None = None
    distribution: str | None = None
    policy_class: type[Policy] | None = field(default=None, compare=False)


class _Entry:
    """The entry points registered under one name, and the outcome of loading them (once)."""

    def __init__(self, name: str, entry_point: importlib.metadata.EntryPoint) -> None:
        self.name = name
        self.entry_points = [entry_point]
        self.policy_class: type[Policy] | None = None
        self.error: PolicyError | None = None
        self.loaded = False

    @property
    def targets(self) -> list[str]:
        return [ep.value for ep in self.entry_points]

    def add(self, entry_point: importlib.metadata.EntryPoint) -> None:
        if entry_point.value not in self.targets:
            self.entry_points.append(entry_point)

    def load(self) -> None:
        """Import and check the target once, keeping the class or the error."""
        if self.loaded:
            return
        self.loaded = True
        if len(self.entry_points) > 1:
            self.error = PolicyError(
                f"policy name {self.name!r} is registered by {len(self.entry_points)} entry "
                f"points of group {GROUP!r}: {_describe(self.entry_points)}; uninstall one of "
                "these packages or rename its entry point"
            )
            return
        (ep,) = self.entry_points
        try:
            obj = ep.load()
        except Exception as exc:
            error = PolicyError(
                f"policy {self.name!r} could not be loaded from {ep.value} "
                f"({type(exc).__name__}: {exc}); check that its package and dependencies are "
                "installed in this environment"
            )
            error.__cause__ = exc
            self.error = error
            return
        self.error = _check(self.name, ep.value, obj)
        if self.error is None:
            self.policy_class = obj

    def info(self, entry_point: importlib.metadata.EntryPoint) -> PolicyInfo:
        dist = entry_point.dist.name if entry_point.dist is not None else None
        return PolicyInfo(self.name, entry_point.value, self.error, dist, self.policy_class)


def _describe(entry_points: Iterable[importlib.metadata.EntryPoint]) -> str:
    parts = []
    for ep in entry_points:
        dist = f" (from {ep.dist.name})" if ep.dist is not None else ""
        parts.append(f"{ep.value}{dist}")
    return ", ".join(parts)


def _check(name: str, target: str, obj: Any) -> PolicyError | None:
    """Return why ``obj`` cannot serve as policy ``name``, or ``None`` when it can."""
    if not (isinstance(obj, type) and issubclass(obj, Policy)):
        return PolicyError(
            f"entry point {name!r} = {target} is {obj!r}, not a subclass of "
            "elastic_slurm.plugins.policy.Policy"
        )
    if obj.name != name:
        return PolicyError(
            f"entry point {name!r} = {target} loads a policy whose name is {obj.name!r}; "
            "the entry-point name and the class attribute `name` must be the same"
        )
    if inspect.isabstract(obj):
        missing = ", ".join(sorted(getattr(obj, "__abstractmethods__", ())))
        return PolicyError(
            f"policy {name!r} ({target}) is abstract: it does not implement {missing}"
        )
    return None


class Registry:
    """Policies by name, from a given set of entry points.

    Nothing is imported at construction; each policy is loaded (once) when first requested.
    The module-level functions use :func:`installed_registry`; tests build their own from
    hand-made :class:`importlib.metadata.EntryPoint` objects.

    Parameters
    ----------
    entry_points
        The entry points to serve, already selected from group :data:`GROUP`. Names that occur
        with different targets are recorded as a collision (see the module docstring).
    """

    def __init__(self, entry_points: Iterable[importlib.metadata.EntryPoint]) -> None:
        self._entries: dict[str, _Entry] = {}
        for ep in entry_points:
            entry = self._entries.get(ep.name)
            if entry is None:
                self._entries[ep.name] = _Entry(ep.name, ep)
            else:
                entry.add(ep)

    def names(self) -> list[str]:
        """Return the registered policy names, sorted, without loading anything."""
        return sorted(self._entries)

    def available(self) -> list[PolicyInfo]:
        """Load every policy and report each entry point with its status.

        Returns
        -------
        list of PolicyInfo
            Sorted by name, then target. A name registered by several targets appears once
            per target, each row carrying the collision error.
        """
        infos = []
        for name in self.names():
            entry = self._entries[name]
            entry.load()
            infos.extend(entry.info(ep) for ep in entry.entry_points)
        return sorted(infos, key=lambda info: (info.name, info.target))

    def load_policy_class(self, name: str) -> type[Policy]:
        """Return the policy class registered as ``name``, importing it on first use.

        Raises
        ------
        PolicyError
            When no policy has that name (the message lists the known ones), when the name is
            registered by several targets, or when the target fails to import or is not a
            concrete :class:`Policy` subclass whose ``name`` is ``name``. An import failure is
            chained: the original exception is ``__cause__``.
        """
        entry = self._entries.get(name)
        if entry is None:
            known = ", ".join(self.names()) or "none (is elastic-slurm installed here?)"
            raise PolicyError(
                f"no scheduling policy named {name!r}; known policies: {known} "
                f"(entry-point group {GROUP!r})"
            )
        entry.load()
        if entry.error is not None:
            # A fresh exception each time, so tracebacks do not pile up on the kept one.
            raise PolicyError(str(entry.error)) from entry.error.__cause__
        if entry.policy_class is None:  # pragma: no cover - load() sets one or the other
            raise PolicyError(f"policy {name!r} did not load and left no error")
        return entry.policy_class

    def make_policy(self, name: str, options: Mapping[str, Any] | None = None) -> Policy:
        """Build policy ``name`` from its options (a site config's ``policy.options``).

        Raises
        ------
        PolicyError
            As :meth:`load_policy_class`, and for options the policy's ``Config`` refuses
            (:meth:`Policy.from_options`).
        """
        return self.load_policy_class(name).from_options(options)


_installed: Registry | None = None


def installed_registry() -> Registry:
    """Return the registry of the policies installed in this environment (built once).

    The entry points are read from the installed distributions' metadata on the first call;
    a package installed later is seen only by a new process.
    """
    global _installed
    if _installed is None:
        _installed = Registry(importlib.metadata.entry_points(group=GROUP))
    return _installed


def available() -> list[PolicyInfo]:
    """Report every installed policy with its load status (loads each one).

    Returns
    -------
    list of PolicyInfo
        Sorted by name, then target; see :meth:`Registry.available`.
    """
    return installed_registry().available()


def load_policy_class(name: str) -> type[Policy]:
    """Return the installed policy class named ``name``, importing it on first use.

    Raises
    ------
    PolicyError
        See :meth:`Registry.load_policy_class`.
    """
    return installed_registry().load_policy_class(name)


def make_policy(name: str, options: Mapping[str, Any] | None = None) -> Policy:
    """Build the installed policy ``name`` from a mapping of options.

    Parameters
    ----------
    name
        The policy's registry name, for example ``"pending_first"``.
    options
        Values for the fields of the policy's ``Config``; ``None`` or empty for the defaults.

    Raises
    ------
    PolicyError
        For an unknown or broken policy (:meth:`Registry.load_policy_class`) or bad options
        (:meth:`Policy.from_options`).
    """
    return installed_registry().make_policy(name, options)
