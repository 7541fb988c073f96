#!/usr/bin/env python
"""Arms side by side (issue 35, step 1): does measuring the arms inside one trial, alternating
between them in short slices, shrink the per-block spread of the ratio they are compared by?

For each case (a pair of arms, or k arms, and a load from a study), and for every block, this
runs every design once, in a random order per block:

* ``seq``: today's design. Each arm is a trial of its own: a fresh instance started alone on the
  service CPU, its warm-up, ``--seconds`` measured, stopped; the arms in a random order.
* ``slice-<ms>``: the interleaved trial. Fresh instances of all the trial's arms started
  together, pinned to the same service CPU; the load alternates between them in slices of
  ``<ms>`` with a gap of ``--gap-ms`` after each, in a balanced order (``--order debruijn``:
  every ordered pair of arms adjacent equally often, pairs ABBA...; ``mirror``: ABC CBA, the
  first order tried), a random phase per trial, warm-up slices first, then measured slices until
  each arm has had ``--seconds``. In the closed model each connection sends only in its arm's
  slices (a request in flight at a slice's end completes in the gap); in the open model each
  arrival of the schedule belongs to the arm whose slice it falls in, and keeps its intended
  time. Each arm's summaries come from its own slices only (its throughput over its measured
  slices' total length).
* ``pairs-<ms>`` (k > 2 arms): an interleaved trial per (baseline, arm) pair instead of one
  round-robin trial of all k; ``mirror-<ms>``: the round-robin trial in the order ABC CBA.

Every design uses benchlib's own load engine (:class:`benchlib.loadgen.engine.Engine`, here in
this process on the client's CPUs; the slicing is a subclass in this script), the local
runtime's fresh instances, the client and service on separate CPUs.

Per case and design it prints: the SD over blocks of the per-block log ratio (arm/baseline) of
throughput, p50 and p99, the median ratio, the verdicts of :func:`benchlib.stats.compare`
(paired by block, Holm over the table), the wall seconds per block, and for the interleaved
designs the carry-over (each arm's cgroup CPU in the other arms' slices, less its idle rate
measured before the load, as a percentage of its CPU in its own slices and the gap after
them). Everything is written as CSV and JSON under ``--out`` with the load averages at start
and end.

    python bench/interleave.py --case aa-go --blocks 10
    python bench/interleave.py --case iris,hello01,planted --reps 2
    python bench/interleave.py --list
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import math
import os
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import pandas as pd

from benchlib.core.model import LoadSpec, Target
from benchlib.core.schema import PHASE_CODES
from benchlib.core.slicing import SlicePlan, de_bruijn_pairs, plan_slices, slice_cpu
from benchlib.loadgen.engine import EngineConfig, records_to_rows, tune_socket_limits
from benchlib.loadgen.launch import _worker_configs
from benchlib.loadgen.slices import SlicedEngine, until_ns
from benchlib.run.cpus import plan_cpus
from benchlib.runtime import StartOptions, get_runtime
from benchlib.runtime.manifest import get_manifest
from benchlib.runtime.ports import free_port
from benchlib.stats import compare
from benchlib.stats.summary import summarize_trial

METRICS = ("throughput_rps", "p50_ms", "p99_ms")
_clock = time.monotonic_ns


@dataclass(frozen=True)
class ArmDef:
    """One arm of a case: a service in a variant on one of its endpoints, with extra environment."""

    name: str
    service: str
    variant: str | None = None
    endpoint: str | None = None
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Case:
    """Arms (the first is the baseline) and the load each gets in its slices or trial."""

    arms: tuple[ArmDef, ...]
    load: LoadSpec
    note: str
    slices_ms: tuple[int, ...] = (50, 200, 500)


def _closed(c: int) -> LoadSpec:
    return LoadSpec(model="closed", connections=c, duration_s=1.0, warmup_s=0.5, workers=1)


def _open(rate: float, inflight: int) -> LoadSpec:
    return LoadSpec(model="open", arrival="constant", rate_rps=rate, connections=inflight, duration_s=1.0,
                    warmup_s=0.5, workers=1)


def _planted_us() -> str:
    return os.environ.get("PLANTED_US", "10")


CASES: dict[str, Case] = {
    "aa-go": Case((ArmDef("a", "go-nethttp-hello"), ArmDef("b", "go-nethttp-hello")), _closed(16),
                  "A/A: two instances of go-nethttp-hello, the quickstart's load (16 keep-alive connections)"),
    "iris": Case((ArmDef("iris-faithful", "go-iris-random", "faithful", "random"),
                  ArmDef("iris-fair", "go-iris-random", "fair", "random")), _closed(125),
                 "study 02's Iris pair on the random string, the seed's 125 connections"),
    "hello01": Case((ArmDef("go-fair", "go-gin-mongo", "fair", "helloWorld"),
                     ArmDef("rust-fair", "rust-rocket-mongo", "fair", "helloWorld")), _open(100, 100),
                    "study 01's helloWorld, Go Gin vs Rust Rocket (fair), open model at 100 requests/s"),
    "planted": Case((ArmDef("plain", "python-aiohttp-hello"),
                     ArmDef("slowed", "python-aiohttp-hello", env=(("EXTRA_WORK_US", _planted_us()),))), _closed(16),
                    "python-aiohttp-hello against itself with EXTRA_WORK_US of busy work per request (planted cost)"),
    "rr3": Case((ArmDef("iris-faithful", "go-iris-random", "faithful", "random"),
                 ArmDef("iris-fair", "go-iris-random", "fair", "random"),
                 ArmDef("nethttp", "go-nethttp-random", "fair", "random")), _closed(125),
                "three arms of study 02: one round-robin trial of all three against a trial per pair", (50,)),
}


# -- the slice orders -------------------------------------------------------------------------
def balanced_order(n_arms: int, rng: random.Random, *, scheme: str = "debruijn") -> list[int]:
    """One balanced cycle with a random phase: every ordered pair of arms adjacent once
    (``debruijn``; pairs: ``AABB`` rotated, i.e. ``ABBA``), or ``mirror``: ``ABC CBA`` (each arm
    equally often in each position, but for k > 2 not preceded by every other arm alike)."""
    base = de_bruijn_pairs(n_arms) if scheme == "debruijn" else list(range(n_arms)) + list(reversed(range(n_arms)))
    k = rng.randrange(len(base))
    return base[k:] + base[:k]


# -- one trial --------------------------------------------------------------------------------
@dataclass
class TrialOut:
    """What one trial gave: per arm its measured rows, measured seconds, and CPU figures."""

    rows: dict[str, np.ndarray]
    measured_s: dict[str, float]
    carry_pct: dict[str, float] = field(default_factory=dict)
    own_cpu_ms_per_s: dict[str, float] = field(default_factory=dict)
    wall_s: float = 0.0


def run_sliced(load: LoadSpec, targets: list[tuple[str, Target]], handles: list[Any], plan: SlicePlan,
               seed: int) -> TrialOut:
    """Drive the arms' sliced engines (:class:`benchlib.loadgen.slices.SlicedEngine`) in one
    event loop on this process's CPUs; read each instance's cgroup CPU counter before the load
    (its idle rate) and at every slice boundary (:func:`benchlib.loadgen.slices.slice_cpu`)."""
    import uvloop

    engines: list[SlicedEngine] = []
    for i, ((_name, target), win) in enumerate(zip(targets, plan.windows)):
        spec = load.with_(duration_s=plan.total_s - plan.warmup_s, warmup_s=plan.warmup_s)
        cfg = EngineConfig(**_worker_configs(spec, target, seed * 31 + i)[0])
        engines.append(SlicedEngine(cfg, 0, win))
    tune_socket_limits(sum(e.cfg.connections for e in engines))
    times: list[int] = []
    counters: list[list[int | None]] = []
    idle: list[float] = []

    async def reader(start: int) -> None:
        for b in plan.boundaries_ns():
            await until_ns(start + b)
            times.append(_clock() - start)
            counters.append([h.cpu_counter_ns() for h in handles])

    async def session() -> None:
        for e in engines:
            await e.open_pool()
        # the idle rate of each instance, before any load of this trial
        t0, c0 = _clock(), [h.cpu_counter_ns() for h in handles]
        await asyncio.sleep(0.5)
        t1, c1 = _clock(), [h.cpu_counter_ns() for h in handles]
        idle.extend((math.nan if a is None or b is None else (b - a) / (t1 - t0)) for a, b in zip(c0, c1))
        start = _clock() + 20_000_000
        for e in engines:
            e.set_start(start)
        tasks = [e.run() for e in engines] + [e.activate() for e in engines if e.closed_model] + [reader(start)]
        await asyncio.gather(*tasks)

    t_wall = time.monotonic()
    uvloop.run(session())
    out = TrialOut(rows={}, measured_s={}, wall_s=time.monotonic() - t_wall)
    for k, ((name, _t), e) in enumerate(zip(targets, engines)):
        rows = records_to_rows(e.records, e.start_ns)
        out.rows[name] = rows[rows["phase"] == PHASE_CODES["measure"]]
        out.measured_s[name] = plan.measured_s(k)
    for (name, _t), cpu in zip(targets, slice_cpu(plan, times, counters, idle)):
        if cpu is not None and math.isfinite(cpu.carry_pct):
            out.carry_pct[name] = cpu.carry_pct
            out.own_cpu_ms_per_s[name] = 1e3 * cpu.own_s / cpu.own_period_s
    return out


# -- services -----------------------------------------------------------------------------------
class Services:
    """The case's builds, fresh instances, and one shared dependency instance (FerretDB) kept
    for the whole case, on the service CPU."""

    def __init__(self, case: Case, server_cpus: tuple[int, ...]) -> None:
        self.rt = get_runtime("local")
        self.rt.check()
        self.cpus = server_cpus
        self.resolved = {a.name: get_manifest(a.service).resolve(a.variant) for a in case.arms}
        self.prepared = {a.name: self.rt.prepare(self.resolved[a.name]) for a in case.arms}
        self.deps: dict[str, Any] = {}
        for svc in self.resolved.values():
            for dep in svc.manifest.requires:
                if dep not in self.deps:
                    prep = self.rt.prepare(get_manifest(dep).resolve())
                    self.deps[dep] = self.rt.start(prep, StartOptions(port=free_port(), cpus=server_cpus,
                                                                      log_sink="discard", role="dependency"))

    def start(self, arm: ArmDef) -> Any:
        return self.rt.start(self.prepared[arm.name], StartOptions(
            port=free_port(), cpus=self.cpus, log_sink="discard", env=dict(arm.env), deps=dict(self.deps)))

    def target(self, arm: ArmDef, handle: Any, load: LoadSpec) -> tuple[LoadSpec, Target]:
        ep = self.resolved[arm.name].endpoint(arm.endpoint)
        spec = load.with_(method=ep.method, path=ep.path, body=ep.body, headers=tuple(ep.headers))
        return spec, Target(handle.host, handle.port)

    def close(self) -> None:
        for h in self.deps.values():
            h.stop()


def trial(services: Services, case: Case, arms: Sequence[ArmDef], design: str, args: argparse.Namespace,
          rng: random.Random, seed: int) -> TrialOut:
    """One trial of ``arms``: ``seq`` (one arm, the whole time) or sliced (``slice_ms``)."""
    handles = []
    try:
        for a in arms:
            handles.append(services.start(a))
        specs = [services.target(a, h, case.load) for a, h in zip(arms, handles)]
        load = specs[0][0]
        targets = [(a.name, t) for a, (_, t) in zip(arms, specs)]
        if design == "seq":  # one arm, one window: its warm-up, then its measured seconds
            total_ms = 1e3 * (args.warmup + args.seconds)
            plan = SlicePlan((np.array([[0, int(total_ms * 1e6)]], dtype=np.int64),), args.warmup,
                             total_ms / 1e3, (0,), total_ms, 0.0)
            return run_sliced(load, targets, handles, plan, seed)
        scheme = "mirror" if design.startswith("mirror-") else args.order
        plan = plan_slices(len(arms), warmup_s=args.warmup, measured_s=args.seconds,
                           slice_ms=float(design.split("-")[1]), gap_ms=args.gap_ms, seed=seed,
                           order=balanced_order(len(arms), rng, scheme=scheme))
        return run_sliced(load, targets, handles, plan, seed)
    finally:
        for h in handles:
            h.stop()


def designs_of(case: Case, only: Sequence[str] | None) -> list[str]:
    out = ["seq"] + [f"slice-{ms}" for ms in case.slices_ms]
    if len(case.arms) > 2:
        out += [f"pairs-{ms}" for ms in case.slices_ms] + [f"mirror-{ms}" for ms in case.slices_ms]
    return [d for d in out if not only or d in only]


def block(services: Services, case: Case, designs: Sequence[str], b: int, args: argparse.Namespace,
          rng: random.Random) -> list[dict[str, Any]]:
    """Every design once for block ``b``, in a random order; one summary row per arm and design."""
    out: list[dict[str, Any]] = []
    order = list(designs)
    rng.shuffle(order)
    for pos, design in enumerate(order):
        t0 = time.monotonic()
        if design == "seq":
            groups = [[a] for a in rng.sample(list(case.arms), len(case.arms))]
        elif design.startswith("pairs-"):
            groups = [[case.arms[0], a] for a in case.arms[1:]]
            rng.shuffle(groups)
            design_run = "slice-" + design.split("-")[1]
        else:
            groups = [list(case.arms)]
        got: dict[str, tuple[np.ndarray, float, TrialOut]] = {}
        for g, arms in enumerate(groups):
            res = trial(services, case, arms, design if not design.startswith("pairs-") else design_run, args, rng,
                        seed=args.seed + 1000 * b + 10 * pos + g)
            for a in arms:
                key = a.name if a.name not in got else f"{a.name}#{g}"
                got[key] = (res.rows[a.name], res.measured_s[a.name], res)
        wall = time.monotonic() - t0
        for key, (rows, meas_s, res) in got.items():
            name = key.split("#")[0]
            if "#" in key:  # pairs: the baseline measured again in another pair; kept apart
                continue
            s = summarize_trial(rows, duration_s=meas_s, deciles=False)
            out.append({"design": design, "arm": name, "block": b, "position": pos, "condition": "c",
                        "seq": b * 100 + pos, "valid": True, "wall_s": wall, "measured_s": meas_s,
                        "carry_pct": res.carry_pct.get(name), "own_cpu_ms_per_s": res.own_cpu_ms_per_s.get(name),
                        **{m: s.get(m) for m in (*METRICS, "n", "error_rate")}})
        print(f"  block {b} {design:10s} {wall:5.1f} s  " + "  ".join(
            f"{r['arm']}: {r['throughput_rps']:.0f}/s p50 {r['p50_ms']:.3f} ms"
            + (f" carry {r['carry_pct']:.1f}%" if r["carry_pct"] is not None else "")
            for r in out if r["design"] == design and r["block"] == b), flush=True)
    return out


# -- the table -------------------------------------------------------------------------------
def table(df: pd.DataFrame, case: Case) -> pd.DataFrame:
    """Per design and arm (against the baseline): SD of the per-block log ratio, median ratio,
    verdicts, wall seconds per block, carry-over."""
    base = case.arms[0].name
    rows = []
    for design, d in df.groupby("design", sort=False):
        cmp = compare(d, baseline=base, metrics=[m for m in METRICS if d[m].notna().all()], design="paired")
        verdicts = {(r["arm"], r["metric"]): r["verdict"] for _, r in cmp.table.iterrows()}
        wall = d.groupby("block")["wall_s"].first().median()
        for arm in [a.name for a in case.arms[1:]]:
            rec: dict[str, Any] = {"design": design, "arm": arm, "blocks": d["block"].nunique(),
                                   "wall_s_per_block": wall}
            for m in METRICS:
                p = d.pivot_table(index="block", columns="arm", values=m)
                if arm not in p or base not in p or p[[arm, base]].isna().any().any():
                    continue
                lr = np.log(p[arm] / p[base])
                rec[f"sd_{m}"] = float(lr.std(ddof=1))
                rec[f"ratio_{m}"] = float(np.exp(lr.median()))
                rec[f"verdict_{m}"] = verdicts.get((arm, m), "")
            rec["carry_pct_max"] = d["carry_pct"].max() if d["carry_pct"].notna().any() else None
            rows.append(rec)
    return pd.DataFrame(rows)


def _loadavg() -> float:
    return os.getloadavg()[0]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="aa-go", help="comma-separated cases: " + ", ".join(CASES))
    ap.add_argument("--designs", default="", help="comma-separated subset of: seq, slice-<ms>, pairs-<ms>")
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--reps", type=int, default=1, help="independent repetitions of each case")
    ap.add_argument("--seconds", type=float, default=2.0, help="measured seconds per arm per trial")
    ap.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds per arm per trial")
    ap.add_argument("--gap-ms", type=float, default=5.0, help="idle gap after each slice (ms)")
    ap.add_argument("--order", choices=("debruijn", "mirror"), default="debruijn",
                    help="slice order: every ordered pair of arms adjacent once (debruijn) or ABC CBA (mirror)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="data/bench/interleave", help="folder for the CSV and JSON")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)
    if args.list:
        for k, c in CASES.items():
            print(f"{k:8s} {c.note}")
        return 0
    names = [c for c in args.case.split(",") if c]
    bad = [c for c in names if c not in CASES]
    if bad:
        print(f"unknown case(s) {bad}; valid: {', '.join(CASES)}", file=sys.stderr)
        return 2
    cpus = plan_cpus()
    os.sched_setaffinity(0, set(cpus.client))
    run_id = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S") + f"-{os.getpid() % 10000:04d}"
    out_dir = Path(args.out) / run_id
    out_dir.mkdir(parents=True, exist_ok=True)
    t_start, load0 = time.monotonic(), os.getloadavg()
    print(f"interleave bench {run_id}: load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}, "
          f"server CPUs {list(cpus.server)}, client CPUs {list(cpus.client)}", flush=True)
    all_rows, tables = [], []
    for name in names:
        case = CASES[name]
        designs = designs_of(case, [d for d in args.designs.split(",") if d] or None)
        services = Services(case, cpus.server)
        try:
            for rep in range(args.reps):
                rng = random.Random(args.seed * 7919 + rep)
                print(f"{name} rep {rep}: {case.note}; designs {designs}", flush=True)
                rows: list[dict[str, Any]] = []
                for b in range(args.blocks):
                    rows += block(services, case, designs, b, args, rng)
                df = pd.DataFrame(rows).assign(case=name, rep=rep)
                all_rows.append(df)
                t = table(df, case).assign(case=name, rep=rep)
                tables.append(t)
                print(t.to_string(index=False, float_format=lambda v: f"{v:.4g}"), flush=True)
        finally:
            services.close()
    pd.concat(all_rows).to_csv(out_dir / "trials.csv", index=False)
    summary = pd.concat(tables)
    summary.to_csv(out_dir / "table.csv", index=False)
    load1 = os.getloadavg()
    meta = {"run_id": run_id, "argv": list(sys.argv[1:] if argv is None else argv), "cases": names,
            "load_start": load0, "load_end": load1, "minutes": (time.monotonic() - t_start) / 60,
            "planted_us": _planted_us(), "order": args.order, "cpus": cpus.to_dict()}
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=1))
    print(f"\n{run_id}: {meta['minutes']:.1f} min, load average {load0[0]:.2f} -> {load1[0]:.2f}; {out_dir}")
    print(summary.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
