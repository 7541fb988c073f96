#!/usr/bin/env bash
# The test command on a new machine, repeatable: move every cache aside, run a fresh clone's
# .ci/run under `time`, log the figures, put everything back (docs/dev/ci-time.md).
# With --report, the same for a new user's first `make report` instead (README's cost table).
#
# usage: sudo scripts/dev/cold-ci.sh [--report] [--dry-run] [--ref REF] [--log FILE] [--keep-clone]
#
#   --report      run `make report` (BASE_PYTHON=/usr/bin/python3, as .ci/run sets it) in the
#                 fresh clone instead of .ci/run; on success its time is recorded as the
#                 "first-run" total (builds cold) in this checkout's data/measurements.json
#                 (`python -m benchlib._project.measurements record-total`; then `... sync` renders it
#                 into README), and the executed reports are kept beside the log
#   --dry-run     print what would be moved aside, stopped and purged; change nothing
#                 (needs no root)
#   --ref REF     the commit to clone and run (default HEAD of this checkout)
#   --log FILE    where the one-line result is appended (default /var/tmp/cold-ci/results.log);
#                 the run's full output goes beside it, in <timestamp>/ci-run.log
#   --keep-clone  keep the fresh clone (its path is printed)
#
# What "nothing cached" means here, and what is moved aside (renamed in place, so it costs
# nothing on the same file system, and renamed back afterwards):
#   * the benchlib build cache ($BENCHLIB_CACHE, default ~/.cache/benchlib: service builds,
#     the debootstrap base-image tarball, Docker build logs)
#   * the package caches of the service toolchains: ~/.cargo/registry ~/.cargo/git, Go's
#     module and build caches (`go env GOMODCACHE GOCACHE`), npm's (~/.npm/_cacache),
#     NuGet's (~/.nuget/packages), pip's and uv's (~/.cache/pip ~/.cache/uv), apt's
#     downloaded .deb files (/var/cache/apt/archives)
#   * every Docker image: the engine started by scripts/docker-engine.sh is stopped and its
#     data root (/var/lib/docker, and /var/lib/benchlib-dockerd-* of named engines) moved
#     aside; an engine this script cannot stop (systemd, Docker Desktop) makes it refuse
#   * the Debian packages scripts/setup.sh installs (its APT_PACKAGES list, read from the
#     script), purged with what only they needed; all reinstalled afterwards
# The toolchains themselves (go, cargo/rustup, node) stay: the CI machine has them.
#
# The restore runs on every exit (success, failure, Ctrl-C): the caches the run made are
# deleted and the originals renamed back; the packages are reinstalled; the engine is
# started again if it was running. Run it on a quiet machine: the load average before and
# after is logged, and a busy machine inflates the figure.
set -euo pipefail

here="$(cd "$(dirname "$0")/../.." && pwd)"
dry_run=0
mode=test
ref=HEAD
log_file=/var/tmp/cold-ci/results.log
keep_clone=0
while [ $# -gt 0 ]; do
    case "$1" in
        --dry-run) dry_run=1; shift ;;
        --report) mode=report; shift ;;
        --ref) ref="${2:?--ref needs a commit}"; shift 2 ;;
        --ref=*) ref="${1#--ref=}"; shift ;;
        --log) log_file="${2:?--log needs a file}"; shift 2 ;;
        --log=*) log_file="${1#--log=}"; shift ;;
        --keep-clone) keep_clone=1; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "cold-ci.sh: unknown argument '$1' (valid: --report, --dry-run, --ref REF, --log FILE, --keep-clone)" >&2; exit 2 ;;
    esac
done

