"""The policies shipped with elastic-slurm, one module each."""
