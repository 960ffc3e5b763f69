"""What several policies share; policies import this kit, never each other.

Queue order and start sizes, backfill windows and reservations, and node counting:

* :mod:`~elastic_slurm.plugins.kit.queue`: the order jobs are served in and the sizes they may
  start at, grow to or give back.
* :mod:`~elastic_slurm.plugins.kit.backfill`: run-time estimates as reservations see them, the
  EASY shadow time and the free-node profile of conservative backfilling.
* :mod:`~elastic_slurm.plugins.kit.occupancy`: busy nodes over time (a resource evolution
  profile), for planners that place multi-step requests.
* :mod:`~elastic_slurm.plugins.kit.placement` and
  :mod:`~elastic_slurm.plugins.kit.compiled_placement`: the scan of conservative backfilling
  over such a profile written over NumPy arrays, compiled with Numba when it is installed.
* :mod:`~elastic_slurm.plugins.kit.nodes`: how many nodes the machine has, and keeping a batch
  of decisions within the nodes that are free.
* :mod:`~elastic_slurm.plugins.kit.view_memo`: what a policy worked out from a job's view,
  kept across cycles by the view's identity.
"""