say() { printf 'cold-ci: %s\n' "$*"; }
# The suite's signal tests send SIGINT and SIGHUP to themselves: under nohup, or started with '&'
# from a shell without job control, those signals arrive ignored and cannot be reset, so the
# tests fail for the way the script was started. Refuse that at once.
sig_ignored="$(awk '/^SigIgn:/ {print $2}' /proc/$$/status 2>/dev/null || echo 0)"
if [ "$dry_run" = 0 ] && (( (16#${sig_ignored:-0} & 3) != 0 )); then
    echo "cold-ci.sh: SIGHUP or SIGINT is ignored here (nohup, or '&' without job control): the suite's" \
         "signal tests would fail; run it in the foreground, or in the background with 'set -m' / setsid" >&2
    exit 2
fi
if [ "$dry_run" = 0 ] && [ "$(id -u)" != 0 ]; then
    echo "cold-ci.sh: needs root (it stops the Docker engine and purges Debian packages); try --dry-run" >&2
    exit 2
fi
commit="$(git -C "$here" rev-parse --verify "$ref^{commit}")" || { echo "cold-ci.sh: unknown commit '$ref'" >&2; exit 2; }
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
suffix=".cold-ci-aside-$stamp"

# -- what would be moved, stopped, purged ----------------------------------------------------
# The Debian packages: setup.sh's own list (one source), never typed here.
mapfile -t apt_list < <(bash -c "$(grep -E '^APT_PACKAGES=' "$here/scripts/setup.sh"); printf '%s\n' \"\${APT_PACKAGES[@]}\"")
[ ${#apt_list[@]} -gt 0 ] || { echo "cold-ci.sh: no APT_PACKAGES=(...) line in scripts/setup.sh" >&2; exit 1; }

go_env() { command -v go >/dev/null 2>&1 && go env "$1" 2>/dev/null || true; }
npm_cache="$(command -v npm >/dev/null 2>&1 && npm config get cache 2>/dev/null || echo "$HOME/.npm")"
candidates=(
    "${BENCHLIB_CACHE:-$HOME/.cache/benchlib}"
    "$HOME/.cargo/registry" "$HOME/.cargo/git"
    "$(go_env GOMODCACHE)" "$(go_env GOCACHE)" "$HOME/go/pkg/mod" "$HOME/.cache/go-build"
    "$npm_cache/_cacache" "$HOME/.nuget/packages"
    "$HOME/.cache/pip" "$HOME/.cache/uv"
    /var/cache/apt/archives
    /var/lib/docker /var/lib/containerd
)
for d in /var/lib/benchlib-dockerd-*; do [ -d "$d" ] && candidates+=("$d"); done
moves=()
for p in "${candidates[@]}"; do
    [ -n "$p" ] && [ -e "$p" ] || continue
    p="$(realpath -s "$p")"
    case " ${moves[*]-} " in *" $p "*) continue ;; esac
    moves+=("$p")
done
installed_apt=()
for p in "${apt_list[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" && installed_apt+=("$p")
done
engine_status="$("$here/scripts/docker-engine.sh" status 2>/dev/null | head -n 1 || true)"
named_engines=()
for d in /run/benchlib-dockerd-*/; do
    [ -f "$d/dockerd.pid" ] && named_engines+=("$(basename "$d" | sed 's/^benchlib-dockerd-//')")
done

say "commit $commit ($(git -C "$here" log -1 --format=%s "$commit"))"
say "Docker engine: ${engine_status:-no answer}${named_engines[*]:+; named engines: ${named_engines[*]}}"
for p in "${moves[@]}"; do
    if mountpoint -q "$p"; then say "would cover mount point $p with an empty folder ($p$suffix) for the run ($(du -sh "$p" 2>/dev/null | cut -f1))"
    else say "would move aside: $p -> $p$suffix ($(du -sh "$p" 2>/dev/null | cut -f1))"; fi
done
say "would purge (setup.sh's list, installed now): ${installed_apt[*]:-none}"
say "setup.sh's list not installed now (left alone): $(comm -23 <(printf '%s\n' "${apt_list[@]}" | sort) <(printf '%s\n' "${installed_apt[@]}" | sort) | tr '\n' ' ')"
if [ "$mode" = report ]; then
    run_what="make report (BASE_PYTHON=/usr/bin/python3)"
    say "would clone $here at $commit into a temp dir and run $run_what under time; result line to $log_file;" \
        "on success record its time as first-run (builds cold) in $here/data/measurements.json"
else
    run_what=".ci/run"
    say "would clone $here at $commit into a temp dir and run .ci/run under time; result line to $log_file"
fi
if [ "$dry_run" = 1 ]; then
    say "dry run: nothing changed"
    exit 0
fi

# -- the real thing ----------------------------------------------------------------------------
case "$engine_status" in
    running:*"started by this script"*|"not running"*|"") ;;
    running:*) echo "cold-ci.sh: a Docker engine this project did not start answers ($engine_status);" \
                    "stop it yourself (its images would stay cached otherwise)" >&2; exit 1 ;;
esac
out_dir="$(dirname "$log_file")/$stamp"
mkdir -p "$out_dir"
work="$(mktemp -d /var/tmp/cold-ci-clone.XXXXXX)"
dpkg-query -W -f='${Package}\t${Status}\n' | awk -F'\t' '$2 == "install ok installed" {print $1}' | sort > "$out_dir/dpkg-before.txt"
engine_was_running=0
case "$engine_status" in running:*) engine_was_running=1 ;; esac
moved=()
covered=()
restored=0

restore() {
    [ "$restored" = 1 ] && return
    restored=1
    set +e
    say "restoring (log $out_dir/restore.log)"
    {
        "$here/scripts/docker-engine.sh" stop
        for n in "${named_engines[@]}"; do "$here/scripts/docker-engine.sh" stop --name "$n"; done
        for p in "${moved[@]}"; do
            if [ -e "$p" ]; then chmod -R u+w "$p" 2>/dev/null; rm -rf "$p"; fi  # Go's module cache is read-only
            mv "$p$suffix" "$p" && echo "restored $p"
        done
        for p in "${covered[@]}"; do  # mount points: the empty folder mounted over them goes
            umount "$p" || umount -l "$p"
            rm -rf "$p$suffix" && echo "uncovered $p"
        done
        if [ ${#installed_apt[@]} -gt 0 ]; then
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${installed_apt[@]}"
            # what the purge took with it (dependencies only they needed)
            dpkg-query -W -f='${Package}\t${Status}\n' | awk -F'\t' '$2 == "install ok installed" {print $1}' | sort > "$out_dir/dpkg-after.txt"
            mapfile -t gone < <(comm -23 "$out_dir/dpkg-before.txt" "$out_dir/dpkg-after.txt")
            [ ${#gone[@]} -gt 0 ] && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${gone[@]}"
        fi
        [ "$engine_was_running" = 1 ] && "$here/scripts/docker-engine.sh" start
        [ "$keep_clone" = 1 ] || rm -rf "$work"
    } >> "$out_dir/restore.log" 2>&1
    if [ "$keep_clone" = 1 ]; then say "restored; the clone is kept in $work"; else say "restored"; fi
    where="$(cd / && python3 -c 'import benchlib, os; print(os.path.dirname(benchlib.__file__))' 2>/dev/null || true)"
    case "$where" in "$work"/*) say "warning: python3's benchlib now points into the removed clone ($where):" \
        "the clone's set-up installed into python3, not a virtual environment; reinstall it from your checkout" ;; esac
}
trap restore EXIT
trap 'exit 130' INT TERM

say "stopping the Docker engine(s) started by scripts/docker-engine.sh"
"$here/scripts/docker-engine.sh" stop || true
for n in "${named_engines[@]}"; do "$here/scripts/docker-engine.sh" stop --name "$n" || true; done
for p in "${moves[@]}"; do
    if mountpoint -q "$p"; then
        # a mount point (e.g. /var/lib/docker on a device of its own) cannot be renamed: an empty
        # folder is bind-mounted over it for the run, and unmounted (and deleted) at the end
        mkdir -p "$p$suffix"
        mount --bind "$p$suffix" "$p"
        covered+=("$p")
        say "covered mount point $p with an empty folder ($p$suffix)"
        continue
    fi
    mv "$p" "$p$suffix"
    moved+=("$p")
    say "moved aside $p"
done
mkdir -p /var/cache/apt/archives/partial  # apt wants it; the run's downloads land there
if [ ${#installed_apt[@]} -gt 0 ]; then
    say "purging ${installed_apt[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq --autoremove "${installed_apt[@]}" > "$out_dir/purge.log" 2>&1
fi

git clone -q --no-local "$here" "$work/benchlib"
git -C "$work/benchlib" checkout -q "$commit"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
run_log="$out_dir/ci-run.log"
[ "$mode" = report ] && run_log="$out_dir/make-report.log"
say "running $run_what in $work/benchlib (output: $run_log); load average $load_before"
t0="$(date +%s)"
set +e
if [ "$mode" = report ]; then
    # a new user's first command (README): make, then `make report` with the stock Python
    ( cd "$work/benchlib" && export DEBIAN_FRONTEND=noninteractive && apt-get update -qq \
        && apt-get install -y -qq --no-install-recommends make python3-venv >/dev/null \
        && time env -u PYTHON BASE_PYTHON=/usr/bin/python3 make report ) > "$run_log" 2>&1
else
    ( cd "$work/benchlib" && time .ci/run ) > "$run_log" 2>&1
fi
rc=$?
set -e
elapsed=$(( $(date +%s) - t0 ))
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$mode" = report ]; then
    [ -d "$work/benchlib/reports" ] && cp -r "$work/benchlib/reports" "$out_dir/reports"
    line="$(printf '%s commit=%s mode=report exit=%s elapsed_s=%s (%dm%02ds) load_before=%s load_after=%s cpus=%s' \
        "$stamp" "${commit:0:10}" "$rc" "$elapsed" $((elapsed / 60)) $((elapsed % 60)) \
        "${load_before// /,}" "${load_after// /,}" "$(nproc)")"
else
    # pytest's summary lines (one per pytest invocation: `make test` runs several): sum them
    count() { { grep -E '^=+ .* in [0-9.]+s' "$run_log" | grep -oE "[0-9]+ $1" || true; } | awk '{s += $1} END {print s + 0}'; }
    passed="$(count passed)"; skipped="$(count skipped)"; failed="$(count failed)"; errors="$(count error)"
    line="$(printf '%s commit=%s exit=%s elapsed_s=%s (%dm%02ds) passed=%s skipped=%s failed=%s errors=%s load_before=%s load_after=%s cpus=%s' \
        "$stamp" "${commit:0:10}" "$rc" "$elapsed" $((elapsed / 60)) $((elapsed % 60)) "$passed" "$skipped" "$failed" \
        "$errors" "${load_before// /,}" "${load_after// /,}" "$(nproc)")"
fi
echo "$line" >> "$log_file"
say "$line"
say "the run's output: $run_log"
if [ "$mode" = report ]; then
    if [ "$rc" = 0 ]; then
        # the 1-min load average before and after, lowest first
        loads="$(printf '%s\n%s\n' "${load_before%% *}" "${load_after%% *}" | sort -g | tr '\n' ' ')"
        measure_python="${PYTHON:-python3}"
        [ -z "${PYTHON:-}" ] && [ -x "$here/.venv/bin/python" ] && measure_python="$here/.venv/bin/python"
        ( cd "$here" && PYTHONPATH="$here" "$measure_python" -m benchlib._project.measurements record-total --what first-run \
            --builds cold --seconds "$elapsed" --loadavg $loads \
            --source "scripts/dev/cold-ci.sh --report: make report in a fresh clone of ${commit:0:10}, nothing cached, $(nproc) CPUs" ) \
            || say "could not record the time in $here/data/measurements.json; record it by hand:" \
                   "python -m benchlib._project.measurements record-total --what first-run --builds cold --seconds $elapsed --loadavg $loads --source ..."
        say "then: python -m benchlib._project.measurements sync (README's cost table) and commit data/measurements.json"
    else
        say "make report failed (exit $rc): its time is not recorded; see $run_log"
    fi
fi
exit "$rc"
