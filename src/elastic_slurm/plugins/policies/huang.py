"""Huang et al.'s moldable policies, and the fair-share baseline they compare against.

K.-C. Huang, T.-C. Huang, M.-J. Tsai, H.-Y. Chang and Y.-H. Tung, "Moldable Job Scheduling for
HPC as a Service with Application Speedup Model and Execution Time Information" (HPCaaS: users
give no size; the scheduler picks each job's size when it starts, from its speedup model).

* :class:`HuangMoldable` (``huang_moldable``): section 3's *parallel* and *serial* allocation
  policies, section 4.2's *improved* policy (Fig. 12), which uses execution-time information,
  and the *auxiliary* approach of their reference [18] that Figs. 9, 13 and 14 compare with.
* :class:`ModifiedFairShare` (``huang_fairshare``): section 4.1's "corrected modified weight
  fraction" fair-share limit of Srinivasan et al. (their reference [9]) in a schedule-time
  moldable scheduler with aggressive (EASY) backfilling: the baseline of Figs. 15-17.

The two policies live in :mod:`~elastic_slurm.plugins.policies.huang_moldable` and
:mod:`~elastic_slurm.plugins.policies.huang_fairshare`, their speedup helpers in
:mod:`~elastic_slurm.plugins.kit.speedup`; this module re-exports them under their old path.

Both only start jobs (``Start`` with the chosen size) and never resize a running one. A
moldable or malleable job's size is chosen within ``[nodes_min, nodes_max]``; rigid and
evolving jobs start at their requested size. Neither policy keeps state between cycles, bar
caches of what they derive from the job views (pure functions of the views, kept only to
save time on long queues).

How they degrade: a moldable job without a speedup model may get up to ``nodes_max``, its run
time taken as the same at any size (as ``JobView.walltime_at_s`` does). Without any execution
time (live, no time limit) the improved policy counts each running job as one future release,
and the fair-share one imposes no limit on the job and cannot reserve past it.
"""

from __future__ import annotations

from elastic_slurm.plugins.kit.speedup import knee, size_range
from elastic_slurm.plugins.policies.huang_fairshare import FairShareConfig, ModifiedFairShare
from elastic_slurm.plugins.policies.huang_moldable import (
    HuangConfig,
    HuangMoldable,
    parallel_allocation,
    serial_allocation,
)

__all__ = [
    "FairShareConfig",
    "HuangConfig",
    "HuangMoldable",
    "ModifiedFairShare",
    "knee",
    "parallel_allocation",
    "serial_allocation",
    "size_range",
]
