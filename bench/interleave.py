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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from benchlib.run.cpus import plan_cpus  # noqa: E402
from benchlib.loadgen.engine import Engine, EngineConfig, records_to_rows, tune_socket_limits  # noqa: E402
from benchlib.loadgen.launch import _worker_configs  # noqa: E402
from benchlib.runtime.manifest import get_manifest  # noqa: E402
from benchlib.core.model import LoadSpec, Target  # noqa: E402
from benchlib.runtime import StartOptions, get_runtime  # noqa: E402
from benchlib.runtime.ports import free_port  # noqa: E402
from benchlib.core.schema import PHASE_CODES  # noqa: E402
from benchlib.stats import compare  # noqa: E402
from benchlib.stats.summary import summarize_trial  # noqa: E402

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


# -- the sliced engine ----------------------------------------------------------------------
def slice_plan(order: Sequence[int], n_arms: int, warm_per_arm_s: float, meas_per_arm_s: float, slice_ms: float,
               gap_ms: float) -> tuple[list[np.ndarray], float, float]:
    """Every arm's windows (rows ``[start, end)``, ns from the trial's start), the warm-up's
    length and the total (s). Slices follow ``order`` (a balanced cycle of arm indices) from
    its start, through the warm-up and then the measured phase; the measured phase starts on a
    cycle boundary, so each arm has the same number of measured slices."""
    s_ns, g_ns = int(slice_ms * 1e6), int(gap_ms * 1e6)
    windows: list[list[tuple[int, int]]] = [[] for _ in range(n_arms)]
    per_cycle = len(order) // n_arms  # slices per arm per cycle
    warm_cycles = max(1, math.ceil(warm_per_arm_s * 1e3 / slice_ms / per_cycle))
    meas_cycles = max(1, round(meas_per_arm_s * 1e3 / slice_ms / per_cycle))
    t = 0
    t_measure = 0
    for c in range(warm_cycles + meas_cycles):
        if c == warm_cycles:
            t_measure = t
        for arm in order:
            windows[arm].append((t, t + s_ns))
            t += s_ns + g_ns
    return [np.array(w, dtype=np.int64) for w in windows], t_measure / 1e9, t / 1e9


def de_bruijn_pairs(n: int) -> list[int]:
    """A cyclic sequence of ``n * n`` arm indices in which every ordered pair ``(i, j)``
    (``i`` then ``j``, ``i == j`` included) follows once: each arm is preceded by every arm
    equally often (the de Bruijn sequence B(n, 2); for two arms ``AABB``)."""
    a = [0] * (2 * n)
    seq: list[int] = []

    def db(t: int, p: int) -> None:
        if t > 2:
            if 2 % p == 0:
                seq.extend(a[1:p + 1])
        else:
            a[t] = a[t - p]
            db(t + 1, p)
            for j in range(a[t - p] + 1, n):
                a[t] = j
                db(t + 1, t)

    db(1, 1)
    return seq


def balanced_order(n_arms: int, rng: random.Random, *, scheme: str = "debruijn") -> list[int]:
    """One balanced cycle with a random phase: every ordered pair of arms adjacent once
    (``debruijn``; pairs: ``AABB`` rotated, i.e. ``ABBA``), or ``mirror``: ``ABC CBA`` (each arm
    equally often in each position, but for k > 2 not preceded by every other arm alike)."""
    base = de_bruijn_pairs(n_arms) if scheme == "debruijn" else list(range(n_arms)) + list(reversed(range(n_arms)))
    k = rng.randrange(len(base))
    return base[k:] + base[:k]


class SlicedEngine(Engine):
    """benchlib's engine, sending only inside this arm's windows (absolute after :meth:`set_start`)."""

    def __init__(self, cfg: EngineConfig, start_ns: int, windows_rel: np.ndarray) -> None:
        self.win_rel = windows_rel
        super().__init__(cfg, start_ns)

    def set_start(self, start_ns: int) -> None:
        super().set_start(start_ns)
        self.win = self.win_rel + start_ns
        self.wi = 0
        self.t_end = int(self.win[-1, 1])
        self.t_simple_stop = -1  # every closed-model send asks may_send

    def in_window(self, now: int) -> bool:
        w, i = self.win, self.wi
        while i < len(w) and now >= w[i, 1]:
            i += 1
        self.wi = i
        return i < len(w) and now >= w[i, 0]

    def may_send(self, now: int) -> bool:
        if now >= self.t_end:
            self.stopping = True
            return False
        return self.in_window(now)

    def _schedule_blocks(self) -> Iterator[np.ndarray]:
        lo, hi = self.win_rel[:, 0], self.win_rel[:, 1]
        for block in super()._schedule_blocks():
            i = np.searchsorted(lo, block, side="right") - 1
            keep = (i >= 0) & (block < hi[np.clip(i, 0, None)])
            yield block[keep]

    async def activate(self) -> None:
        """Closed model: at each of this arm's windows, send on its idle connections and open
        the ones it lacks; after its last window, stop."""
        for s in self.win[:, 0].tolist():
            if s <= self.start_ns:
                continue  # run() opens the first window's connections itself
            await _until(s)
            now = _clock()
            idle, self.idle = self.idle, []
            for conn in idle:
                if not conn.dead:
                    conn.send(now)
            for _ in range(self.cfg.connections - self.nconns):
                self.open_conn(now)
        await _until(self.t_end)
        self.stopping = True
        self.check_done()


async def _until(t_ns: int) -> None:
    gap = (t_ns - _clock()) / 1e9
    if gap > 0.002:
        await asyncio.sleep(gap - 0.002)
    while _clock() < t_ns:
        await asyncio.sleep(0)


