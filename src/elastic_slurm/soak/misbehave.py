"""Jobs that misbehave: one ignores its orders, three have hostile job directories.

* **Ignoring its orders**: a malleable job (``[1, nodes]``, starting on 2, grace period 5 s)
  whose program (:data:`IGNORING_PROGRAM`) initialises the elastic runtime and then sleeps,
  never reaching a resize point: an order to it is never followed.
* **Hostile job directories**: three malleable trace programs (``[1, nodes]``, starting on 2),
  whose directories are changed once they run, as their owner could
  (:func:`attack`): ``orders/`` replaced by a symlink to a file outside the directory
  (:data:`BAIT`), ``secret`` replaced by a FIFO, and an order numbered 999999999999. What the
  controller must do: nothing outside the job directory changes, its loop and its HTTP server
  keep serving the other jobs.

The job directory's layout is the protocol's (``docs/protocol.md``):
``<workdir>/.elastic-slurm/job-<id>/``.
"""

from __future__ import annotations

import os
import shutil
from datetime import timedelta
from pathlib import Path

from elastic_slurm.model.request import ElasticRequest, JobKind
from elastic_slurm.resources import example

#: The three attacks, one per hostile job.
ATTACKS = ("orders_symlink", "secret_fifo", "order_999999999999")

#: The bait's content: it must still read so at the end.
BAIT_TEXT = "the soak's bait: the controller must never write here\n"

IGNORING_PROGRAM = '''\
"""A malleable job that never reaches a resize point (the soak's fault)."""
import sys
import time

from elastic_slurm.mpi_runtime import init

ec = init()
time.sleep(float(sys.argv[1]))
if ec.rank == 0:
    print("ignored every order", flush=True)
'''


def job_dir(workdir: Path, job_id: int) -> Path:
    """The directory of job ``job_id`` submitted from ``workdir``."""
    return workdir / ".elastic-slurm" / f"job-{job_id}"


def ignoring_request(out_dir: Path, nodes: int, seconds: float) -> ElasticRequest:
    """The request of the job that ignores its orders (it sleeps ``seconds``)."""
    program = out_dir / "ignore_orders.py"
    program.write_text(IGNORING_PROGRAM)
    return ElasticRequest(
        program=(str(program), str(seconds)),
        kind=JobKind.MALLEABLE,
        nodes_min=1,
        nodes_max=nodes,
        nodes_start=min(2, nodes),
        walltime=timedelta(seconds=seconds + 180),
        job_name="soak-ignoring",
        grace_period_s=5.0,
    )


def hostile_request(attack: str, nodes: int, seconds: float) -> ElasticRequest:
    """The request of the job whose directory suffers ``attack`` (it computes ``seconds``)."""
    return ElasticRequest(
        program=(
            str(example("trace_job.py")),
            "--runtime-s",
            str(seconds),
            "--ref-nodes",
            "2",
            "--max-nodes",
            str(nodes),
        ),
        kind=JobKind.MALLEABLE,
        nodes_min=1,
        nodes_max=nodes,
        nodes_start=min(2, nodes),
        walltime=timedelta(seconds=seconds + 180),
        job_name=f"soak-hostile-{attack}",
    )


def bait(out_dir: Path) -> Path:
    """The file the symlinked ``orders/`` points at (created with :data:`BAIT_TEXT`)."""
    outside = out_dir / "outside"
    outside.mkdir(parents=True, exist_ok=True)
    path = outside / "bait.txt"
    if not path.exists():
        path.write_text(BAIT_TEXT)
    return path


def ready(directory: Path) -> bool:
    """True once the job's launcher has written its secret (it talks to the controller)."""
    return (directory / "secret").is_file()


def attack(kind: str, directory: Path, bait_file: Path) -> str:
    """Turn ``directory`` hostile by ``kind`` (one of :data:`ATTACKS`); one line saying how.

    Raises
    ------
    ValueError
        An unknown attack.
    """
    if kind == "orders_symlink":
        orders = directory / "orders"
        if orders.is_symlink() or orders.is_file():
            orders.unlink()
        elif orders.is_dir():
            shutil.rmtree(orders)
        orders.symlink_to(bait_file)
        return f"{orders} -> {bait_file}"
    if kind == "secret_fifo":
        secret = directory / "secret"
        secret.unlink(missing_ok=True)
        os.mkfifo(secret, 0o600)
        return f"{secret} is a FIFO"
    if kind == "order_999999999999":
        orders = directory / "orders"
        orders.mkdir(exist_ok=True)
        path = orders / "999999999999.json"
        path.write_text('{"seq": 999999999999, "action": "shrink", "nodes": []}\n')
        return f"{path} written"
    raise ValueError(f"unknown attack {kind!r}; known: {', '.join(ATTACKS)}")


def bait_untouched(bait_file: Path) -> bool:
    """True when the bait still holds :data:`BAIT_TEXT` and nothing else appeared beside it."""
    try:
        same = bait_file.read_text() == BAIT_TEXT
    except OSError:
        return False
    return same and sorted(p.name for p in bait_file.parent.iterdir()) == [bait_file.name]
