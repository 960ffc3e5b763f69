"""Live validation (Ghafoor, chapter 5): a trace slice run on the cluster and in the simulator.

* :mod:`.mapping`: the slice, compressed and scaled to the cluster;
* :mod:`.live`: the run on live Slurm with the controller (measured from Slurm's accounting);
* :mod:`.simulated`: the same workload and policy in the simulator;
* :mod:`.compare`: per-job and aggregate ``|live - simulated| / live``.
"""
