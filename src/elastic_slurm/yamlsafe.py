"""The one YAML loader for what people write: job specs and site configs.

YAML 1.1, which PyYAML implements, reads some values differently from what their writer
meant, and its features let a small file cost a lot to load. This loader keeps the safe
subset and reads the rest as Slurm (or a person) would:

* only ``null``/``~``, ``true``/``false`` (any case), decimal integers and decimal floats
  with a point (``.inf`` and ``.nan`` included; bounds are the schema's job) are typed;
  everything else stays a string: ``1:00:00`` (YAML 1.1: 3600) is the text Slurm's
  ``--time`` reads as one hour, ``yes``/``no``/``on``/``off`` stay words (a boolean field
  still takes them, through pydantic), ``2024-01-01`` is not a date, ``0x10`` not 16;
* an integer with leading zeros is decimal, as Slurm's ``strtol(..., 10)`` reads it:
  ``010`` is 10 (YAML 1.1: 8);
* anchors and aliases (``&a``, ``*a``) are refused: they are what makes an "alias bomb"
  (a few lines that expand to billions of nodes);
* explicit tags other than the core ones (``!!str``, ``!!int``, ``!!float``, ``!!bool``,
  ``!!null``, ``!!seq``, ``!!map``) are refused, and so is the merge key ``<<`` (it is an
  ordinary key here, which the schema then refuses by name);
* a key given twice in one mapping is refused (YAML 1.1 loaders keep the last silently);
* nesting deeper than :data:`MAX_DEPTH`, more than :data:`MAX_VALUES` values, a document
  longer than :data:`MAX_BYTES`, and bytes
  that are not UTF-8 are refused, naming the line (or the byte offset).

Every refusal is one :class:`~elastic_slurm.errors.ConfigError` line that names the source,
the line and column, and the key path where one is known. Loading a refused document costs
at most one pass over :data:`MAX_BYTES` bytes (well under a second).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
from yaml.events import AliasEvent, MappingEndEvent, SequenceEndEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from elastic_slurm.errors import ConfigError

MAX_BYTES = 64 * 1024
"""Largest document read (bytes); a site config is a few kilobytes, a job spec less."""

MAX_VALUES = 10_000
"""Most values (scalars, lists and mappings) in one document."""

MAX_DEPTH = 16
"""Deepest nesting of mappings and sequences (the top-level mapping is depth 1)."""

_MAX_INT_DIGITS = 30
_INT = re.compile(r"^[-+]?[0-9]+$")
_FLOAT = re.compile(
    r"^[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"
)
_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")


class _Resolver(yaml.resolver.BaseResolver):
    """Implicit types of plain scalars: null, bool, decimal int and float; the rest is text."""


_Resolver.add_implicit_resolver("tag:yaml.org,2002:bool", _BOOL, list("tTfF"))
_Resolver.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
_Resolver.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))
_Resolver.add_implicit_resolver("tag:yaml.org,2002:null", _NULL, ["~", "n", "N", ""])


class _Constructor(yaml.constructor.SafeConstructor):
    """Builds Python values from the core tags only; other tags are refused."""

    yaml_constructors: dict[Any, Any] = {}

    def construct_decimal_int(self, node: ScalarNode) -> int:
        text = str(self.construct_scalar(node))
        if not _INT.match(text):
            raise ConstructorError(
                None, None, f"{text[:40]!r} is not a decimal integer", node.start_mark
            )
        if len(text.lstrip("+-")) > _MAX_INT_DIGITS:
            raise ConstructorError(
                None, None, f"integer of {len(text)} digits is too large", node.start_mark
            )
        return int(text, 10)  # "010" is 10, as Slurm's strtol(..., 10) reads it

    def construct_strict_bool(self, node: ScalarNode) -> bool:
        text = str(self.construct_scalar(node))
        if not _BOOL.match(text):
            raise ConstructorError(
                None, None, f"{text[:40]!r} is not true or false", node.start_mark
            )
        return text.lower() == "true"

    def construct_decimal_float(self, node: ScalarNode) -> float:
        text = str(self.construct_scalar(node)).lower()
        if text.lstrip("+-") == ".inf":
            return float(text.replace(".inf", "inf"))
        if text == ".nan":
            return float("nan")
        try:
            return float(text)
        except ValueError:
            raise ConstructorError(
                None, None, f"{text[:40]!r} is not a decimal number", node.start_mark
            ) from None

    def construct_unique_mapping(self, node: MappingNode) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _value in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:
                raise ConstructorError(
                    None, None, "a mapping key must be a plain value", key_node.start_mark
                ) from None
            if duplicate:
                raise ConstructorError(
                    None, None, f"key {key!r} is given twice", key_node.start_mark
                )
            seen.add(key)
        return self.construct_mapping(node, deep=True)

    def construct_undefined(self, node: Node) -> Any:
        raise ConstructorError(
            None,
            None,
            f"the tag {node.tag!r} is not allowed (only plain values, lists and mappings)",
            node.start_mark,
        )


_Constructor.add_constructor("tag:yaml.org,2002:null", _Constructor.construct_yaml_null)
_Constructor.add_constructor("tag:yaml.org,2002:bool", _Constructor.construct_strict_bool)
_Constructor.add_constructor("tag:yaml.org,2002:int", _Constructor.construct_decimal_int)
_Constructor.add_constructor("tag:yaml.org,2002:float", _Constructor.construct_decimal_float)
_Constructor.add_constructor("tag:yaml.org,2002:str", _Constructor.construct_yaml_str)
_Constructor.add_constructor("tag:yaml.org,2002:seq", _Constructor.construct_yaml_seq)
_Constructor.add_constructor("tag:yaml.org,2002:map", _Constructor.construct_unique_mapping)
_Constructor.add_constructor(None, _Constructor.construct_undefined)


class _Loader(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    yaml.composer.Composer,
    _Constructor,
    _Resolver,
):
    """PyYAML's pure-Python pipeline with a composer that refuses aliases and deep nesting."""

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _Constructor.__init__(self)
        _Resolver.__init__(self)
        self.path: list[str] = []
        self.values = 0

    def _where(self) -> str:
        """`` under key.sub[0]``: where the composer is (empty at the top)."""
        text = "".join(p if p.startswith("[") else f".{p}" for p in self.path).lstrip(".")
        return f" under {text}" if text else ""

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()
        if isinstance(event, AliasEvent) or getattr(event, "anchor", None) is not None:
            raise ComposerError(
                None,
                None,
                f"anchors and aliases (&name, *name) are not allowed{self._where()}",
                event.start_mark,
            )
        self.values += 1
        if self.values > MAX_VALUES:
            raise ComposerError(
                None, None, f"more than {MAX_VALUES} values{self._where()}", event.start_mark
            )
        return super().compose_node(parent, index)

    def _deeper(self, mark: Any) -> None:
        if len(self.path) >= MAX_DEPTH:
            raise ComposerError(
                None, None, f"nested deeper than {MAX_DEPTH} levels{self._where()}", mark
            )

    def compose_sequence_node(self, anchor: str | None) -> SequenceNode:
        start = self.get_event()
        self._deeper(start.start_mark)
        tag = start.tag
        if tag is None or tag == "!":
            tag = self.resolve(SequenceNode, None, start.implicit)
        node = SequenceNode(tag, [], start.start_mark, None, flow_style=start.flow_style)
        index = 0
        while not self.check_event(SequenceEndEvent):
            self.path.append(f"[{index}]")
            node.value.append(self.compose_node(node, index))
            self.path.pop()
            index += 1
        node.end_mark = self.get_event().end_mark
        return node

    def compose_mapping_node(self, anchor: str | None) -> MappingNode:
        start = self.get_event()
        self._deeper(start.start_mark)
        tag = start.tag
        if tag is None or tag == "!":
            tag = self.resolve(MappingNode, None, start.implicit)
        node = MappingNode(tag, [], start.start_mark, None, flow_style=start.flow_style)
        while not self.check_event(MappingEndEvent):
            key = self.compose_node(node, None)
            label = key.value if isinstance(key, ScalarNode) else "?"
            self.path.append(str(label)[:40])
            value = self.compose_node(node, key)
            self.path.pop()
            node.value.append((key, value))
        node.end_mark = self.get_event().end_mark
        return node


