"""The local cluster: a real multi-node Slurm cluster on one machine (``elastic-slurm cluster``).

``packages`` installs what is missing, ``network`` builds the bridge and namespaces, ``hosts``
keeps a managed block in ``/etc/hosts``, ``slurmconf`` renders the configuration, ``processes``
starts and stops daemons by PID, and ``local`` puts them together. ``users`` checks what
unprivileged users' jobs must reach (the job Python) and creates test accounts.
"""
