#!/bin/sh
# Starts the seed's AsyncFastCGI processes: `dotnet AsyncFastCGI.dll PORT` for each port in
# $PORTS (the seed's `dotnet exec AsyncFastCGI.dll 8080` ... 8083), as children of this
# script; SIGTERM/SIGINT are passed on; when one exits on its own the others are stopped.
#
# Usage: sh launch.sh PATH/TO/AsyncFastCGI.dll   (HOST, PORTS or PORT from the environment)
set -eu
dll="${1:?usage: sh launch.sh AsyncFastCGI.dll}"
ports="${PORTS:-${PORT:?set PORTS or PORT}}"
pids=
old_ifs="$IFS"; IFS=,
for port in $ports; do
    dotnet "$dll" "$port" &
    pids="$pids $!"
done
IFS="$old_ifs"
stop() { for p in $pids; do kill -TERM "$p" 2>/dev/null || true; done; }
trap 'stop; wait; exit 0' TERM INT
# wait until one process exits, then stop the others
while :; do
    for p in $pids; do
        if ! kill -0 "$p" 2>/dev/null; then
            echo "launch.sh: AsyncFastCGI process $p exited; stopping the others" >&2
            stop; wait; exit 1
        fi
    done
    sleep 1
done
