"""Planning a study within a time budget from its pilot (pure).

A study starts with a pilot (at least :data:`MIN_PILOT_BLOCKS` blocks, counted in its budget
and kept out of its analysis) that estimates the variance components where it runs
(:mod:`benchlib.stats.variance`). From them :func:`plan_within_budget` chooses the measured
seconds per trial, the warm-up and the blocks:

* **blocks x duration**: the least wall time reaching ``target_mde`` on every row
  (:func:`~benchlib.stats.planning.design_plan.plan_design`, on the 80% upper confidence bound of the
  between-trial variance); when that does not fit into what the pilot left of the budget, the
  design with the smallest MDE that does (the plan then says the target is not reached, and
  the sequential analysis's futility rule, ``SequentialDesign(target_mde=...)``, names the
  rows that stay out of reach);
* **shortest trial** (:func:`request_floor`): a trial at least as long as the slowest arm
  needs, at the pilot's request rate, to collect the requests every quantile metric of the
  questions needs (``50 / (1 - q)``: 5,000 for p99) with a safety factor
  :data:`REQUEST_SAFETY`; a shorter trial would leave the metric out;
* **warm-up** (:func:`warmup_check`): the pilot's, lengthened when the first quarter of the
  pilot's measured phase differs in level from the rest by more than half the target (the
  service was not yet in steady state when measurement began);
* stored components of an earlier run on the same machine may seed the pilot's
  (:func:`benchlib.stats.variance.pool_components`: degrees of freedom add up, the upper bound
  narrows).

:class:`BudgetPlan` is the result, with its Markdown for the report's design section.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from benchlib.core.errors import ParameterError
from benchlib.stats.planning.cost import CostModel
from benchlib.stats.planning.design_plan import DEFAULT_DURATIONS, DesignPlan, mde_text, plan_design
from benchlib.stats.quantiles import quantile_of
from benchlib.stats.sequential import SequentialDesign
from benchlib.stats.summary import required_requests
from benchlib.stats.variance import VARIANCE_CONFIDENCE, PairComponents

__all__ = ["MIN_PILOT_BLOCKS", "REQUEST_SAFETY", "BudgetPlan", "LengthFloor", "WarmupCheck", "plan_within_budget",
           "request_floor", "warmup_check"]

#: The fewest pilot blocks: 2 df for the between-trial variance of each row.
MIN_PILOT_BLOCKS = 3
#: A planned trial's expected successful requests (the slowest arm's pilot rate x measured
#: seconds) are at least this many times what its highest quantile metric needs: the rate
#: varies from trial to trial, and a trial just at the minimum would leave the metric out of
#: about half of the trials.
REQUEST_SAFETY = 1.2


@dataclass(frozen=True)
class LengthFloor:
    """The shortest measured phase the questions' metrics allow (:func:`request_floor`).

    ``metric``: the metric that sets it (the highest quantile); ``requests``: the successful
    requests it needs per trial (``50 / (1 - q)``); ``arm`` and ``rate_rps``: the slowest
    arm and its successful requests per measured second in the pilot; ``safety``: the factor
    applied; ``duration_s``: ``safety * requests / rate_rps`` (seconds)."""

    metric: str
    requests: int
    arm: str
    rate_rps: float
    safety: float
    duration_s: float

    def text(self) -> str:
        """In words, for the plan's notes."""
        return (f"{self.metric} needs {self.requests:,} successful requests per trial and the slowest arm "
                f"({self.arm}) served {self.rate_rps:,.0f} req/s in the pilot: trials of at least "
                f"{self.duration_s:.3g} s ({self.safety:g}x that count)")


def request_floor(metrics: Sequence[str], rates: Mapping[str, float], *,
                  safety: float = REQUEST_SAFETY) -> LengthFloor | None:
    """The shortest measured phase (s) at which every quantile metric in ``metrics`` is
    expected to be reported in every arm: ``safety`` times its required successful requests
    (:func:`~benchlib.stats.summary.required_requests`) at the slowest arm's rate. ``rates``:
    arm -> successful requests per measured second (the pilot's median). ``None`` when no
    metric is a quantile or no rate is known.

    Raises
    ------
    ParameterError
        A ``safety`` below 1, or an arm whose rate is not a positive number.
    """
    if isinstance(safety, bool) or not isinstance(safety, (int, float)) or not (math.isfinite(safety) and safety >= 1):
        raise ParameterError(f"safety must be a number of at least 1, got {safety!r}")
    bad = {a: r for a, r in rates.items() if not (isinstance(r, (int, float)) and math.isfinite(r) and r > 0)}
    if bad:
        raise ParameterError(f"request rates must be positive numbers (requests per second), got {bad}")
    qs = {m: q for m in dict.fromkeys(metrics) if (q := quantile_of(m)) is not None}
    if not qs or not rates:
        return None
    metric = max(qs, key=lambda m: qs[m])
    arm = min(rates, key=lambda a: rates[a])
    need = required_requests(qs[metric])
    return LengthFloor(metric, need, str(arm), float(rates[arm]), float(safety), float(safety) * need / float(rates[arm]))


