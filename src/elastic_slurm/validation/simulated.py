"""The same slice and the same policy in the simulator.

The simulated jobs are the live ones (:class:`~.mapping.TraceJob`): same arrivals, sizes,
ranges, time limits and run times, malleable jobs with linear speedup within their range
(what ``examples/trace_job.py`` does live). Each resize costs the job ``resize_cost_s``
seconds of stopped work (:class:`~elastic_slurm.model.speedup.LinearResizeCost` with that
fixed part), calibrated by :mod:`.live` from the mean time of the live run's resizes in the
controller's journal (decision to the job's ``done``), as Ghafoor calibrates his adaptation
cost from measurements (thesis, chapter 5).
"""

from __future__ import annotations

from elastic_slurm.model.request import JobKind
from elastic_slurm.model.speedup import Linear, LinearResizeCost
from elastic_slurm.plugins.policy import Policy
from elastic_slurm.simulator.replay import SimResult, Simulation
from elastic_slurm.simulator.workload import SimJob
from elastic_slurm.validation.compare import RunTimes
from elastic_slurm.validation.mapping import Slice


def sim_jobs(slice_: Slice, resize_cost_s: float) -> list[SimJob]:
    """The slice's jobs as simulator jobs (``job_id`` = the SWF job number)."""
    cost = LinearResizeCost(fixed_s=resize_cost_s)
    return [
        SimJob(
            job_id=j.trace_id,
            submit_s=j.arrival_s,
            runtime_s=j.runtime_s,
            nodes_requested=j.nodes,
            kind=JobKind.MALLEABLE if j.malleable else JobKind.RIGID,
            nodes_min=j.nodes_min,
            nodes_max=j.nodes_max,
            walltime_s=j.walltime_s,
            speedup=Linear() if j.malleable else None,
            resize_cost=cost if j.malleable else None,
        )
        for j in slice_.jobs
    ]


def simulate(slice_: Slice, policy: Policy, resize_cost_s: float) -> tuple[RunTimes, SimResult]:
    """Run the slice in the simulator with ``policy``; the jobs' records and the full result."""
    result = Simulation(sim_jobs(slice_, resize_cost_s), policy, slice_.nodes).run()
    return RunTimes({r.job_id: r for r in result.records}, slice_.nodes), result
