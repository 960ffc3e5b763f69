#!/usr/bin/env bash
# Prepare .venv with elastic-slurm installed (Debian 12; run as root on a fresh machine).
# Usage: bash scripts/bootstrap.sh [EXTRAS]   e.g. "mpi,test"
set -euo pipefail
cd "$(dirname "$0")/.."
extras=${1:-mpi}
py=${PYTHON:-python3}

apt_install() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "bootstrap: $* missing; install it (apt-get install $*) or run as root" >&2
        exit 1
    fi
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
}

command -v "$py" >/dev/null || apt_install python3
if [ ! -x .venv/bin/python ]; then
    if ! "$py" -m venv .venv 2>/dev/null; then
        rm -rf .venv
        apt_install python3-venv
        "$py" -m venv .venv
    fi
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[$extras]"
