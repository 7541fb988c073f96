"""The trials x duration planner: how many blocks of how many measured seconds reach a target
MDE on every row at the least wall time, or the smallest MDE within a time budget (pure).

For each measured duration ``d`` the planner finds the blocks the paired rank test needs
(:func:`benchlib.stats.power.mde_shift`, each row at ``alpha / m``) to reach the target MDE on
every row, given each row's variance components at ``d``
(:meth:`benchlib.stats.variance.PairComponents.sd`: ``between + c / d``), times the wall time
of a block (:class:`benchlib.stats.planning.cost.CostModel`: start-up, warm-up, ``d``, peer
tools, pause, per arm), and takes the cheapest. Where the between-trial variance dominates,
more and shorter trials win. It plans on an upper confidence bound of each row's between-trial
variance (80% one-sided, chi-square with the pilot's ``n_blocks - 1`` df;
:meth:`~benchlib.stats.variance.PairComponents.upper`), not on the point estimate, and says
what the point estimate would need: the range of blocks a pilot's uncertainty implies.

:func:`predicted_mde` is the one home of a predicted MDE: the planner's options, the budget
planner (:mod:`benchlib.stats.planning.budget`) and a report's design section all call it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from benchlib.core.errors import ParameterError
from benchlib.stats._checks import probability
from benchlib.stats.planning.cost import CostModel
from benchlib.stats.planning.sample_size import SequentialPlan, plan_sequential
from benchlib.stats.power import mde_shift, min_trials, planning_alpha
from benchlib.stats.quantiles import quantile_of
from benchlib.stats.sequential import SequentialDesign
from benchlib.stats.summary import MIN_TAIL_COUNT, required_requests
from benchlib.stats.variance import VARIANCE_CONFIDENCE, PairComponents

__all__ = [
    "DEFAULT_DURATIONS",
    "DesignOption",
    "DesignPlan",
    "mde_text",
    "min_blocks_text",
    "plan_design",
    "predicted_mde",
]

#: Measured durations (s) the planner considers unless told otherwise.
DEFAULT_DURATIONS: tuple[float, ...] = (0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 15.0, 20.0, 30.0, 60.0)


@dataclass(frozen=True)
class DesignOption:
    """Blocks x measured duration, with its predicted cost and MDEs.

    ``mde``: metric -> the largest MDE (relative) over the rows of that metric at ``power``,
    each row at ``alpha / m``; ``minutes``: ``blocks`` x the block's wall time;
    ``reaches``: every row's MDE is at most its target (with a budget: within the budget);
    ``extrapolated``: the duration lies outside the pilot's measured range.
    """

    duration_s: float
    blocks: int
    minutes: float
    mde: Mapping[str, float]
    reaches: bool = True
    extrapolated: bool = False


@dataclass(frozen=True)
class DesignPlan:
    """The planner's choice and what it rests on (:func:`plan_design`).

    Attributes
    ----------
    chosen:
        The cheapest option reaching every row's target (with a time budget: the option
        with the smallest MDE relative to the targets within it); when none reaches the
        targets, the cheapest option at ``max_blocks`` whose MDEs are within 10% of the
        closest to them (``chosen.reaches`` False).
    options:
        The best blocks for each duration considered (the trade-off curve).
    current:
        The design passed as ``current`` (e.g. today's defaults), evaluated the same way.
    targets:
        Metric -> target MDE (relative).
    components, cost:
        What the predictions rest on.
    sequential:
        With ``sequential=True``: the group-sequential plan at the chosen duration
        (:class:`~benchlib.stats.planning.sample_size.SequentialPlan`) for the row that needs most
        blocks.
    variance_confidence:
        The plan (``chosen``, ``options``, ``current``, ``sequential``) rests on each row's
        between-trial variance at this one-sided upper confidence bound
        (:meth:`PairComponents.upper`); ``None``: on the point estimates.
    point:
        With a bound: the chosen duration planned on the point estimates instead (fewer
        blocks for a target; smaller MDEs within a budget): with ``chosen`` it gives the range
        of designs the pilot's uncertainty implies. ``None`` without a bound.
    notes:
        Caveats (extrapolation beyond the pilot's durations, durations too short for a
        quantile, a target out of reach).
    """

    targets: Mapping[str, float]
    power: float
    alpha: float
    n_comparisons: int
    correction: str
    chosen: DesignOption
    options: tuple[DesignOption, ...]
    current: DesignOption | None
    components: tuple[PairComponents, ...]
    cost: CostModel
    budget_minutes: float | None = None
    sequential: SequentialPlan | None = None
    notes: tuple[str, ...] = ()
    variance_confidence: float | None = None
    point: DesignOption | None = None

    def basis(self) -> str:
        """What the plan rests on, in words (for reports)."""
        if self.variance_confidence is None:
            return "the point estimates of the variance components"
        df = sorted({c.n_blocks - 1 for c in self.components})
        dfs = f"{df[0]}" if len(df) == 1 else f"{df[0]}-{df[-1]}"
        return (f"the {self.variance_confidence:.0%} upper confidence bound of each row's between-trial variance "
                f"(chi-square, {dfs} df)")

    def blocks_range(self) -> str:
        """The blocks the pilot's uncertainty implies at the chosen duration: ``"8-12 blocks"``
        (point estimate to upper bound), or the chosen blocks alone."""
        c = self.chosen
        if self.point is None or self.point.blocks == c.blocks or self.budget_minutes is not None:
            return f"{c.blocks} blocks"
        return f"{min(self.point.blocks, c.blocks)}-{max(self.point.blocks, c.blocks)} blocks"

    def table(self) -> pd.DataFrame:
        """One row per duration (and the current design): blocks, minutes, MDE per metric."""
        recs = []
        for tag, opts in (("option", self.options), ("current", (self.current,) if self.current else ())):
            for o in opts:
                rec: dict[str, Any] = {"design": "chosen" if o == self.chosen and tag == "option" else tag,
                                       "duration_s": o.duration_s, "blocks": o.blocks, "minutes": o.minutes,
                                       "reaches": o.reaches}
                rec.update({f"mde_{m}_pct": 100 * v for m, v in o.mde.items()})
                recs.append(rec)
        return pd.DataFrame.from_records(recs)

    def _goal(self) -> str:
        tg = sorted(set(self.targets.values()))
        words = (f"{100 * tg[0]:g}%" if len(tg) == 1 else
                 ", ".join(f"{m} {100 * v:g}%" for m, v in self.targets.items()))
        if self.budget_minutes is not None:
            return f"smallest MDE within {self.budget_minutes:g} min (targets {words})"
        return f"target MDE {words}"

    def to_markdown(self) -> str:
        """The chosen design, the alternatives and the components, for a report."""
        c = self.chosen
        mdes = ", ".join(f"{m} {mde_text(v)}" for m, v in c.mde.items())
        lines = [
            f"**Design**: {c.blocks} blocks × {c.duration_s:g} s measured per trial, about {c.minutes:.1f} min; "
            f"predicted MDE at {self.power:.0%} power, each of {self.n_comparisons} rows at α = "
            f"{self.alpha:g}/{self.n_comparisons}: {mdes} ({self._goal()}"
            + ("" if c.reaches else "; not reached") + f"). Planned on {self.basis()}.",
        ]
        if self.point is not None:
            p = self.point
            pm = ", ".join(f"{m} {mde_text(v)}" for m, v in p.mde.items())
            lines.append(f"On the point estimates the same duration would need {p.blocks} blocks "
                         f"(about {p.minutes:.1f} min; MDE {pm}): the pilot's uncertainty spans "
                         f"{self.blocks_range()}." if self.budget_minutes is None else
                         f"On the point estimates the same design would reach MDE {pm}.")
        if self.current is not None:
            cur = self.current
            lines.append(f"Current design {cur.blocks} blocks × {cur.duration_s:g} s: about {cur.minutes:.1f} min, "
                         "predicted MDE " + ", ".join(f"{m} {mde_text(v)}" for m, v in cur.mde.items()) + ".")
        if self.sequential is not None:
            sp = self.sequential
            per_block = c.minutes / c.blocks if c.blocks else math.nan
            e2 = sp.expected_blocks[2 * sp.target_mde]
            lines.append(f"Group-sequential alternative: up to {sp.design.max_blocks} blocks "
                         f"(looks at {', '.join(map(str, sp.design.looks))}), at most "
                         f"{sp.design.max_blocks * per_block:.1f} min; expected {e2:.1f} blocks ({e2 * per_block:.1f} min) "
                         "when the true change is twice the target.")
        lines += ["", "| measured s | blocks | minutes | " + " | ".join(f"MDE {m}" for m in c.mde) + " |",
                  "|---|---|---|" + "---|" * len(c.mde)]
        for o in self.options:
            tags = [t for t, on in (("**chosen**", o == c), ("extrapolated", o.extrapolated),
                                    ("target not reached", not o.reaches)) if on]
            lines.append(f"| {o.duration_s:g}{' (' + ', '.join(tags) + ')' if tags else ''} | {o.blocks} | "
                         f"{o.minutes:.1f} | " + " | ".join(mde_text(o.mde[m]) for m in c.mde) + " |")
        lines += ["", "| metric | arm vs baseline | blocks | SD of log ratio | between | within (at the pilot's d) | "
                  "between share | between SD, 95% CI |", "|---|---|---|---|---|---|---|---|"]
        for pc in self.components:
            lo, hi = pc.between_ci
            lines.append(f"| {pc.metric} | {pc.arm} vs {pc.baseline} | {pc.n_blocks} | "
                         f"{100 * math.sqrt(pc.total_var):.1f}% | "
                         f"{100 * math.sqrt(pc.between_var):.1f}% | {100 * math.sqrt(pc.within_var):.1f}% "
                         f"({pc.duration_s:g} s) | {100 * pc.between_share:.0f}% | [{100 * math.sqrt(lo):.1f}%, "
                         f"{100 * math.sqrt(hi):.1f}%] |")
        if self.notes:
            lines += [""] + [f"* {n}" for n in self.notes]
        return "\n".join(lines)


def mde_text(x: float) -> str:
    """A relative MDE in percent; "∞ (too few blocks)" when the design can never be significant."""
    return "∞ (too few blocks)" if math.isinf(x) else f"{100 * x:.1f}%"


def predicted_mde(c: PairComponents, duration_s: float, blocks: int, *, row_alpha: float, power: float = 0.8,
                  sequential: SequentialDesign | None = None,
                  variance_confidence: float | None = VARIANCE_CONFIDENCE) -> float:
    """The relative MDE (0.05 = 5%) one row with components ``c`` is predicted to reach at
    ``blocks`` x ``duration_s`` measured seconds, at ``power`` and row level ``row_alpha``
    (``alpha / its Holm family``): the exact paired signed-rank test's on ``blocks`` blocks,
    or with ``sequential`` the group-sequential test's over its looks (its ``max_blocks``;
    what a sequential run's verdicts use), for the SD of the log ratio :meth:`PairComponents.sd`
    at ``duration_s``, with the between-trial variance at its ``variance_confidence``
    one-sided upper bound (:meth:`PairComponents.upper`; ``None``: the point estimate).

    The one home of a predicted MDE: the planner's options (:func:`plan_design`, hence
    :func:`~benchlib.stats.planning.budget.plan_within_budget`) and a report's design section
    (:func:`benchlib.analysis.pilot.design_table`) both call it, so the design section shows
    the MDE the plan was made on. ``inf``: the design can never be significant; NaN: no spread."""
    cc = c.upper(variance_confidence) if variance_confidence is not None else c
    sd = cc.sd(duration_s)
    if not (math.isfinite(sd) and sd >= 0):
        return math.nan
    if sequential is None:
        return math.expm1(mde_shift(blocks, sd, alpha=row_alpha, power=power, paired=True, method="rank"))
    units = math.log1p(sequential.mde(1.0, alpha=row_alpha, power=power))  # shift in SDs of the log ratio
    return math.expm1(units * sd) if math.isfinite(units) else math.inf


def _blocks_for(shift: float, sigma: float, row_alpha: float, power: float, floor: int, cap: int) -> int | None:
    """Fewest blocks whose paired rank MDE (log shift) at ``row_alpha`` is at most ``shift``."""
    for n in range(floor, cap + 1):
        if mde_shift(n, sigma, alpha=row_alpha, power=power, paired=True, method="rank") <= shift:
            return n
    return None


def plan_design(
    components: Sequence[PairComponents],
    cost: CostModel,
    *,
    target_mde: float | Mapping[str, float] = 0.05,
    budget_minutes: float | None = None,
    power: float = 0.8,
    alpha: float = 0.05,
    n_comparisons: int | None = None,
    correction: str = "holm",
    durations: Sequence[float] = DEFAULT_DURATIONS,
    min_duration_s: float = 0.0,
    current: tuple[int, float] | None = None,
    arms: Sequence[str] | None = None,
    sequential: bool = False,
    max_blocks: int = 200,
    variance_confidence: float | None = VARIANCE_CONFIDENCE,
    looks: Callable[[int], SequentialDesign | None] | None = None,
    families: Mapping[tuple[str, str, str, str], int] | None = None,
) -> DesignPlan:
    """Choose blocks x measured duration: the least wall time reaching ``target_mde`` on
    every row, or (with ``budget_minutes``) the smallest MDE within that time.

    Parameters
    ----------
    components:
        One :class:`PairComponents` per row of the question (metric x arm vs baseline),
        from a pilot (:func:`pair_components`).
    cost:
        The wall time of a block (:func:`cost_model`); ``arms`` restricts it to the arms the
        question runs (default: the arms of ``components``).
    target_mde:
        Relative MDE to reach on every row (0.05 = 5%), or one per metric
        (``{"p50_ms": 0.05, "p99_ms": 0.2}``).
    budget_minutes:
        Instead of the least time for the target: the design whose worst MDE relative to
        its metric's target is smallest within this wall time.
    power, alpha, n_comparisons, correction:
        MDEs at ``power``, each row at ``alpha / m`` with ``m = n_comparisons`` (default: the
        number of ``components``).
    durations, min_duration_s:
        Measured durations (s) to consider, and a floor (e.g. what steady state needs); a
        duration too short for a quantile metric (fewer than 50 requests beyond it at the
        slower arm's rate) is left out.
    current:
        ``(blocks, duration_s)`` of today's design, evaluated for comparison.
    sequential:
        Also plan a group-sequential design at the chosen duration.
    max_blocks:
        The most blocks considered.
    variance_confidence:
        Plan on each row's between-trial variance at this one-sided upper confidence bound
        (:meth:`PairComponents.upper`, default 80%): a pilot's point estimate is as likely
        too small as too large, and a plan on it reaches its power in about half of the
        runs. ``None``: plan on the point estimates. With a bound, ``DesignPlan.point`` holds
        the plan on the point estimates at the chosen duration (the range of blocks).
    looks:
        The analysis the run will get: blocks -> its
        :class:`~benchlib.stats.sequential.SequentialDesign` (``None``: the fixed test), e.g.
        :func:`benchlib.analysis.stopping.analysis_design`. A sequential run's verdicts have the
        sequential test's MDE over its looks, larger than the fixed test's at the same blocks:
        the MDEs (and the blocks a target needs) are then that test's. Default: the fixed test.
    families:
        Each row's Holm family size, by :attr:`PairComponents.row`: its MDE at ``alpha / its
        family`` (a row not in it at ``alpha / n_comparisons``).

    Every MDE is :func:`predicted_mde`'s.
    """
    probability("power", power)
    probability("alpha", alpha)
    if variance_confidence is not None:
        probability("variance_confidence", variance_confidence)
    comps = tuple(components)
    if not comps:
        raise ParameterError("plan_design() needs at least one PairComponents (a pilot with 3+ complete blocks)")
    metrics = list(dict.fromkeys(c.metric for c in comps))
    if isinstance(target_mde, Mapping):
        missing = [m for m in metrics if m not in target_mde]
        if missing:
            raise ParameterError(f"target_mde has no target for {missing}; give one per metric or one number")
        targets = {m: float(target_mde[m]) for m in metrics}
    else:
        targets = {m: float(target_mde) for m in metrics}
    for metric, t in targets.items():
        if not (np.isfinite(t) and t > 0):
            raise ParameterError(f"target_mde of {metric} must be a positive relative change (0.05 = 5%), got {t!r}")
    if budget_minutes is not None and not (np.isfinite(budget_minutes) and budget_minutes > 0):
        raise ParameterError(f"budget_minutes must be a positive number of minutes, got {budget_minutes!r}")
    bad = [f"{c.metric} {c.arm} vs {c.baseline}" for c in comps if not np.isfinite(c.within_coef)]
    if bad:
        raise ParameterError(f"no within-trial variance for {bad}: the pilot's windows are too short for that metric")
    m = len(comps) if n_comparisons is None else int(n_comparisons)
    row_alpha = planning_alpha(alpha, m, correction)
    fam: dict[tuple[str, str, str, str], int] = dict(families or {})
    floor = min_trials(alpha=alpha, n_comparisons=max([m, *fam.values()]) if fam else m, correction=correction,
                       paired=True)

    def alpha_of(c: PairComponents) -> float:
        return planning_alpha(alpha, int(fam[c.row]), correction) if c.row in fam else row_alpha

    designs: dict[int, SequentialDesign | None] = {}

    def design_at(n: int) -> SequentialDesign | None:
        if looks is None:
            return None
        if n not in designs:
            designs[n] = looks(int(n))
        return designs[n]

    def mde_at(c: PairComponents, d: float, n: int) -> float:
        return predicted_mde(c, d, n, row_alpha=alpha_of(c), power=power, sequential=design_at(n),
                             variance_confidence=None)

    def blocks_for(c: PairComponents, d: float) -> int | None:
        target = math.log1p(targets[c.metric])
        n = _blocks_for(target, c.sd(d), alpha_of(c), power, floor, max_blocks)
        if n is None or looks is None:
            return n
        # the sequential test needs at least the fixed test's blocks: more, by the price of its looks
        while n <= max_blocks:
            if mde_at(c, d, n) <= targets[c.metric] + 1e-12:
                return n
            n += 1
        return None
    use_arms = list(arms) if arms is not None else list(dict.fromkeys(a for c in comps for a in (c.baseline, c.arm)))
    d_lo = min(c.duration_s for c in comps) * min((f for c in comps for f in c.prefix_check), default=1.0)
    d_hi = max(c.duration_s for c in comps)
    notes: list[str] = []

    def shortest(c: PairComponents) -> float:
        q = quantile_of(c.metric)
        return required_requests(q) / c.rate_rps if q is not None and c.rate_rps > 0 else 0.0

    plan_comps = tuple(c.upper(variance_confidence) for c in comps) if variance_confidence is not None else comps

    def evaluate(d: float, n: int, reaches: bool, cs: Sequence[PairComponents] = plan_comps) -> DesignOption:
        worst: dict[str, float] = {}
        for c in cs:
            worst[c.metric] = max(worst.get(c.metric, 0.0), mde_at(c, d, n))
        return DesignOption(float(d), int(n), n * cost.block_seconds(d, use_arms) / 60.0,
                            {k: worst[k] for k in metrics}, reaches, not (d_lo - 1e-9 <= d <= d_hi + 1e-9))

    def for_target(d: float, cs: Sequence[PairComponents] = plan_comps) -> DesignOption:
        need = [blocks_for(c, d) for c in cs]
        if any(x is None for x in need):
            return evaluate(d, max_blocks, False, cs)
        return evaluate(d, max(x for x in need if x is not None), True, cs)

    def for_budget(d: float, cs: Sequence[PairComponents] = plan_comps) -> DesignOption:
        assert budget_minutes is not None
        n = min(max_blocks, int(budget_minutes * 60.0 // cost.block_seconds(d, use_arms)))
        if n < floor:
            return evaluate(d, floor, False, cs)
        return evaluate(d, n, True, cs)

    def badness(o: DesignOption) -> float:
        return max(o.mde[k] / targets[k] for k in metrics)

    short = max(shortest(c) for c in comps)
    ds = [float(d) for d in durations if d >= max(min_duration_s, short) - 1e-12]
    if not ds:
        raise ParameterError(f"every duration in {list(durations)} is below the shortest usable one "
                             f"({max(min_duration_s, short):.3g} s)")
    if len(ds) < len(durations) and short > min_duration_s:
        notes.append(f"durations below {short:.2g} s left out: the slower arm's rate gives fewer than "
                     f"{MIN_TAIL_COUNT} requests beyond the highest quantile")
    opts = [for_budget(d) if budget_minutes is not None else for_target(d) for d in ds]
    ok = [o for o in opts if o.reaches]
    if budget_minutes is not None:
        chosen = min(ok, key=badness) if ok else min(opts, key=lambda o: o.minutes)
        if not ok:
            notes.append(f"no duration fits the {min_blocks_text(floor)} the test needs into {budget_minutes:g} min")
    elif ok:
        chosen = min(ok, key=lambda o: (o.minutes, -o.duration_s))
    else:
        best = min(badness(o) for o in opts)
        chosen = min((o for o in opts if badness(o) <= 1.1 * best), key=lambda o: o.minutes)
        notes.append(f"no duration reaches the target within {max_blocks} blocks; shown: the MDEs at {max_blocks} "
                     "blocks, and chosen the cheapest duration within 10% of the best of them")
    if chosen.extrapolated:
        notes.append(f"the chosen {chosen.duration_s:g} s lies outside the pilot's measured range "
                     f"({d_lo:g}-{d_hi:g} s): the within-trial model c/d is extrapolated there")
    cur = evaluate(float(current[1]), int(current[0]), True) if current is not None else None
    if cur is not None:
        cur = DesignOption(cur.duration_s, cur.blocks, cur.minutes, cur.mde,
                           all(cur.mde[k] <= targets[k] + 1e-12 for k in metrics), cur.extrapolated)
    seq = None
    if sequential and chosen.reaches and budget_minutes is None:
        worst = max(plan_comps, key=lambda c: c.sd(chosen.duration_s) / math.log1p(targets[c.metric]))
        try:
            seq = plan_sequential(worst.sd(chosen.duration_s), target_mde=targets[worst.metric], power=power,
                                  alpha=alpha, n_comparisons=m, correction=correction,
                                  max_blocks=min(60, max(max_blocks, chosen.blocks)))
        except ParameterError as exc:
            notes.append(f"no group-sequential plan: {exc}")
    point = None
    if variance_confidence is not None:
        point = (for_budget(chosen.duration_s, comps) if budget_minutes is not None
                 else for_target(chosen.duration_s, comps))
    return DesignPlan(targets, float(power), float(alpha), m, correction, chosen, tuple(opts), cur, comps, cost,
                      budget_minutes, seq, tuple(notes), variance_confidence, point)


def min_blocks_text(floor: int) -> str:
    """``"6 blocks"``: the smallest design the exact test can decide with."""
    return f"{floor} blocks"