# -- one trial --------------------------------------------------------------------------------
@dataclass
class TrialOut:
    """What one trial gave: per arm its measured rows, measured seconds, and CPU figures."""

    rows: dict[str, np.ndarray]
    measured_s: dict[str, float]
    carry_pct: dict[str, float] = field(default_factory=dict)
    own_cpu_ms_per_s: dict[str, float] = field(default_factory=dict)
    wall_s: float = 0.0


def _cpu_ns(handle: Any) -> int | None:
    cg = getattr(handle, "_cgroup", None)
    return cg.cpu_usage_ns() if cg is not None else None


def run_sliced(load: LoadSpec, targets: list[tuple[str, Target]], handles: list[Any], windows: list[np.ndarray],
               warm_s: float, total_s: float, seed: int) -> TrialOut:
    """Drive the arms' engines in one event loop on this process's CPUs; read each arm's cgroup
    CPU at every window boundary."""
    import uvloop

    engines: list[SlicedEngine] = []
    for i, ((_name, target), win) in enumerate(zip(targets, windows)):
        spec = load.with_(duration_s=total_s - warm_s, warmup_s=warm_s)
        cfg = EngineConfig(**_worker_configs(spec, target, seed * 31 + i)[0])
        engines.append(SlicedEngine(cfg, 0, win))
    tune_socket_limits(sum(e.cfg.connections for e in engines))
    readings: list[tuple[int, list[int | None]]] = []

    async def reader(start: int) -> None:
        bounds = sorted({int(b) for w in windows for b in w.ravel()})
        for b in bounds:
            await _until(start + b)
            readings.append((_clock() - start, [_cpu_ns(h) for h in handles]))

    async def session() -> None:
        for e in engines:
            await e.open_pool()
        # the idle rate of each instance, before any load of this trial
        t0, c0 = _clock(), [_cpu_ns(h) for h in handles]
        await asyncio.sleep(0.5)
        t1, c1 = _clock(), [_cpu_ns(h) for h in handles]
        idle.extend((None if a is None or b is None else (b - a) / (t1 - t0)) for a, b in zip(c0, c1))
        start = _clock() + 20_000_000
        for e in engines:
            e.set_start(start)
        tasks = [e.run() for e in engines] + [e.activate() for e in engines if e.closed_model] + [reader(start)]
        await asyncio.gather(*tasks)

    idle: list[float | None] = []
    t_wall = time.monotonic()
    uvloop.run(session())
    out = TrialOut(rows={}, measured_s={}, wall_s=time.monotonic() - t_wall)
    t_measure_rel = int(warm_s * 1e9)
    for (name, _t), e, win in zip(targets, engines, windows):
        rows = records_to_rows(e.records, e.start_ns)
        out.rows[name] = rows[rows["phase"] == PHASE_CODES["measure"]]
        out.measured_s[name] = float(np.clip(win[:, 1] - np.maximum(win[:, 0], t_measure_rel), 0, None).sum()) / 1e9
    _carry_over(out, targets, windows, readings, idle, t_measure_rel)
    return out


def _carry_over(out: TrialOut, targets: list[tuple[str, Target]], windows: list[np.ndarray],
                readings: list[tuple[int, list[int | None]]], idle: list[float | None], t_measure_rel: int) -> None:
    """Per arm, over the measured phase: CPU in its own periods (its slice and the gap after
    it) and in the others' periods; carry-over = (the others' periods' CPU - idle rate x their
    length) / own periods' CPU, in %."""
    if len(readings) < 2 or any(v is None for v in idle) or any(v is None for _, vs in readings for v in vs):
        return
    starts = sorted((int(w[j, 0]), a) for a, w in enumerate(windows) for j in range(len(w)))
    owner_at = [a for _, a in starts]
    start_at = [s for s, _ in starts]
    times = np.array([t for t, _ in readings], dtype=np.int64)
    cpu = np.array([vs for _, vs in readings], dtype=np.float64)
    n = len(targets)
    own = np.zeros(n)
    other = np.zeros(n)
    other_t = np.zeros(n)
    own_t = np.zeros(n)
    for k in range(len(times) - 1):
        mid = (times[k] + times[k + 1]) // 2
        if mid < t_measure_rel:
            continue
        j = int(np.searchsorted(start_at, mid, side="right")) - 1
        if j < 0:
            continue
        owner = owner_at[j]
        dt_ns = times[k + 1] - times[k]
        for a in range(n):
            d = cpu[k + 1, a] - cpu[k, a]
            if a == owner:
                own[a] += d
                own_t[a] += dt_ns
            else:
                other[a] += d
                other_t[a] += dt_ns
    for a, (name, _t) in enumerate(targets):
        if own[a] > 0:
            out.carry_pct[name] = 100.0 * (other[a] - idle[a] * other_t[a]) / own[a]  # type: ignore[operator]
            out.own_cpu_ms_per_s[name] = own[a] / 1e6 / (own_t[a] / 1e9)


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
        if design == "seq":
            w_ns = int(args.warmup * 1e9)
            win = [np.array([[0, w_ns + int(args.seconds * 1e9)]], dtype=np.int64)]
            return run_sliced(load, targets, handles, win, args.warmup, args.warmup + args.seconds, seed)
        slice_ms = float(design.split("-")[1])
        scheme = "mirror" if design.startswith("mirror-") else args.order
        windows, warm_s, total_s = slice_plan(balanced_order(len(arms), rng, scheme=scheme), len(arms),
                                              args.warmup, args.seconds, slice_ms, args.gap_ms)
        return run_sliced(load, targets, handles, windows, warm_s, total_s, seed)
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
    run_id = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%d-%H%M%S") + f"-{os.getpid() % 10000:04d}"
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
