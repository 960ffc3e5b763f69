#!/usr/bin/env bash
# Prepare .venv with elastic-slurm installed (Debian 12; run as root on a fresh machine).
# Usage: bash scripts/bootstrap.sh [EXTRAS]   e.g. "mpi,test"
#
# The venv is made from Debian's /usr/bin/python3 when it exists (PYTHON=... overrides), not
# from the first python3 on PATH: jobs run as their users, and an interpreter under a private
# directory (pyenv under /root, mode 0700) fails for them with "bad interpreter: Permission
# denied". An existing .venv whose interpreter other users cannot execute is rebuilt.
set -euo pipefail
cd "$(dirname "$0")/.."
extras=${1:-mpi}

apt_install() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "bootstrap: $* missing; install it (apt-get install $*) or run as root" >&2
        exit 1
    fi
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
}

# closed_to_others PATH BITS: print the first component of PATH's resolved path that other
# users cannot use (a directory they cannot search, or PATH itself without the permission bits
# BITS for others: 1 execute, 4 read, 5 both) and succeed; fail if there is none.
closed_to_others() {
    local target dir="" part
    target=$(readlink -f "$1") || { echo "$1"; return 0; }
    IFS=/ read -ra parts <<<"${target#/}"
    for part in "${parts[@]}"; do
        dir="$dir/$part"
        local need=1
        [ "$dir" = "$target" ] && need=$2
        if [ $((0$(stat -c %a "$dir") & need)) -ne "$need" ]; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}

if [ -n "${PYTHON:-}" ]; then
    py=$PYTHON
else
    [ -x /usr/bin/python3 ] || command -v python3 >/dev/null || apt_install python3
    if [ -x /usr/bin/python3 ]; then py=/usr/bin/python3; else py=python3; fi
fi
command -v "$py" >/dev/null || { echo "bootstrap: no interpreter $py" >&2; exit 1; }
if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "bootstrap: $py is Python $("$py" -V 2>&1); elastic-slurm needs 3.11 or later:" \
        "set PYTHON=/path/to/python3.11" >&2
    exit 1
fi

if [ -e .venv/bin/python ] && blocked=$(closed_to_others .venv/bin/python 1); then
    if ! chosen=$(closed_to_others "$(command -v "$py")" 1); then
        echo "bootstrap: .venv runs $(readlink -f .venv/bin/python), which other users cannot" \
            "execute ($blocked is closed to them): rebuilding it from $py" >&2
        rm -rf .venv
    fi
fi
if [ ! -x .venv/bin/python ]; then
    if ! "$py" -m venv .venv 2>/dev/null; then
        rm -rf .venv
        apt_install python3-venv
        "$py" -m venv .venv
    fi
fi
if blocked=$(closed_to_others .venv/bin/python 1); then
    echo "bootstrap: warning: .venv runs $(readlink -f .venv/bin/python), which other users" \
        "cannot execute ($blocked is closed to them): their jobs cannot use this venv" >&2
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[$extras]"
# An editable install leaves the bytecode to the first import, which writes none where
# PYTHONDONTWRITEBYTECODE is set or the user cannot write the checkout: every rank of every job
# generation would compile the package again at its start (measured: four ranks starting on two
# cores, 0.88 s with the bytecode, 1.01 s without). Compile it once here; a changed module is
# compiled again as usual.
.venv/bin/python -m compileall -q src
if blocked=$(closed_to_others "$PWD/src/elastic_slurm" 5); then
    echo "bootstrap: note: $blocked is closed to other users, so their jobs cannot import" \
        "elastic-slurm from this checkout; install it where they can read it" \
        "(docs/install-site.md, 'Letting unprivileged users run elastic jobs')" >&2
fi
