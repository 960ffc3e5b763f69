"""The protocol between the controller and running jobs (HTTP + JSON; ``docs/protocol.md``).

* :mod:`.identity`: the job's secret and the sender's user (MUNGE);
* :mod:`.files`: hostile-input file primitives (no symlink followed, regular files only, caps);
* :mod:`.jobdir`: a job's directory, read and written only through :mod:`.files`;
* :mod:`.gateway`: the controller's side: authenticate, then read or write the job directory;
* :mod:`.server`: Flask endpoints served by cheroot in the controller's process;
* :mod:`.client`: the job's side (requests, with retries).
"""
