"""Power, minimum detectable effect and the trials-per-arm planner (pure).

The planning quantity is ``sigma``: the SD across trials of the log per-trial summary
(about the between-trial coefficient of variation), or, for blocked designs analysed
paired, the SD of the within-block log ratios. Power is that of a t-test on the logs
(noncentral t, two-sided); for the rank method the sample size is discounted by the
asymptotic relative efficiency of the rank tests, 3/pi = 0.955, above 30 trials per arm;
up to 30 the exact rank test's power is simulated (its discreteness matters there), and the
plan never falls below the smallest size at which the exact test can reach significance at
all (the minimum-p floor).

With ``n_comparisons = m`` rows and Holm (or BH/BY), a row on its own must reach ``alpha / m``,
so plans use that level: conservative, and the honest answer for one real change among m rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize, special

from benchlib.core.errors import ParameterError
from benchlib.stats._checks import choose, probability
from benchlib.stats.exact import min_p_paired, min_p_unpaired
from benchlib.stats.multiplicity import CORRECTIONS, best_case_adjusted

__all__ = [
    "RANK_EFFICIENCY",
    "METHODS",
    "power_t",
    "power_rank",
    "mde",
    "mde_shift",
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


def _power(delta: float, sigma: float, n: int, *, alpha: float, paired: bool, method: str) -> float:
    if method == "rank":
        return power_rank(delta, sigma, n, alpha=alpha, paired=paired)
    return power_t(delta, sigma, n, alpha=alpha, paired=paired)


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


#: Trials per arm (blocks) up to which rank-test power is simulated exactly (the exact
#: test's discreteness matters there); above, the t power at 3/pi of the trials.
RANK_SIM_MAX_N = 30
#: Simulated experiments per power evaluation (common random numbers, fixed seed).
RANK_SIM_DRAWS = 4000


def _rank_critical(n: int, alpha: float, paired: bool) -> int:
    """Largest statistic value c with exact two-sided p < alpha at c (-1 if none)."""
    from benchlib.stats.exact import _t_cdf, _u_cdf

    cdf = _t_cdf(n) if paired else _u_cdf(n, n)
    ok = np.flatnonzero(2.0 * cdf[: (cdf.size + 1) // 2] < alpha * (1 - 1e-12))
    return int(ok[-1]) if ok.size else -1


@lru_cache(maxsize=64)
def _rank_draws(n: int, paired: bool, draws: int, seed: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The standard-normal draws of :func:`power_rank` (read-only, cached: the same draws
    serve every ``delta``, ``sigma`` and ``alpha``)."""
    rng = np.random.default_rng([seed, n, int(paired)])
    za = rng.standard_normal((draws, n))
    zb = None if paired else rng.standard_normal((draws, n))
    for z in (za, zb):
        if z is not None:
            z.setflags(write=False)
    return za, zb


def power_rank(
    delta: float, sigma: float, n: int, *, alpha: float, paired: bool = False,
    draws: int = RANK_SIM_DRAWS, seed: int = 0,
) -> float:
    """Power of the exact two-sided rank test (Mann-Whitney, or signed-rank when paired),
    p < ``alpha``, for normal log values with SD ``sigma`` shifted by ``delta``.

    Simulated with a fixed seed (the same draws for every ``delta``, so the curve is
    monotone and repeatable) up to :data:`RANK_SIM_MAX_N`; above, the t power at 3/pi of
    the trials. Near the minimum-p floor the exact test's discreteness costs power that the
    t approximation does not see (7 blocks at alpha = 0.025: about 0.8 where t says 0.95).
    """
    if n < 2 or not sigma > 0:
        return 0.0
    if n > RANK_SIM_MAX_N:
        return power_t(delta, sigma, n * RANK_EFFICIENCY, alpha=alpha, paired=paired)
    c = _rank_critical(n, alpha, paired)
    if c < 0:
        return 0.0
    za, zb = _rank_draws(n, paired, draws, seed)
    if paired:
        d = za * sigma + delta
        ranks = np.argsort(np.argsort(np.abs(d), axis=1), axis=1) + 1
        stat = (ranks * (d > 0)).sum(axis=1)
        top = n * (n + 1) // 2
    else:
        assert zb is not None
        stat = ((zb[:, :, None] * sigma + delta) > (za[:, None, :] * sigma)).sum(axis=(1, 2))
        top = n * n
    return float(np.mean((stat <= c) | (stat >= top - c)))


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


def mde_shift(
    n: float,
    sigma: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    paired: bool = False,
    method: str = "rank",
) -> float:
    """Minimum detectable shift on the comparison scale (log ratio, or difference in the
    metric's units) at ``power`` for ``n`` trials per arm (blocks when paired), given the
    spread ``sigma`` on that scale.

    ``inf`` when ``n`` is too small for any effect; NaN when ``sigma`` is not finite or
    negative; 0 when ``sigma`` is 0 and the design can reach significance at all (with no
    spread, a shift of every trial, however small, is found).
    """
    if not (np.isfinite(sigma) and sigma >= 0):
        return math.nan
    size = float(round(n)) if method == "rank" else float(n)
    u = _mde_units(size, float(alpha), float(power), bool(paired), "rank" if method == "rank" else "t")
    if not math.isfinite(u):
        return math.inf
    return float(sigma * u)


@lru_cache(maxsize=1024)
def _mde_units(n: float, alpha: float, power: float, paired: bool, method: str) -> float:
    """Minimum detectable shift in units of ``sigma`` (power depends on ``delta / sigma``
    only), by bisection on the power curve; cached. For the rank method the curve is the
    simulated exact test's (a step function); otherwise the t-test's."""
    if n < 2:
        return math.inf

    def pw(x: float) -> float:
        if method == "rank":
            return power_rank(x, 1.0, int(n), alpha=alpha, paired=paired)
        return power_t(x, 1.0, n, alpha=alpha, paired=paired)

    hi = 50.0
    if pw(hi) < power:
        return math.inf
    lo = 0.0
    tol = 1e-5 if method == "rank" else 1e-9
    while hi - lo > tol:
        mid = (lo + hi) / 2.0
        if pw(mid) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def mde(
    n: float,
    sigma: float,
    *,
    alpha: float = 0.05,
    power: float = 0.8,
    paired: bool = False,
    method: str = "rank",
) -> float:
    """Minimum detectable effect (relative, 0.05 = 5%) at ``power`` for ``n`` trials per arm:
    ``expm1`` of :func:`mde_shift` on the log scale.

    ``inf`` when ``n`` is too small for any effect; NaN when ``sigma`` is not positive.
    """
    if not (np.isfinite(sigma) and sigma > 0):
        return math.nan
    return float(math.expm1(mde_shift(n, sigma, alpha=alpha, power=power, paired=paired, method=method)))


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
    for n in range(max(2, floor), _MAX_N):
        if _power(delta, sigma, n, alpha=alpha, paired=paired, method=method) >= power:
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
        return _power(math.log1p(e), self.sigma, n, alpha=self.row_alpha, paired=self.paired, method=self.method)

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
