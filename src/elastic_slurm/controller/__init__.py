"""The controller: observe Slurm, ask the policy, carry out its decisions, tell the jobs.

``observe`` turns one batched poll into a :class:`~elastic_slurm.model.ClusterSnapshot`;
``actuate`` carries out decisions through the adapter and the job directory, one resize per
job at a time; ``journal`` records every decision and outcome; ``daemon`` runs the loop.
"""
