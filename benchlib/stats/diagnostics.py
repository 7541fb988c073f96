"""Diagnostics of one trial and of a set of trials (pure).

Within a trial: lag-1 autocorrelation and effective sample size, Gregg's modality value
("mvalue"), counts of extreme requests. Across trials: outlier trials (more than 3 MADs of
the log metric from the arm's median), interleaving of arms in the run order (no blocking
means drift can pose as a difference), counterbalancing of the order within blocks.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

__all__ = [
    "lag1_autocorrelation",
    "effective_n",
    "mvalue",
    "MVALUE_MULTIMODAL",
    "MVALUE_BIMODAL",
    "MVALUE_SEVERAL",
    "severe_outliers",
    "outlier_trials",
    "OUTLIER_MADS",
    "runs_interleaving",
]

#: BenchmarkDotNet's thresholds for the mvalue.
MVALUE_SEVERAL = 2.8
MVALUE_BIMODAL = 3.2
MVALUE_MULTIMODAL = 4.2

#: A trial is an outlier when its log metric is more than this many (normal-consistent)
#: MADs from its arm's median of trials.
OUTLIER_MADS = 3.0


def lag1_autocorrelation(x: np.ndarray) -> float:
    """Lag-1 autocorrelation of ``x`` (NaN for fewer than 3 values or a constant series)."""
    x = np.asarray(x, dtype=float)
    if x.size < 3:
        return math.nan
    e = x - x.mean()
    den = float(e @ e)
    if den == 0.0:
        return math.nan
    return float(e[:-1] @ e[1:]) / den


def effective_n(n: int, phi: float) -> float:
    """Effective sample size of a mean under AR(1): ``n (1 - phi) / (1 + phi)``, in [1, n]."""
    if not np.isfinite(phi) or phi <= 0.0:
        return float(n)
    phi = min(phi, 0.9999)
    return float(min(n, max(1.0, n * (1.0 - phi) / (1.0 + phi))))


def mvalue(x: np.ndarray, *, grid: int = 512) -> float:
    """Brendan Gregg's modality value of a sample (computed on a smoothed density of ``x``).

    The sum of absolute rises and falls of the density along a grid, divided by its
    maximum (the curve starts and ends at zero): 2 for one mode, about 4 for two clear
    modes. The density is a binned Gaussian kernel estimate whose bandwidth is the
    Silverman rule but at least 1/25 of the robust spread, so that sampling noise in large
    samples does not read as extra modes. Thresholds (BenchmarkDotNet): above 2.8 "can have
    several modes", above 3.2 bimodal, above 4.2 multimodal. NaN for fewer than 15 values.

    Pass log latencies: modes of a latency distribution are separated by factors.
    """
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    n = x.size
    if n < 15:
        return math.nan
    q25, q75 = np.quantile(x, [0.25, 0.75])
    spread = float(min(np.std(x), (q75 - q25) / 1.349)) or float(np.std(x))
    if not spread > 1e-9 * max(1.0, float(np.abs(x).max())):
        return 2.0  # (nearly) constant: one mode
    h = max(0.9 * spread * n ** (-0.2), spread / 25.0)
    lo, hi = float(x.min()) - 4 * h, float(x.max()) + 4 * h
    # bin finely enough for the kernel, but never more than a bin per 0.2 h
    bins = int(min(max(grid, (hi - lo) / (0.2 * h)), 200_000))
    counts, edges = np.histogram(x, bins=bins, range=(lo, hi))
    width = edges[1] - edges[0]
    half = int(math.ceil(4 * h / width))
    k = np.exp(-0.5 * ((np.arange(-half, half + 1) * width) / h) ** 2)
    dens = np.convolve(counts.astype(float), k / k.sum(), mode="same")
    peak = float(dens.max())
    if peak <= 0:
        return math.nan
    # ignore wiggles below 0.1% of the peak (numerical dust in the far tails)
    dens = np.where(dens < 1e-3 * peak, 0.0, dens)
    padded = np.concatenate([[0.0], dens, [0.0]])
    return float(np.abs(np.diff(padded)).sum() / peak)


def severe_outliers(log_x: np.ndarray) -> int:
    """Number of values above Tukey's severe fence ``Q3 + 3 IQR`` (on the log scale)."""
    x = np.asarray(log_x, dtype=float)
    if x.size < 4:
        return 0
    q1, q3 = np.quantile(x, [0.25, 0.75])
    return int(np.count_nonzero(x > q3 + 3.0 * (q3 - q1)))


def outlier_trials(log_values: np.ndarray, *, mads: float = OUTLIER_MADS) -> np.ndarray:
    """Distance of each trial from its arm's median of trials, in MADs (normal-consistent).

    Returns the signed distances; ``abs(distance) > mads`` marks an outlier trial. All
    zeros when the MAD is zero or there are fewer than 3 trials.
    """
    x = np.asarray(log_values, dtype=float)
    if x.size < 3:
        return np.zeros(x.size)
    med = np.median(x)
    mad = float(stats.median_abs_deviation(x, scale="normal"))
    if not mad > 0:
        return np.zeros(x.size)
    return (x - med) / mad


def runs_interleaving(labels_in_run_order: list[str]) -> tuple[int, float]:
    """Runs of equal labels in the run order, and the one-sided p-value of so few runs.

    With two arms run as AAAA...BBBB... there are 2 runs; randomized blocks give about
    ``1 + 2 m n / (m + n)``. The p-value is the exact probability, under random order, of
    at most the observed number of runs (Wald-Wolfowitz); small values mean the arms were
    not interleaved and drift between them cannot be told from a difference.
    """
    labs = list(labels_in_run_order)
    if len(labs) < 2:
        return len(labs), 1.0
    runs = 1 + sum(1 for i in range(1, len(labs)) if labs[i] != labs[i - 1])
    kinds = sorted(set(labs))
    if len(kinds) != 2:
        return runs, 1.0
    m = labs.count(kinds[0])
    n = labs.count(kinds[1])
    total = math.comb(m + n, m)

    def prob_runs(r: int) -> float:
        if r % 2 == 0:
            k = r // 2
            return 2.0 * math.comb(m - 1, k - 1) * math.comb(n - 1, k - 1) / total
        k = (r - 1) // 2
        return (
            math.comb(m - 1, k) * math.comb(n - 1, k - 1) + math.comb(m - 1, k - 1) * math.comb(n - 1, k)
        ) / total

    p = sum(prob_runs(r) for r in range(2, runs + 1))
    return runs, float(min(1.0, p))
