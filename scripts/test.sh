#!/usr/bin/env bash
# The test suite as `make test` runs it: two pytest runs, together exactly the default run.
#
#   1. the parallel part (`--part parallel`: pure computations, tests/conftest.py's
#      PARALLEL_FILES) on pytest-xdist workers, one per CPU this process may use;
#   2. the serial part (`--part serial`: everything that starts services, pins CPUs, loads
#      or measures), alone on the machine, as before.
#
# Both parts always run; the exit status is the first failure's (0 when both pass). Extra
# arguments go to both runs (e.g. scripts/test.sh -x). Without pytest-xdist the parallel part
# runs in one process. PYTHON (default python3) picks the interpreter.
#
# Where the time goes, in every run's output: pytest's slowest tests (--durations: 20 of the
# parallel part; every test of the serial part that took 10 s or more), the time by test
# file (every file), and after each part the table of builds (service, image, base image, peer tool; runtime; seconds; cache hit or
# not) from BENCHLIB_BUILD_TIMES, one file per part in TEST_TIMES_DIR (default: a new
# temporary folder, printed at the end).
#
# Beside part 1 (which uses the CPUs, not the network), `python -m benchlib.runtime.prefetch` fetches
# what part 2's builds would otherwise wait for on a cold machine (Go modules, crates, the
# Docker base image; nothing is compiled); part 2 starts when it has ended, and its lines
# are printed then (PREFETCH=0: not run).
set -uo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
workers="$($PYTHON -c 'import os; print(len(os.sched_getaffinity(0)))')" || exit 2
if [ "$workers" -gt 1 ] && $PYTHON -c 'import xdist' 2>/dev/null; then
    parallel=(-n "$workers")
else
    parallel=()
    [ "$workers" -gt 1 ] && echo "test.sh: pytest-xdist is not installed: the parallel part runs in one process"
fi

times_dir="${TEST_TIMES_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/benchlib-test-times.XXXXXX")}"
mkdir -p "$times_dir"
prefetch_pid=
if [ "${PREFETCH:-1}" != 0 ]; then
    $PYTHON -m benchlib.runtime.prefetch >"$times_dir/prefetch.log" 2>&1 &
    prefetch_pid=$!
fi
SECONDS=0
echo "test.sh: part 1 of 2, the pure tests${parallel:+ on $workers workers}"
BENCHLIB_BUILD_TIMES="$times_dir/builds-parallel.jsonl" \
    $PYTHON -m pytest --part parallel "${parallel[@]}" --durations=20 "$@"
first=$?
echo "test.sh: part 1 took ${SECONDS} s"
if [ -n "$prefetch_pid" ]; then
    wait "$prefetch_pid" || echo "test.sh: the prefetch exited with status $?"
    echo "test.sh: prefetch, beside part 1 (${SECONDS} s after part 1 began):"
    cat "$times_dir/prefetch.log"
fi
SECONDS=0
echo "test.sh: part 2 of 2, the tests that start services, pin CPUs or measure (serially)"
BENCHLIB_BUILD_TIMES="$times_dir/builds-serial.jsonl" $PYTHON -m pytest --part serial --durations=0 --durations-min=10 "$@"
second=$?
echo "test.sh: part 2 took ${SECONDS} s; build records: $times_dir"
# 5: no test collected in that part (e.g. -k selected only the other part's tests)
[ "$first" = 5 ] && first=0
[ "$second" = 5 ] && second=0
[ "$first" != 0 ] && exit "$first"
exit "$second"
