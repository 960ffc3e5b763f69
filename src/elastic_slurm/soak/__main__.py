"""``python -m elastic_slurm.soak``: a site soak with faults (:mod:`.command`, ``docs/soak.md``)."""

import sys

from elastic_slurm.soak.command import main

sys.exit(main())
