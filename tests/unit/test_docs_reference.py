"""The reference pages and the code agree: every environment variable and site-config key.

``docs/reference/environment.md`` must list exactly the variables the source reads (found by
reading the source's syntax tree), and ``docs/reference/site-config.md`` exactly the schema's
keys with the schema's defaults. Adding a variable or a key without documenting it fails here.
"""

from __future__ import annotations

import ast
import re
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from elastic_slurm.config.schema import LocalTransportConfig, SiteConfig, SSHTransportConfig

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "elastic_slurm"
REFERENCE = ROOT / "docs" / "reference"
_VAR = re.compile(r"^[A-Z][A-Z0-9_]*$")
_PROJECT_VAR = re.compile(r"ELASTIC_SLURM_[A-Z0-9_]+")


# ---------------------------------------------------------------------- environment variables
def _envish(node: ast.AST) -> bool:
    """Whether an expression is an environment mapping (``os.environ``, ``env``, ``self.env``)."""
    return ast.unparse(node).endswith(("environ", "env"))


def _text(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def variables_read(source: str) -> set[str]:
    """Environment variables a module's source reads.

    Project variables as string constants (``"ELASTIC_SLURM_X"``) or through
    ``envvars.get_str/get_int/get_float("X")``; any variable through ``os.getenv("X")``,
    ``<env>.get("X")``, ``<env>["X"]`` or ``"X" in <env>``.
    """
    found = set()
    for node in ast.walk(ast.parse(source)):
        text = _text(node)
        if text is not None and _PROJECT_VAR.fullmatch(text):
            found.add(text)
        elif isinstance(node, ast.Call) and node.args and _text(node.args[0]):
            func, arg = node.func, _text(node.args[0]) or ""
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if not _VAR.match(arg):
                continue
            if name in ("get_str", "get_int", "get_float"):
                found.add("ELASTIC_SLURM_" + arg)
            elif name == "getenv" or (
                name == "get" and isinstance(func, ast.Attribute) and _envish(func.value)
            ):
                found.add(arg)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = _text(node.slice)
            if key and _VAR.match(key) and _envish(node.value):
                found.add(key)
        elif isinstance(node, ast.Compare) and _text(node.left):
            key = _text(node.left) or ""
            if (
                _VAR.match(key)
                and any(isinstance(op, ast.In) for op in node.ops)
                and any(_envish(c) for c in node.comparators)
            ):
                found.add(key)
    return found


def documented_variables(text: str) -> tuple[set[str], set[str]]:
    """(variables of the package's tables, variables of the test suite's table)."""
    package, tests = set(), set()
    target = package
    for line in text.splitlines():
        if line.startswith("## "):
            target = tests if "test suite" in line else package
        m = re.match(r"^\| `([A-Z][A-Z0-9_]*)` \|", line)
        if m:
            target.add(m.group(1))
    return package, tests


def test_the_scanner_sees_every_way_the_code_reads_a_variable():
    source = (
        "import os\nfrom elastic_slurm import envvars\n"
        "A = 'ELASTIC_SLURM_ONE'\n"
        "envvars.get_float('TWO', 1.0)\n"
        "os.environ.get('THREE')\n"
        "os.getenv('FOUR')\n"
        "self.env['FIVE']\n"
        "'SIX' in env\n"
        "os.environ['NOT_READ'] = '1'\n"
        "other.get('NOT_ENV')\n"
    )
    assert variables_read(source) == {
        "ELASTIC_SLURM_ONE",
        "ELASTIC_SLURM_TWO",
        "THREE",
        "FOUR",
        "FIVE",
        "SIX",
    }


def test_the_environment_page_lists_exactly_what_the_code_reads():
    read: set[str] = set()
    for path in SRC.rglob("*.py"):
        read |= variables_read(path.read_text())
    package, _ = documented_variables((REFERENCE / "environment.md").read_text())
    assert sorted(read - package) == [], "read by the code, missing from the page"
    assert sorted(package - read) == [], "on the page, read nowhere in the code"


def test_the_test_suite_variables_are_used_by_the_tests_or_ci():
    _, tests = documented_variables((REFERENCE / "environment.md").read_text())
    used = "\n".join(
        p.read_text()
        for folder in ("tests", "scripts", ".ci")
        for p in (ROOT / folder).rglob("*")
        if p.is_file() and p.suffix in (".py", ".sh", "")
    )
    assert tests and all(name in used for name in tests)


# ---------------------------------------------------------------------- site-config keys
REQUIRED = object()


def _model_of(annotation: Any) -> type[BaseModel] | None:
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def schema_keys(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    """Every leaf key of ``model`` (dotted), with its default (``REQUIRED`` when required)."""
    out: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        if name == "transport":
            for form in (LocalTransportConfig, SSHTransportConfig):
                for key, default in schema_keys(form, "transport.").items():
                    out.setdefault(key, default)  # the local form's default first
            out["transport.kind"] = "local"
            continue
        sub = _model_of(field.annotation)
        if sub is not None:
            out.update(schema_keys(sub, f"{prefix}{name}."))
            continue
        if field.is_required():
            out[prefix + name] = REQUIRED
        elif field.default is PydanticUndefined:
            out[prefix + name] = field.default_factory()  # type: ignore[misc]
        else:
            out[prefix + name] = field.default
    return out


def _as_yaml(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_as_yaml(v) for v in value]
    if isinstance(value, Path) or type(value).__name__ == "IPv4Network":
        return str(value)
    return value


def documented_keys(text: str) -> dict[str, str]:
    """``{key: default cell}`` of every row of the page's tables."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"^\| `([a-z_.]+)` \| [^|]+ \| ([^|]+) \|", line)
        if m:
            rows[m.group(1)] = m.group(2).strip()
    return rows


def test_the_site_config_page_lists_exactly_the_schema_keys():
    keys = schema_keys(SiteConfig)
    rows = documented_keys((REFERENCE / "site-config.md").read_text())
    assert sorted(set(keys) - set(rows)) == [], "in the schema, missing from the page"
    assert sorted(set(rows) - set(keys)) == [], "on the page, not in the schema"


@pytest.mark.parametrize("key", sorted(schema_keys(SiteConfig)))
def test_the_site_config_page_gives_the_schema_default(key: str):
    cell = documented_keys((REFERENCE / "site-config.md").read_text())[key]
    default = schema_keys(SiteConfig)[key]
    if default is REQUIRED:
        assert cell == "(required)"
        return
    assert cell.startswith("`") and cell.endswith("`"), cell
    assert yaml.safe_load(cell.strip("`")) == _as_yaml(default)
