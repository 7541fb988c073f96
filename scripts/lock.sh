#!/usr/bin/env bash
# Regenerate requirements.lock, the exact Python environment scripts/setup.sh and CI install:
# benchlib's dependencies and every extra (services, lab, test), plus the build backend of the
# editable install (pyproject.toml's [build-system] requires), resolved for CPython 3.11 on
# Linux from pyproject.toml's ranges, each pin with the hashes of its files.
#
#   scripts/lock.sh                          keep the pins that still fit; add what is new
#   scripts/lock.sh --upgrade                every package to the newest version the ranges allow
#   scripts/lock.sh --upgrade-package NAME   one package to its newest
#
# The resolver is uv's `uv pip compile --generate-hashes` (uv $UV_VERSION below), installed by
# this script in a throwaway virtual environment made from BASE_PYTHON (default python3) and
# removed at the end; nothing is installed into your own environment. Commit the new lock with
# the pyproject.toml change it follows; environment.yml mirrors the ranges
# (tests/test_environment_sync.py checks both).
set -euo pipefail
cd "$(dirname "$0")/.."

UV_VERSION=0.13.8
PYTHON_VERSION=3.11
BASE_PYTHON="${BASE_PYTHON:-python3}"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/benchlib-lock.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

"$BASE_PYTHON" -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check "uv==$UV_VERSION"

# the build backend, so that `pip install --no-build-isolation -e .` needs nothing unpinned
"$tmp/venv/bin/python" - >"$tmp/build.in" <<'EOF'
import tomllib
print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))
EOF

out="$tmp/requirements.lock"
if [ -f requirements.lock ]; then cp requirements.lock "$out"; fi   # uv keeps the pins that still fit
"$tmp/venv/bin/uv" pip compile pyproject.toml "$tmp/build.in" --all-extras --generate-hashes \
    --python-version "$PYTHON_VERSION" --python-platform x86_64-unknown-linux-gnu \
    --no-header --annotation-style line --quiet -o "$out" "$@"

{
    cat <<'EOF'
# requirements.lock: the exact Python environment of scripts/setup.sh and CI (.ci/run):
# benchlib's dependencies and every extra (services, lab, test) plus the build backend of the
# editable install, for CPython 3.11 on Linux, each pin with the hashes pip checks
# (pip install --require-hashes -r requirements.lock). pyproject.toml keeps the ranges for
# library users. Made by scripts/lock.sh (uv pip compile --generate-hashes); regenerate it after
# changing pyproject.toml's dependencies:
#     scripts/lock.sh                          keep the pins that still fit, add what is new
#     scripts/lock.sh --upgrade                the newest versions the ranges allow
#     scripts/lock.sh --upgrade-package NAME   one package to its newest
EOF
    grep -v '^#' "$out" | sed "s#$tmp/build.in#pyproject.toml (build-system)#g"
} >requirements.lock
echo "lock: wrote requirements.lock ($(grep -c '^[a-z0-9]' requirements.lock) packages)"
