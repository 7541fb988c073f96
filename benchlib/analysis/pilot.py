"""A stored run as a pilot: its trials' windows and timestamps, for the design planner.

* :func:`pilot_windows`: every stored trial's measured phase split into windows
  (:func:`benchlib.stats.variance.window_metrics`), labelled, for
  :func:`~benchlib.stats.variance.pair_components`;
* :func:`trial_costs`: each trial slot's timestamps, warm-up, measured and peer-tool seconds,
  for :func:`~benchlib.stats.planning.cost.cost_model`;
* :func:`plan_from_run`: both, then :func:`~benchlib.stats.planning.design_plan.plan_design` for one
  condition;
* :class:`PilotComponents` / :func:`components_from_run`: variance components the run did
  not produce (a stored earlier run, or a pilot's), which alone can *predict* its MDE;
* :func:`design_table` / :func:`design_section`: a report's "design" section: the design this
  run used (blocks planned and run, measured seconds per trial, sequential looks), the MDE
  predicted for it by the components of a pilot or an earlier run (without one: the MDE from
  this run's own components, labelled as such, since it equals the achieved MDE by
  construction), the MDE the run achieved (its verdicts'; a sequential run's are the
  sequential test's, and so is the prediction), and the design the planner would choose for a
  target;
* ``benchlib plan RUN --baseline ARM --target 0.10 --target 0.05`` (also
  ``python -m benchlib.analysis.pilot ...``, the same :func:`main`) prints the components and
  the plans in Markdown.

Reads only (``benchlib.store.records``); the stored run is never modified.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from benchlib.stats.planning.cost import CostModel, cost_model
from benchlib.stats.planning.design_plan import DesignPlan, mde_text, plan_design, predicted_mde
from benchlib.stats.power import planning_alpha
from benchlib.stats.quantiles import quantile_of
from benchlib.stats.sequential import SequentialDesign
from benchlib.stats.variance import (
    VARIANCE_CONFIDENCE,
    PairComponents,
    arm_components,
    components_table,
    pair_components,
    window_metrics,
)
from benchlib.store.results import Run, open_run

__all__ = ["OWN_MDE_LABEL", "PilotComponents", "components_from_run", "design_section", "design_table",
           "pilot_windows", "plan_from_run", "trial_costs", "main"]

#: The design section's heading for an MDE computed from the run's own trials: it equals the
#: achieved MDE by construction (the same data), so it is no prediction.
OWN_MDE_LABEL = "MDE from this run's own components (not a prediction)"


@dataclass(frozen=True)
class PilotComponents:
    """Variance components from data the run did not produce: what a prediction of its MDE
    may rest on (:func:`design_table`'s ``components=``).

    Attributes
    ----------
    components:
        One :class:`~benchlib.stats.variance.PairComponents` per (condition, baseline, arm,
        metric) (``labels["condition"]`` names the condition; a metric in µs may use its ms
        components, the log ratios are the same).
    source:
        Where they come from, in words for the report (``"the stored run `r1`"``, ``"the
        pilot's 3 blocks"``).
    cost:
        The wall time of a block measured with them (for the planner); ``None``: the run's own.
    """

    components: tuple[PairComponents, ...]
    source: str
    cost: CostModel | None = None

    def of(self, condition: str, metric: str, pairs: Sequence[tuple[str, str]]) -> list[PairComponents]:
        """The components of ``metric`` (or its ``_ms`` twin for ``_us``) for ``pairs`` in ``condition``."""
        names = {metric, f"{metric[:-3]}_ms"} if metric.endswith("_us") else {metric}
        want = {(str(b), str(a)) for b, a in pairs}
        return [c for c in self.components if str(c.labels.get("condition", condition)) == str(condition)
                and c.metric in names and (c.baseline, c.arm) in want and math.isfinite(c.within_coef)]


def components_from_run(run: Run, *, metrics: Sequence[str], pairs: Sequence[tuple[str, str]] | None = None,
                        conditions: Sequence[str] | None = None) -> PilotComponents:
    """The variance components of a stored run (an earlier run or a pilot), per condition,
    for ``pairs`` ((baseline, arm); default every arm against the run's baseline), with its
    cost model: what :func:`design_table` can predict another run's MDE from."""
    rec = run
    qs = tuple(q for q in (quantile_of(m) for m in metrics) if q is not None) or (0.5,)
    wins = pilot_windows(rec, quantiles=qs, conditions=conditions)
    comps: list[PairComponents] = []
    for m in metrics:
        if len(wins) and m in wins.columns:
            comps += pair_components(wins, m, contrasts=pairs) if pairs is not None else pair_components(
                wins, m, baseline=rec.baseline)
    costs = trial_costs(rec)
    return PilotComponents(tuple(comps), f"the stored run `{rec.run_id}`",
                           cost_model(costs) if len(costs) else None)


def pilot_windows(run: Run, *, splits: Sequence[int] = (1, 2, 4, 8), prefixes: Sequence[float] = (0.5, 0.25),
                  quantiles: Sequence[float] = (0.5, 0.99), conditions: Sequence[str] | None = None) -> Any:
    """One row per window of every stored trial that sent measured requests: ``condition``,
    ``arm``, ``block``, ``valid`` (status ``ok``) and :func:`window_metrics`'s columns."""
    rec = run
    out = []
    for t in rec.trials:
        if not t.ran or (conditions is not None and t.condition not in conditions):
            continue
        dur = t.load.measured_duration_s if t.load is not None else None
        dur = dur if dur is not None and math.isfinite(dur) and dur > 0 else None
        try:
            wins = window_metrics(t.rows(), splits=splits, prefixes=prefixes, duration_s=dur, quantiles=quantiles)
        except Exception as exc:
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
    rec = run
    between = rec.experiment.between_trials_s if rec.experiment is not None else 0.0
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
                  windows: pd.DataFrame | None = None, sequential: bool = True, **kwargs: Any) -> DesignPlan:
    """Plan blocks x duration for one condition of a stored run (see
    :func:`benchlib.stats.planning.design_plan.plan_design`; ``kwargs`` go there). Metrics whose
    components cannot be estimated from this pilot (too few requests per window) are left
    out and named in the plan's notes."""
    rec = run
    if windows is None:
        qs = tuple(q for q in (quantile_of(m) for m in metrics) if q is not None) or (0.5,)
        windows = pilot_windows(rec, conditions=[condition], quantiles=qs)
    wins = windows
    wins = wins[wins["condition"] == condition]
    base = baseline if baseline is not None or contrasts is not None else rec.baseline
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
            if v.effect != "ratio" or v.kind.without_figures:
                continue
            group = str(v.labels.get("condition", ""))
            stored = [(str(c.condition), c.baseline, c.arm) for c in rows or ()
                      if str(c.group) == group and c.labels == (v.baseline, v.arm)]
            cond, base, arm = stored[0] if stored else (group, v.baseline, v.arm)
            out.append((cond, group, base, arm, v.metric, int(v.family_size),
                        float(v.mde) if math.isfinite(v.mde) or v.mde == math.inf else math.inf))
    return out


def design_table(run: Run, answers: Sequence[Any], *, pilot: Run | None = None, components: PilotComponents | None = None,
                 sequential: SequentialDesign | None = None, target_mde: float = 0.05, power: float = 0.8,
                 alpha: float = 0.05, windows: Any = None,
                 variance_confidence: float | None = VARIANCE_CONFIDENCE) -> Any:
    """One row per (condition, metric) of the compared rows of ``answers``: the design the run
    used and the MDEs predicted and achieved, relative, at ``power``.

    A prediction rests on data the run did not produce: ``components`` (a
    :class:`PilotComponents`, e.g. a pilot's or :func:`components_from_run` of an earlier
    run) or ``pilot`` (a stored earlier run, other than this one). Without either, the MDE
    from this run's own components is given as ``own_mde_pct``: the same data as the
    verdicts, so it equals the achieved MDE by construction and predicts nothing.

    Columns: ``condition``, ``metric``, ``rows`` (compared rows of that metric),
    ``family_size`` (largest Holm family they belong to), ``blocks_planned``, ``blocks_run``,
    ``duration_s`` (measured seconds per trial: the load's, or for a load of a request count the
    median measured phase of the trials of ``pilot`` or the run), ``mde_source`` (where the
    components come from, in words), ``predicted_mde_pct`` (the largest over the rows, from the
    pilot's components, at this design and each row's level ``alpha / family_size``, on the
    ``variance_confidence`` upper bound of the between-trial variance as the planner plans:
    :func:`~benchlib.stats.planning.design_plan.predicted_mde`, the planner's own; NaN without a pilot),
    ``own_mde_pct`` (the same from the run's own components, on their point estimates; NaN with a
    pilot), ``achieved_mde_pct`` (the largest of the verdicts' MDEs, infinite for a row with
    too few blocks to be significant at all; median in ``achieved_mde_median_pct``),
    ``between_share_pct`` (median share of the between-trial variance), and the planner's
    choice for ``target_mde`` (on the ``variance_confidence`` upper bound of the between-trial
    variance, :func:`~benchlib.stats.planning.design_plan.plan_design`): ``chosen_blocks``,
    ``chosen_duration_s``, ``chosen_minutes``, ``chosen_mde_pct``, ``chosen_blocks_point``
    (the blocks the point estimates would need at that duration), ``minutes_now`` (the cost
    model's wall time of the run's own design). With ``sequential`` (the run's
    :class:`~benchlib.stats.sequential.SequentialDesign`) the predicted and own MDEs are the
    sequential test's over its looks, as the verdicts' are.
    """
    rec = run
    src = pilot if pilot is not None else rec
    if pilot is not None and src.run_id == rec.run_id and src.study == rec.study:
        src = rec  # the run itself given as its pilot: its own components, no prediction
    own = components is None and src is rec
    source = (components.source if components is not None else
              f"the stored run `{src.run_id}`" if not own else "this run's own trials")
    rows = _pairs(answers)
    if not rows:
        return pd.DataFrame()
    metrics = tuple(dict.fromkeys(r[4] for r in rows))
    if components is not None:
        windows = windows if windows is not None else pd.DataFrame()
    elif windows is None:
        qs = tuple(q for q in (quantile_of(m) for m in metrics) if q is not None) or (0.5,)
        windows = pilot_windows(src, quantiles=qs)
    costs = trial_costs(src if components is None else rec)
    ran = {}
    for t in rec.trials:
        if t.ran:
            ran[t.condition] = max(ran.get(t.condition, 0), int(t.block) + 1)
    planned = rec.experiment.trials if rec.experiment is not None else 0
    seconds = {c.name: c.load.duration_s for c in rec.experiment.conditions} if rec.experiment is not None else {}
    out = []
    for cond in dict.fromkeys(r[0] for r in rows):
        here = [r for r in rows if r[0] == cond]
        d_now = float(seconds.get(cond) or math.nan)
        if not math.isfinite(d_now) and len(costs):  # a request-count load: its measured seconds
            d_now = float(costs.loc[costs["condition"] == cond, "duration_s"].median())
        n_now = ran.get(cond, 0)
        w = windows[windows["condition"] == cond] if len(windows) else windows
        cm = (components.cost if components is not None and components.cost is not None else
              cost_model(costs[costs["condition"] == cond]) if len(costs) else None)
        for m in dict.fromkeys(r[4] for r in here):
            mine = [r for r in here if r[4] == m]
            fam = max(r[5] for r in mine)
            rec_row: dict[str, Any] = {
                "condition": cond, "metric": m, "rows": len(mine), "family_size": fam, "blocks_planned": planned,
                "blocks_run": n_now, "duration_s": d_now,
                "achieved_mde_pct": 100 * max(r[6] for r in mine),
                "achieved_mde_median_pct": 100 * float(np.median([r[6] for r in mine])),
                "mde_source": source, "predicted_mde_pct": math.nan, "own_mde_pct": math.nan,
                "between_share_pct": math.nan}
            pairs = list(dict.fromkeys((r[2], r[3]) for r in mine))
            comps = []
            # a metric in other units (p50_us) has the log ratios of its windows' column (p50_ms)
            wm = f"{m[:-3]}_ms" if m.endswith("_us") and len(w) and m not in w.columns else m
            if components is not None:
                comps = components.of(cond, m, pairs)
                wm = comps[0].metric if comps else m
            elif len(w) and wm in w.columns:
                comps = [c for c in pair_components(w, wm, contrasts=pairs) if math.isfinite(c.within_coef)]
            blocks_at = sequential.max_blocks if sequential is not None else n_now
            if comps and blocks_at >= 2 and math.isfinite(d_now):
                # each row at alpha / its own Holm family; a prediction on the planner's bound,
                # the run's own components on their point estimates (they equal the achieved MDE)
                fam_of = {(r[2], r[3]): max(x[5] for x in mine if (x[2], x[3]) == (r[2], r[3])) for r in mine}
                pred = [predicted_mde(c, d_now, blocks_at, power=power, sequential=sequential,
                                      row_alpha=planning_alpha(alpha, fam_of.get((c.baseline, c.arm), fam), "holm"),
                                      variance_confidence=None if own else variance_confidence)
                        for c in comps]
                rec_row["own_mde_pct" if own else "predicted_mde_pct"] = 100 * max(pred)
                shares = [c.between_share for c in comps if math.isfinite(c.between_share)]
                rec_row["between_share_pct"] = 100 * float(np.median(shares)) if shares else math.nan
                if cm is not None and cm.arms:
                    plan = plan_design(comps, cm, target_mde=target_mde, power=power, alpha=alpha, n_comparisons=fam,
                                       current=(n_now, d_now) if n_now else None,
                                       variance_confidence=variance_confidence)
                    rec_row.update(chosen_blocks=plan.chosen.blocks, chosen_duration_s=plan.chosen.duration_s,
                                   chosen_minutes=plan.chosen.minutes, chosen_mde_pct=100 * plan.chosen.mde[wm],
                                   chosen_reaches=plan.chosen.reaches,
                                   chosen_blocks_point=plan.point.blocks if plan.point is not None else math.nan,
                                   minutes_now=plan.current.minutes if plan.current else math.nan)
            out.append(rec_row)
    return pd.DataFrame.from_records(out)


def design_section(run: Run, answers: Sequence[Any], *, pilot: Run | None = None, components: PilotComponents | None = None,
                   target_mde: float = 0.05, power: float = 0.8, stopping: Any = None, windows: Any = None,
                   variance_confidence: float | None = VARIANCE_CONFIDENCE, planned: Any = None) -> str:
    """The report's "design" section (Markdown): per condition and metric, the design run,
    the MDE predicted from the variance components of a pilot or an earlier run (``pilot``: a
    stored run; ``components``: a :class:`PilotComponents`) or, without one, the MDE from
    this run's own components (labelled :data:`OWN_MDE_LABEL`), the MDE achieved, and the
    design the planner recommends for ``target_mde`` (:func:`design_table`); ``stopping``:
    the run's :class:`~benchlib.analysis.stopping.Stopping`
    (:func:`~benchlib.analysis.stopping.stopping_rule`: on or off and why, its looks, what it
    saved; its design makes the MDEs the sequential test's) or
    :class:`~benchlib.analysis.stopping.StopWhenSettled` (its looks are said); ``planned``: the
    run's :class:`~benchlib.analysis.planned.PlannedRun` (a pilot chose the design within a
    budget): its pilot's estimate, the plan and the MDE achieved against its target come first,
    and the planner's recommendation is for that target."""
    from benchlib.analysis.formats import num

    rec = run
    if planned is not None:
        # the stopping paragraph below counts the blocks per arm when stopping is on
        head = planned.markdown(answers, blocks=not getattr(stopping, "on", False))
        # the prediction rests on the components the plan was made on (the pilot's, pooled with
        # a seed's), so the table shows the MDE planned on
        if pilot is None and components is None:
            components = getattr(planned, "components", None)
            pilot = planned.pilot if components is None else None
        rest = design_section(run, answers, pilot=pilot,
                              components=components, target_mde=planned.plan.target_mde,
                              power=power, stopping=stopping, windows=windows,
                              variance_confidence=variance_confidence)
        return head + "\n\n" + rest
    design = getattr(stopping, "design", None) if stopping is not None else None
    design = design if isinstance(design, SequentialDesign) else None
    t = design_table(rec, answers, pilot=pilot, components=components, sequential=design, target_mde=target_mde,
                     power=power, windows=windows, variance_confidence=variance_confidence)
    src = str(t["mde_source"].iloc[0]) if len(t) else (
        components.source if components is not None else
        f"the stored run `{pilot.run_id}`" if pilot is not None else "this run's own trials")
    own = len(t) > 0 and t["predicted_mde_pct"].isna().all() and not t["own_mde_pct"].isna().all()
    bound = (f" on the {variance_confidence:.0%} upper confidence bound of the between-trial variance"
             if variance_confidence is not None else " on the point estimates")
    lines = [f"**Design.** Variance components (between trials vs within a trial) from {src}; MDEs at "
             f"{power:.0%} power, each row at α = 0.05 / its Holm family"
             + (f", over the sequential looks ({', '.join(map(str, design.looks))} blocks)" if design else "")
             + ("" if own else f"; the predicted MDE{bound}, as the planner predicts it")
             + f"; the planner's choice is the least wall time reaching {target_mde:.0%} on every row of the metric"
             f"{bound} (Kalibera & Jones 2013)."
             + (" The MDE from this run's own components uses the same trials as the verdicts, so it equals the "
                "achieved MDE by construction: it is no prediction (a prediction needs a pilot or an earlier run: "
                "`design_section(..., pilot=...)`)." if own else "")]
    from benchlib.analysis.interleaved import design_kind_markdown

    lines += [p for p in (design_kind_markdown(rec),) if p]  # side by side or one arm per trial, spread
    stopped = rec.record.stopped_after_blocks
    if stopping is not None and hasattr(stopping, "markdown"):
        lines.append(stopping.markdown(rec))
    elif stopping is not None:
        lines.append(f"Sequential stopping: {stopping.describe()}.")
    elif stopped is not None:
        lines.append(f"Sequential stopping: the run stopped after {stopped} blocks.")
    from benchlib.analysis.disturbed import disturbance_markdown

    lines += [p for p in (disturbance_markdown(rec, answers),) if p]  # disturbed trials, repeats, sensitivity
    if not len(t):
        return "\n\n".join([*lines, "No compared row with a relative effect: nothing to plan."])

    def pct(x: Any) -> str:
        return "–" if x is None or math.isnan(float(x)) else mde_text(float(x) / 100.0)

    head = OWN_MDE_LABEL if own else "predicted MDE"
    lines += ["", f"| condition | metric | rows (family) | blocks run / planned × measured s | {head} | "
              "achieved MDE (max, median) | between share | recommended for the target |",
              "|---|---|---|---|---|---|---|---|"]
    for r in t.to_dict("records"):
        rec_txt = "–"
        if math.isfinite(float(r.get("chosen_blocks", math.nan))):
            pt = float(r.get("chosen_blocks_point", math.nan))
            rng = (f" (point estimate: {int(pt)} blocks)" if math.isfinite(pt) and int(pt) != int(r["chosen_blocks"])
                   else "")
            rec_txt = (f"{int(r['chosen_blocks'])} × {num(r['chosen_duration_s'])} s{rng}, {r['chosen_minutes']:.1f} min, "
                       f"MDE {pct(r['chosen_mde_pct'])}" + ("" if r.get("chosen_reaches") else " (target not reached)")
                       + (f" (now {r['minutes_now']:.1f} min)" if math.isfinite(float(r.get('minutes_now', math.nan)))
                          else ""))
        mde_now = r["own_mde_pct"] if own else r["predicted_mde_pct"]
        lines.append(f"| {r['condition']} | {r['metric']} | {r['rows']} ({r['family_size']}) | {r['blocks_run']} / "
                     f"{r['blocks_planned']} × {num(r['duration_s'])} s | {pct(mde_now)} | "
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
    rec = open_run(args.run)
    metrics = tuple(args.metric or ("throughput_rps", "p50_ms", "p99_ms"))
    qs = tuple(q for q in (quantile_of(m) for m in metrics) if q is not None) or (0.5,)
    wins = pilot_windows(rec, quantiles=qs)
    for cond in args.condition or list(rec.conditions):
        base = args.baseline or rec.baseline
        print(f"## {rec.study} / {rec.run_id} / {cond}\n")
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
