"""The simulator: the controller's policy objects on workload traces, in virtual time.

A site simulates exactly the policy it deploys: the simulator builds
:class:`~elastic_slurm.model.ClusterSnapshot` objects from its virtual cluster, calls the same
``Policy.decide(snapshot, trigger)`` and carries out the same ``Start``/``Expand``/``Shrink``
decisions, with resize costs and speedup models.

Modules, from the bottom up:

* :mod:`~elastic_slurm.simulator.swf`: Standard Workload Format reader and writer;
* :mod:`~elastic_slurm.simulator.workload`: :class:`SimJob`, SWF to jobs, elastic conversions;
* :mod:`~elastic_slurm.simulator.engine`: the deterministic event queue and clock;
* :mod:`~elastic_slurm.simulator.cluster`: the virtual cluster and the decision semantics;
* :mod:`~elastic_slurm.simulator.replay`: the loop, :func:`run`;
* :mod:`~elastic_slurm.simulator.kernel` and :mod:`~elastic_slurm.simulator.rigid_loop`: the
  compiled engine that runs FCFS and EASY on rigid jobs (the same results, far faster);
* :mod:`~elastic_slurm.simulator.metrics`, :mod:`~elastic_slurm.simulator.plots`,
  :mod:`~elastic_slurm.simulator.costs`.

The speedup and resize-cost models are in :mod:`elastic_slurm.model.speedup`.

Typical use::

    from elastic_slurm.simulator import run
    result = run("SDSC-SP2-1998-4.2-cln.swf.gz", "easy_backfill", seed=1)
    result.metrics.avg_wait_s, result.records[0].start_s
"""

from elastic_slurm.simulator.cluster import JobRecord, SimulationError
from elastic_slurm.simulator.metrics import BSLD_BOUND_S, Metrics, SchedulingTime
from elastic_slurm.simulator.replay import SimConfig, SimResult, Simulation, load_workload, run
from elastic_slurm.simulator.swf import SWFHeader, SWFJob, SWFTrace, TraceError, read_swf, write_swf
from elastic_slurm.simulator.workload import (
    ElasticConversion,
    EvolvingEvent,
    LinaConversion,
    SimJob,
    Workload,
    from_swf,
    make_elastic,
)

__all__ = [
    "BSLD_BOUND_S",
    "ElasticConversion",
    "EvolvingEvent",
    "JobRecord",
    "LinaConversion",
    "Metrics",
    "SWFHeader",
    "SWFJob",
    "SWFTrace",
    "SchedulingTime",
    "SimConfig",
    "SimJob",
    "SimResult",
    "Simulation",
    "SimulationError",
    "TraceError",
    "Workload",
    "from_swf",
    "load_workload",
    "make_elastic",
    "read_swf",
    "run",
    "write_swf",
]
