"""Exact rank statistics: Mann-Whitney U and Wilcoxon signed-rank, and the Hodges-Lehmann
estimators with the distribution-free intervals obtained by inverting those tests.

Pure: numpy and scipy only. Sample sizes here are trial counts (a few to a few dozen), so
the exact null distributions are cheap; they are computed by counting subsets (a dynamic
programme over integer scores) and cached.

Conventions (``a`` = baseline sample, ``b`` = the other arm):

* Two-sample: ``U = #(b_j > a_i) + 1/2 #(b_j == a_i)`` (SciPy's ``mannwhitneyu(b, a)``
  statistic); the Hodges-Lehmann shift is ``median_{i,j}(b_j - a_i)``; the Moses interval is
  ``[D(k), D(mn-k+1)]`` of the sorted pairwise differences, where ``k - 1`` is the largest
  ``c`` with ``P(U <= c) <= alpha/2``.
* One-sample (paired blocks): ``d_k = b_k - a_k``; the estimate is the median of the Walsh
  averages ``(d_i + d_j)/2, i <= j``; the interval ``[W(k), W(N-k+1)]`` uses the exact
  signed-rank distribution the same way.

With no ties the interval excludes 0 exactly when the exact two-sided test rejects at the
*achieved* level, so estimate, interval and p-value agree. With ties the p-value uses the
exact permutation distribution of the mid-rank statistic (conditional on the ties), and the
interval keeps the no-ties critical values (its coverage is then approximate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import special, stats

from benchlib.stats._checks import finite_1d

__all__ = [
    "EXACT_MAX_PAIRS",
    "EXACT_MAX_BLOCKS",
    "RankInterval",
    "RankTest",
    "hodges_lehmann_shift",
    "hodges_lehmann_center",
    "moses_interval",
    "walsh_interval",
    "mann_whitney",
    "signed_rank",
    "min_p_unpaired",
    "min_p_unpaired_tied",
    "min_p_paired",
    "walsh_averages",
    "median_interval_rank",
]

#: Exact two-sample distributions are used up to this many pairs (m * n); above it, the
#: normal approximation (with tie and continuity corrections).
EXACT_MAX_PAIRS = 2500
#: Exact signed-rank distributions are used up to this many blocks.
EXACT_MAX_BLOCKS = 400

_REL_TOL = 1e-12  # for comparing cumulative probabilities with alpha/2


@dataclass(frozen=True)
class RankTest:
    """Result of an exact (or, for large samples, asymptotic) rank test.

    Attributes
    ----------
    statistic:
        ``U`` (two-sample, ties counted 1/2) or ``T+`` (signed-rank, sum of the ranks of the
        positive differences).
    pvalue:
        Two-sided p-value.
    exact:
        Whether ``pvalue`` comes from the exact permutation distribution.
    ties:
        Whether ties (or zero differences) were present.
    """

    statistic: float
    pvalue: float
    exact: bool
    ties: bool


@dataclass(frozen=True)
class RankInterval:
    """A distribution-free interval from inverting a rank test.

    Attributes
    ----------
    estimate:
        The Hodges-Lehmann estimate.
    lo, hi:
        Interval ends (``-inf``/``inf`` when the sample is too small for the level asked).
    achieved:
        The exact coverage of the interval under the no-ties null distribution (for
        example 0.957 for 10 vs 10 trials at a nominal 0.95).
    k:
        The 1-based order statistic of the lower end (0 when the interval is unbounded).
    exact:
        Whether the exact distribution was used (else the normal approximation).
    """

    estimate: float
    lo: float
    hi: float
    achieved: float
    k: int
    exact: bool


# ---------------------------------------------------------------------------------------
# Null distributions (counting subsets with a given score sum)


def _subset_sums_fixed_size(weights: np.ndarray, k: int) -> np.ndarray:
    """Number of k-subsets of ``weights`` (non-negative ints) by their sum (float counts)."""
    total = int(np.sort(weights)[::-1][:k].sum())
    dp = np.zeros((k + 1, total + 1))
    dp[0, 0] = 1.0
    for w in weights.tolist():
        w = int(w)
        if w > total:
            continue
        # choose this item: shift by w and move one row down (in place, high rows first)
        if w == 0:
            dp[1:, :] += dp[:-1, :].copy()
        else:
            dp[1:, w:] += dp[:-1, : total + 1 - w].copy()
    return dp[k]


def _subset_sums_any_size(weights: np.ndarray) -> np.ndarray:
    """Number of subsets (any size) of ``weights`` (non-negative ints) by their sum."""
    total = int(weights.sum())
    dp = np.zeros(total + 1)
    dp[0] = 1.0
    for w in weights.tolist():
        w = int(w)
        if w == 0:
            dp = dp * 2.0
        else:
            dp[w:] = dp[w:] + dp[: total + 1 - w].copy()
    return dp


@lru_cache(maxsize=512)
def _u_cdf(m: int, n: int) -> np.ndarray:
    """``P(U <= u)`` for ``u = 0..m*n`` (no ties), U = number of pairs with b > a."""
    counts = _subset_sums_fixed_size(np.arange(1, m + n + 1), n)
    offset = n * (n + 1) // 2
    pmf = counts[offset:] / counts.sum()
    cdf = np.cumsum(pmf)
    cdf[-1] = 1.0
    cdf.setflags(write=False)
    return cdf


@lru_cache(maxsize=512)
def _t_cdf(n: int) -> np.ndarray:
    """``P(T+ <= t)`` for ``t = 0..n(n+1)/2`` (no ties, no zeros)."""
    counts = _subset_sums_any_size(np.arange(1, n + 1))
    cdf = np.cumsum(counts / counts.sum())
    cdf[-1] = 1.0
    cdf.setflags(write=False)
    return cdf


@lru_cache(maxsize=256)
def median_interval_rank(n: int, confidence: float = 0.95) -> tuple[int, float]:
    """The order-statistic interval of a median of ``n`` values: the 1-based rank ``k`` of
    ``[x(k), x(n-k+1)]`` (0 if no such interval reaches ``confidence``) and its achieved
    coverage ``1 - 2 P(Bin(n, 1/2) <= k - 1)`` (NaN if none): 96.9% for 6 values, 99.2% for
    8, 97.9% for 10 at a nominal 95%. The same interval as
    ``scipy.stats.quantile_test(x, p=0.5).confidence_interval(confidence)``."""
    alpha2 = (1.0 - confidence) / 2.0
    k = 0
    while k + 1 <= n // 2 and float(special.bdtr(k, n, 0.5)) <= alpha2 * (1 + 1e-12):
        k += 1
    return k, (1.0 - 2.0 * float(special.bdtr(k - 1, n, 0.5)) if k else math.nan)


def _two_sided(cdf_at: float, sf_at: float) -> float:
    return float(min(1.0, 2.0 * min(cdf_at, sf_at)))


# ---------------------------------------------------------------------------------------
# Minimum achievable p-values (the "can this design ever be significant?" guard)


def min_p_unpaired(m: int, n: int) -> float:
    """Smallest two-sided p-value the exact Mann-Whitney test can give for m vs n trials.

    ``2 / C(m+n, n)`` (benchstat's ``uTestMinP``): 0.1 for 3 vs 3, 0.0079 for 5 vs 5,
    0.0022 for 6 vs 6.
    """
    if m < 1 or n < 1:
        return 1.0
    return float(min(1.0, 2.0 / special.comb(m + n, n, exact=True)))


def min_p_unpaired_tied(a: np.ndarray, b: np.ndarray) -> float:
    """Smallest two-sided p-value :func:`mann_whitney` can give for these trials' values,
    ties kept: the p-value of the most extreme arrangement of the pooled values (the arm's
    ``n`` trials holding the ``n`` largest, or the ``n`` smallest), under the exact
    permutation distribution of the mid-rank sum conditional on the ties.

    Without ties it equals :func:`min_p_unpaired`; ties raise it, up to 1 when the values
    cannot be told apart, e.g. error rates of 0 in 19 of 20 trials (every arrangement gives
    ``p = 1``), where the untied floor ``2 / C(20, 10)`` would promise significance.
    """
    a = finite_1d("a", a)
    b = finite_1d("b", b)
    m, n = a.size, b.size
    if m < 1 or n < 1:
        return 1.0
    pooled = np.sort(np.concatenate([a, b]))
    top = mann_whitney(pooled[:m], pooled[m:]).pvalue  # the arm holds the n largest values
    bottom = mann_whitney(pooled[n:], pooled[:n]).pvalue  # ... or the n smallest
    return float(min(top, bottom))


def min_p_paired(n: int) -> float:
    """Smallest two-sided p-value of the exact signed-rank test on ``n`` blocks: ``2 / 2**n``.

    0.0625 for 5 blocks (never significant at 0.05), 0.031 for 6.
    """
    if n < 1:
        return 1.0
    return float(min(1.0, 2.0 / 2.0**n))


# ---------------------------------------------------------------------------------------
# Two-sample


def hodges_lehmann_shift(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Hodges-Lehmann shift: the median of all differences ``b_j - a_i``."""
    a = finite_1d("a", a)
    b = finite_1d("b", b)
    return float(np.median(np.subtract.outer(b, a)))


def mann_whitney(a: np.ndarray, b: np.ndarray) -> RankTest:
    """Two-sided Mann-Whitney U test of ``b`` against ``a``.

    Exact when ``len(a) * len(b) <= EXACT_MAX_PAIRS``: with no ties this equals
    ``scipy.stats.mannwhitneyu(b, a, method="exact")``; with ties it is the exact
    permutation distribution of the mid-rank sum. Above that size: the normal approximation
    with tie and continuity corrections.
    """
    a = finite_1d("a", a)
    b = finite_1d("b", b)
    m, n = a.size, b.size
    pooled = np.concatenate([a, b])
    ranks = stats.rankdata(pooled)  # mid-ranks
    ties = bool(np.unique(pooled).size < pooled.size)
    r_b = float(ranks[m:].sum())
    u = r_b - n * (n + 1) / 2.0
    if m * n <= EXACT_MAX_PAIRS:
        if not ties:
            cdf = _u_cdf(m, n)
            ui = int(round(u))
            lower = cdf[ui]
            upper = 1.0 - (cdf[ui - 1] if ui > 0 else 0.0)
            return RankTest(u, _two_sided(lower, upper), True, False)
        w = np.rint(2.0 * ranks).astype(np.int64)
        counts = _subset_sums_fixed_size(w, n)
        probs = counts / counts.sum()
        obs = int(round(2.0 * r_b))
        lower = float(probs[: obs + 1].sum())
        upper = float(probs[obs:].sum())
        return RankTest(u, _two_sided(lower, upper), True, True)
    # normal approximation
    mu = m * n / 2.0
    _, tcounts = np.unique(pooled, return_counts=True)
    big_n = m + n
    tie_term = float((tcounts**3 - tcounts).sum()) / (big_n * (big_n - 1))
    sd = math.sqrt(m * n / 12.0 * ((big_n + 1) - tie_term))
    if sd == 0.0:
        return RankTest(u, 1.0, False, ties)
    z = (abs(u - mu) - 0.5) / sd
    return RankTest(u, float(min(1.0, 2.0 * stats.norm.sf(max(z, 0.0)))), False, ties)


def _u_critical(m: int, n: int, alpha2: float) -> tuple[int, float, bool]:
    """Largest c with ``P(U <= c) <= alpha2`` (-1 if none), that probability, exactness."""
    if m * n <= EXACT_MAX_PAIRS:
        cdf = _u_cdf(m, n)
        c = int(np.searchsorted(cdf, alpha2 * (1 + _REL_TOL), side="right")) - 1
        return c, (float(cdf[c]) if c >= 0 else 0.0), True
    mu = m * n / 2.0
    sd = math.sqrt(m * n * (m + n + 1) / 12.0)
    c = int(math.floor(mu - 0.5 + stats.norm.ppf(alpha2) * sd))
    c = max(c, -1)
    tail = float(stats.norm.cdf((c + 0.5 - mu) / sd)) if c >= 0 else 0.0
    return c, tail, False


def moses_interval(a: np.ndarray, b: np.ndarray, confidence: float = 0.95) -> RankInterval:
    """Hodges-Lehmann shift of ``b`` against ``a`` with the exact Moses interval.

    Parameters
    ----------
    a, b:
        The two samples (for benchlib: log per-trial summaries of baseline and arm).
    confidence:
        Nominal two-sided confidence; the interval reached is at least this
        (``achieved``), or unbounded when the samples are too small.

    Examples
    --------
    >>> r = moses_interval(np.arange(10.0), np.arange(10.0) + 0.5)
    >>> r.k, round(r.achieved, 3)
    (24, 0.957)
    """
    a = finite_1d("a", a)
    b = finite_1d("b", b)
    m, n = a.size, b.size
    diffs = np.sort(np.subtract.outer(b, a).ravel())
    est = float(np.median(diffs))
    c, tail, exact = _u_critical(m, n, (1.0 - confidence) / 2.0)
    if c < 0:
        return RankInterval(est, -math.inf, math.inf, 1.0, 0, exact)
    k = c + 1
    lo = float(diffs[k - 1])
    hi = float(diffs[m * n - k])
    return RankInterval(est, lo, hi, float(1.0 - 2.0 * tail), k, exact)


# ---------------------------------------------------------------------------------------
# One-sample (paired blocks)


def walsh_averages(d: np.ndarray) -> np.ndarray:
    """All Walsh averages ``(d_i + d_j) / 2`` for ``i <= j``, sorted."""
    d = np.asarray(d, dtype=float)
    i, j = np.triu_indices(d.size)
    return np.sort((d[i] + d[j]) / 2.0)


def hodges_lehmann_center(d: np.ndarray) -> float:
    """One-sample Hodges-Lehmann estimate: the median of the Walsh averages."""
    d = finite_1d("d", d)
    return float(np.median(walsh_averages(d)))


def signed_rank(d: np.ndarray) -> RankTest:
    """Two-sided Wilcoxon signed-rank test of ``d`` against 0.

    Zero differences are dropped (SciPy's default ``zero_method="wilcox"``). Exact up to
    ``EXACT_MAX_BLOCKS`` non-zero differences: with no ties and no zeros this equals
    ``scipy.stats.wilcoxon(d, method="exact")``; with ties it is the exact sign-flip
    distribution of the mid-rank statistic.
    """
    d = finite_1d("d", d)
    nz = d[d != 0.0]
    zeros = bool(nz.size < d.size)
    n = nz.size
    if n == 0:
        return RankTest(0.0, 1.0, True, True)
    ranks = stats.rankdata(np.abs(nz))
    ties = zeros or bool(np.unique(np.abs(nz)).size < n)
    t_plus = float(ranks[nz > 0].sum())
    if n <= EXACT_MAX_BLOCKS:
        if not ties:
            cdf = _t_cdf(n)
            ti = int(round(t_plus))
            lower = cdf[ti]
            upper = 1.0 - (cdf[ti - 1] if ti > 0 else 0.0)
            return RankTest(t_plus, _two_sided(lower, upper), True, False)
        w = np.rint(2.0 * ranks).astype(np.int64)
        counts = _subset_sums_any_size(w)
        probs = counts / counts.sum()
        obs = int(round(2.0 * t_plus))
        return RankTest(
            t_plus, _two_sided(float(probs[: obs + 1].sum()), float(probs[obs:].sum())), True, ties
        )
    mu = n * (n + 1) / 4.0
    _, tcounts = np.unique(np.abs(nz), return_counts=True)
    var = n * (n + 1) * (2 * n + 1) / 24.0 - float((tcounts**3 - tcounts).sum()) / 48.0
    sd = math.sqrt(var)
    z = (abs(t_plus - mu) - 0.5) / sd
    return RankTest(t_plus, float(min(1.0, 2.0 * stats.norm.sf(max(z, 0.0)))), False, ties)


def _t_critical(n: int, alpha2: float) -> tuple[int, float, bool]:
    if n <= EXACT_MAX_BLOCKS:
        cdf = _t_cdf(n)
        c = int(np.searchsorted(cdf, alpha2 * (1 + _REL_TOL), side="right")) - 1
        return c, (float(cdf[c]) if c >= 0 else 0.0), True
    mu = n * (n + 1) / 4.0
    sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24.0)
    c = max(int(math.floor(mu - 0.5 + stats.norm.ppf(alpha2) * sd)), -1)
    tail = float(stats.norm.cdf((c + 0.5 - mu) / sd)) if c >= 0 else 0.0
    return c, tail, False


def walsh_interval(d: np.ndarray, confidence: float = 0.95) -> RankInterval:
    """Median of Walsh averages of ``d`` with the exact signed-rank interval.

    Examples
    --------
    >>> r = walsh_interval(np.linspace(-1, 2, 10))
    >>> r.k, round(r.achieved, 3)
    (9, 0.951)
    """
    d = finite_1d("d", d)
    w = walsh_averages(d)
    est = float(np.median(w))
    c, tail, exact = _t_critical(d.size, (1.0 - confidence) / 2.0)
    if c < 0:
        return RankInterval(est, -math.inf, math.inf, 1.0, 0, exact)
    k = c + 1
    return RankInterval(est, float(w[k - 1]), float(w[w.size - k]), float(1.0 - 2.0 * tail), k, exact)
