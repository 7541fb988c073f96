#!/usr/bin/env bash
# The static checks `make lint` runs, and `make test` before its tests (each failure fails it):
#
#   1. ruff over benchlib, tests, bench and scripts (rules and reasons in pyproject.toml's
#      [tool.ruff]);
#   2. mypy --strict ([tool.mypy]) on the packages in MYPY_STRICT below; what they import is
#      read and checked too;
#   3. commit subjects of at most 72 characters (scripts/dev/check_subjects.py), over the
#      commits since the one that added that check.
#
# PYTHON (default python3) picks the environment holding ruff and mypy (pyproject's dev extra,
# in requirements.lock). Extra arguments go to ruff (e.g. scripts/lint.sh --fix).
set -uo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
MYPY_STRICT=(benchlib/core benchlib/stats benchlib/store)

status=0
echo "lint: ruff"
$PYTHON -m ruff check --output-format concise "$@" benchlib tests bench scripts || status=1
echo "lint: mypy --strict on ${MYPY_STRICT[*]}"
$PYTHON -m mypy "${MYPY_STRICT[@]}" || status=1
echo "lint: commit subjects"
$PYTHON scripts/dev/check_subjects.py || status=1
[ "$status" = 0 ] && echo "lint: clean"
exit "$status"
