"""``python -m elastic_slurm``: the same as the ``elastic-slurm`` command."""

import sys

from elastic_slurm.cli.main import main

sys.exit(main())
