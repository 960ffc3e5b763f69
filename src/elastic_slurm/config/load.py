"""Find and load a site config; errors name the file and the key.

Precedence, highest first: command-line options (``--site``, and options applied by the
caller with :meth:`pydantic.BaseModel.model_copy`), ``ELASTIC_SLURM_*`` environment variables
(``ELASTIC_SLURM_SITE`` names the default site, ``ELASTIC_SLURM_SITE_DIR`` adds a directory to
search), the site YAML, and the defaults of :mod:`elastic_slurm.config.schema`. The YAML is
read with :mod:`elastic_slurm.yamlsafe` (no YAML 1.1 surprises, no aliases, bounded size and
depth, UTF-8 only).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from elastic_slurm import envvars, yamlsafe
from elastic_slurm.config.schema import SiteConfig
from elastic_slurm.errors import ConfigError
from elastic_slurm.resources import data_dirs

DEFAULT_SITE = "local"


def site_config_dirs() -> list[Path]:
    """Directories searched for ``<site>.yaml``, in order.

    ``$ELASTIC_SLURM_SITE_DIR`` first, then the source tree's ``site_configs/`` (a checkout),
    then the copy packaged in the wheel.
    """
    extra = envvars.get_str("SITE_DIR")
    return [*([Path(extra)] if extra else []), *data_dirs("site_configs")]


def _find(site: str) -> Path:
    candidate = Path(site)
    if candidate.suffix in (".yaml", ".yml") or os.sep in site:
        if not candidate.is_file():
            what = "is not a regular file" if candidate.exists() else "does not exist"
            raise ConfigError(f"site config file {candidate} {what}")
        return candidate
    searched = site_config_dirs()
    for d in searched:
        for suffix in (".yaml", ".yml"):
            p = d / f"{site}{suffix}"
            if p.is_file():
                return p
    known = sorted({p.stem for d in searched for p in d.glob("*.y*ml")})
    raise ConfigError(
        f"no site config named {site!r} in {', '.join(map(str, searched)) or '(no directory)'}; "
        f"known sites: {', '.join(known) or 'none'}; or pass a path to a YAML file"
    )


def _format_errors(path: Path, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        key = ".".join(str(x) for x in err["loc"])[:80] or "(top level)"
        lines.append(f"{path}: {key}: {err['msg']}")
    return "\n".join(lines)


def load_site(site: str | None = None) -> SiteConfig:
    """Load and validate a site config by name (``local``) or path (``./mysite.yaml``).

    Parameters
    ----------
    site
        A name searched in :func:`site_config_dirs`, or a path; ``None`` for
        ``$ELASTIC_SLURM_SITE``, or ``local`` when that is not set.

    Returns
    -------
    SiteConfig
        Frozen and validated; for a site with ``local_cluster`` and no ``slurm_conf``, the
        ``slurm_conf`` is the one the local cluster writes.

    Raises
    ------
    ConfigError
        The file is missing, is not UTF-8 YAML within :mod:`elastic_slurm.yamlsafe`'s bounds,
        is not a mapping, or a key is wrong; the message names the file and the key
        (``local.yaml: local_cluster.nodes: ...``).
    """
    path = _find(site or envvars.get_str("SITE") or DEFAULT_SITE)
    raw: Any = yamlsafe.load_file(path)
    if raw is None:
        raw = {}  # an empty file: every key has a default
    if not isinstance(raw, dict):
        raise ConfigError(
            f"{path}: expected a mapping of keys at the top level, got {type(raw).__name__}"
        )
    raw.setdefault("name", path.stem)
    raw["source"] = str(path)
    try:
        cfg = SiteConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_format_errors(path, exc)) from exc
    if cfg.local_cluster is not None and cfg.slurm_conf is None:
        cfg = cfg.model_copy(
            update={"slurm_conf": cfg.local_cluster.state_dir / "etc" / "slurm.conf"}
        )
    if cfg.local_cluster is not None and cfg.partition is None:
        cfg = cfg.model_copy(update={"partition": cfg.local_cluster.partition})
    return cfg
