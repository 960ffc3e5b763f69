"""Scheduling policies as plugins (entry-point group ``elastic_slurm.policies``)."""
