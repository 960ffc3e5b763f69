"""``elastic-slurm demo``: the project's main job, end to end on the local cluster."""
