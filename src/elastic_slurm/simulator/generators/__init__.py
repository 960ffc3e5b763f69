"""Workload generators: synthetic workloads, and conversions of traces for one paper each.

Each module here turns a trace (or nothing) into :class:`~elastic_slurm.simulator.workload.SimJob`
lists the simulator runs, the way one paper built its workloads; each module's docstring cites
the paper and says which of its choices the paper left open.
"""