def _codepoint(character: int | str) -> int:
    return character if isinstance(character, int) else ord(character)


def _one_line(source: str, exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.reader.ReaderError):
        return (
            f"{source}: character U+{_codepoint(exc.character):04X} at position "
            f"{exc.position} is not allowed in YAML (control characters are not)"
        )
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        what = "; ".join(x for x in (exc.context, exc.problem) if x)
        return f"{where}: not valid YAML: {what}"
    return f"{source}: not valid YAML: {' '.join(str(exc).split())}"


def decode(data: bytes, source: str) -> str:
    """``data`` as text: UTF-8 (a byte-order mark is dropped), at most :data:`MAX_BYTES`.

    Raises
    ------
    ConfigError
        Too long, or not UTF-8 (the message gives the byte, its offset and its line).
    """
    if len(data) > MAX_BYTES:
        raise ConfigError(f"{source}: larger than {MAX_BYTES} bytes: not a job spec or config")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{source}:{line}: not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start}; "
            "save the file as UTF-8"
        ) from None


def loads(text: str | bytes, source: str = "<string>") -> Any:
    """Parse one YAML document with the rules of this module.

    Parameters
    ----------
    text
        The document; bytes must be UTF-8, and either form at most :data:`MAX_BYTES` long.
    source
        How messages name the document (a file name).

    Returns
    -------
    Any
        ``None`` for an empty document, else dicts, lists, ``str``, ``int``, ``float``,
        ``bool`` and ``None``.

    Raises
    ------
    ConfigError
        One line naming ``source``, the line and column, and the problem.
    """
    if isinstance(text, bytes):
        text = decode(text, source)
    elif len(text) > MAX_BYTES:
        raise ConfigError(f"{source}: larger than {MAX_BYTES} characters: not a job spec or config")
    loader = None
    try:
        loader = _Loader(text)
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        raise ConfigError(_one_line(source, exc)) from None
    except RecursionError:  # not reachable with MAX_DEPTH; kept as a last guard
        raise ConfigError(f"{source}: not valid YAML: nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()


def load_file(path: Path) -> Any:
    """Read and parse a YAML file (at most :data:`MAX_BYTES`; regular files only).

    The file is opened without blocking (a FIFO named as a config cannot stall the reader).

    Raises
    ------
    ConfigError
        The file cannot be read, is not a regular file, or :func:`loads` refuses it.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    with os.fdopen(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(f"{path}: not a regular file")
        try:
            data = stream.read(MAX_BYTES + 1)
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return loads(data, str(path))


__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_VALUES", "ConfigError", "decode", "load_file", "loads"]
