"""The simulator: the same policy objects on workload traces, in virtual time (to come).

It will run the plugins of :mod:`elastic_slurm.plugins` on
:class:`~elastic_slurm.model.ClusterSnapshot` objects built from SWF traces, so that a site
simulates exactly the policy it deploys.
"""
