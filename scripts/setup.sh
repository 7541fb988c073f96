#!/usr/bin/env bash
# Set up everything benchlib needs on a fresh Debian/Ubuntu machine, idempotently.
#
#   scripts/setup.sh            Debian packages (when root, or with sudo), the Python package
#                               with its test extra, the Jupyter kernel, and a Docker engine
#                               if none answers (root only; see scripts/docker-engine.sh).
#
# What it installs:
#   apt:  docker.io debootstrap (the Docker runtime and its locally built base image),
#         wrk apache2-utils hey nghttp2-client (peer load generators for cross-checks and bench/),
#         nginx php-fpm (study 03's FastCGI front and baseline: benchlib runs their binaries with
#         configurations of its own, unprivileged, on ports it picks; on a systemd host Debian
#         also starts the packages' own services, which benchlib does not use:
#         `systemctl disable --now nginx php8.2-fpm` stops them)
#   pip:  this project, editable, with the [test] extra
# The service toolchains (go, cargo, node/npm) are not installed here: services whose
# toolchain is missing are reported as "not run: no <tool>" with how to install it.
#
# Environment: BENCHLIB_SKIP_APT=1 skips apt; BENCHLIB_SKIP_DOCKER=1 skips the engine;
# PYTHON (default python3) picks the interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
APT_PACKAGES=(docker.io debootstrap wrk apache2-utils hey nghttp2-client curl nginx php-fpm)

say() { printf 'setup: %s\n' "$*"; }

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

say "installing benchlib (editable, with the test extra) into $($PYTHON -c 'import sys; print(sys.prefix)')"
$PYTHON -m pip install -q --disable-pip-version-check -e '.[test]'

if [ "${BENCHLIB_SKIP_DOCKER:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v dockerd >/dev/null 2>&1; then
    scripts/docker-engine.sh start || say "could not start a Docker engine; the Docker runtime will say why when used"
fi

for tool in go cargo node npm; do
    command -v "$tool" >/dev/null 2>&1 || say "note: no '$tool' on PATH; services needing it will be reported as not run"
done
say "done"
