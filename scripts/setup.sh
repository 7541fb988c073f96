#!/usr/bin/env bash
# Set up everything benchlib needs on a fresh Debian/Ubuntu machine, idempotently.
#
#   scripts/setup.sh            Debian packages (when root, or with sudo), the project's virtual
#                               environment .venv with the exact versions of requirements.lock
#                               and benchlib (editable), the Jupyter kernel "benchlib", and a
#                               Docker engine if none answers (root only; see scripts/docker-engine.sh).
#
# What it installs:
#   apt:  python3-venv (virtual environments on Debian/Ubuntu, whose system Python refuses pip
#         installs: PEP 668, "externally-managed-environment"),
#         docker.io debootstrap (the Docker runtime and its locally built base image),
#         wrk apache2-utils hey nghttp2-client (peer load generators for cross-checks and bench/),
#         nginx php-fpm (study 03's FastCGI front and baseline: benchlib runs their binaries with
#         configurations of its own, unprivileged, on ports it picks; on a systemd host Debian
#         also starts the packages' own services, which benchlib does not use:
#         `systemctl disable --now nginx php8.2-fpm` stops them)
#   pip:  into .venv (made with `$BASE_PYTHON -m venv .venv`), requirements.lock with
#         --require-hashes (benchlib's dependencies and all its extras: services, lab, test;
#         scripts/lock.sh regenerates it), then this project editable without dependencies.
#         Skipped when the environment already holds this lock (a stamp of its hash in the
#         environment), so a second run takes seconds.
#   kernel: the Jupyter kernel "benchlib" in the environment (share/jupyter/kernels/benchlib):
#         `make lab` and papermill find it; `benchlib run` / `report` run the same kernel.
# The service toolchains (go, cargo, node/npm) are not installed here: services whose
# toolchain is missing are reported as "not run: no <tool>" with how to install it.
#
# Environment: BASE_PYTHON (default python3) is the interpreter .venv is made from (never
# downloaded; a Python 3.11, which the lock is resolved for); an existing .venv made from another
# interpreter is made again when BASE_PYTHON is given, and kept when it is not. PYTHON, when set to anything but
# .venv/bin/python, is an existing environment to install into as it is, instead of .venv (a
# virtual or conda environment; an externally managed interpreter is refused). BENCHLIB_SKIP_APT=1
# skips apt; BENCHLIB_SKIP_DOCKER=1 skips the engine.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
base_given="${BASE_PYTHON:+yes}"
BASE_PYTHON="${BASE_PYTHON:-python3}"
PYTHON="${PYTHON:-$VENV/bin/python}"
LOCK=requirements.lock
APT_PACKAGES=(python3-venv docker.io debootstrap wrk apache2-utils hey nghttp2-client curl nginx php-fpm chromium chromium-driver)

say() { printf 'setup: %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 2; }

if [ "${BENCHLIB_SKIP_APT:-0}" != 1 ] && command -v apt-get >/dev/null 2>&1; then
    missing=()
    for p in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        if [ "$(id -u)" = 0 ]; then sudo=""; elif command -v sudo >/dev/null 2>&1; then sudo="sudo"; else sudo="none"; fi
        if [ "$sudo" = none ]; then
            say "not root and no sudo: please install the Debian packages ${missing[*]}"
        else
            say "installing Debian packages: ${missing[*]}"
            $sudo apt-get update -qq
            DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
        fi
    fi
fi

# -- the Python environment ---------------------------------------------------------------------
# the interpreter's own path, and whether it is an externally managed one (PEP 668: the marker
# file in its stdlib, outside a virtual environment)
realexe() { "$1" -c 'import os, sys; print(os.path.realpath(sys.executable))'; }
managed() {
    "$1" -c 'import os, sys, sysconfig
sys.exit(0 if sys.prefix == sys.base_prefix and os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)'
}

if [ "$PYTHON" = "$VENV/bin/python" ] || [ "$(realpath -ms "$PYTHON")" = "$(realpath -ms "$VENV/bin/python")" ]; then
    PYTHON="$VENV/bin/python"
    have=""   # the interpreter the existing .venv was made from, if it still runs
    if [ -x "$PYTHON" ]; then
        have="$("$PYTHON" -c 'import os, sys; print(os.path.realpath(sys._base_executable))' 2>/dev/null || true)"
    fi
    if [ -z "$have" ] || [ -n "$base_given" ]; then
        command -v "$BASE_PYTHON" >/dev/null 2>&1 \
            || die "BASE_PYTHON=$BASE_PYTHON: no such interpreter; point BASE_PYTHON at a Python 3.11 (Debian 12: /usr/bin/python3)"
        base="$(realexe "$BASE_PYTHON")"
        "$base" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))' \
            || die "BASE_PYTHON=$BASE_PYTHON is Python $("$base" -c 'import platform; print(platform.python_version())'); benchlib needs 3.11 (the lock's)"
        if [ "$have" != "$base" ]; then
            if [ -e "$VENV" ]; then
                say "re-making $VENV from $base (it was made from ${have:-an interpreter that no longer runs})"
            else
                say "making the virtual environment $VENV from $base"
            fi
            "$base" -m venv --clear "$VENV" \
                || die "could not make $VENV with $base -m venv (Debian/Ubuntu: apt-get install python3-venv)"
        fi
    fi
else
    command -v "$PYTHON" >/dev/null 2>&1 || die "PYTHON=$PYTHON: no such interpreter (leave PYTHON unset to use $VENV)"
    if managed "$PYTHON"; then
        die "PYTHON=$PYTHON is an externally managed interpreter (PEP 668: pip may not install into it); leave PYTHON unset, and scripts/setup.sh makes $VENV from it (BASE_PYTHON=$PYTHON)"
    fi
    say "using the environment of PYTHON=$PYTHON as it is (not $VENV)"
fi
"$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
    || say "note: $LOCK is resolved for Python 3.11; this is $("$PYTHON" -c 'import platform; print(platform.python_version())')"

prefix="$("$PYTHON" -c 'import sys; print(sys.prefix)')"
stamp="$prefix/.benchlib-setup"
# what the environment must hold: this lock and pyproject.toml, installed for this checkout
want="$(cat "$LOCK" pyproject.toml | sha256sum | cut -d' ' -f1) $(pwd -P)"
here="$(pwd -P)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$PYTHON" -c '
import sys, benchlib
sys.exit(not benchlib.__file__.startswith(sys.argv[1] + "/"))' "$here" 2>/dev/null; then
    say "$prefix already holds $LOCK and benchlib (editable, from here): nothing to install"
else
    say "installing $LOCK (exact versions, hashes checked) into $prefix"
    rm -f "$stamp"
    "$PYTHON" -m pip install -q --disable-pip-version-check --require-hashes -r "$LOCK"
    say "installing benchlib (editable, without dependencies: the lock has them)"
    "$PYTHON" -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
    printf '%s\n' "$want" >"$stamp"
fi

# The Jupyter kernel "benchlib" of this environment (the same one `benchlib run` starts)
say "Jupyter kernel: $("$PYTHON" -m benchlib.publish.kernel install)"

if [ "${BENCHLIB_SKIP_DOCKER:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v dockerd >/dev/null 2>&1; then
    scripts/docker-engine.sh start || say "could not start a Docker engine; the Docker runtime will say why when used"
fi

for tool in go cargo node npm; do
    command -v "$tool" >/dev/null 2>&1 || say "note: no '$tool' on PATH; services needing it will be reported as not run"
done
say "done"
