#!/bin/sh
# Run the small integration set against each cluster flavour and print a flavour x test table.
# Usage: scripts/test-matrix.sh [FLAVOURS] (default trixie,forky; add bookworm for the host's
# cluster, which must be up already). Needs root; chroots are built on first use.
set -eu
cd "$(dirname "$0")/.."
exec .venv/bin/python -m elastic_slurm cluster matrix --flavours "${1:-trixie,forky}"
