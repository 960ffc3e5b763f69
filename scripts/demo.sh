#!/usr/bin/env bash
# The main job: bring the local Slurm cluster up and run the elastic heat2d demo.
# Usage: bash scripts/demo.sh [elastic-slurm demo options, e.g. --json]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh mpi
exec .venv/bin/elastic-slurm demo "$@"
