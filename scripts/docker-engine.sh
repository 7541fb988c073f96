#!/usr/bin/env bash
# Start or stop a Docker engine for benchlib when none answers.
#
# usage: scripts/docker-engine.sh start|stop|status [--name NAME]
#
#   start   If an engine already answers on the socket, say so and do nothing. Otherwise
#           start `dockerd --bridge=none --iptables=false --storage-driver=overlay2` in its
#           own session (every container uses host networking, so all traffic stays on
#           loopback), wait until it answers, and print what was started (pid, socket, log).
#           Idempotent: a second `start` finds the engine answering and starts nothing.
#   stop    Stop only an engine this script started (its pid file); an engine that was
#           already running (systemd, Docker Desktop, ...) is never touched.
#   status  Print whether an engine answers and whether this script started it.
#
# --name NAME   a second, independent engine (e.g. `--name test`): its own socket
#               (/run/benchlib-dockerd-NAME/docker.sock), data root
#               (/var/lib/benchlib-dockerd-NAME) and exec root. Used by the tests of remote
#               endpoints (DOCKER_HOST=unix:///run/benchlib-dockerd-NAME/docker.sock).
#               Without --name: the standard /var/run/docker.sock and /var/lib/docker.
#
# Environment: BENCHLIB_DOCKERD_ARGS adds arguments to dockerd; BENCHLIB_DOCKERD_TIMEOUT_S
# (default 60) bounds the wait for the engine to answer. Needs root (Debian: apt-get install
# docker.io).
set -euo pipefail

cmd="${1:-}"
shift || true
name=""
while [ $# -gt 0 ]; do
    case "$1" in
        --name) name="${2:?--name needs a value}"; shift 2 ;;
        --name=*) name="${1#--name=}"; shift ;;
        *) echo "docker-engine.sh: unknown argument '$1' (valid: --name NAME)" >&2; exit 2 ;;
    esac
done
if [ -n "$name" ] && ! [[ "$name" =~ ^[a-z0-9][a-z0-9_-]*$ ]]; then
    echo "docker-engine.sh: --name must match [a-z0-9][a-z0-9_-]*, got '$name'" >&2
    exit 2
fi

if [ -z "$name" ]; then
    state_dir=/run/benchlib-dockerd
    socket=/var/run/docker.sock
    data_root=/var/lib/docker
    exec_root=/var/run/docker
    log_file=/var/log/benchlib-dockerd.log
else
    state_dir="/run/benchlib-dockerd-$name"
    socket="$state_dir/docker.sock"
    data_root="/var/lib/benchlib-dockerd-$name"
    exec_root="$state_dir/exec"
    log_file="/var/log/benchlib-dockerd-$name.log"
fi
pid_file="$state_dir/dockerd.pid"   # written by this script only: what `stop` may stop
timeout_s="${BENCHLIB_DOCKERD_TIMEOUT_S:-60}"

answers() {
    # True when an engine answers /_ping on the socket.
    [ -S "$socket" ] || return 1
    if command -v curl >/dev/null 2>&1; then
        [ "$(curl -s --max-time 3 --unix-socket "$socket" http://localhost/_ping 2>/dev/null)" = "OK" ]
    else
        docker -H "unix://$socket" version >/dev/null 2>&1
    fi
}

our_pid() {
    # The pid this script started, if that process is still a dockerd.
    [ -f "$pid_file" ] || return 1
    local pid
    pid="$(cat "$pid_file")"
    [ -n "$pid" ] && [ -d "/proc/$pid" ] && grep -q dockerd "/proc/$pid/comm" 2>/dev/null || return 1
    echo "$pid"
}

case "$cmd" in
start)
    if answers; then
        if pid="$(our_pid)"; then
            echo "docker engine already running: dockerd pid $pid on unix://$socket (started by this script; log $log_file)"
        else
            echo "docker engine already answers on unix://$socket (not started by this script; left alone)"
        fi
        exit 0
    fi
    if ! command -v dockerd >/dev/null 2>&1; then
        echo "docker-engine.sh: dockerd not found; install it (Debian: apt-get install docker.io)" >&2
        exit 1
    fi
    if [ "$(id -u)" != 0 ]; then
        echo "docker-engine.sh: starting dockerd needs root" >&2
        exit 1
    fi
    mkdir -p "$state_dir" "$data_root" "$(dirname "$log_file")"
    # shellcheck disable=SC2086
    setsid dockerd \
        --host "unix://$socket" \
        --data-root "$data_root" \
        --exec-root "$exec_root" \
        --pidfile "$state_dir/dockerd.daemon.pid" \
        --bridge=none --iptables=false --ip6tables=false \
        --storage-driver=overlay2 \
        ${BENCHLIB_DOCKERD_ARGS:-} \
        </dev/null >>"$log_file" 2>&1 &
    pid=$!
    echo "$pid" >"$pid_file"
    deadline=$(( $(date +%s) + timeout_s ))
    until answers; do
        if ! [ -d "/proc/$pid" ]; then
            rm -f "$pid_file"
            echo "docker-engine.sh: dockerd exited during start-up; last lines of $log_file:" >&2
            tail -n 20 "$log_file" >&2
            exit 1
        fi
        if [ "$(date +%s)" -ge "$deadline" ]; then
            echo "docker-engine.sh: dockerd (pid $pid) did not answer within ${timeout_s}s; stopping it. Last lines of $log_file:" >&2
            tail -n 20 "$log_file" >&2
            kill -TERM "$pid" 2>/dev/null || true
            rm -f "$pid_file"
            exit 1
        fi
        sleep 0.5
    done
    echo "started dockerd pid $pid on unix://$socket (data root $data_root, log $log_file)"
    if [ -n "$name" ]; then
        echo "use it with: export DOCKER_HOST=unix://$socket"
    fi
    ;;
stop)
    if ! pid="$(our_pid)"; then
        rm -f "$pid_file"
        if answers; then
            echo "docker engine on unix://$socket was not started by this script; left running"
        else
            echo "no docker engine started by this script on unix://$socket; nothing to stop"
        fi
        exit 0
    fi
    kill -TERM "$pid"
    for _ in $(seq 1 60); do
        [ -d "/proc/$pid" ] || break
        sleep 0.5
    done
    if [ -d "/proc/$pid" ]; then
        echo "dockerd pid $pid did not stop within 30s; sending SIGKILL" >&2
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$pid_file"
    # dockerd leaves its bind mount of the host network namespace behind; remove it.
    if [ -e "$exec_root/netns/default" ] && grep -q " $exec_root/netns/default " /proc/self/mounts; then
        umount "$exec_root/netns/default" 2>/dev/null || true
    fi
    echo "stopped dockerd pid $pid (unix://$socket)"
    ;;
status)
    if answers; then
        if pid="$(our_pid)"; then
            echo "running: dockerd pid $pid on unix://$socket (started by this script)"
        else
            echo "running: an engine answers on unix://$socket (not started by this script)"
        fi
    else
        echo "not running: nothing answers on unix://$socket"
        exit 3
    fi
    ;;
*)
    echo "usage: scripts/docker-engine.sh start|stop|status [--name NAME]" >&2
    exit 2
    ;;
esac
