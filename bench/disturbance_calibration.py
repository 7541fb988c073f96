"""Calibrate the disturbance rule: which outside signal separates a disturbed trial from an
undisturbed one, and where the bound goes (docs/statistics.md, "Disturbed trials").

Runs real trials (the local runtime, a real service on 127.0.0.1, benchlib's load generator)
in three scenarios, each its own run:

* ``idle``: nothing planted;
* ``server-hog``: ``--hogs`` busy loops pinned to the service's CPU through the run;
* ``client-hog``: the same on the client's CPU.

No trial is repeated (``repeat_disturbed=0``): every trial keeps its signals. Prints, per
signal (:meth:`benchlib.store.records.disturbance.Disturbance.figures`), its distribution in each
scenario and the separation of each planted scenario from ``idle`` (the share of (planted,
idle) pairs in which the planted trial reads higher: 1.0 = perfectly separated; the
largest idle value and the smallest planted one), and, per trial, the level shifts the
changepoint diagnostics find in its latencies and whether the canary changed speed there.

    python bench/disturbance_calibration.py --trials 6 --duration 3 --hogs 1

Run it on a quiet machine for figures; on a busy one it only shows that it works.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchlib.core.model import Arm, Condition, Experiment, LoadSpec
from benchlib.run.cpus import plan_cpus
from benchlib.run.runner import run_experiment
from benchlib.stats.changepoint import detect_changes
from benchlib.store.records import rows as R
from benchlib.store.records.disturbance import canary_at_shifts

SIGNALS = ("server_contention", "client_contention", "server_foreign", "client_foreign", "steal", "service_wait",
           "psi_some", "slowdown", "slowdown_worst_bin", "canary_median_us")


def hogs(cpu: int, n: int) -> list[subprocess.Popen[bytes]]:
    """``n`` busy loops pinned to ``cpu`` (stopped by the caller)."""
    code = f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"
    return [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]


def scenario(name: str, args: argparse.Namespace, out: Path) -> list[dict[str, float]]:
    cpus = plan_cpus()
    planted = []
    if name == "server-hog":
        planted = hogs(cpus.server[0], args.hogs)
    elif name == "client-hog":
        planted = hogs(cpus.client[0], args.hogs)
    time.sleep(0.3)
    try:
        spec = LoadSpec(connections=args.connections, duration_s=args.duration, warmup_s=0.5, timeout_s=2)
        exp = Experiment(f"calib-{name}", (Arm("svc", args.service),), (Condition("main", spec),), trials=args.trials,
                         seed=1, between_trials_s=0.2, repeat_disturbed=0)
        run = run_experiment(exp, out_dir=out, progress=False, cpus=cpus)
    finally:
        for p in planted:
            p.kill()
            p.wait()
    rows = []
    for t in run.trials:
        d = t.disturbance
        if d is None:
            continue
        f = d.figures()
        shifts, seen, p50 = 0, 0, math.nan
        if t.load is not None and t.load.t0_monotonic_ns is not None and d.t0_monotonic_ns is not None:
            m = R.ok_measured(t.rows())
            lat = (m["t_done_ns"] - m["t_intended_ns"]).astype(float)
            p50 = float(np.median(lat)) / 1e6 if len(lat) else math.nan
            cp = detect_changes(np.log(np.maximum(lat, 1.0)), m["t_intended_ns"] / 1e9)
            big = [a for a, s in zip(cp.at_s, cp.shifts) if abs(s) > 0.10]
            shifts = len(big)
            seen = sum(canary_at_shifts(d, big, offset_s=(t.load.t0_monotonic_ns - d.t0_monotonic_ns) / 1e9))
        rows.append({**f, "scenario": name, "block": t.block, "status": t.status, "shifts": shifts,
                     "shifts_canary": seen, "p50_ms": p50})
        print(f"{name:11s} b{t.block} " + " ".join(f"{k}={f[k]:.3g}" for k in SIGNALS)
              + f" shifts={shifts} canary_at={seen} p50={rows[-1]['p50_ms']:.3f}ms {t.status}", flush=True)
    return rows


def separation(hi: list[float], lo: list[float]) -> float:
    """Share of (hi, lo) pairs with hi > lo (ties count half)."""
    pairs = [(h, lw) for h in hi for lw in lo if math.isfinite(h) and math.isfinite(lw)]
    return sum(1.0 if h > lw else 0.5 if h == lw else 0.0 for h, lw in pairs) / len(pairs) if pairs else math.nan


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=6)
    ap.add_argument("--duration", type=float, default=3.0, help="measured seconds per trial")
    ap.add_argument("--hogs", type=int, default=1, help="busy loops planted on the CPU")
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--service", default="python-aiohttp-hello")
    ap.add_argument("--scenarios", default="idle,server-hog,client-hog")
    args = ap.parse_args(argv)
    print(f"load average at start: {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="benchlib-calib-") as tmp:
        rows = [r for s in args.scenarios.split(",") for r in scenario(s, args, Path(tmp))]
    print(f"load average at end: {os.getloadavg()}\n")
    by = {s: [r for r in rows if r["scenario"] == s] for s in args.scenarios.split(",")}
    print("| signal | " + " | ".join(f"{s} min / median / max" for s in by) + " | "
          + " | ".join(f"{s} vs idle: separation (idle max, planted min)" for s in by if s != "idle") + " |")
    for k in SIGNALS:
        cells = []
        for rs in by.values():
            v = [r[k] for r in rs if math.isfinite(r[k])]
            cells.append(f"{min(v):.3g} / {float(np.median(v)):.3g} / {max(v):.3g}" if v else "–")
        idle = [r[k] for r in by.get("idle", [])]
        for s, rs in by.items():
            if s == "idle":
                continue
            hi = [r[k] for r in rs]
            fi = [x for x in idle if math.isfinite(x)]
            fh = [x for x in hi if math.isfinite(x)]
            cells.append(f"{separation(hi, idle):.2f} ({max(fi):.3g}, {min(fh):.3g})" if fi and fh else "–")
        print(f"| {k} | " + " | ".join(cells) + " |")
    shifts = sum(r["shifts"] for r in rows)
    seen = sum(r["shifts_canary"] for r in rows)
    print(f"\nlevel shifts > 10% found in the trials' latencies: {shifts}; the canary changed speed "
          f"(> 15%) at {seen} of them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
