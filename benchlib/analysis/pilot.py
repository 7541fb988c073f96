"""A stored run as a pilot: its trials' windows and timestamps, for the design planner.

* :func:`pilot_windows`: every stored trial's measured phase split into windows
  (:func:`benchlib.stats.variance.window_metrics`), labelled, for
  :func:`~benchlib.stats.variance.pair_components`;
* :func:`trial_costs`: each trial slot's timestamps, warm-up, measured and peer-tool seconds,
  for :func:`~benchlib.stats.variance.cost_model`;
* :func:`plan_from_run`: both, then :func:`~benchlib.stats.variance.plan_design` for one
  condition;
* :func:`design_table` / :func:`design_section`: a report's "design" section: the design this
  run used (blocks planned and run, measured seconds per trial, sequential looks), the MDE
  predicted for it by the variance components (of a pilot run, or of this run), the MDE
  the run achieved (its verdicts'), and the design the planner would choose for a target;
* ``benchlib plan RUN --baseline ARM --target 0.10 --target 0.05`` (also
  ``python -m benchlib.analysis.pilot ...``, the same :func:`main`) prints the components and
  the plans in Markdown.

Reads only (``benchlib.records``); the stored run is never modified.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from typing import Any

from benchlib.results import Run, open_run

__all__ = ["design_section", "design_table", "pilot_windows", "plan_from_run", "trial_costs", "main"]


def pilot_windows(run: Run, *, splits: Sequence[int] = (1, 2, 4, 8), prefixes: Sequence[float] = (0.5, 0.25),
                  quantiles: Sequence[float] = (0.5, 0.99), conditions: Sequence[str] | None = None) -> Any:
    """One row per window of every stored trial that sent measured requests: ``condition``,
    ``arm``, ``block``, ``valid`` (status ``ok``) and :func:`window_metrics`'s columns."""
    import pandas as pd

    from benchlib.stats.variance import window_metrics

    rec = run
    out = []
    for t in rec.trials:
        if not t.ran or (conditions is not None and t.condition not in conditions):
            continue
        dur = t.load.measured_duration_s if t.load is not None else None
        dur = dur if dur is not None and math.isfinite(dur) and dur > 0 else None
        try:
            wins = window_metrics(t.rows(), splits=splits, prefixes=prefixes, duration_s=dur, quantiles=quantiles)
        except Exception as exc:  # noqa: BLE001 - a trial without measured requests has no windows
            if "measured" in str(exc):
                continue
            raise
        for w in wins:
            out.append({"condition": t.condition, "arm": t.arm, "block": t.block, "valid": t.valid, **w})
    return pd.DataFrame.from_records(out)


def trial_costs(run: Run) -> Any:
    """One row per stored trial slot, in run order: ``condition``, ``arm``, ``block``, ``seq``,
    ``started`` (first attempt), ``finished``, ``next_started`` (the next slot's start; NaT
    for the last), ``warmup_s``, ``duration_s`` (measured), ``peer_s`` (the peer tool's run),
    ``between_s`` (the run's pause between trials), ``attempts``."""
    import pandas as pd

    rec = run
    between = float(rec.parameters.get("between_trials_s") or 0.0)
    rows = []
    for t in sorted(rec.trials, key=lambda x: x.seq):
        starts = [a.started for a in t.attempts if a.started] + ([t.started] if t.started else [])
        spec = (t.load.loadspec if t.load is not None else {}) or {}
        dur = t.load.measured_duration_s if t.load is not None else math.nan
        if not (dur is not None and math.isfinite(dur)):
            dur = float(spec.get("duration_s") or math.nan)
        peer = t.peer.duration_s if t.peer is not None and math.isfinite(t.peer.duration_s) else 0.0
        rows.append({"condition": t.condition, "arm": t.arm, "block": t.block, "seq": t.seq,
                     "started": min(starts) if starts else pd.NaT, "finished": t.finished or pd.NaT,
                     "warmup_s": float(spec.get("warmup_s") or 0.0), "duration_s": float(dur), "peer_s": float(peer),
                     "between_s": between, "attempts": 1 + len(t.attempts)})
    df = pd.DataFrame.from_records(rows)
    if len(df):
        df["started"] = pd.to_datetime(df["started"], utc=True)
        df["finished"] = pd.to_datetime(df["finished"], utc=True)
        df["next_started"] = df["started"].shift(-1)
    return df


