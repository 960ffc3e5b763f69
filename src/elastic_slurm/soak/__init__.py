"""A site soak with faults: a trace replayed live on a local cluster while things break.

``python -m elastic_slurm.soak`` (or ``bash scripts/soak.sh``) brings up a local cluster of its
own (``soak/site.yaml``, beside the default one), starts the controller, replays a
time-compressed slice of a real trace with real MPI programs (about half of them malleable),
injects faults on a schedule, and prints what survived (``docs/soak.md``). One concept per
module:

* :mod:`.schedule`: which faults, when, for how long (pure);
* :mod:`.workload`: the trace slice and its replay;
* :mod:`.controller`: the controller as a process (start, SIGKILL, restart, ``/proc``, metrics);
* :mod:`.daemons`: Slurm's daemons of the cluster stopped and brought back;
* :mod:`.misbehave`: a job that ignores its orders, and hostile job directories;
* :mod:`.accounting`: jobs, resizes and allocations counted at the end;
* :mod:`.report`: the table;
* :mod:`.run`: all of it in order;
* :mod:`.command`: the command line (``python -m elastic_slurm.soak``).
"""