@dataclass(frozen=True)
class WarmupCheck:
    """Whether the pilot's trials were in steady state when measurement began.

    ``shifts``: arm -> median over its pilot trials of ``|log(first quarter / rest)|`` of the
    metric (p50 latency and throughput, the larger); ``tolerance``: the largest shift
    allowed (half the target MDE, on the log scale); ``warmup_s``: the warm-up to use (the
    pilot's, plus a quarter of the pilot's measured seconds when an arm shifted more);
    ``why``: in words."""

    shifts: Mapping[str, float]
    tolerance: float
    pilot_warmup_s: float
    warmup_s: float
    why: str


def warmup_check(windows: pd.DataFrame, *, pilot_warmup_s: float, pilot_duration_s: float,
                 target_mde: float, metrics: Sequence[str] = ("p50_ms", "throughput_rps")) -> WarmupCheck:
    """The warm-up for the planned trials from the pilot's windows
    (:func:`benchlib.analysis.pilot.pilot_windows`: ``arm``, ``block``, ``valid``, ``kind``,
    ``k``, ``j`` and the metric columns): see :class:`WarmupCheck`."""
    tol = math.log1p(target_mde) / 2.0
    shifts: dict[str, float] = {}
    if len(windows) and {"kind", "k", "j", "arm", "block"} <= set(windows.columns):
        w = windows[(windows["kind"] == "split") & (windows["k"] == 4)]
        if "valid" in w.columns:
            w = w[w["valid"].astype(bool)]
        keys = [c for c in ("condition", "arm", "block") if c in w.columns]
        for arm, g in w.groupby("arm", sort=False):
            per = []
            for _, t in g.groupby([k for k in keys if k != "arm"], sort=False):
                for m in metrics:
                    if m not in t.columns:
                        continue
                    first = t.loc[t["j"] == 0, m].to_numpy(dtype=float)
                    rest = t.loc[t["j"] > 0, m].to_numpy(dtype=float)
                    rest = rest[np.isfinite(rest) & (rest > 0)]
                    if first.size and np.isfinite(first[0]) and first[0] > 0 and rest.size:
                        per.append((m, abs(math.log(first[0] / float(np.median(rest))))))
            if per:
                shifts[str(arm)] = max(float(np.median([s for mm, s in per if mm == m]))
                                       for m in dict.fromkeys(mm for mm, _ in per))
    bad = {a: s for a, s in shifts.items() if s > tol}
    if bad:
        add = pilot_duration_s / 4.0
        worst = max(bad, key=lambda a: bad[a])
        why = (f"the first quarter of the pilot's measured phase differed from the rest by "
               f"{100 * math.expm1(bad[worst]):.1f}% ({worst}; allowed {100 * math.expm1(tol):.1f}%, half the "
               f"target): warm-up lengthened by {add:.3g} s to {pilot_warmup_s + add:.3g} s")
        return WarmupCheck(shifts, tol, pilot_warmup_s, pilot_warmup_s + add, why)
    why = (f"the pilot's first quarter of each trial was within {100 * math.expm1(tol):.1f}% of the rest "
           f"(half the target): warm-up kept at {pilot_warmup_s:.3g} s" if shifts else
           f"no windows to check steady state: warm-up kept at {pilot_warmup_s:.3g} s")
    return WarmupCheck(shifts, tol, pilot_warmup_s, pilot_warmup_s, why)