def plan_from_run(run: Run, *, condition: str, baseline: str | None = None,
                  contrasts: Sequence[tuple[str, str]] | None = None,
                  metrics: Sequence[str] = ("throughput_rps", "p50_ms", "p99_ms"), target_mde: float = 0.05,
                  n_comparisons: int | None = None, current: tuple[int, float] | None = None,
                  windows: Any = None, sequential: bool = True, **kwargs: Any) -> Any:
    """Plan blocks x duration for one condition of a stored run (see
    :func:`benchlib.stats.variance.plan_design`; ``kwargs`` go there). Metrics whose
    components cannot be estimated from this pilot (too few requests per window) are left
    out and named in the plan's notes."""
    from benchlib.stats.variance import cost_model, pair_components, plan_design

    rec = run
    if windows is None:
        from benchlib.stats.quantiles import quantile_of

        qs = tuple(q for q in (quantile_of(m) for m in metrics) if q is not None) or (0.5,)
        windows = pilot_windows(rec, conditions=[condition], quantiles=qs)
    wins = windows
    wins = wins[wins["condition"] == condition]
    base = baseline if baseline is not None or contrasts is not None else str(rec.parameters.get("baseline"))
    comps, left = [], []
    for m in metrics:
        if m not in wins.columns:
            left.append(m)
            continue
        got = [c for c in pair_components(wins, m, baseline=base, contrasts=contrasts) if math.isfinite(c.within_coef)]
        comps += got
        if not got:
            left.append(m)
    costs = trial_costs(rec)
    costs = costs[costs["condition"] == condition]
    plan = plan_design(comps, cost_model(costs), target_mde=target_mde, n_comparisons=n_comparisons, current=current,
                       sequential=sequential, **kwargs)
    if left:
        from dataclasses import replace

        plan = replace(plan, notes=(*plan.notes, f"left out (no within-trial estimate from this pilot): {', '.join(left)}"))
    return plan


def _pairs(answers: Sequence[Any]) -> list[tuple[str, str, str, str, str, int, float]]:
    """(stored condition, group, stored baseline, stored arm, metric, family size, MDE) of every
    compared row of ``answers`` (:class:`~benchlib.analysis.questions.Answer` or
    :class:`~benchlib.stats.Comparison`)."""
    out = []
    for ans in answers:
        comp = getattr(ans, "comparison", ans)
        if comp is None:
            continue
        rows = ans.family.rows() if hasattr(ans, "family") else None
        for v in comp.verdicts:
            if v.effect != "ratio" or v.kind.value in ("omitted", "not_run", "no_valid_trial"):
                continue
            group = str(v.labels.get("condition", ""))
            stored = [(str(c.condition), c.baseline, c.arm) for c in rows or ()
                      if str(c.group) == group and c.labels == (v.baseline, v.arm)]
            cond, base, arm = stored[0] if stored else (group, v.baseline, v.arm)
            out.append((cond, group, base, arm, v.metric, int(v.family_size),
                        float(v.mde) if math.isfinite(v.mde) or v.mde == math.inf else math.inf))
    return out


