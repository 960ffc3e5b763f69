"""The policy contract: a function of a snapshot and a trigger that returns decisions.

A policy does no I/O and keeps no hidden link to Slurm, so the controller (live Slurm) and the
simulator (virtual time) run the very same objects. Options come in a frozen dataclass, the
policy's ``Config``; a site's ``policy:`` YAML section is validated against it.
"""

from __future__ import annotations

import abc
import dataclasses
import typing
from collections.abc import Mapping
from typing import Any, ClassVar

from elastic_slurm.errors import PolicyError
from elastic_slurm.model.decisions import Decision
from elastic_slurm.model.snapshot import ClusterSnapshot
from elastic_slurm.model.triggers import Trigger


@dataclasses.dataclass(frozen=True)
class NoOptions:
    """The options of a policy that has none."""


def _default(f: dataclasses.Field[Any]) -> str:
    if f.default is not dataclasses.MISSING:
        return f"default {f.default!r}"
    if f.default_factory is not dataclasses.MISSING:
        return f"default {f.default_factory()!r}"
    return "required"


#: Option types checked before a ``Config`` is built, and how a refusal names them.
_PLAIN_TYPES: dict[Any, str] = {
    bool: "true or false",
    int: "a whole number",
    float: "a number",
    str: "a string",
}
_PLAIN_TYPES.update({t | None: f"{what} or null" for t, what in list(_PLAIN_TYPES.items())})


def _check_type(policy: type[Policy], key: str, value: Any) -> None:
    """Refuse an option value of the wrong plain type, naming the option and the type.

    Options typed ``bool``, ``int``, ``float`` or ``str`` (or any of them ``| None``) are
    checked strictly with pydantic (a whole number passes for a number; ``"0.5"`` does not);
    other types are left to the ``Config``'s own checks.

    Raises
    ------
    PolicyError
        ``policy 'lina_elastic': option utilization_threshold must be a number, got 'abc'``.
    """
    import pydantic

    try:
        hint = typing.get_type_hints(policy.Config).get(key)
    except (NameError, TypeError):  # a forward reference the module does not resolve
        return
    what = _PLAIN_TYPES.get(hint)
    if what is None:
        return
    try:
        pydantic.TypeAdapter(hint).validate_python(value, strict=True)
    except pydantic.ValidationError:
        raise PolicyError(
            f"policy {policy.name!r}: option {key} must be {what}, got {value!r}"
        ) from None


class Policy(abc.ABC):
    """Base class of scheduling policies.

    Subclasses set ``name`` (the registry name), may set ``Config`` (a frozen dataclass of
    options with defaults) and implement :meth:`decide`. The class attributes ``summary``,
    ``paper``, ``section``, ``job_kinds`` and ``resizes`` describe the policy to users
    (``elastic-slurm policies``); :meth:`describe` gathers them with the options.

    Parameters
    ----------
    config
        An instance of ``Config``; ``None`` for the defaults.
    """

    name: ClassVar[str] = ""
    Config: ClassVar[type] = NoOptions
    #: One line: what the policy does (shown by ``elastic-slurm policies``).
    summary: ClassVar[str] = ""
    #: The source of the algorithm: authors, title, year ("" for none).
    paper: ClassVar[str] = ""
    #: Where in the paper: section, algorithm or figure.
    section: ClassVar[str] = ""
    #: The job kinds whose size it chooses or changes; other kinds start at their request.
    job_kinds: ClassVar[tuple[str, ...]] = ("rigid",)
    #: Whether it ever resizes running jobs (expands or shrinks).
    resizes: ClassVar[bool] = False

    def __init__(self, config: Any | None = None) -> None:
        self.config = config if config is not None else self.Config()

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None) -> Policy:
        """Build the policy from a mapping of options (a site config's ``policy.options``).

        Raises
        ------
        PolicyError
            For an unknown option (the message lists the known ones with their defaults) or a
            value ``Config`` refuses.
        """
        options = dict(options or {})
        fields = {f.name: f for f in dataclasses.fields(cls.Config)}
        unknown = sorted(set(options) - set(fields))
        if unknown:
            known = ", ".join(f"{f.name} ({_default(f)})" for f in fields.values()) or "none"
            raise PolicyError(
                f"policy {cls.name!r} has no option(s) {', '.join(unknown)}; its options: {known}"
            )
        for key, value in options.items():
            _check_type(cls, key, value)
        try:
            return cls(cls.Config(**options))
        except (TypeError, ValueError) as exc:
            raise PolicyError(f"policy {cls.name!r}: bad options {options}: {exc}") from exc

    @classmethod
    def describe(cls) -> dict[str, Any]:
        """The policy's metadata and options, as ``elastic-slurm policies --json`` prints them.

        Returns
        -------
        dict
            ``name``, ``summary``, ``paper``, ``section``, ``job_kinds`` (list of kind names),
            ``resizes`` (bool) and ``options`` (name to ``"default ..."`` or ``"required"``).
        """
        return {
            "name": cls.name,
            "summary": cls.summary,
            "paper": cls.paper,
            "section": cls.section,
            "job_kinds": list(cls.job_kinds),
            "resizes": cls.resizes,
            "options": {f.name: _default(f) for f in dataclasses.fields(cls.Config)},
        }

    def prepare(self) -> None:  # noqa: B027 - optional: most policies load nothing
        """Load what the policy needs before its first cycle (a compiled kernel, for example).

        The simulator calls it before its loop and the controller before its first cycle, so
        that the time measured per cycle is the policy's and not a one-off load (for the
        compiled placement kernel: about 0.6 s from Numba's cache, seconds without one).
        :meth:`decide` must work without it. The default does nothing.
        """

    @abc.abstractmethod
    def decide(self, snapshot: ClusterSnapshot, trigger: Trigger) -> list[Decision]:
        """Return the decisions for this cycle (possibly none); must not mutate anything."""
