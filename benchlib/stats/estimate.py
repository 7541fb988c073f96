"""One comparison row's effect, interval and p-value, for each method and design (pure).

Inputs are the two arms' per-trial values already on the comparison scale (logs for ratio
metrics, raw values for difference metrics); paired inputs are aligned by block.

* ``rank`` (default): Hodges-Lehmann shift with the exact Moses interval and exact
  Mann-Whitney test (unpaired), or the median of Walsh averages with the exact signed-rank
  interval and test (paired); blocks with an exact-zero difference are left out of all of
  them alike (see :attr:`Estimate.n_tied`).
* ``parametric``: difference of mean logs with the Welch t interval and test (unpaired), or
  the mean within-block log difference with the one-sample t (paired).
* ``bootstrap``: the Hodges-Lehmann shift with a trial-level (block-level when paired) BCa
  interval and the BCa-inverted p-value.

Every method also gives the (1 - 2 alpha) interval of the equivalence test (TOST) and, given
the margin, the TOST p-value (the larger of the two one-sided p-values at the margins), which
:func:`~benchlib.stats.compare` adjusts over the family like the difference p-values, and the
p-value of the minimum-effect test (the effect lies beyond the margin: the test a comparison of
two runs decides on, :mod:`benchlib.analysis.runcompare`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats

from benchlib.stats.bootstrap import BootstrapShift, bootstrap_shift
from benchlib.stats.exact import (
    hodges_lehmann_center,
    mann_whitney,
    min_p_paired,
    min_p_unpaired,
    min_p_unpaired_tied,
    moses_interval,
    signed_rank,
    walsh_interval,
)

__all__ = ["Estimate", "estimate", "BOOTSTRAP_MIN_TRIALS", "beyond_pvalue", "shift_pvalue", "test_name", "tost_pvalue"]

#: The trial-level bootstrap is refused below this many trials per arm (blocks when paired).
BOOTSTRAP_MIN_TRIALS = 5


@dataclass(frozen=True)
class Estimate:
    """Effect of the arm against the baseline on the comparison scale.

    Attributes
    ----------
    effect:
        Log ratio (ratio metrics) or difference (difference metrics), arm minus baseline.
    lo, hi:
        Interval at the requested confidence.
    achieved:
        Coverage actually reached (exact rank intervals are conservative; others nominal).
    tost_lo, tost_hi:
        Interval at ``1 - 2 alpha`` for the equivalence test.
    pvalue:
        Two-sided p-value of "no shift".
    min_p:
        Smallest p-value this design and method can produce (0 when unbounded); unpaired
        rank method with ties: the floor of the exact test given those ties
        (:func:`benchlib.stats.exact.min_p_unpaired_tied`).
    sigma:
        Spread used for the minimum detectable effect: pooled within-arm SD (unpaired) or
        SD of the within-block differences (paired).
    test:
        The test's name for reports.
    exact:
        Whether the p-value and interval come from exact distributions.
    ties:
        Whether ties made the rank interval approximate.
    n_tied:
        Paired rank method: blocks whose difference is exactly zero. They carry no sign, so
        the signed-rank test leaves them out, and so do the estimate, the intervals and
        ``min_p`` (computed from the blocks that differ; R's ``wilcox.test`` convention).
        When every block ties, none is left out: the row has zero spread and the interval
        is ``[0, 0]``.
    tost_p:
        p-value of the equivalence test at the margin ``±L`` (log scale): the larger of the
        one-sided p-values of "effect >= L" and "effect <= -L", from the same test as
        ``pvalue`` (NaN when no margin was given).
    beyond_p:
        p-value of the minimum-effect test at the margin ``±L``: "the effect lies within
        ``[-L, L]``" rejected in favour of an effect beyond it, from the same test as
        ``pvalue`` (:func:`beyond_pvalue`; NaN when no margin was given).
    """

    effect: float
    lo: float
    hi: float
    achieved: float
    tost_lo: float
    tost_hi: float
    pvalue: float
    min_p: float
    sigma: float
    test: str
    exact: bool = True
    ties: bool = False
    n_tied: int = 0
    tost_p: float = math.nan
    beyond_p: float = math.nan


def _pooled_sd(a: np.ndarray, b: np.ndarray) -> float:
    df = a.size + b.size - 2
    if df < 1:
        return math.nan
    ss = float(((a - a.mean()) ** 2).sum() + ((b - b.mean()) ** 2).sum())
    return math.sqrt(ss / df)


def tost_pvalue(p_at: Callable[[float], float], effect: float, margin: float) -> float:
    """TOST p-value at the margin ``±margin`` (comparison scale) from a two-sided p-value
    function ``p_at(c)`` of "the effect is c": each one-sided p-value is half the two-sided
    one when the estimate lies on the rejecting side of ``c``, else one minus that half; the
    larger of the two is the TOST p-value (NaN without a positive, finite margin)."""
    if not (math.isfinite(margin) and margin > 0) or not math.isfinite(effect):
        return math.nan
    ps = []
    for c, below in ((margin, True), (-margin, False)):
        half = float(p_at(c)) / 2.0
        ps.append(half if (effect < c if below else effect > c) else 1.0 - half)
    return float(max(ps))


def beyond_pvalue(p_at: Callable[[float], float], effect: float, margin: float) -> float:
    """Two-sided p-value of the minimum-effect test at the margin ``±margin`` (comparison
    scale): the null "the effect lies within ``[-margin, margin]``" against an effect beyond it.
    With the estimate beyond a margin, the two-sided p-value ``p_at(c)`` of "the effect is c" at
    that margin (its rejection at ``alpha`` puts the whole ``1 - alpha`` interval beyond the
    margin); with the estimate inside, 1. With ``margin`` 0 it is the ordinary p-value ``p_at(0)``
    (NaN without a finite, non-negative margin or estimate)."""
    if not (math.isfinite(margin) and margin >= 0) or not math.isfinite(effect):
        return math.nan
    if effect > margin:
        return float(p_at(margin))
    if effect < -margin:
        return float(p_at(-margin))
    return float(p_at(0.0)) if margin == 0 else 1.0


def test_name(method: str, paired: bool, exact: bool = True) -> str:
    """Name of the test behind a row (for tables and the one-line form)."""
    if method == "rank":
        base = "Wilcoxon signed-rank" if paired else "Mann-Whitney"
        return f"exact {base}" if exact else f"{base} (normal approx.)"
    if method == "parametric":
        return "paired t on logs" if paired else "Welch t on logs"
    return "trial-bootstrap BCa (blocks)" if paired else "trial-bootstrap BCa"


def estimate(
    a: np.ndarray,
    b: np.ndarray,
    *,
    paired: bool,
    method: str,
    confidence: float,
    alpha: float,
    rng: np.random.Generator | None = None,
    n_resamples: int = 9999,
    margin: float = math.nan,
) -> Estimate:
    """Effect, intervals and p-value of ``b`` against ``a`` (see the module docstring).

    ``margin``: the equivalence margin on the comparison scale (``log(1 + m)`` for ratio
    metrics); given, the estimate carries its TOST p-value (:attr:`Estimate.tost_p`) and its
    minimum-effect p-value (:attr:`Estimate.beyond_p`).

    The caller checks the trial counts (at least 1 per arm for ``rank``, 2 for
    ``parametric``, :data:`BOOTSTRAP_MIN_TRIALS` for ``bootstrap``).
    """
    e, boot = _estimate(a, b, paired, method, confidence, alpha, rng, n_resamples)
    if not (math.isfinite(margin) and margin > 0):
        return e
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if e.lo == e.hi:  # zero spread: the effect is known exactly
        return replace(e, tost_p=0.0 if abs(e.effect) < margin else 1.0,
                       beyond_p=0.0 if abs(e.effect) > margin else 1.0)
    p_at = shift_pvalue(a, b, paired=paired, method=method, boot=boot)
    return replace(e, tost_p=tost_pvalue(p_at, e.effect, margin), beyond_p=beyond_pvalue(p_at, e.effect, margin))


def shift_pvalue(a: np.ndarray, b: np.ndarray, *, paired: bool, method: str,
                 boot: BootstrapShift | None = None) -> Callable[[float], float]:
    """The two-sided p-value function ``p_at(c)`` of "the effect (``b`` against ``a``, on the
    comparison scale) is ``c``", from the same test as :func:`estimate`'s p-value (the
    bootstrap method needs the distribution ``boot`` its estimate was computed from)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if method == "rank" and paired:
        d = b - a
        d = d[d != 0.0] if 0 < np.count_nonzero(d == 0.0) < d.size else d
        return lambda c: signed_rank(d - c).pvalue
    if method == "rank":
        return lambda c: mann_whitney(a, b - c).pvalue
    if method == "parametric" and paired:
        return lambda c: float(stats.ttest_1samp(b - a, c).pvalue)
    if method == "parametric":
        return lambda c: float(stats.ttest_ind(b - c, a, equal_var=False).pvalue)
    assert boot is not None
    return boot.pvalue_at