def design_table(run: Run, answers: Sequence[Any], *, pilot: Run | None = None, target_mde: float = 0.05,
                 power: float = 0.8, alpha: float = 0.05, windows: Any = None) -> Any:
    """One row per (condition, metric) of the compared rows of ``answers``: the design the run
    used and the MDEs predicted and achieved, relative, at ``power``.

    Columns: ``condition``, ``metric``, ``rows`` (compared rows of that metric),
    ``family_size`` (largest Holm family they belong to), ``blocks_planned``, ``blocks_run``,
    ``duration_s`` (measured seconds per trial: the load's, or for a load of a request count the
    median measured phase of the trials of ``pilot`` or the run), ``predicted_mde_pct`` (the largest over the
    rows, from the variance components of ``pilot``, default the run itself, at this design and
    each row's level ``alpha / family_size``), ``achieved_mde_pct`` (the largest of the
    verdicts' MDEs, infinite for a row with too few blocks to be significant at all; median
    in ``achieved_mde_median_pct``), ``between_share_pct`` (median share
    of the between-trial variance), and the planner's choice for ``target_mde``:
    ``chosen_blocks``, ``chosen_duration_s``, ``chosen_minutes``, ``chosen_mde_pct``,
    ``minutes_now`` (the cost model's wall time of the run's own design).
    """
    import numpy as np
    import pandas as pd

    from benchlib.stats.power import mde_shift, planning_alpha
    from benchlib.stats.variance import cost_model, pair_components, plan_design

    rec = run
    src = pilot if pilot is not None else rec
    rows = _pairs(answers)
    if not rows:
        return pd.DataFrame()
    metrics = tuple(dict.fromkeys(r[4] for r in rows))
    if windows is None:
        from benchlib.stats.quantiles import quantile_of

        qs = tuple(q for q in (quantile_of(m) for m in metrics) if q is not None) or (0.5,)
        windows = pilot_windows(src, quantiles=qs)
    costs = trial_costs(src)
    ran = {}
    for t in rec.trials:
        if t.ran:
            ran[t.condition] = max(ran.get(t.condition, 0), int(t.block) + 1)
    planned = int(rec.parameters.get("trials") or 0)
    loads = {c.get("name"): c.get("load") or {} for c in rec.parameters.get("conditions") or ()}
    out = []
    for cond in dict.fromkeys(r[0] for r in rows):
        here = [r for r in rows if r[0] == cond]
        d_now = float(loads.get(cond, {}).get("duration_s") or math.nan)
        if not math.isfinite(d_now) and len(costs):  # a request-count load: its measured seconds
            d_now = float(costs.loc[costs["condition"] == cond, "duration_s"].median())
        n_now = ran.get(cond, 0)
        w = windows[windows["condition"] == cond] if len(windows) else windows
        cm = cost_model(costs[costs["condition"] == cond]) if len(costs) else None
        for m in dict.fromkeys(r[4] for r in here):
            mine = [r for r in here if r[4] == m]
            fam = max(r[5] for r in mine)
            rec_row: dict[str, Any] = {
                "condition": cond, "metric": m, "rows": len(mine), "family_size": fam, "blocks_planned": planned,
                "blocks_run": n_now, "duration_s": d_now,
                "achieved_mde_pct": 100 * max(r[6] for r in mine),
                "achieved_mde_median_pct": 100 * float(np.median([r[6] for r in mine])),
                "predicted_mde_pct": math.nan, "between_share_pct": math.nan}
            pairs = list(dict.fromkeys((r[2], r[3]) for r in mine))
            comps = []
            # a metric in other units (p50_us) has the log ratios of its windows' column (p50_ms)
            wm = f"{m[:-3]}_ms" if m.endswith("_us") and len(w) and m not in w.columns else m
            if len(w) and wm in w.columns:
                comps = [c for c in pair_components(w, wm, contrasts=pairs) if math.isfinite(c.within_coef)]
            if comps and n_now >= 2 and math.isfinite(d_now):
                ra = planning_alpha(alpha, fam, "holm")
                pred = [math.expm1(mde_shift(n_now, c.sd(d_now), alpha=ra, power=power, paired=True, method="rank"))
                        for c in comps]
                rec_row["predicted_mde_pct"] = 100 * max(pred)
                shares = [c.between_share for c in comps if math.isfinite(c.between_share)]
                rec_row["between_share_pct"] = 100 * float(np.median(shares)) if shares else math.nan
                if cm is not None and cm.arms:
                    plan = plan_design(comps, cm, target_mde=target_mde, power=power, alpha=alpha, n_comparisons=fam,
                                       current=(n_now, d_now) if n_now else None)
                    rec_row.update(chosen_blocks=plan.chosen.blocks, chosen_duration_s=plan.chosen.duration_s,
                                   chosen_minutes=plan.chosen.minutes, chosen_mde_pct=100 * plan.chosen.mde[wm],
                                   chosen_reaches=plan.chosen.reaches,
                                   minutes_now=plan.current.minutes if plan.current else math.nan)
            out.append(rec_row)
    return pd.DataFrame.from_records(out)


