"""Transports run commands given as argument lists (never shell strings)."""

from elastic_slurm.adapter.transport.base import Completed, Transport
from elastic_slurm.adapter.transport.local import LocalTransport

__all__ = ["Completed", "LocalTransport", "Transport"]
