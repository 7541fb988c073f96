#!/usr/bin/env python
"""What the saturation guard sees in an open-model flood: 100,000 arrivals/s from one worker.

The trial of the old ``test_a_client_that_cannot_keep_up_is_flagged`` (issue 10: it failed
on a fresh machine with ``valid: True``): open model, 100,000 arrivals/s for 0.3 s, 64
connections, one worker allowed on every CPU, against the ``hello`` test server pinned to
the last CPU. Runs it ``--runs`` times as the machine is, then with ``--hogs`` busy-loop processes
(one per CPU), and prints per trial: the schedule-lag percentiles, the worker's CPU, wall,
idle-spin and run-queue-wait times over the traffic, its busy fraction as the guard counts
it, the achieved rate, the test server's CPU use, and the verdict. ("as-is": the machine as it
is, with whatever else runs on it; "+hogs": plus the busy loops.)

    flock /tmp/benchlib-bench.lock python bench/guard_probe.py
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchlib.core.model import LoadSpec, Target
from benchlib.loadgen import run_load
from benchlib.loadgen.guard import busy_fraction
from benchlib.loadgen.testservers import serve


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _server_pid(port: int) -> int:
    out = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True).stdout
    return int(out.split("pid=")[1].split(",")[0])


def probe(runs: int, label: str) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    spec = LoadSpec(model="open", rate_rps=100_000, duration_s=0.3, warmup_s=0, connections=64, timeout_s=20)
    with serve("hello", cpus=[cpus[-1]]) as (host, port):
        srv = _server_pid(port)
        for _ in range(runs):
            s0 = _cpu_s(srv)
            r = run_load(spec, Target(host, port))
            s1 = _cpu_s(srv)
            m = r.meta
            w = m["worker_stats"][0]
            lag = {k: (v or 0) / 1e6 for k, v in m["schedule_lag_ns"].items()}
            print(f"{label:6} load {os.getloadavg()[0]:4.1f} | lag ms p50 {lag['p50']:5.2f} p90 {lag['p90']:5.2f} "
                  f"p99 {lag['p99']:6.2f} max {lag['max']:6.2f} | worker cpu {w['traffic_cpu_s']:.3f} s "
                  f"wall {w['traffic_wall_s']:.3f} s idle-spin {w['spin_ns'] / 1e9:.3f} s "
                  f"run-queue wait {w['runqueue_wait_s'] or 0:.3f} s busy {busy_fraction(w):4.0%} | "
                  f"achieved {m['achieved_rps']:7,.0f}/s | server cpu {s1 - s0:.2f} s | valid {m['valid']}"
                  + ("" if m["valid"] else f" ({m['invalid_reason'].split(';')[0][:70]})"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--hogs", action=argparse.BooleanOptionalAction, default=True,
                    help="also run with one busy-loop process per CPU")
    args = ap.parse_args()
    probe(args.runs, "as-is")
    if args.hogs:
        hogs = [subprocess.Popen(["taskset", "-c", str(c), sys.executable, "-c", "while True: pass"])
                for c in sorted(os.sched_getaffinity(0))]
        try:
            time.sleep(1)
            probe(args.runs, "+hogs")
        finally:
            for h in hogs:
                h.kill()
                h.wait()


if __name__ == "__main__":
    main()
