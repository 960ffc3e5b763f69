"""The protocol between the controller and running jobs (HTTP + JSON; ``docs/protocol.md``).

* :mod:`.identity`: the job's secret and the sender's user (MUNGE);
* :mod:`.gateway`: the controller's side: authenticate, then read or write the job directory;
* :mod:`.server`: Flask endpoints served by waitress in the controller's process;
* :mod:`.client`: the job's side (requests, with retries).
"""
