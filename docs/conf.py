"""Sphinx configuration: the user documentation (Markdown) and the API reference (docstrings).

Build it with one command from the repository's top (the ``docs`` extra installs the tools)::

    python -m sphinx -n -W --keep-going -b html docs build/docs

``-n`` (nitpicky) makes every cross-reference that points nowhere a warning, and ``-W`` every
warning an error: ``tests/unit/test_docs_build.py`` runs exactly this.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

try:  # importing mpi4py.MPI (autodoc of mpi_runtime) must not start MPI in the build
    import mpi4py

    mpi4py.rc.initialize = False
    mpi4py.rc.finalize = False
except ImportError:
    pass

project = "elastic-slurm"
author = "the elastic-slurm authors"
copyright = "the elastic-slurm authors"  # noqa: A001 - Sphinx's name

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "myst_parser",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "reproduction/**"]

napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
napoleon_use_ivar = True  # an Attributes section is fields of its class, not objects again
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
myst_heading_anchors = 3
html_theme = "alabaster"
html_title = "elastic-slurm"


# ---------------------------------------------------------------------- cross-references
# The docstrings write references as their modules see them (``:class:`InvalidRequest```
# where ``elastic_slurm.errors.InvalidRequest`` is meant). A reference Sphinx cannot resolve
# is linked when one documented object ends with its name; it is let through when it names
# something that exists but has no page here (the standard library, pydantic, a module left
# out of the reference); and it stays an error (with -n -W) when it names nothing at all.


_HEADER_RULE = re.compile(r"^\s*-{3,}\s*$")
_KEEP_DOCTESTS = {"examples", "example", "notes"}


def _field_colon(line: str) -> bool:
    """Whether napoleon would split ``line`` into ``type: description`` (a colon outside code)."""
    outside = re.sub(r"(:[a-z:]+:)?`[^`]*`", "", line)
    return re.search(r"(?<!:):(?!:)", outside) is not None


def _numpy_layout(app, what, name, obj, options, lines):  # noqa: ANN001, ANN202 - Sphinx's
    """Read the docstrings as their authors wrote them, before napoleon does.

    * A doctest right after a section (``Raises``, ``Returns``...) starts an ``Examples``
      section (numpy's layout asks for the header; napoleon would read the doctest as
      exceptions or return values).
    * An attribute's first line is a sentence: napoleon's Google-style reading takes what
      comes before its first colon for a type. An empty comment line comes first instead.
    """
    if what in {"attribute", "data", "property"} and lines and _field_colon(lines[0]):
        lines[:0] = ["..", ""]
    section, i = "", 0
    while i < len(lines):
        line = lines[i]
        if line.strip() and i + 1 < len(lines) and _HEADER_RULE.match(lines[i + 1]):
            section = line.strip().lower()
        elif line.lstrip().startswith(">>>") and section and section not in _KEEP_DOCTESTS:
            indent = line[: len(line) - len(line.lstrip())]
            head = [f"{indent}Examples", f"{indent}--------"]
            if i and lines[i - 1].strip():
                head.insert(0, "")
            lines[i:i] = head
            section = "examples"
            i += len(head)
        i += 1


def _project_names() -> set[str]:
    """Every dotted name of the package: modules, their attributes, class members and fields."""
    import importlib
    import pkgutil

    import elastic_slurm

    names: set[str] = {"elastic_slurm"}
    for info in pkgutil.walk_packages(elastic_slurm.__path__, "elastic_slurm."):
        if info.name.rsplit(".", 1)[-1] == "__main__":
            continue
        module = importlib.import_module(info.name)
        names.add(info.name)
        for key, value in vars(module).items():
            names.add(f"{info.name}.{key}")
            if isinstance(value, type):
                members = set(dir(value)) | _documented_attributes(value)
                for klass in value.__mro__:
                    members.update(getattr(klass, "__annotations__", {}))
                names.update(f"{info.name}.{key}.{m}" for m in members)
    for key in vars(elastic_slurm.__class__):
        names.add(f"elastic_slurm.{key}")
    return names


def _documented_attributes(klass: type) -> set[str]:
    """The names an ``Attributes`` section of the class's docstring lists (instance fields)."""
    import inspect

    lines = (inspect.getdoc(klass) or "").splitlines()
    names: set[str] = set()
    for i, line in enumerate(lines[:-1]):
        if line.strip() == "Attributes" and _HEADER_RULE.match(lines[i + 1]):
            for entry in lines[i + 2 :]:
                if entry and not entry[0].isspace():
                    m = re.match(r"([A-Za-z_]\w*)\s*(:.*)?$", entry)
                    if m is None:
                        break
                    names.add(m.group(1))
    return names


_NAMES: set[str] = set()
#: Names the docstrings and annotations use for other projects' modules, and the modules whose
#: names type annotations render bare (``Annotated``, pydantic's field metadata).
_ALIASES = {"np": "numpy", "npt": "numpy.typing", "MPI": "mpi4py.MPI"}
_RENDERED_FROM = ("typing", "pydantic.fields", "annotated_types")


def _exists(target: str, module: str | None, klass: str | None) -> bool:
    """Whether ``target`` names something, from the referring module and class."""
    import builtins

    if not _NAMES:
        _NAMES.update(_project_names())
    target = target.lstrip(".~")
    if hasattr(builtins, target.split(".")[0]) and "." not in target:
        return True
    scopes = [p for p in (f"{module}.{klass}" if klass else None, module) if p]
    if any(f"{s}.{target}" in _NAMES for s in scopes) or target in _NAMES:
        return True
    if any(name.endswith("." + target) for name in _NAMES):
        return True
    head, _, rest = target.partition(".")
    if head in _ALIASES:
        target = f"{_ALIASES[head]}.{rest}" if rest else _ALIASES[head]
    last = target.rsplit(".", 1)[-1]
    paths = [f"{s}.{target}" for s in scopes]  # an import in the referring module
    paths += [target, *(f"{m}.{last}" for m in _RENDERED_FROM)]  # a dotted path, a bare name
    return any(_importable(path) for path in paths)


def _importable(path: str) -> bool:
    """Whether ``path`` is a module, or an attribute chain from one."""
    import importlib

    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def _resolve(app, env, node, contnode):  # noqa: ANN001, ANN202 - Sphinx's event signature
    """Link a reference to the one documented object whose name ends with it."""
    if node.get("refdomain") != "py":
        return None
    from sphinx.util.nodes import make_refnode

    domain = env.get_domain("py")
    target = node["reftarget"].lstrip(".~")
    found = [n for n in domain.objects if n == target or n.endswith("." + target)]
    if len(found) != 1:
        return None
    entry = domain.objects[found[0]]
    return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode)


def _tolerate(app, domain, node):  # noqa: ANN001, ANN202 - Sphinx's event signature
    """Let through a reference to something that exists but has no page here."""
    if domain is None or domain.name != "py":
        return None
    target = node["reftarget"].lstrip(".~")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", target):
        return True  # no name: a type annotation's rendering (pydantic's Field(...) metadata)
    if _exists(target, node.get("py:module"), node.get("py:class")):
        return True
    return None


def setup(app):  # noqa: ANN001, ANN201 - Sphinx's hook
    """Connect the reference resolver and checker."""
    app.connect("autodoc-process-docstring", _numpy_layout, priority=400)  # before napoleon
    app.connect("missing-reference", _resolve)
    app.connect("warn-missing-reference", _tolerate)
    return {"parallel_read_safe": True}
