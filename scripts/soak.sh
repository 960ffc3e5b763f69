#!/bin/sh
# A site soak with faults (docs/soak.md): a soak cluster of its own
# (src/elastic_slurm/soak/site.yaml, beside the default one) with 32 nodes, a few hundred jobs of an SDSC-SP2 slice replayed live
# under the controller for 30 minutes, faults on a schedule, and a table of what was lost,
# leaked and measured. Exits 1 if a job or resize was lost, an allocation leaked, or a fault
# was not injected or not survived. Needs root; takes the soak cluster down at the end.
# Usage: scripts/soak.sh [--nodes 32] [--minutes 30] [--jobs N] [more options: --help]
set -eu
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh mpi,test >&2
exec .venv/bin/python -m elastic_slurm.soak "$@"
