#!/usr/bin/env python
"""Client-bound arms (issue 38, item 3): which question answers "which server serves more" when
benchlib's client cannot saturate a server on one core?

Two candidate answers, both measured here on a pair the client *does* saturate, so that each can
be checked against the answer it stands in for (the saturated throughput ratio):

* ``saturated``: the reference. Closed model, ``--connections`` keep-alive connections, each
  server alone on its own CPU with no quota: throughput ``arm / baseline``.
* ``cpu`` (candidate a): the server's CPU time per request (``server_cpu_us_per_req``, measured
  per trial from its cgroup) at a fixed open-model rate both servers sustain (``--rate``, below
  the slower one's capacity); its inverse ratio ``baseline / arm`` is the throughput ratio a
  CPU-bound server would reach with a core of its own. It answers "which server does the same
  work with less CPU", which equals "which serves more" only for a server whose rate is set by
  its CPU and scales with one core.
* ``quota`` (candidate b): the same closed load, each server under the same CFS quota below one
  core (``--quota``, e.g. 0.25 CPU: ``Experiment(limits=Limits(cpus=...))``), so that the client
  out-runs it; throughput ``arm / baseline``. It answers "which serves more with a quarter of a
  core", which equals the saturated answer when a server's rate scales with its CPU share.

Each design is its own run in ``--blocks`` randomized blocks (fresh instances per trial, the
default design); per design it prints the median of the per-block paired ratios with its
exact interval (Hodges-Lehmann and Wilcoxon signed-rank, as the verdict tables), the busiest
client CPU, and whether the candidate's interval overlaps the reference's. The decision between
(a) and (b) needs this on a quiet machine (nothing else running; its load averages at start and
end are printed): a candidate qualifies when its interval covers the saturated ratio's median
and its interval is no wider.

    python bench/client_bound_answers.py                       # the quickstart pair, 10 blocks each
    python bench/client_bound_answers.py --blocks 6 --quota 0.5
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from benchlib.core.model import Arm, Condition, Experiment, Limits, LoadSpec
from benchlib.run.runner import run_experiment
from benchlib.stats.estimate import estimate

#: The quickstart pair: the client saturates both on one core (docs/statistics.md, "A claim at its own size").
BASELINE = Arm("python-aiohttp", "python-aiohttp-hello")
ARM = Arm("go-nethttp", "go-nethttp-hello")


def _paired(run, metric: str, *, invert: bool) -> tuple[np.ndarray, np.ndarray]:
    """Log values of baseline and arm per block (valid trials; blocks where both have one)."""
    s = run.summaries()
    s = s[s["valid"].astype(bool) & (s[metric].astype(float) > 0)]
    by = {a: s[s["arm"] == a].groupby("block")[metric].median() for a in (BASELINE.name, ARM.name)}
    blocks = sorted(set(by[BASELINE.name].index) & set(by[ARM.name].index))
    base = np.log(by[BASELINE.name].loc[blocks].to_numpy(dtype=float))
    arm = np.log(by[ARM.name].loc[blocks].to_numpy(dtype=float))
    return (arm, base) if invert else (base, arm)


def _ratio(run, metric: str, *, invert: bool = False) -> dict[str, float]:
    """The median paired ratio ``arm / baseline`` (``baseline / arm`` for CPU per request) with
    its exact 95% interval, and the busiest client CPU (median over trials)."""
    a, b = _paired(run, metric, invert=invert)
    if len(a) < 2:
        return {"ratio": math.nan, "lo": math.nan, "hi": math.nan, "blocks": float(len(a)), "client_cpu": math.nan}
    est = estimate(a, b, paired=True, method="rank", confidence=0.95, alpha=0.05)
    s = run.summaries()
    cpu = s["client_cpu"].astype(float).median() if "client_cpu" in s.columns else math.nan
    return {"ratio": math.exp(est.effect), "lo": math.exp(est.lo), "hi": math.exp(est.hi), "blocks": float(len(a)),
            "client_cpu": float(cpu)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=10, help="randomized blocks per design (default 10)")
    ap.add_argument("--seconds", type=float, default=2.0, help="measured seconds per trial (default 2)")
    ap.add_argument("--warmup", type=float, default=0.5, help="warm-up seconds per trial (default 0.5)")
    ap.add_argument("--connections", type=int, default=16, help="closed-model connections (default 16)")
    ap.add_argument("--rate", type=float, default=2000.0,
                    help="candidate (a): the open-model rate both servers sustain, requests/s (default 2000)")
    ap.add_argument("--quota", type=float, default=0.25, help="candidate (b): each server's CPU quota (default 0.25)")
    ap.add_argument("--out", default="", help="where the runs go (default: data/runs)")
    a = ap.parse_args()
    if not (0 < a.quota < 1):
        sys.exit(f"--quota {a.quota}: give a share of one CPU between 0 and 1, e.g. 0.25")
    t0, load0 = time.monotonic(), os.getloadavg()[0]
    closed = LoadSpec(model="closed", connections=a.connections, duration_s=a.seconds, warmup_s=a.warmup)
    opened = LoadSpec(model="open", rate_rps=a.rate, connections=a.connections, duration_s=a.seconds,
                      warmup_s=a.warmup)
    designs = {
        "saturated": (Experiment(study="client-bound-saturated", arms=(BASELINE, ARM), trials=a.blocks, seed=1,
                                 baseline=BASELINE.name, conditions=(Condition("closed", closed),)),
                      "throughput_rps", False),
        "cpu": (Experiment(study="client-bound-cpu", arms=(BASELINE, ARM), trials=a.blocks, seed=2,
                           baseline=BASELINE.name, conditions=(Condition("open", opened),)),
                "server_cpu_us_per_req", True),
        "quota": (Experiment(study="client-bound-quota", arms=(BASELINE, ARM), trials=a.blocks, seed=3,
                             baseline=BASELINE.name, conditions=(Condition("closed", closed),),
                             limits=Limits(cpus=a.quota)),
                  "throughput_rps", False),
    }
    results: dict[str, dict[str, float]] = {}
    for name, (exp, metric, invert) in designs.items():
        run = run_experiment(exp, out_dir=a.out or None, progress=False)
        results[name] = {**_ratio(run, metric, invert=invert), "run_id": run.run_id}  # type: ignore[dict-item]
    ref = results["saturated"]
    print(f"go-nethttp-hello / python-aiohttp-hello, {a.blocks} blocks x {a.seconds:g} s; load average "
          f"{load0:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; {(time.monotonic() - t0) / 60:.1f} min")
    print("| design | what it measures | ratio [95% CI] | busiest client CPU | covers the saturated median | run |")
    print("|---|---|---|---|---|---|")
    words = {"saturated": "throughput, no quota (the reference)",
             "cpu": f"1 / CPU per request at {a.rate:g} req/s",
             "quota": f"throughput, each server at {a.quota:g} CPU"}
    for name, r in results.items():
        covers = "-" if name == "saturated" else ("yes" if r["lo"] <= ref["ratio"] <= r["hi"] else "no")
        print(f"| {name} | {words[name]} | {r['ratio']:.2f} [{r['lo']:.2f}, {r['hi']:.2f}] | "
              f"{r['client_cpu']:.0%} | {covers} | {r['run_id']} |")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
