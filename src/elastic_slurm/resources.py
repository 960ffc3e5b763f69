"""Find files shipped beside the package: ``site_configs/`` and ``examples/``.

In a checkout they are at the repository's top; in an installed wheel they are packaged as
``elastic_slurm/_site_configs`` and ``elastic_slurm/_examples``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from elastic_slurm.errors import ConfigError


def data_dirs(kind: str) -> list[Path]:
    """Existing directories holding ``kind`` (``site_configs`` or ``examples``), checkout first."""
    found = []
    checkout = Path(__file__).resolve().parents[2] / kind
    if checkout.is_dir():
        found.append(checkout)
    packaged = Path(str(resources.files("elastic_slurm"))) / f"_{kind}"
    if packaged.is_dir():
        found.append(packaged)
    return found


def example(name: str) -> Path:
    """The path of a shipped example program (``heat2d.py``).

    Raises
    ------
    ConfigError
        It is not there (the message lists where it was looked for).
    """
    dirs = data_dirs("examples")
    for d in dirs:
        if (d / name).is_file():
            return d / name
    raise ConfigError(f"example {name} not found in {', '.join(map(str, dirs)) or 'any directory'}")
