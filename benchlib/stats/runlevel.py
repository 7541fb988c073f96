"""Run-level variance: how much whole runs of one study differ on one machine, and a comparison
of two runs that counts it (pure).

The trials of one run share that run's conditions (the machine that day, other load, its
thermal state, the build), so they do not sample what moves a whole run. Comparing run B with
run A on their trials alone leaves that variance out: the interval is too narrow and the error
rates depend on a variance nobody estimated. With at least :data:`MIN_RUNS` runs of the study
on the machine (the history), the run-level variance is estimated by the one-way
random-effects analysis of variance of the runs' per-trial values (:func:`run_level`), and
:func:`across_runs` compares two runs with it: the difference of two run means has the variance
``2 tau^2 + s_a^2 / n_a + s_b^2 / n_b``, with Satterthwaite's degrees of freedom (``tau^2`` on
``runs - 1``), and the interval, the minimum-effect test at the margin, the equivalence test and
the MDE (:func:`across_runs_mde`) are Student-t ones on that variance.

Everything is on the comparison scale: the logs of a ratio metric's per-trial values, or the
values of a difference metric (error rates).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from benchlib.stats.estimate import beyond_pvalue, tost_pvalue
from benchlib.stats.exact import hodges_lehmann_shift

__all__ = ["MIN_RUNS", "AcrossRuns", "RunLevel", "across_runs", "across_runs_mde", "run_level"]

#: The fewest runs (each with at least two valid trials of the row) the run-level variance is
#: estimated from: two degrees of freedom.
MIN_RUNS = 3


@dataclass(frozen=True)
class RunLevel:
    """The run-level variance of one row (:func:`run_level`).

    Attributes
    ----------
    runs: runs it rests on (each with at least two values).
    between: the run-level variance component ``tau^2`` (comparison scale squared; 0 when the
        runs' means vary no more than their trials predict).
    within: the pooled within-run variance of one trial's value.
    df: degrees of freedom of ``between`` (``runs - 1``).
    """

    runs: int
    between: float
    within: float
    df: int

    @property
    def sd(self) -> float:
        """The run-level SD (comparison scale: 0.03 is about 3% for a ratio metric)."""
        return math.sqrt(self.between)


def run_level(groups: Sequence[np.ndarray]) -> RunLevel | None:
    """The run-level variance of a row from its values in each run (one array per run,
    comparison scale): the one-way random-effects estimate ``(MSB - MSW) / n0`` (0 when
    negative), with ``n0`` the weighted mean trials per run. ``None`` with fewer than
    :data:`MIN_RUNS` runs of at least two finite values."""
    gs = [g[np.isfinite(g)] for g in (np.asarray(x, dtype=float) for x in groups)]
    gs = [g for g in gs if g.size >= 2]
    k = len(gs)
    if k < MIN_RUNS:
        return None
    n = np.array([g.size for g in gs], dtype=float)
    total = float(n.sum())
    means = np.array([g.mean() for g in gs])
    grand = float((n * means).sum() / total)
    msw = float(sum(((g - g.mean()) ** 2).sum() for g in gs) / (total - k))
    msb = float((n * (means - grand) ** 2).sum() / (k - 1))
    n0 = (total - float((n * n).sum()) / total) / (k - 1)
    return RunLevel(k, max(0.0, (msb - msw) / n0), msw, k - 1)


@dataclass(frozen=True)
class AcrossRuns:
    """Run B against run A with the run-level variance (:func:`across_runs`), comparison scale.

    Attributes
    ----------
    effect: the Hodges-Lehmann shift of B's values over A's.
    lo, hi: its ``confidence`` interval; ``tost_lo``, ``tost_hi``: its ``1 - 2 alpha`` one.
    se, df: the standard error of the difference of two run means (within-run and run-level
        variance) and its Satterthwaite degrees of freedom.
    p: the minimum-effect test's p-value at the margin (the plain test of no shift without one);
        ``p_shift``: the test of no shift at all; ``tost_p``: the equivalence test's (NaN
        without a margin).
    """

    effect: float
    lo: float
    hi: float
    tost_lo: float
    tost_hi: float
    se: float
    df: float
    p: float
    p_shift: float
    tost_p: float


def across_runs(a: np.ndarray, b: np.ndarray, level: RunLevel, *, confidence: float = 0.95, alpha: float = 0.05,
                margin: float = math.nan) -> AcrossRuns:
    """Run B's values ``b`` against run A's ``a`` (comparison scale, at least two each), with
    the row's run-level variance ``level`` (:func:`run_level` of the history): the shift's
    interval and tests are Student-t ones on ``2 tau^2 + s_a^2 / n_a + s_b^2 / n_b``;
    ``margin`` (comparison scale, e.g. ``log(1.05)``) for the minimum-effect and equivalence
    tests (NaN: the plain test, no equivalence)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    va, vb = float(np.var(a, ddof=1)) / a.size, float(np.var(b, ddof=1)) / b.size
    vr = 2.0 * level.between
    var = va + vb + vr
    parts = [(va, a.size - 1), (vb, b.size - 1), (vr, level.df)]
    den = sum(v * v / d for v, d in parts if v > 0 and d > 0)
    df = var * var / den if den > 0 else float(a.size + b.size - 2)
    se = math.sqrt(var)
    effect = float(hodges_lehmann_shift(a, b))

    def p_at(c: float) -> float:
        if se == 0:
            return 1.0 if effect == c else 0.0
        return float(2.0 * stats.t.sf(abs(effect - c) / se, df))

    half = float(stats.t.ppf(0.5 + confidence / 2.0, df)) * se
    thalf = float(stats.t.ppf(1.0 - alpha, df)) * se
    m = margin if math.isfinite(margin) and margin > 0 else math.nan
    return AcrossRuns(effect, effect - half, effect + half, effect - thalf, effect + thalf, se, df,
                      beyond_pvalue(p_at, effect, m) if math.isfinite(m) else p_at(0.0), p_at(0.0),
                      tost_pvalue(p_at, effect, m))


def across_runs_mde(se: float, df: float, *, alpha: float, power: float = 0.8) -> float:
    """The smallest true shift (comparison scale, beyond any margin) a two-sided Student-t test
    at ``alpha`` finds with ``power``, for a difference with standard error ``se`` on ``df``
    degrees of freedom."""
    if not (math.isfinite(se) and se >= 0 and df > 0):
        return math.nan
    return float((stats.t.ppf(1.0 - alpha / 2.0, df) + stats.t.ppf(power, df)) * se)