def _estimate(a: np.ndarray, b: np.ndarray, paired: bool, method: str, confidence: float, alpha: float,
              rng: np.random.Generator | None, n_resamples: int) -> tuple[Estimate, BootstrapShift | None]:
    """:func:`estimate` without the TOST p-value, and the bootstrap distribution (bootstrap
    method) from which it is computed."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    tost_conf = 1.0 - 2.0 * alpha
    if method == "rank":
        n_tied = 0
        if paired:
            d = b - a
            n_tied = int(np.count_nonzero(d == 0.0))
            if 0 < n_tied < d.size:
                # tied blocks carry no sign: the test drops them, so do the guard and the interval
                d = d[d != 0.0]
            else:
                n_tied = 0  # none, or every block tied (zero spread: the interval is [0, 0])
            iv = walsh_interval(d, confidence)
            tv = signed_rank(d)
            tost = walsh_interval(d, tost_conf)
            mp = min_p_paired(d.size)
            sigma = float(np.std(d, ddof=1)) if d.size > 1 else math.nan
        else:
            iv = moses_interval(a, b, confidence)
            tv = mann_whitney(a, b)
            tost = moses_interval(a, b, tost_conf)
            # with ties the test's floor comes from the tied null (issue 19, item 10)
            mp = min_p_unpaired_tied(a, b) if tv.ties else min_p_unpaired(a.size, b.size)
            sigma = _pooled_sd(a, b)
        return Estimate(
            iv.estimate, iv.lo, iv.hi, iv.achieved, tost.lo, tost.hi, tv.pvalue, mp, sigma,
            test_name("rank", paired, tv.exact and iv.exact), tv.exact and iv.exact, tv.ties, n_tied,
        ), None
    if method == "parametric":
        if paired:
            d = b - a
            eff = float(d.mean())
            sd = float(np.std(d, ddof=1))
            sigma = sd
            if sd == 0.0:
                return Estimate(eff, eff, eff, confidence, eff, eff, 1.0 if eff == 0 else 0.0, 0.0, 0.0,
                                test_name("parametric", True), True), None
            res = stats.ttest_1samp(d, 0.0)
            ci = res.confidence_interval(confidence)
            ct = res.confidence_interval(tost_conf)
        else:
            eff = float(b.mean() - a.mean())
            sigma = _pooled_sd(a, b)
            if np.var(a) == 0.0 and np.var(b) == 0.0:
                return Estimate(eff, eff, eff, confidence, eff, eff, 1.0 if eff == 0 else 0.0, 0.0, 0.0,
                                test_name("parametric", False), True), None
            res = stats.ttest_ind(b, a, equal_var=False)
            ci = res.confidence_interval(confidence)
            ct = res.confidence_interval(tost_conf)
        return Estimate(
            eff, float(ci.low), float(ci.high), confidence, float(ct.low), float(ct.high),
            float(res.pvalue), 0.0, sigma, test_name("parametric", paired), True,
        ), None
    # bootstrap
    assert rng is not None
    if paired:
        d = b - a
        bs = bootstrap_shift(d, None, paired=True, n_resamples=n_resamples, rng=rng)
        sigma = float(np.std(d, ddof=1))
        eff = hodges_lehmann_center(d)
    else:
        bs = bootstrap_shift(a, b, paired=False, n_resamples=n_resamples, rng=rng)
        sigma = _pooled_sd(a, b)
        eff = bs.estimate
    lo, hi = bs.interval(confidence)
    tlo, thi = bs.interval(tost_conf)
    return Estimate(
        eff, lo, hi, confidence, tlo, thi, bs.pvalue, 1.0 / (n_resamples + 1), sigma,
        test_name("bootstrap", paired), False,
    ), bs
