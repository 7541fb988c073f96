"""Power, minimum detectable effect and the trials-per-arm planner (pure).

The planning quantity is ``sigma``: the SD across trials of the log per-trial summary
(about the between-trial coefficient of variation), or, for blocked designs analysed
paired, the SD of the within-block log ratios. Power is that of a t-test on the logs
(noncentral t, two-sided); for the rank method the sample size is discounted by the
asymptotic relative efficiency of the rank tests, 3/pi = 0.955, and never falls below the
smallest size at which the exact test can reach significance at all (the minimum-p floor).

With ``n_comparisons = m`` rows and Holm (or BH/BY), a row on its own must reach ``alpha / m``,
so plans use that level: conservative, and the honest answer for one real change among m rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize, special

from benchlib.errors import ParameterError
from benchlib.stats._checks import choose, probability
from benchlib.stats.exact import min_p_paired, min_p_unpaired
from benchlib.stats.multiplicity import CORRECTIONS, best_case_adjusted

__all__ = [
    "RANK_EFFICIENCY",
    "METHODS",
    "power_t",
    "mde",
    "trials_needed",
    "min_trials",
    "planning_alpha",
    "pilot_sigma",
    "TrialPlan",
    "plan",
]

#: Asymptotic relative efficiency of the Mann-Whitney / signed-rank tests vs t under normality.
RANK_EFFICIENCY = 3.0 / math.pi
#: Valid values of ``method``.
METHODS: tuple[str, ...] = ("rank", "parametric", "bootstrap")
_MAX_N = 100_000


def _efficiency(method: str) -> float:
    return RANK_EFFICIENCY if method == "rank" else 1.0


def power_t(delta: float, sigma: float, n: float, *, alpha: float, paired: bool = False) -> float:
    """Power of a two-sided t-test on logs to detect a log shift ``delta``.

    Parameters
    ----------
    delta:
        True shift on the log scale (``log(1.05)`` for 5%).
    sigma:
        Unpaired: SD of the log per-trial values within an arm. Paired: SD of the
        within-block log differences.
    n:
        Trials per arm (unpaired) or blocks (paired); may be fractional (efficiency-scaled).
    alpha:
        Two-sided level.
    paired:
        One-sample t on differences instead of the two-sample t.
    """
    if n < 2 or sigma <= 0:
        return math.nan if sigma <= 0 else 0.0
    if paired:
        df = n - 1.0
        nc = abs(delta) / (sigma / math.sqrt(n))
    else:
        df = 2.0 * n - 2.0
        nc = abs(delta) / (sigma * math.sqrt(2.0 / n))
    if nc > 37.0:
        return 1.0
    tcrit = float(special.stdtrit(df, 1.0 - alpha / 2.0))
    upper = 1.0 - float(special.nctdtr(df, nc, tcrit))
    lower = float(special.nctdtr(df, nc, -tcrit))
    if not np.isfinite(upper):
        upper = 1.0
    if not np.isfinite(lower):
        lower = 0.0
    return float(min(1.0, max(0.0, upper + lower)))


def min_trials(*, alpha: float, n_comparisons: int = 1, correction: str = "holm", paired: bool = False) -> int:
    """Smallest trials per arm (or blocks) at which the exact rank test can be significant.

    Examples
    --------
    >>> min_trials(alpha=0.05), min_trials(alpha=0.05, n_comparisons=10), min_trials(alpha=0.05, paired=True)
    (4, 6, 6)
    """
    for n in range(2, 1000):
        p = min_p_paired(n) if paired else min_p_unpaired(n, n)
        if best_case_adjusted(p, n_comparisons, correction) < alpha:
            return n
    raise ParameterError(f"no trial count below 1000 reaches alpha={alpha}")


def planning_alpha(alpha: float, n_comparisons: int, correction: str) -> float:
    """The level one row must reach alone: ``alpha / m`` unless ``correction == "none"``."""
    return alpha if correction == "none" else alpha / max(1, n_comparisons)


def mde(
    n: float,
    sigma: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    paired: bool = False,
    method: str = "rank",
) -> float:
    """Minimum detectable effect (relative, 0.05 = 5%) at ``power`` for ``n`` trials per arm.

    ``inf`` when ``n`` is too small for any effect; NaN when ``sigma`` is not positive.
    """
    if not (np.isfinite(sigma) and sigma > 0):
        return math.nan
    n_eff = n * _efficiency(method)
    if n_eff < 2 or power_t(50.0, sigma, n_eff, alpha=alpha, paired=paired) < power:
        return math.inf
    root = optimize.brentq(
        lambda x: power_t(x, sigma, n_eff, alpha=alpha, paired=paired) - power, 0.0, 50.0, xtol=1e-9
    )
    return float(math.expm1(root))


def trials_needed(
    effect: float,
    sigma: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    paired: bool = False,
    method: str = "rank",
    floor: int = 3,
) -> int:
    """Trials per arm (or blocks) for ``power`` to detect a relative ``effect`` (0.05 = 5%)."""
    if effect <= -1.0 or effect == 0.0:
        raise ParameterError(f"effect must be a non-zero relative change above -1, got {effect!r}")
    delta = math.log1p(effect)
    eff = _efficiency(method)
    for n in range(max(2, floor), _MAX_N):
        if power_t(delta, sigma, n * eff, alpha=alpha, paired=paired) >= power:
            return n
    raise ParameterError(f"more than {_MAX_N} trials per arm would be needed (sigma={sigma:.3g}, effect={effect})")


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
        return power_t(
            math.log1p(e), self.sigma, n * _efficiency(self.method), alpha=self.row_alpha, paired=self.paired
        )

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