@dataclass(frozen=True)
class BudgetPlan:
    """The design a pilot chose within a time budget (:func:`plan_within_budget`).

    Attributes
    ----------
    budget_min, target_mde:
        The budget (minutes, pilot included) and the target MDE (relative, 0.05 = 5%).
    pilot_blocks, pilot_minutes:
        The pilot's blocks and the wall time they took (counted in the budget).
    source:
        Where the components come from, in words (the pilot's blocks, and any seed).
    trials, duration_s, warmup_s:
        The chosen design: blocks, measured seconds per trial, warm-up seconds.
    minutes:
        The chosen design's predicted wall time (without the pilot).
    mde:
        Metric -> the largest predicted MDE (relative) over its rows at the chosen design, on
        the 80% upper bound of the between-trial variance, each row at alpha / its Holm family,
        for the test the run's analysis uses (over ``looks`` when sequential):
        :func:`~benchlib.stats.planning.design_plan.predicted_mde`, which the report's design section calls too.
    reaches:
        The target is reached on every row within the budget.
    plan:
        The planner's full answer (:class:`~benchlib.stats.planning.design_plan.DesignPlan`).
    warmup:
        The steady-state check behind ``warmup_s``.
    notes:
        Caveats in words.
    floor:
        The shortest trial the questions' quantile metrics allow (:func:`request_floor`), if
        any; no shorter trial is planned.
    looks:
        The sequential looks (block counts) the chosen design is analysed at; ``()``: the
        fixed test.
    outside_minutes:
        What the main run is expected to spend outside its trials' cycles, which the cost
        model (trial timestamps) does not see: its start (builds, services' preparation, a
        settle wait), the analysis at its looks, the report after it; given by the caller
        (:func:`plan_within_budget`'s ``outside_minutes``) and counted against the budget.
    """

    budget_min: float
    target_mde: float
    pilot_blocks: int
    pilot_minutes: float
    source: str
    trials: int
    duration_s: float
    warmup_s: float
    minutes: float
    mde: Mapping[str, float]
    reaches: bool
    plan: DesignPlan | None
    warmup: WarmupCheck | None
    notes: tuple[str, ...] = ()
    floor: LengthFloor | None = None
    looks: tuple[int, ...] = ()
    outside_minutes: float = 0.0

    @property
    def total_minutes(self) -> float:
        """What the plan will take in all (minutes): the pilot, the main run's trials (the cost
        model) and what the cost model does not see (``outside_minutes``)."""
        return self.pilot_minutes + self.minutes + self.outside_minutes

    def forecast(self) -> str:
        """One line, for before the main run starts: what the plan will take against the budget."""
        outside = (f" + {self.outside_minutes:.1f} min outside the trials (start, looks, report)"
                   if self.outside_minutes > 0 else " (the time outside the trials not counted)")
        over = self.total_minutes - self.budget_min
        verdict = (f"{over:.1f} min over the {self.budget_min:g} min budget" if over > 0.05 else
                   f"within the {self.budget_min:g} min budget")
        return (f"The plan will take about {self.total_minutes:.1f} min: the pilot {self.pilot_minutes:.1f} min + "
                f"{self.trials} blocks of {self.duration_s:.3g} s trials, {self.minutes:.1f} min{outside}; {verdict}.")

    @property
    def worst_mde(self) -> float:
        """The largest predicted MDE over every row (relative)."""
        return max(self.mde.values(), default=math.nan)

    def to_dict(self) -> dict[str, Any]:
        """Plain fields (for run.json and the report)."""
        return {"budget_min": self.budget_min, "target_mde": self.target_mde, "pilot_blocks": self.pilot_blocks,
                "pilot_minutes": self.pilot_minutes, "source": self.source, "trials": self.trials,
                "duration_s": self.duration_s, "warmup_s": self.warmup_s, "minutes": self.minutes,
                "mde": dict(self.mde), "reaches": self.reaches, "notes": list(self.notes),
                "min_duration_s": self.floor.duration_s if self.floor is not None else 0.0,
                "min_duration_metric": self.floor.metric if self.floor is not None else "",
                "warmup_why": self.warmup.why if self.warmup is not None else "", "looks": list(self.looks),
                "outside_minutes": self.outside_minutes}

    def markdown(self, achieved: Mapping[str, float] | None = None) -> str:
        """The design section's paragraph: the pilot's estimate, the plan chosen, and (given
        ``achieved``: metric -> the largest achieved MDE of the run's verdicts, relative) the
        MDE achieved against the target."""
        lines = [f"**Pilot and plan** (budget {self.budget_min:g} min, target MDE {mde_text(self.target_mde)}): "
                 f"the pilot ran {self.pilot_blocks} blocks in {self.pilot_minutes:.1f} min (counted in the budget, "
                 f"kept out of the analysis); components from {self.source}."]
        if self.plan is not None:
            lines.append("")
            lines.append("| metric | rows | between share (pilot) | SD of the log ratio at the chosen length |")
            lines.append("|---|---|---|---|")
            for m in dict.fromkeys(c.metric for c in self.plan.components):
                cs = [c for c in self.plan.components if c.metric == m]
                share = float(np.nanmedian([c.between_share for c in cs])) if cs else math.nan
                sd = max(c.sd(self.duration_s) for c in cs)
                lines.append(f"| {m} | {len(cs)} | {100 * share:.0f}% | {100 * sd:.1f}% |")
            lines.append("")
        mdes = ", ".join(f"{m} {mde_text(v)}" for m, v in self.mde.items())
        lines.append(f"Plan chosen: **{self.trials} blocks × {self.duration_s:.3g} s measured after {self.warmup_s:.3g} s "
                     f"of warm-up**, about {self.minutes:.1f} min; predicted MDE (80% upper bound of the "
                     f"between-trial variance, "
                     + (f"the sequential test over its looks at {', '.join(map(str, self.looks))} blocks"
                        if self.looks else "the fixed test") + f") {mdes}: "
                     + ("the target is reached on every row." if self.reaches else
                        "**the target is not reached within the budget**: the rows out of reach stop as "
                        "\"not decidable within the budget\"."))
        lines.append(self.forecast())
        if self.warmup is not None:
            lines.append(f"Warm-up: {self.warmup.why}.")
        if achieved:
            got = ", ".join(f"{m} {mde_text(v)}" + (" ≤" if v <= self.target_mde + 1e-12 else " >")
                            + f" target {mde_text(self.target_mde)}" for m, v in achieved.items())
            lines.append(f"MDE achieved (largest over each metric's rows): {got}.")
        lines += [f"Note: {n}" for n in self.notes]
        return "\n".join(lines)