def design_section(run: Run, answers: Sequence[Any], *, pilot: Run | None = None, target_mde: float = 0.05,
                   power: float = 0.8, stopping: Any = None, windows: Any = None) -> str:
    """The report's "design" section (Markdown): per condition and metric, the design run,
    the MDE predicted from the variance components and the MDE achieved, and the design the
    planner recommends for ``target_mde`` (:func:`design_table`); ``stopping``: the run's
    :class:`~benchlib.analysis.stopping.Stopping` (:func:`~benchlib.analysis.stopping.stopping_rule`:
    on or off and why, its looks, what it saved) or
    :class:`~benchlib.analysis.stopping.StopWhenSettled` (its looks are said)."""
    from benchlib.analysis.fmt import num

    rec = run
    t = design_table(rec, answers, pilot=pilot, target_mde=target_mde, power=power, windows=windows)
    src = "the pilot run `" + pilot.run_id + "`" if pilot is not None else "this run's own trials"
    lines = [f"**Design.** Variance components (between trials vs within a trial) from {src}; MDEs at "
             f"{power:.0%} power, each row at α = 0.05 / its Holm family; the planner's choice is the least wall "
             f"time reaching {target_mde:.0%} on every row of the metric (Kalibera & Jones 2013)."]
    stopped = rec.run.get("stopped_after_blocks")
    if stopping is not None and hasattr(stopping, "markdown"):
        lines.append(stopping.markdown(rec))
    elif stopping is not None:
        lines.append(f"Sequential stopping: {stopping.describe()}.")
    elif stopped is not None:
        lines.append(f"Sequential stopping: the run stopped after {stopped} blocks.")
    if not len(t):
        return "\n\n".join([*lines, "No compared row with a relative effect: nothing to plan."])

    from benchlib.stats.variance import mde_text

    def pct(x: Any) -> str:
        return "–" if x is None or math.isnan(float(x)) else mde_text(float(x) / 100.0)

    lines += ["", "| condition | metric | rows (family) | blocks run / planned × measured s | predicted MDE | "
              "achieved MDE (max, median) | between share | recommended for the target |",
              "|---|---|---|---|---|---|---|---|"]
    for r in t.to_dict("records"):
        rec_txt = "–"
        if math.isfinite(float(r.get("chosen_blocks", math.nan))):
            rec_txt = (f"{int(r['chosen_blocks'])} × {num(r['chosen_duration_s'])} s, {r['chosen_minutes']:.1f} min, "
                       f"MDE {pct(r['chosen_mde_pct'])}" + ("" if r.get("chosen_reaches") else " (target not reached)")
                       + (f" (now {r['minutes_now']:.1f} min)" if math.isfinite(float(r.get('minutes_now', math.nan)))
                          else ""))
        lines.append(f"| {r['condition']} | {r['metric']} | {r['rows']} ({r['family_size']}) | {r['blocks_run']} / "
                     f"{r['blocks_planned']} × {num(r['duration_s'])} s | {pct(r['predicted_mde_pct'])} | "
                     f"{pct(r['achieved_mde_pct'])}, {pct(r['achieved_mde_median_pct'])} | "
                     f"{pct(r['between_share_pct'])} | {rec_txt} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None, *, prog: str = "python -m benchlib.analysis.pilot") -> int:
    """Print a stored run's variance components and design plans (Markdown)."""
    ap = argparse.ArgumentParser(prog=prog, description=main.__doc__)
    ap.add_argument("run", help="a stored run: its folder, <study>/<run_id>, or its run id (looked up under data/runs)")
    ap.add_argument("--condition", action="append", help="condition(s) to plan (default: each)")
    ap.add_argument("--baseline", help="arm the others are compared with (default: the run's baseline)")
    ap.add_argument("--metric", action="append", help="metrics (default: throughput_rps, p50_ms, p99_ms)")
    ap.add_argument("--target", action="append", type=float, help="target MDEs (default 0.10 and 0.05)")
    ap.add_argument("--budget", type=float, help="also: the smallest MDE within this many minutes")
    ap.add_argument("--family-size", type=int, help="rows of the Holm family (default: the rows planned)")
    ap.add_argument("--current", nargs=2, type=float, metavar=("BLOCKS", "SECONDS"), help="today's design")
    args = ap.parse_args(argv)
    from benchlib.stats.variance import components_table

    from benchlib.stats.quantiles import quantile_of

    rec = open_run(args.run)
    metrics = tuple(args.metric or ("throughput_rps", "p50_ms", "p99_ms"))
    qs = tuple(q for q in (quantile_of(m) for m in metrics) if q is not None) or (0.5,)
    wins = pilot_windows(rec, quantiles=qs)
    for cond in args.condition or list(rec.conditions):
        base = args.baseline or str(rec.parameters.get("baseline"))
        print(f"## {rec.study} / {rec.run_id} / {cond}\n")
        from benchlib.stats.variance import arm_components, pair_components

        w = wins[wins["condition"] == cond]
        arms = [c for m in metrics if m in w.columns for c in arm_components(w, m)]
        pairs = [c for m in metrics if m in w.columns for c in pair_components(w, m, baseline=base)]
        print(components_table(arms).to_string(index=False, float_format=lambda v: f"{v:.3g}"), "\n")
        print(components_table(pairs).to_string(index=False, float_format=lambda v: f"{v:.3g}"), "\n")
        for target in args.target or (0.10, 0.05):
            try:
                plan = plan_from_run(rec, condition=cond, baseline=base, metrics=metrics, target_mde=target,
                                     n_comparisons=args.family_size, windows=wins,
                                     current=(int(args.current[0]), args.current[1]) if args.current else None)
            except Exception as exc:  # noqa: BLE001 - one line per condition that cannot be planned
                print(f"target {target:.0%}: not planned: {exc}\n")
                continue
            print(f"### target MDE {target:.0%}\n\n{plan.to_markdown()}\n")
        if args.budget:
            plan = plan_from_run(rec, condition=cond, baseline=base, metrics=metrics, target_mde=min(args.target or (0.05,)),
                                 budget_minutes=args.budget, n_comparisons=args.family_size, windows=wins,
                                 current=(int(args.current[0]), args.current[1]) if args.current else None)
            print(f"### budget {args.budget:g} min\n\n{plan.to_markdown()}\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
