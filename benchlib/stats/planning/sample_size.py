"""Sample size at a known spread: the trials per arm (or blocks) a target minimum detectable
effect needs, for the fixed test and for the group-sequential test (pure).

The planning quantity is ``sigma``: the SD across trials of the log per-trial summary
(about the between-trial coefficient of variation), or, for blocked designs analysed
paired, the SD of the within-block log ratios; :func:`pilot_sigma` estimates it from a pilot's
per-trial summaries. :func:`plan` gives the fixed test's trials per arm (the power curves of
:mod:`benchlib.stats.power`, never below the smallest size at which the exact test can reach
significance at all); :func:`plan_sequential` the fewest blocks at most of a group-sequential
design (:class:`~benchlib.stats.sequential.SequentialDesign`) with the same power.

With ``n_comparisons = m`` rows and Holm (or BH/BY), a row on its own must reach ``alpha / m``,
so plans use that level: conservative, and the honest answer for one real change among m rows.
Where the spread itself depends on the trial's length, :mod:`benchlib.stats.planning.design_plan`
plans blocks x measured duration from variance components instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from benchlib.core.errors import ParameterError
from benchlib.stats._checks import choose, probability
from benchlib.stats.multiplicity import CORRECTIONS
from benchlib.stats.power import METHODS, mde, min_trials, planning_alpha, power_of, trials_needed
from benchlib.stats.sequential import DEFAULT_SHAPE, SequentialDesign

__all__ = ["SequentialPlan", "TrialPlan", "pilot_sigma", "plan", "plan_sequential"]


def pilot_sigma(
    pilot: pd.DataFrame, metric: str, *, design: str = "auto", baseline: str | None = None
) -> tuple[float, bool, int]:
    """SD of the log metric across the pilot's trials: ``(sigma, paired, df)``.

    Unpaired: the within-arm SDs pooled over arms (each arm with at least two trials).
    Paired (``design="paired"``, or ``"auto"`` with at least two arms in complete blocks):
    the SD of the within-block log differences against ``baseline`` (default: the first arm).
    """
    choose("design", design, ("auto", "paired", "unpaired"))
    if metric not in pilot.columns:
        raise ParameterError(f"pilot has no column {metric!r}; it has {sorted(map(str, pilot.columns))}")
    data = pilot
    if "valid" in data.columns:
        data = data[data["valid"].astype(bool)]
    vals = data[metric].to_numpy(dtype=float)
    if not np.all(np.isfinite(vals)) or np.any(vals <= 0):
        raise ParameterError(f"pilot column {metric!r} must hold positive finite numbers for a log-scale plan")
    data = data.assign(_log=np.log(vals))
    arms = list(dict.fromkeys(data["arm"])) if "arm" in data.columns else ["_"]
    if "arm" not in data.columns:
        data = data.assign(arm="_")
    want_paired = design == "paired"
    if design == "auto" and len(arms) >= 2 and "block" in data.columns:
        counts = data.groupby(["block", "arm"]).size()
        want_paired = bool((counts == 1).all()) and data["block"].nunique() >= 3
    if want_paired:
        base = baseline if baseline is not None else arms[0]
        wide = data.pivot_table(index="block", columns="arm", values="_log", aggfunc="first")
        diffs = [
            (wide[a] - wide[base]).dropna().to_numpy() for a in wide.columns if a != base
        ]
        d = np.concatenate(diffs) if diffs else np.empty(0)
        if d.size < 3:
            raise ParameterError("a paired plan needs a pilot with at least 3 complete blocks")
        return float(np.std(d, ddof=1)), True, int(d.size - 1)
    ss = 0.0
    df = 0
    for _, g in data.groupby("arm"):
        x = g["_log"].to_numpy()
        if x.size >= 2:
            ss += float(((x - x.mean()) ** 2).sum())
            df += x.size - 1
    if df < 2:
        raise ParameterError("the pilot needs at least 3 valid trials (2 in one arm) to estimate the spread")
    return math.sqrt(ss / df), False, df


@dataclass(frozen=True)
class TrialPlan:
    """A plan: trials per arm (or blocks), with what it rests on.

    ``int(plan)`` is the number of trials per arm; :meth:`power` and :meth:`mde` give the
    curve for other sizes; :meth:`explain` says it in words.
    """

    trials: int
    metric: str
    sigma: float
    paired: bool
    method: str
    target_mde: float
    target_power: float
    alpha: float
    row_alpha: float
    n_comparisons: int
    correction: str
    floor: int
    extra: dict[str, Any] = field(default_factory=dict)

    def __int__(self) -> int:
        return self.trials

    def __index__(self) -> int:
        return self.trials

    def power(self, n: int, effect: float | None = None) -> float:
        """Predicted power at ``n`` trials per arm for ``effect`` (default the target MDE)."""
        e = self.target_mde if effect is None else effect
        if n < self.floor:
            return 0.0
        return power_of(math.log1p(e), self.sigma, n, alpha=self.row_alpha, paired=self.paired, method=self.method)

    def mde(self, n: int) -> float:
        """Minimum detectable effect at ``n`` trials per arm (relative)."""
        if n < self.floor:
            return math.inf
        return mde(n, self.sigma, alpha=self.row_alpha, power=self.target_power, paired=self.paired, method=self.method)

    def explain(self) -> str:
        """One paragraph in plain words."""
        unit = "blocks" if self.paired else "trials per arm"
        kind = "within-block log ratios" if self.paired else "log per-trial values"
        return (
            f"{self.trials} {unit}: to detect a {self.target_mde:.1%} change in {self.metric} with "
            f"{self.target_power:.0%} power, given a spread of {self.sigma:.2%} ({kind}, SD), "
            f"{self.method} method, alpha={self.alpha:g} over {self.n_comparisons} comparison(s) "
            f"({self.correction}: each row alone at {self.row_alpha:.3g}); the exact test needs at "
            f"least {self.floor} to reach significance at all."
        )


def plan(
    pilot: pd.DataFrame | None = None,
    *,
    metric: str = "p50_ms",
    target_mde: float = 0.05,
    power: float = 0.8,
    alpha: float = 0.05,
    n_comparisons: int = 1,
    correction: str = "holm",
    method: str = "rank",
    design: str = "auto",
    baseline: str | None = None,
    sigma: float | None = None,
) -> TrialPlan:
    """Trials per arm (blocks, for a paired design) needed to detect ``target_mde``.

    Parameters
    ----------
    pilot:
        Per-trial summaries of a pilot run (at least 3 valid trials; 5 per arm or more is
        better), as :func:`benchlib.stats.compare` takes them. Not needed when ``sigma`` is
        given.
    metric:
        The summary column to plan for.
    target_mde:
        Relative change to detect (0.05 = 5%).
    power:
        Probability of detecting it.
    alpha, n_comparisons, correction:
        The significance level and the family it will be tested in.
    method:
        ``"rank"`` (the default analysis), ``"parametric"`` or ``"bootstrap"``.
    design:
        ``"auto"``, ``"paired"`` or ``"unpaired"`` (as in :func:`compare`).
    baseline:
        For a paired pilot with several arms: the arm differences are taken against.
    sigma:
        Use this spread (SD of log per-trial values; of within-block log ratios when
        ``design="paired"``) instead of estimating it from a pilot.

    Returns
    -------
    TrialPlan
        Behaves as an ``int`` (the trials per arm) and carries the details.

    Examples
    --------
    >>> int(plan(sigma=0.05, target_mde=0.05, method="parametric", design="unpaired"))
    18
    """
    probability("power", power)
    probability("alpha", alpha)
    choose("correction", correction, CORRECTIONS)
    choose("method", method, METHODS)
    choose("design", design, ("auto", "paired", "unpaired"))
    if not (np.isfinite(target_mde) and target_mde > 0):
        raise ParameterError(f"target_mde must be a positive relative change (0.05 = 5%), got {target_mde!r}")
    if int(n_comparisons) < 1:
        raise ParameterError(f"n_comparisons must be at least 1, got {n_comparisons!r}")
    extra: dict[str, Any] = {}
    if sigma is not None:
        if not (np.isfinite(sigma) and sigma > 0):
            raise ParameterError(f"sigma must be a positive SD of log values, got {sigma!r}")
        s, paired = float(sigma), design == "paired"
    elif pilot is not None:
        s, paired, df = pilot_sigma(pilot, metric, design=design, baseline=baseline)
        extra["sigma_df"] = df
    else:
        raise ParameterError("plan() needs a pilot DataFrame or sigma=")
    row_alpha = planning_alpha(alpha, int(n_comparisons), correction)
    floor = (
        min_trials(alpha=alpha, n_comparisons=int(n_comparisons), correction=correction, paired=paired)
        if method == "rank"
        else (5 if method == "bootstrap" else 2)
    )
    n = trials_needed(target_mde, s, alpha=row_alpha, power=power, paired=paired, method=method, floor=floor)
    return TrialPlan(
        trials=max(n, floor),
        metric=metric,
        sigma=s,
        paired=paired,
        method=method,
        target_mde=float(target_mde),
        target_power=float(power),
        alpha=float(alpha),
        row_alpha=row_alpha,
        n_comparisons=int(n_comparisons),
        correction=correction,
        floor=floor,
        extra=extra,
    )


@dataclass(frozen=True)
class SequentialPlan:
    """A group-sequential plan: the looks, and what they are predicted to give.

    Attributes
    ----------
    design:
        The looks (its maximum reaches ``target_power`` at ``target_mde``).
    sigma:
        SD of the within-block log ratios planned for.
    target_mde, target_power, power:
        The effect to detect (relative), the power asked, and the design's predicted power.
    alpha, row_alpha, n_comparisons, correction:
        The level, the level one row must reach alone (``alpha / m`` under Holm), the
        family.
    fixed_blocks:
        Blocks of the fixed-size design with the same target (:func:`benchlib.stats.plan`).
    expected_blocks:
        Predicted mean blocks run for a one-row question that stops at its first significant
        look, by true relative effect (0, the target, twice the target); at 0 only an
        equivalence could stop it earlier (not modelled).
    """

    design: SequentialDesign
    sigma: float
    target_mde: float
    target_power: float
    power: float
    alpha: float
    row_alpha: float
    n_comparisons: int
    correction: str
    fixed_blocks: int
    expected_blocks: dict[float, float]

    def explain(self) -> str:
        """One paragraph in plain words."""
        exp = ", ".join(f"{b:.1f} at {e:.0%}" for e, b in self.expected_blocks.items())
        return (
            f"up to {self.design.max_blocks} blocks, {self.design.describe()}: {self.power:.0%} power to detect a "
            f"{self.target_mde:.1%} change (within-block SD {self.sigma:.2%}, each row at {self.row_alpha:.3g} = "
            f"alpha {self.alpha:g} over {self.n_comparisons} row(s)); a fixed design needs {self.fixed_blocks} "
            f"blocks. Expected blocks run for one row by true effect: {exp}."
        )


def plan_sequential(
    sigma: float | None = None,
    *,
    pilot: pd.DataFrame | None = None,
    metric: str = "p50_ms",
    baseline: str | None = None,
    target_mde: float = 0.05,
    power: float = 0.8,
    alpha: float = 0.05,
    n_comparisons: int = 1,
    correction: str = "holm",
    step: int | None = None,
    shape: float = DEFAULT_SHAPE,
    max_blocks: int = 60,
) -> SequentialPlan:
    """The fewest blocks at most of a group-sequential design (looks every ``step`` blocks;
    default 2, or more so that there are at most 10 looks) that detects ``target_mde`` with
    ``power``, for a paired rank analysis; at most ``max_blocks`` (beyond, a fixed design
    or a longer measured duration is the better answer).

    ``sigma``: SD of the within-block log ratios; or ``pilot`` (per-trial summaries in
    blocks) and ``metric`` (and ``baseline``) to estimate it, as :func:`benchlib.stats.plan`.
    """
    probability("power", power)
    probability("alpha", alpha)
    if sigma is None:
        if pilot is None:
            raise ParameterError("plan_sequential() needs sigma= or pilot=")
        sigma, _, _ = pilot_sigma(pilot, metric, design="paired", baseline=baseline)
    fixed = plan(sigma=float(sigma), target_mde=target_mde, power=power, alpha=alpha,
                 n_comparisons=n_comparisons, correction=correction, design="paired")
    row_alpha = planning_alpha(alpha, int(n_comparisons), correction)
    n = max(int(fixed), 2)
    while True:
        st = step if step is not None else max(2, math.ceil(n / 10))
        design = SequentialDesign.every(n, step=st, n_comparisons=n_comparisons, alpha=alpha, shape=shape)
        pw = design.power(target_mde, float(sigma), alpha=row_alpha)
        if pw >= power:
            break
        n += 1
        if n > max_blocks:
            raise ParameterError(f"more than {max_blocks} blocks would be needed (sigma={sigma:.3g}, "
                                 f"target_mde={target_mde})")
    expected = {e: design.expected_blocks(e, float(sigma), alpha=row_alpha) if e else float(design.max_blocks)
                for e in (0.0, float(target_mde), 2.0 * float(target_mde))}
    return SequentialPlan(design, float(sigma), float(target_mde), float(power), pw, float(alpha), row_alpha,
                          int(n_comparisons), correction, int(fixed), expected)
