#!/bin/sh
# The integration set on each cluster flavour (Slurm 22.05 / 24.11 / 26.05 with the Open MPI of
# each), printing a flavour x check table; chroots are built on first use (Debian's registry).
# Usage: scripts/test-matrix.sh [FLAVOURS] [more `cluster matrix` options]
#   FLAVOURS defaults to bookworm,trixie,forky. Needs root; prepares .venv like the tests do.
set -eu
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh mpi,test
flavours=${1:-bookworm,trixie,forky}
[ $# -gt 0 ] && shift
exec .venv/bin/elastic-slurm cluster matrix --flavours "$flavours" "$@"