def plan_within_budget(
    components: Sequence[PairComponents],
    cost: CostModel,
    *,
    budget_min: float,
    target_mde: float,
    pilot_minutes: float,
    pilot_blocks: int,
    source: str,
    warmup: WarmupCheck | None = None,
    n_comparisons: int | None = None,
    durations: Sequence[float] = DEFAULT_DURATIONS,
    min_duration_s: float = 0.0,
    alpha: float = 0.05,
    power: float = 0.8,
    max_blocks: int = 60,
    variance_confidence: float = VARIANCE_CONFIDENCE,
    metrics: Sequence[str] = (),
    rates: Mapping[str, float] | None = None,
    request_safety: float = REQUEST_SAFETY,
    looks: Callable[[int], SequentialDesign | None] | None = None,
    families: Mapping[tuple[str, str, str, str], int] | None = None,
    outside_minutes: float = 0.0,
) -> BudgetPlan:
    """Choose blocks, measured seconds and warm-up for ``target_mde`` (relative) within what
    the pilot left of ``budget_min`` minutes.

    The least wall time reaching the target (:func:`~benchlib.stats.planning.design_plan.plan_design`, on
    the ``variance_confidence`` upper bound of the between-trial variance); if that exceeds
    ``budget_min - pilot_minutes``, the design with the smallest MDE relative to the target
    within it (``reaches`` False). ``warmup`` (:func:`warmup_check`) sets the warm-up, which
    enters the cost of a trial. A block costs every trial of ``cost`` (name its arms
    ``condition/arm`` when the study has several conditions).

    No trial is shorter than :func:`request_floor` of ``metrics`` (the questions' metrics,
    with those of ``components``: a metric the pilot could not estimate still needs its
    requests) at ``rates`` (arm -> successful requests per measured second in the pilot;
    default: each component's ``rate_rps``) times ``request_safety``: durations below it are
    left out, and when none is left the floor itself is the length. The notes say which
    metric set the floor, and when the budget cannot afford the target at that length.

    ``looks`` (blocks -> the run's :class:`~benchlib.stats.sequential.SequentialDesign`, or
    ``None`` for the fixed test) and ``families`` (each row's Holm family size, by
    :attr:`~benchlib.stats.variance.PairComponents.row`) make the MDEs those of the analysis
    the run will get (:func:`~benchlib.stats.planning.design_plan.plan_design`).

    ``outside_minutes``: what the main run will spend outside its trials' cycles (its start,
    the analysis at its looks, the report), which the cost model does not see; counted against
    the budget with ``pilot_minutes`` (which should be all the study has spent so far: the pilot's
    start and the planning too), so that the plan keeps the budget (:meth:`BudgetPlan.forecast`).

    Raises
    ------
    ParameterError
        A budget or target that is not a positive number, fewer than
        :data:`MIN_PILOT_BLOCKS` pilot blocks, no components, or a pilot that used up the
        budget, or a ``request_safety`` below 1.
    """
    for name, v in (("budget_min", budget_min), ("target_mde", target_mde)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
            raise ParameterError(f"{name} must be a positive number, got {v!r}")
    if int(pilot_blocks) < MIN_PILOT_BLOCKS:
        raise ParameterError(f"a pilot needs at least {MIN_PILOT_BLOCKS} blocks, got {pilot_blocks!r}")
    comps = tuple(c for c in components if math.isfinite(c.within_coef) and c.n_blocks >= 2)
    if not comps:
        raise ParameterError("the pilot gave no variance components (no complete valid blocks with windows); "
                             "valid: a pilot of at least 3 blocks whose trials ran")
    if isinstance(outside_minutes, bool) or not (math.isfinite(outside_minutes) and outside_minutes >= 0):
        raise ParameterError(f"outside_minutes must be a number of minutes of at least 0, got {outside_minutes!r}")
    left = float(budget_min) - float(pilot_minutes) - float(outside_minutes)
    if left <= 0:
        raise ParameterError(f"the pilot took {pilot_minutes:.1f} min of the {budget_min:g} min budget"
                             + (f" and {outside_minutes:.1f} min are expected outside the main run's trials"
                                if outside_minutes else "") + ": nothing left to plan; valid: a larger budget_min")
    warm = warmup.warmup_s if warmup is not None else None
    # a trial costs at least its warm-up and measured phase: a fixed cost below 0 (timestamps of
    # one-second resolution over short trials) is taken as 0
    cost = CostModel(tuple(replace(a, fixed_s=max(0.0, a.fixed_s), warmup_s=warm if warm is not None else a.warmup_s)
                           for a in cost.arms))
    if not cost.arms:
        raise ParameterError("the pilot's trials have no timestamps to cost a block from")
    notes: list[str] = []
    if rates is None:
        rates = {}
        for c in comps:
            if math.isfinite(c.rate_rps) and c.rate_rps > 0:
                rates[c.arm] = min(rates.get(c.arm, math.inf), c.rate_rps)
    floor = request_floor(list(metrics) + [c.metric for c in comps], rates, safety=request_safety)
    grid = tuple(float(d) for d in durations)
    binding = False  # the floor removed durations the planner would otherwise consider
    if floor is not None and floor.duration_s > min_duration_s:
        kept = tuple(d for d in grid if d >= floor.duration_s - 1e-9)
        if len(kept) < len(grid):
            # the shortest usable length, rounded up to a tenth of a second, when the grid has none
            kept = kept or (math.ceil(floor.duration_s * 10.0 - 1e-9) / 10.0,)
            binding = True
            notes.append(f"durations below {floor.duration_s:.3g} s left out: {floor.text()}")
        grid = kept
        min_duration_s = max(min_duration_s, min(grid))
    kw: dict[str, Any] = dict(target_mde=target_mde, alpha=alpha, power=power, n_comparisons=n_comparisons,
                              durations=grid, min_duration_s=min_duration_s, max_blocks=max_blocks,
                              variance_confidence=variance_confidence, arms=[a.arm for a in cost.arms],
                              looks=looks, families=families)
    plan = plan_design(comps, cost, **kw)
    if not (plan.chosen.reaches and plan.chosen.minutes <= left + 1e-9):
        need = plan.chosen.minutes if plan.chosen.reaches else math.inf
        plan = plan_design(comps, cost, budget_minutes=left, **kw)
        needs = f"more than {max_blocks} blocks" if need == math.inf else f"{need:.1f} min"
        notes.append(f"the target needs {needs}; the {left:.1f} min the pilot left give the design with the smallest MDE")
    notes += list(plan.notes)
    ch = plan.chosen
    reaches = bool(all(v <= target_mde + 1e-12 for v in ch.mde.values()) and ch.minutes <= left + 1e-9)
    if floor is not None and binding and not reaches and ch.duration_s <= min(grid) + 1e-9:
        notes.append(f"the trial length is set by {floor.metric}: the budget cannot afford the target at the "
                     f"{min(grid):.3g} s trials {floor.metric} needs ({floor.text()})")
    analysis = looks(int(ch.blocks)) if looks is not None else None
    return BudgetPlan(float(budget_min), float(target_mde), int(pilot_blocks), float(pilot_minutes), source,
                      int(ch.blocks), float(ch.duration_s),
                      float(warm if warm is not None else cost.arms[0].warmup_s),
                      float(ch.minutes), dict(ch.mde), reaches, plan, warmup, tuple(notes), floor,
                      tuple(analysis.looks) if analysis is not None else (), float(outside_minutes))
