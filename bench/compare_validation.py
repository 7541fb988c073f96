#!/usr/bin/env python
"""Validate ``benchlib compare`` on real runs: false calls between runs of an unchanged
service, and a planted slowdown.

Makes ``2 x --pairs`` runs of one unchanged service (``python-aiohttp-hello`` on 127.0.0.1,
through the real runner and load generator; by default a closed load on one connection, so a
request's latency is the client's turn plus the server's, and busy work added to the server's
adds to it one for one), compares them
in disjoint pairs (run 2k+1 against run 2k) and counts the rows called faster or slower: every
such call is false, since nothing changed. Then makes one run of the same service with a
planted slowdown (``EXTRA_WORK_US``: busy work per request of ``--plant`` times the median p50
of the unchanged runs) and compares it with the last unchanged run (``allow=("config",)``: the
arm's environment is the change under test). Prints each comparison's run ids, load averages
and verdicts, the false-call count and rate, and whether the slowdown was detected (its p50
row called slower).

Figures measured on a busy machine are for debugging only; measure on a quiet one:

    python bench/compare_validation.py
    python bench/compare_validation.py --pairs 2 --trials 5 --duration 1   # a quick look
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchlib.analysis.runcompare import RunComparison, compare_runs
from benchlib.core.model import Arm, Condition, Experiment, LoadSpec
from benchlib.run.runner import run_experiment
from benchlib.store.results import Run

SERVICE = "python-aiohttp-hello"
STUDY = "compare_validation"


def make_run(args: argparse.Namespace, out: Path, run_id: str, extra_work_us: float = 0.0) -> Run:
    """One run of the service (one arm, one condition), stored under ``out``."""
    env = (("EXTRA_WORK_US", f"{extra_work_us:.1f}"),) if extra_work_us > 0 else ()
    if args.model == "open":
        spec = LoadSpec(model="open", rate_rps=args.rate, connections=16, duration_s=args.duration,
                        warmup_s=args.warmup, timeout_s=5.0)
    else:
        spec = LoadSpec(model="closed", connections=args.connections, duration_s=args.duration, warmup_s=args.warmup,
                        timeout_s=5.0)
    exp = Experiment(STUDY, (Arm("aiohttp", SERVICE, env=env),), (Condition("open", spec),), trials=args.trials,
                     seed=args.seed, between_trials_s=0.2)
    return run_experiment(exp, run_id=run_id, out_dir=out, progress=False)


def show(label: str, c: RunComparison) -> None:
    print(f"{label}: B={c.b.run_id} (load {c.b.loadavg:.2f}) vs A={c.a.run_id} (load {c.a.loadavg:.2f})")
    for r in c.rows:
        v = r.verdict
        print(f"    {r.metric:<15} {v.estimate:6.3f} [{v.ci_lo:6.3f}, {v.ci_hi:6.3f}]  p_shift {r.p_shift:.3g}  "
              f"{v.text}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=5, help="pairs of unchanged runs (default 5)")
    ap.add_argument("--trials", type=int, default=10, help="trials per run (default 10)")
    ap.add_argument("--duration", type=float, default=5.0, help="measured seconds per trial (default 5)")
    ap.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds per trial (default 1)")
    ap.add_argument("--model", choices=("closed", "open"), default="closed",
                    help="load model (default closed; an open load's schedule guard invalidates trials on a busy "
                         "machine)")
    ap.add_argument("--connections", type=int, default=1, help="closed load: connections (default 1)")
    ap.add_argument("--rate", type=float, default=500.0, help="open load: offered req/s (default 500)")
    ap.add_argument("--plant", type=float, default=0.10, help="planted slowdown, fraction of p50 (default 0.10)")
    ap.add_argument("--margin", type=float, default=0.05, help="compare's practical margin (default 0.05)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=None, help="runs folder (default: a new temporary folder)")
    args = ap.parse_args(argv)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="benchlib-compare-validation-"))
    load = f"open {args.rate:g} req/s" if args.model == "open" else f"closed, {args.connections} connection(s)"
    print(f"runs under {out}; {args.pairs} pairs, {args.trials} trials x {args.duration:g} s, {load}, "
          f"margin ±{100 * args.margin:g}%; load average now {os.getloadavg()[0]:.2f}")
    runs = [make_run(args, out, f"aa{i:02d}") for i in range(2 * args.pairs)]
    false_calls = rows = pairs_with_call = 0
    for k in range(args.pairs):
        c = compare_runs(runs[2 * k], runs[2 * k + 1], margin=args.margin)
        show(f"pair {k + 1}", c)
        calls = sum(1 for r in c.rows if r.verdict.directional)
        false_calls += calls
        rows += sum(1 for r in c.rows if math.isfinite(r.verdict.p_raw))  # tested rows (not omitted, not run)
        pairs_with_call += calls > 0
    rate = f"{false_calls / rows:.1%}" if rows else "no row tested"
    print(f"unchanged service: {false_calls} false faster/slower call(s) in {rows} tested rows ({rate}); "
          f"pairs with any: {pairs_with_call} of {args.pairs}")
    base = runs[-1]
    p50 = float(base.summaries()["p50_ms"].median())
    work_us = args.plant * p50 * 1000.0
    planted = make_run(args, out, "planted", extra_work_us=work_us)
    c = compare_runs(base, planted, margin=args.margin, allow=("config",))
    print(f"planted slowdown: {work_us:.0f} µs of busy work per request ({100 * args.plant:g}% of p50 "
          f"{p50:.3f} ms)")
    show("planted", c)
    p50_row = next(r for r in c.rows if r.metric == "p50_ms")
    detected = p50_row.verdict.kind.value == "slower"
    ratio = p50_row.verdict.estimate
    print(f"planted slowdown detected: {'yes' if detected else 'no'} (p50 ratio {ratio:.3f}, {p50_row.verdict.text})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
