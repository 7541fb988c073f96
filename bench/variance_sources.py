#!/usr/bin/env python
"""Where a study's variance comes from (issue 23 step 1): a grid of short real runs.

For one study (a representative arm or two of it, its own load), runs through the real runner:

* trial length (measured seconds) x warm-up (short, long), plus one count-bound cell
  (``--count`` requests; closed-model loads only);
* each cell twice: with a fresh service per trial (the default design, mode ``fresh``) and with
  one service start kept for all the cell's trials (``Experiment(service_starts="cell")``,
  mode ``kept``; it breaks trial independence and serves only this measurement);

then prints and writes the table of :mod:`benchlib.analysis.variance_sources` (between- and
within-trial components in %, the MDE they imply for the study's default design, the restart
cost, whether the measured window starts after the detected warm-up, the client's CPU, the
disturbance figures) as CSV and Markdown with the run ids, the load average at start and end
and the minutes it took. The trials per cell are fitted to ``--budget-min`` from an assumed
start-up time per fresh trial (``--startup-s``); when even ``--min-trials`` does not fit, the
longest trial lengths are dropped (and the table says so).

    python bench/variance_sources.py --study 00_quickstart
    python bench/variance_sources.py --study 05_grpc_vs_json --budget-min 8
    python bench/variance_sources.py --list
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd

from benchlib.analysis.pilot import pilot_windows
from benchlib.analysis.variance_sources import table_markdown, trial_facts, variance_table
from benchlib.core.errors import ParameterError
from benchlib.core.model import Arm, Condition, Experiment, LoadSpec
from benchlib.run.runner import run_experiment

DURATIONS = (0.5, 1.0, 2.0, 4.0, 8.0)
WARMUPS = (0.5, 3.0)
COUNT = 10_000


@dataclass(frozen=True)
class Preset:
    """A study's representative arms (``--arms`` defaults to the first of them), its load (the
    request and connections; durations are set by the grid), its default blocks and the
    start-up seconds per fresh trial the budget fit assumes (stop, start, health and contract
    checks; from the stored runs' timestamps: about 2-5 s, 7-13.5 s for Mongo-backed services)."""

    arms: Callable[[], tuple[Arm, ...]]
    load: Callable[[], tuple[LoadSpec, str | None]]
    blocks: int
    startup_s: float = 2.0


def _closed(connections: int) -> Callable[[], tuple[LoadSpec, str | None]]:
    return lambda: (LoadSpec(model="closed", connections=connections), None)


def _first_condition(conds: Sequence[Condition]) -> tuple[LoadSpec, str | None]:
    return conds[0].load, conds[0].endpoint


def _named(arms: Sequence[Arm], *names: str) -> tuple[Arm, ...]:
    return tuple(a for a in arms if a.name in names)


#: Each registered study's preset, from its module (benchlib.analysis.studies.registry): the
#: representative arms, its load, its default blocks and the start-up seconds per fresh trial.
PRESETS: dict[str, Callable[[ModuleType], Preset]] = {
    "00_quickstart": lambda m: Preset(lambda: tuple(m.ARMS), _closed(16), 10),
    "01_rest_mongo_go_dotnet_rust": lambda m: Preset(
        lambda: _named(m.study_arms(extras=False), "go-fair", "rust-fair"),
        lambda: _first_condition(m.study_conditions(full=False)), int(m.DEFAULT_DESIGN["trials"]), 10.0),
    "02_iris_vs_kestrel": lambda m: Preset(
        lambda: _named(m.study_arms(), "iris-faithful-random", "kestrel-faithful-random"),
        lambda: (m.study_condition().load, m.study_condition().endpoint), 10),
    "03_fastcgi_nginx": lambda m: Preset(lambda: m.study_arms("node-nginx-off,go-nginx-off"),
                                         lambda: _first_condition(m.study_conditions(0.03, 0.0, ab=False)), 10, 3.0),
    "04_rust_vs_go_logging": lambda m: Preset(
        lambda: _named(m.study_arms(extras=False), "go-pipe", "actix-release-pipe"), _closed(100),
        int(m.DEFAULT_DESIGN["trials"]), 3.5),
    "05_grpc_vs_json": lambda m: Preset(lambda: m.study_arms("go", "grpc,json", "small"),
                                        lambda: _first_condition(m.study_conditions("1", 1.0, 0.5)), 8),
    "90_harness_overhead": lambda m: Preset(
        lambda: _named(m.design(m.Parameters.read()).experiment.arms, "local", "docker-1cpu"), _closed(16), 9, 3.0),
}


def _presets() -> dict[str, Preset]:
    """The registry's studies of the default report, each with its preset (a study added to the
    report without one is named); the A/B notebook (``in_report`` false) has no arms of its own
    until a user gives them."""
    from benchlib.analysis.studies.registry import STUDIES

    studies = [s for s in STUDIES if s.in_report]
    missing = [s.id for s in studies if s.id not in PRESETS]
    if missing:
        raise ParameterError(f"no variance preset for the registered stud(ies) {', '.join(missing)}: add one to PRESETS")
    return {s.id: PRESETS[s.id](s.load()) for s in studies}


def grid(base: LoadSpec, endpoint: str | None, durations: Sequence[float], warmups: Sequence[float],
         count: int) -> tuple[Condition, ...]:
    """The grid's conditions: ``d<seconds>-w<warm-up>`` for each trial length x warm-up, and
    ``n<count>-w<short warm-up>`` (closed model only; ``count`` 0: none)."""
    out = [Condition(f"d{d:g}-w{w:g}", base.with_(duration_s=float(d), requests=None, warmup_s=float(w),
                                                   warmup_requests=None), endpoint=endpoint)
           for w in warmups for d in durations]
    if count and base.model == "closed":
        out.append(Condition(f"n{count}-w{min(warmups):g}", base.with_(duration_s=None, requests=int(count),
                                                                      warmup_s=float(min(warmups)),
                                                                      warmup_requests=None), endpoint=endpoint))
    return tuple(out)


def planned_minutes(conds: Sequence[Condition], n_arms: int, trials: int, startup_s: float, between_s: float,
                    count_s: float) -> float:
    """Wall minutes of both modes: each fresh trial pays ``startup_s``; a kept cell pays it once."""
    per_trial = sum((c.load.duration_s if c.load.duration_s is not None else count_s) + c.load.warmup_s + between_s
                    for c in conds)
    fresh = trials * (per_trial + startup_s * len(conds))
    kept = trials * per_trial + startup_s * len(conds)
    return n_arms * (fresh + kept) / 60.0


def fit_budget(conds: tuple[Condition, ...], n_arms: int, budget_min: float, *, max_trials: int, min_trials: int,
               startup_s: float, between_s: float, count_s: float) -> tuple[tuple[Condition, ...], int, list[str]]:
    """The most trials per cell (``min_trials``..``max_trials``) that fit ``budget_min``; when
    ``min_trials`` does not, the longest trial lengths are dropped first. Returns the conditions
    kept, the trials and notes."""
    notes: list[str] = []
    conds = tuple(conds)
    while True:
        for n in range(max_trials, min_trials - 1, -1):
            if planned_minutes(conds, n_arms, n, startup_s, between_s, count_s) <= budget_min:
                return conds, n, notes
        longest = max((c.load.duration_s or 0.0) for c in conds)
        if len(conds) <= 1 or longest <= min(DURATIONS):
            notes.append(f"the budget of {budget_min:g} min fits no grid; ran the smallest one anyway")
            return conds, min_trials, notes
        notes.append(f"left out the {longest:g} s trials (the budget of {budget_min:g} min)")
        conds = tuple(c for c in conds if (c.load.duration_s or 0.0) != longest)


def main(argv: Sequence[str] | None = None) -> int:
    presets = _presets()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--study", help=f"one of: {', '.join(presets)}")
    p.add_argument("--list", action="store_true", help="list the studies and their representative arms")
    p.add_argument("--arms", default="", help="comma-separated arm names of the study's representative arms "
                   "(default: the first)")
    p.add_argument("--budget-min", type=float, default=8.0, help="wall minutes for both modes (default 8)")
    p.add_argument("--durations", default=",".join(f"{d:g}" for d in DURATIONS), help="trial lengths, s")
    p.add_argument("--warmups", default=",".join(f"{w:g}" for w in WARMUPS), help="short,long warm-up, s")
    p.add_argument("--count", type=int, default=COUNT, help="requests of the count-bound cell (0: none)")
    p.add_argument("--max-trials", type=int, default=8, help="most trials per cell")
    p.add_argument("--min-trials", type=int, default=3, help="fewest trials per cell (components need 3)")
    p.add_argument("--startup-s", type=float, default=0.0,
                   help="assumed start-up s per fresh trial, for the budget fit (0: the study's)")
    p.add_argument("--count-s", type=float, default=2.0, help="assumed s of the count-bound measured phase")
    p.add_argument("--blocks", type=int, default=0, help="blocks of the default design the MDE is for (0: the study's)")
    p.add_argument("--family", type=int, default=1,
                   help="rows of the Holm family the MDE is for (its level is 0.05 / family; default 1)")
    p.add_argument("--modes", default="fresh,kept", help="fresh,kept or one of them")
    p.add_argument("--runtime", default="local", help="the experiments' runtime (an arm may name its own)")
    p.add_argument("--out", default="", help="folder for variance_sources.csv/.md (default data/variance/<study>/<time>)")
    p.add_argument("--data", default="", help="run folder root (default: the project's data/runs)")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if a.list:
        for name, pre in presets.items():
            print(f"{name}: {', '.join(x.name for x in pre.arms())} (default design {pre.blocks} blocks; "
                  f"start-up assumed {pre.startup_s:g} s per fresh trial)")
        return 0
    if a.study not in presets:
        p.error(f"--study must be one of: {', '.join(presets)}; got {a.study!r}")
    pre = presets[a.study]
    all_arms = pre.arms()
    want = [x for x in a.arms.split(",") if x] or [all_arms[0].name]
    names = [x.name for x in all_arms]
    bad = [x for x in want if x not in names]
    if bad:
        p.error(f"--arms {', '.join(bad)} not among {a.study}'s representative arms: {', '.join(names)}")
    arms = tuple(x for x in all_arms if x.name in want)
    modes = [m for m in a.modes.split(",") if m]
    if not modes or any(m not in ("fresh", "kept") for m in modes):
        p.error(f"--modes must be fresh, kept or both; got {a.modes!r}")
    base, endpoint = pre.load()
    conds = grid(base, endpoint, [float(x) for x in a.durations.split(",")],
                 [float(x) for x in a.warmups.split(",")], a.count)
    between = 0.5
    conds, trials, notes = fit_budget(conds, len(arms) * len(modes) / 2, a.budget_min, max_trials=a.max_trials,
                                      min_trials=a.min_trials, startup_s=a.startup_s or pre.startup_s, between_s=between,
                                      count_s=a.count_s)
    if base.model != "closed" and a.count:
        notes.append(f"no count-bound cell: the study's load is {base.model} (requests bound closed loads only)")
    blocks = a.blocks or pre.blocks
    load0, t0 = os.getloadavg(), time.monotonic()
    print(f"{a.study}: arms {', '.join(x.name for x in arms)}; {len(conds)} cells x {trials} trials x "
          f"{', '.join(modes)}; load average {load0[0]:.2f}", flush=True)
    for n in notes:
        print(f"note: {n}", flush=True)
    windows, facts, run_ids = [], [], []
    for mode in modes:
        exp = Experiment(study=f"variance-{a.study}", arms=arms, conditions=conds, trials=trials, seed=a.seed,
                         runtime=a.runtime, between_trials_s=between,
                         service_starts="trial" if mode == "fresh" else "cell")
        print(f"{mode}: {len(conds) * len(arms) * trials} trials ({time.monotonic() - t0:.0f} s so far)", flush=True)
        run = run_experiment(exp, run_id="", out_dir=a.data or None, progress=False)
        run_ids.append(f"{mode}: {run.run_id}")
        w = pilot_windows(run, quantiles=(0.5, 0.99))
        if len(w):
            w["mode"] = mode
            windows.append(w)
        facts.append(trial_facts(run, mode=mode))
    table = variance_table(pd.concat(windows, ignore_index=True) if windows else pd.DataFrame(),
                           pd.concat(facts, ignore_index=True), metrics=("p50_ms", "p99_ms", "throughput_rps"),
                           blocks=blocks, alpha=0.05 / max(1, a.family))
    load1, minutes = os.getloadavg(), (time.monotonic() - t0) / 60.0
    out = Path(a.out) if a.out else Path("data/variance") / a.study / dt.datetime.now(dt.UTC).strftime(
        "%Y%m%dT%H%M%SZ")
    out.mkdir(parents=True, exist_ok=True)
    table.to_csv(out / "variance_sources.csv", index=False)
    head = [f"Variance sources of {a.study}: arms {', '.join(x.name for x in arms)}; {len(conds)} cells x {trials} "
            f"trials per mode; MDE for the default design of {blocks} blocks (paired rank test, 80% power, "
            f"alpha 0.05 / {max(1, a.family)}, two arms like this one, no shared block effect).",
            f"Runs: {'; '.join(run_ids)}. Load average (1 min) {load0[0]:.2f} at the start, {load1[0]:.2f} at the "
            f"end; {minutes:.1f} min.", *[f"Note: {n}." for n in notes]]
    md = "\n\n".join([*head, table_markdown(table)]) + "\n"
    (out / "variance_sources.md").write_text(md)
    print(md)
    print(f"wrote {out / 'variance_sources.csv'} and {out / 'variance_sources.md'}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ParameterError as exc:
        print(f"variance_sources: error: {exc}", file=sys.stderr)
        sys.exit(2)
