"""Power and minimum detectable effect of the exact rank tests and the t-test at a fixed number
of trials (pure).

The spread ``sigma`` is the SD across trials of the log per-trial summary, or, for blocked
designs analysed paired, the SD of the within-block log ratios. Power is that of a t-test on
the logs (noncentral t, two-sided); for the rank method the sample size is discounted by the
asymptotic relative efficiency of the rank tests, 3/pi = 0.955, above 30 trials per arm; up to
30 the exact rank test's power is simulated (its discreteness matters there). No size below
:func:`min_trials` can reach significance at all (the minimum-p floor).

These are the curves every planner reads (:mod:`benchlib.stats.planning`) and every report's
MDE comes from (:func:`mde_shift`).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import special

from benchlib.core.errors import ParameterError
from benchlib.stats.exact import _t_cdf, _u_cdf, min_p_paired, min_p_unpaired
from benchlib.stats.multiplicity import best_case_adjusted

__all__ = [
    "RANK_EFFICIENCY",
    "METHODS",
    "power_of",
    "power_t",
    "power_rank",
    "mde",
    "mde_shift",
    "trials_needed",
    "min_trials",
    "planning_alpha",
]


#: Asymptotic relative efficiency of the Mann-Whitney / signed-rank tests vs t under normality.
RANK_EFFICIENCY = 3.0 / math.pi
#: Valid values of ``method``.
METHODS: tuple[str, ...] = ("rank", "parametric", "bootstrap")
_MAX_N = 100_000


def power_of(delta: float, sigma: float, n: int, *, alpha: float, paired: bool, method: str) -> float:
    """Power of the test ``method`` analyses with (``"rank"``: :func:`power_rank`; otherwise the
    t-test's, :func:`power_t`) to detect a log shift ``delta`` at spread ``sigma`` with ``n``
    trials per arm (blocks when ``paired``), at two-sided level ``alpha``."""
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
        if power_of(delta, sigma, n, alpha=alpha, paired=paired, method=method) >= power:
            return n
    raise ParameterError(f"more than {_MAX_N} trials per arm would be needed (sigma={sigma:.3g}, effect={effect})")
