#!/usr/bin/env python
"""How often the gate of study ``10_ab`` fails on nothing (A/A) and on a planted 10%
slowdown, at its default design, simulated through the code a run uses (a simulation, not a
timing: any machine gives the same figures for the same seed).

Each simulated run is per-trial summaries of two arms (:func:`benchlib.stats.simulate.simulate_summaries`:
log-normal requests, a random effect per trial of SD ``trial_sd``, paired by block) with
throughput from the mean latency (a closed loop of 16 connections), answered by the study's own
question (:func:`benchlib.analysis.questions.run_family` on the study's family, as the report
does) and judged by its gate (:func:`benchlib.analysis.studies.ab.gate`, margin 5% on
p50, p99 and throughput). Prints, per between-trial SD, the share of A/A runs the gate failed
(false alarms) and of runs with B 10% slower (power), with a 95% Wilson interval each.

    python scripts/dev/ab_false_alarms.py                 # the figures in docs/ab.md
    python scripts/dev/ab_false_alarms.py --runs 200      # a quick look
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import numpy as np

from benchlib.analysis.questions import Family, run_family
from benchlib.analysis.studies import a_vs_b as ab
from benchlib.stats.simulate import simulate_summaries


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson interval of ``k`` of ``n``."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def gate_fails(rng: np.random.Generator, effect: float, blocks: int, trial_sd: float, margin_pct: float,
               metrics: str) -> bool:
    """One simulated run of ``blocks`` blocks with B ``effect`` times A's latency: does the gate fail?"""
    s = simulate_summaries(rng, arms={"A": 1.0, "B": effect}, trials=blocks, n_req=5000, trial_sd=trial_sd,
                           condition=ab.CONDITION)
    s["throughput_rps"] = 16_000.0 / s["mean_ms"]  # a closed loop of 16 connections (Little's law)
    names = [m for m in ab.METRICS if m in s.columns]
    family = Family.against("ab", "A", ["A", "B"], conditions=[ab.CONDITION], metrics=names)
    answer = run_family(s, family, seed=int(rng.integers(1 << 30)))
    return bool(ab.gate(answer, "B", margin_pct, metrics).failed)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000, help="simulated runs per cell (default 1000)")
    ap.add_argument("--blocks", type=int, default=int(ab.Parameters.DEFAULT_DESIGN["trials"]),
                    help="blocks per run (default: the study's default design)")
    ap.add_argument("--margin", type=float, default=5.0, help="the gate's margin in percent (default 5)")
    ap.add_argument("--metrics", default=ab.Parameters.gate_metrics, help="the gate's metrics")
    ap.add_argument("--sd", default="0.01,0.02,0.05,0.1,0.2", help="between-trial SDs (log scale), comma-separated")
    ap.add_argument("--seed", type=int, default=40)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print(f"gate: margin {args.margin:g}% on {args.metrics}; {args.blocks} blocks; {args.runs} runs per cell")
    print(f"{'trial_sd':>8}  {'false alarms (A/A)':>26}  {'fails a 10% slowdown':>26}")
    for sd in (float(x) for x in args.sd.split(",")):
        cells = []
        for effect in (1.0, 1.10):
            k = sum(gate_fails(rng, effect, args.blocks, sd, args.margin, args.metrics) for _ in range(args.runs))
            lo, hi = wilson(k, args.runs)
            cells.append(f"{100 * k / args.runs:5.1f}% [{100 * lo:4.1f}, {100 * hi:4.1f}]")
        print(f"{sd:8.3f}  {cells[0]:>26}  {cells[1]:>26}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
