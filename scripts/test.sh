#!/usr/bin/env bash
# The whole test suite: lint, unit, MPI and integration tests on the real local cluster
# (brought up here, as root). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh mpi,test
# packages only the tests need: an OpenSSH server for the SSH transport's tests
.venv/bin/python -m elastic_slurm.cluster.packages openssh-server openssh-client lua5.3 libslurm38
# the optional pyslurm backend, built for Debian 12's Slurm 22.05 (beside this project)
for wheel in ../shared/wheels/pyslurm-22.5.*.whl; do
    [ -e "$wheel" ] && .venv/bin/python -m pip install -q "$wheel"
done
.venv/bin/ruff check src tests examples bench scripts
.venv/bin/ruff format --check src tests examples bench scripts
.venv/bin/elastic-slurm cluster up --nodes 4
exec .venv/bin/python -m pytest --durations=15 "$@"
