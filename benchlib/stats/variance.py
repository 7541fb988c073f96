"""Variance components of per-trial metrics: between and within trials, estimated from a
pilot's stored requests (pure).

Kalibera & Jones (2013): repeat where the variance is. A per-trial metric on the log scale
(median latency, p99, throughput) varies between trials for two reasons:

* **between trials** (``sigma2_between``): each trial is a fresh start of the service and
  the client (placement, caches, neighbours); more measured seconds do not shrink it;
* **within a trial** (``sigma2_within(d)``): the metric is estimated from a finite stretch
  of requests; it shrinks with the measured duration ``d``, modelled as ``c / d`` (the
  batch-means law for a stationary series whose correlations are short compared with ``d``).

The paired tests compare within-block log ratios, so for a blocked design the component that
matters is the variance of those ratios: ``Var(log b - log a) = B + (c_a + c_b) / d`` with
``B`` the between-trial part of the ratio (block effects cancel). It is estimated from a
pilot's trials (total variance of the ratios) minus the within part, and the within part from
splitting each trial's measured phase into ``k`` equal windows (batch means,
:func:`window_metrics`): the variance of the window metrics at window length ``w`` is
``c / w``, so ``c`` estimated at several ``k`` checks the model, and so does re-measuring the
ratio's variance on a prefix of each trial (the first half, the first quarter), which is what a
shorter trial would have measured.

A pilot of a few blocks leaves the between-trial variance uncertain: :meth:`PairComponents.upper`
is it at a one-sided upper confidence bound (chi-square, :func:`variance_bound`), and
:func:`pool_components` adds the degrees of freedom of an earlier run's components. What a
design needs from these components is planned in :mod:`benchlib.stats.planning`.

Everything here is computed from a pilot's stored requests and timestamps; nothing is assumed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats

from benchlib.core.errors import ParameterError
from benchlib.core.schema import ERROR_CODES, PHASE_CODES
from benchlib.stats._checks import probability
from benchlib.stats.quantiles import quantile_column
from benchlib.stats.summary import MIN_TAIL_COUNT, trial_columns, trial_quantiles

__all__ = [
    "VARIANCE_CONFIDENCE",
    "ArmComponents",
    "PairComponents",
    "window_metrics",
    "arm_components",
    "pair_components",
    "components_table",
    "pool_components",
    "variance_bound",
    "variance_interval",
]

#: One-sided confidence of the upper bound of the between-trial variance a plan rests on
#: (:meth:`PairComponents.upper`): 80%, Browne's (1995) choice for pilot-based sizing.
VARIANCE_CONFIDENCE = 0.8
#: Window counts whose within-trial variance gives the within component (largest windows
#: first: least affected by correlation between neighbouring requests).
WITHIN_SPLITS: tuple[int, ...] = (2, 4, 8)


# ---------------------------------------------------------------------------------------
# Windows of one trial


def window_metrics(
    rows: np.ndarray | pd.DataFrame,
    *,
    splits: Sequence[int] = (1, 2, 4, 8),
    prefixes: Sequence[float] = (0.5, 0.25),
    duration_s: float | None = None,
    quantiles: Sequence[float] = (0.5, 0.99),
    min_tail: int = MIN_TAIL_COUNT,
) -> list[dict[str, Any]]:
    """Metrics of windows of one trial's measured phase.

    Parameters
    ----------
    rows:
        The trial's per-request rows (:data:`benchlib.core.schema.ROW_DTYPE`).
    splits:
        Split the measured phase into ``k`` equal windows, for each ``k`` (``k = 1``: the
        whole phase, computed the same way as the windows).
    prefixes:
        Also measure the first fraction ``f`` of the phase, for each ``f`` (what a trial
        ``f`` times as long would have measured).
    duration_s:
        The measured phase's length (the load generator's ``measured_duration_s``); else
        from the rows as :func:`~benchlib.stats.summarize_trial` does.
    quantiles, min_tail:
        Latency quantiles per window; a quantile with fewer than ``min_tail`` successful
        requests beyond it in a window is NaN.

    Returns
    -------
    list of dict
        One per window: ``kind`` (``"split"`` or ``"prefix"``), ``k`` (windows in the
        split; 0 for prefixes), ``frac`` (the window's share of the phase), ``j`` (its
        index), ``start_s``, ``window_s``, ``n``, ``n_ok``, ``throughput_rps`` and the
        quantile columns (``p50_ms``...).
    """
    cols = trial_columns(rows)
    measured = cols["phase"] == PHASE_CODES["measure"]
    n_all = int(np.count_nonzero(measured))
    if n_all < 2:
        raise ParameterError(f"a trial needs at least 2 measured requests to be split into windows, it has {n_all}")
    t_int = cols["t_intended_ns"][measured]
    t_sent = cols["t_sent_ns"][measured]
    if duration_s is None:
        span = float(t_sent.max() - t_sent.min()) / 1e9
        duration_s = span * n_all / (n_all - 1)
    if not (np.isfinite(duration_s) and duration_s > 0):
        raise ParameterError(f"duration_s must be a positive number of seconds, got {duration_s!r}")
    rel = (t_int - t_int.min()) / 1e9
    status = cols["status"][measured]
    ok = (cols["error"][measured] == ERROR_CODES["none"]) & (status >= 100) & (status < 400)
    lat = (cols["t_done_ns"][measured] - t_int) / 1e6
    spec: list[tuple[str, int, float, int, float, float]] = []
    for k in splits:
        k = int(k)
        if k < 1:
            raise ParameterError(f"splits must be positive window counts, got {k!r}")
        spec += [("split", k, 1.0 / k, j, j * duration_s / k, (j + 1) * duration_s / k) for j in range(k)]
    for f in prefixes:
        if not 0.0 < float(f) <= 1.0:
            raise ParameterError(f"prefixes must be fractions in (0, 1], got {f!r}")
        spec.append(("prefix", 0, float(f), 0, 0.0, float(f) * duration_s))
    out = []
    for kind, k, frac, j, a, b in spec:
        last = kind == "split" and j == k - 1
        sel = (rel >= a) & ((rel <= b + 1e-9) if last else (rel < b))
        x = lat[sel & ok]
        rec: dict[str, Any] = {"kind": kind, "k": k, "frac": frac, "j": j, "start_s": a, "window_s": b - a,
                               "n": int(np.count_nonzero(sel)), "n_ok": int(x.size),
                               "throughput_rps": float(np.count_nonzero(sel)) / (b - a)}
        qv, _ = trial_quantiles(x, list(quantiles)) if x.size else (np.full(len(quantiles), np.nan), "none")
        for q, v in zip(quantiles, qv, strict=True):
            rec[quantile_column(q)] = float(v) if x.size * (1.0 - q) >= min_tail - 1e-9 else math.nan
        out.append(rec)
    return out


# ---------------------------------------------------------------------------------------
# Components


def _scaled(var: float, df: int, p: float) -> float:
    """``var * df / chi2.ppf(p, df)``: the variance whose estimate ``var`` (``df`` degrees of
    freedom, normal data) sits at the chi-square quantile ``p``."""
    return var * df / float(stats.chi2.ppf(p, df))


def variance_bound(var: float, df: int, confidence: float, *, side: Literal["upper", "lower"]) -> float:
    """The one-sided ``confidence`` bound of a variance estimated as ``var`` with ``df`` degrees
    of freedom (normal data; same units as ``var``): the upper bound
    ``var * df / chi2.ppf(1 - confidence, df)`` (what a plan rests on:
    :meth:`PairComponents.upper`) or the lower bound ``var * df / chi2.ppf(confidence, df)``
    (what a futility projection rests on: :func:`benchlib.stats.sequential.budget_mde`). NaN
    with fewer than 1 degree of freedom or a variance that is not finite."""
    probability("confidence", confidence)
    if side not in ("upper", "lower"):
        raise ParameterError(f"side must be 'upper' or 'lower', got {side!r}")
    if df < 1 or not np.isfinite(var):
        return math.nan
    return _scaled(var, df, 1.0 - confidence if side == "upper" else confidence)


def variance_interval(var: float, df: int, confidence: float = 0.95) -> tuple[float, float]:
    """The two-sided ``confidence`` interval of a variance estimated as ``var`` with ``df``
    degrees of freedom (normal data; same units as ``var``); NaNs with fewer than 1 degree of
    freedom or a variance that is not finite."""
    if df < 1 or not np.isfinite(var):
        return math.nan, math.nan
    a = (1.0 - confidence) / 2.0
    return _scaled(var, df, 1.0 - a), _scaled(var, df, a)


@dataclass(frozen=True)
class ArmComponents:
    """One arm's variance components of one metric (log scale).

    Attributes
    ----------
    labels, arm, metric:
        Which (``labels``: the ``by`` columns, e.g. the condition).
    n_trials, duration_s:
        Valid trials used and their measured duration (s).
    centre:
        Geometric mean of the per-trial metric.
    rate_rps:
        Median throughput of the trials (requests per measured second).
    total_var:
        Variance of the log per-trial metric across trials (block effects included).
    within_var:
        Within-trial variance of the log metric at ``duration_s`` (from the windows).
    within_coef:
        ``c`` of ``within(d) = c / d`` (log-variance x seconds).
    within_df:
        Degrees of freedom of ``within_var``.
    within_check:
        ``c`` estimated from each split ``k`` (window ``duration_s / k``): equal values
        mean the ``c / d`` model holds; growing with the window length means correlation
        longer than the windows (then the largest window's ``c`` is the one to trust).
    between_var:
        ``max(0, total_var - within_var)``.
    """

    labels: Mapping[str, Any]
    arm: str
    metric: str
    n_trials: int
    duration_s: float
    centre: float
    rate_rps: float
    total_var: float
    within_var: float
    within_coef: float
    within_df: int
    within_check: Mapping[int, float]
    between_var: float

    @property
    def between_share(self) -> float:
        """Share of the per-trial variance that is between trials."""
        return self.between_var / self.total_var if self.total_var > 0 else math.nan


@dataclass(frozen=True)
class PairComponents:
    """Variance components of the within-block log ratio arm / baseline of one metric.

    Attributes
    ----------
    labels, baseline, arm, metric:
        Which row.
    n_blocks, duration_s:
        Complete valid blocks and the measured duration (s) of their trials.
    rate_rps:
        The slower arm's median throughput (sets how short a trial can be for a quantile).
    total_var, total_ci:
        Variance of the log ratio across blocks (what the paired test sees) with its 95%
        interval (chi-square, ``n_blocks - 1`` df).
    within_var, within_coef:
        The two arms' within-trial variances at ``duration_s`` summed, and its ``c``.
    between_var, between_ci:
        ``total_var - within_var`` (at least 0) and its interval.
    block_var:
        The part the blocks share and pairing removes: ``(Var a + Var b - Var(b - a)) / 2``.
    prefix_check:
        Prefix fraction -> (duration, observed variance of the ratio on that prefix of every
        trial, the model's prediction ``between + c / duration``).
    """

    labels: Mapping[str, Any]
    baseline: str
    arm: str
    metric: str
    n_blocks: int
    duration_s: float
    rate_rps: float
    total_var: float
    total_ci: tuple[float, float]
    within_var: float
    within_coef: float
    between_var: float
    between_ci: tuple[float, float]
    block_var: float
    prefix_check: Mapping[float, tuple[float, float, float]] = field(default_factory=dict)

    @property
    def between_share(self) -> float:
        """Share of the ratio's variance that is between trials."""
        return self.between_var / self.total_var if self.total_var > 0 else math.nan

    @property
    def row(self) -> tuple[str, str, str, str]:
        """Which row: ``(condition, baseline, arm, metric)`` (condition ``""`` when unlabelled)."""
        return (str(self.labels.get("condition", "")), self.baseline, self.arm, self.metric)

    def var(self, duration_s: float) -> float:
        """Predicted variance of the log ratio for trials of ``duration_s`` measured seconds."""
        return self.between_var + self.within_coef / float(duration_s)

    def sd(self, duration_s: float) -> float:
        """Predicted SD of the log ratio (the planning ``sigma``) at ``duration_s``."""
        return math.sqrt(self.var(duration_s))

    def upper(self, confidence: float = VARIANCE_CONFIDENCE) -> PairComponents:
        """These components with the between-trial variance at its one-sided upper
        confidence bound: the total variance of the ratio bounded by chi-square with
        ``n_blocks - 1`` degrees of freedom, ``total * df / chi2.ppf(1 - confidence, df)``,
        less the within part (estimated from many more windows, taken as known). A pilot of
        10 blocks gives a between SD anywhere in a range of about 2.4x (0.024-0.058 at 8 s
        in one study); planning on the 80% bound makes the planned power hold in about 80%
        of pilots (Browne 1995) rather than half of them."""
        probability("confidence", confidence)
        df = self.n_blocks - 1
        if df < 1 or not (np.isfinite(self.total_var) and np.isfinite(self.within_var)):
            return self
        total = variance_bound(self.total_var, df, confidence, side="upper")
        between = max(0.0, total - self.within_var)
        return replace(self, total_var=between + self.within_var, between_var=between)


def _valid(windows: pd.DataFrame) -> pd.DataFrame:
    need = {"arm", "block", "kind", "k", "frac", "j", "window_s"}
    missing = sorted(need - set(windows.columns))
    if missing:
        raise ParameterError(f"windows lack column(s) {missing}; build them with window_metrics() per trial")
    if "valid" in windows.columns:
        windows = windows[windows["valid"].astype(bool)]
    return windows


def _groups(windows: pd.DataFrame, by: Sequence[str]) -> list[tuple[dict[str, Any], pd.DataFrame]]:
    by = [c for c in by if c in windows.columns]
    if not by:
        return [({}, windows)]
    return [(dict(zip(by, k if isinstance(k, tuple) else (k,), strict=True)), g)
            for k, g in windows.groupby(by, sort=False)]


def _arm(g: pd.DataFrame, labels: dict[str, Any], arm: str, metric: str) -> ArmComponents | None:
    w = g[g["arm"] == arm]
    whole = w[(w["kind"] == "split") & (w["k"] == 1)].dropna(subset=[metric])
    whole = whole[whole[metric] > 0]
    if len(whole) < 2:
        return None
    y = np.log(whole[metric].to_numpy(dtype=float))
    d0 = float(whole["window_s"].median())
    total = float(np.var(y, ddof=1))
    check: dict[int, float] = {}
    dfs: dict[int, int] = {}
    for k in sorted(int(x) for x in w.loc[(w["kind"] == "split") & (w["k"] > 1), "k"].unique()):
        part = w[(w["kind"] == "split") & (w["k"] == k) & w["block"].isin(whole["block"])]
        v, df = [], 0
        for _, t in part.groupby("block"):
            x = t[metric].to_numpy(dtype=float)
            if x.size == k and np.all(np.isfinite(x)) and np.all(x > 0):
                v.append(float(np.var(np.log(x), ddof=1)))
                df += k - 1
        if len(v) >= 2:
            check[k] = float(np.mean(v)) * d0 / k  # c = V(w) * w with w = d0 / k
            dfs[k] = df
    use = next((k for k in WITHIN_SPLITS if k in check), None)
    c = check[use] if use is not None else math.nan
    within = c / d0 if use is not None else math.nan
    rate = float(whole["throughput_rps"].median()) if "throughput_rps" in whole.columns else math.nan
    return ArmComponents(labels, arm, metric, int(y.size), d0, float(np.exp(y.mean())), rate, total, within, c,
                         dfs.get(use, 0) if use is not None else 0, check,
                         max(0.0, total - within) if np.isfinite(within) else math.nan)


def arm_components(windows: pd.DataFrame, metric: str, *, by: Sequence[str] = ("condition",)) -> list[ArmComponents]:
    """Each arm's variance components of ``metric`` (per ``by`` group), from the windows of
    its valid trials (:func:`window_metrics`, with the ``arm``, ``block``, ``valid`` and
    ``by`` columns added)."""
    windows = _valid(windows)
    if metric not in windows.columns:
        raise ParameterError(f"windows have no column {metric!r}; they have {sorted(map(str, windows.columns))}")
    out = []
    for labels, g in _groups(windows, by):
        for arm in dict.fromkeys(g["arm"]):
            comp = _arm(g, labels, str(arm), metric)
            if comp is not None:
                out.append(comp)
    return out


def _log_whole(g: pd.DataFrame, arm: str, metric: str, kind: str, key: str, value: float) -> pd.Series:
    w = g[(g["arm"] == arm) & (g["kind"] == kind) & (np.isclose(g[key].astype(float), value))]
    w = w[np.isfinite(w[metric].astype(float)) & (w[metric].astype(float) > 0)]
    return pd.Series(np.log(w[metric].to_numpy(dtype=float)), index=w["block"].to_numpy())


def pair_components(windows: pd.DataFrame, metric: str, *, baseline: str | None = None,
                    contrasts: Sequence[tuple[str, str]] | None = None,
                    by: Sequence[str] = ("condition",)) -> list[PairComponents]:
    """Variance components of the within-block log ratio of ``metric`` for each arm against
    ``baseline`` (or each ``(baseline, arm)`` of ``contrasts``), per ``by`` group."""
    windows = _valid(windows)
    if metric not in windows.columns:
        raise ParameterError(f"windows have no column {metric!r}; they have {sorted(map(str, windows.columns))}")
    if (baseline is None) == (contrasts is None):
        raise ParameterError("pair_components() needs baseline= or contrasts=, one of them")
    out = []
    for labels, g in _groups(windows, by):
        arms = [str(a) for a in dict.fromkeys(g["arm"])]
        pairs = ([(str(baseline), a) for a in arms if a != baseline] if contrasts is None
                 else [(str(b), str(a)) for b, a in contrasts])
        comps = {a: _arm(g, labels, a, metric) for a in arms}
        for base, arm in pairs:
            ca, cb = comps.get(base), comps.get(arm)
            if ca is None or cb is None:
                continue
            ya = _log_whole(g, base, metric, "split", "k", 1)
            yb = _log_whole(g, arm, metric, "split", "k", 1)
            common = sorted(set(ya.index) & set(yb.index))
            if len(common) < 3:
                continue
            da, db = ya.loc[common].to_numpy(), yb.loc[common].to_numpy()
            diff = db - da
            total = float(np.var(diff, ddof=1))
            within = ca.within_var + cb.within_var
            coef = ca.within_coef + cb.within_coef
            between = max(0.0, total - within) if np.isfinite(within) else math.nan
            lo, hi = variance_interval(total, len(common) - 1)
            bci = (max(0.0, lo - within), max(0.0, hi - within)) if np.isfinite(within) else (math.nan, math.nan)
            block = (float(np.var(da, ddof=1)) + float(np.var(db, ddof=1)) - total) / 2.0
            d0 = float(np.median([ca.duration_s, cb.duration_s]))
            checks: dict[float, tuple[float, float, float]] = {}
            for f in sorted({float(x) for x in g.loc[g["kind"] == "prefix", "frac"]}, reverse=True):
                pa = _log_whole(g, base, metric, "prefix", "frac", f)
                pb = _log_whole(g, arm, metric, "prefix", "frac", f)
                cc = sorted(set(pa.index) & set(pb.index) & set(common))
                if len(cc) >= 3:
                    obs = float(np.var(pb.loc[cc].to_numpy() - pa.loc[cc].to_numpy(), ddof=1))
                    checks[f] = (f * d0, obs, between + coef / (f * d0) if np.isfinite(coef) else math.nan)
            out.append(PairComponents(labels, base, arm, metric, len(common), d0, min(ca.rate_rps, cb.rate_rps),
                                      total, (lo, hi), within, coef, between, bci, block, checks))
    return out


def components_table(components: Sequence[PairComponents | ArmComponents]) -> pd.DataFrame:
    """The components as a table (SDs on the log scale in %, shares in %), one row each."""
    recs = []
    for c in components:
        rec: dict[str, Any] = dict(c.labels)
        baseline, n = (c.baseline, c.n_blocks) if isinstance(c, PairComponents) else ("", c.n_trials)
        rec.update(metric=c.metric, baseline=baseline, arm=c.arm, n=n, duration_s=c.duration_s,
                   total_sd_pct=100 * math.sqrt(c.total_var),
                   within_sd_pct=100 * math.sqrt(c.within_var) if np.isfinite(c.within_var) else math.nan,
                   between_sd_pct=100 * math.sqrt(c.between_var) if np.isfinite(c.between_var) else math.nan,
                   between_share_pct=100 * c.between_share)
        if isinstance(c, PairComponents):
            rec.update(between_sd_ci_pct=tuple(100 * math.sqrt(x) if np.isfinite(x) else math.nan
                                               for x in c.between_ci),
                       block_share_pct=100 * c.block_var / (c.total_var + 2 * c.block_var)
                       if c.total_var + 2 * c.block_var > 0 else math.nan)
            for d, obs, pred in c.prefix_check.values():
                rec[f"sd_at_{d:g}s_obs_pct"] = 100 * math.sqrt(obs)
                rec[f"sd_at_{d:g}s_pred_pct"] = 100 * math.sqrt(pred) if np.isfinite(pred) else math.nan
        else:
            for k, coef in c.within_check.items():
                rec[f"within_sd_k{k}_pct"] = 100 * math.sqrt(coef / c.duration_s)
        recs.append(rec)
    return pd.DataFrame.from_records(recs)


def pool_components(pilot: Sequence[PairComponents], seed: Sequence[PairComponents]) -> tuple[PairComponents, ...]:
    """The pilot's components, each pooled with the seed's of the same row (condition,
    baseline, arm, metric), if any: between-trial variance and within-trial coefficient
    weighted by their degrees of freedom (``n_blocks - 1``), at the pilot's duration; a row
    only the seed has is left out (the pilot decides which rows exist here)."""
    seeds = {c.row: c for c in seed if math.isfinite(c.within_coef) and c.n_blocks >= 2}
    out = []
    for c in pilot:
        s = seeds.get(c.row)
        if s is None or not math.isfinite(c.within_coef):
            out.append(c)
            continue
        da, db = c.n_blocks - 1, s.n_blocks - 1
        between = (da * c.between_var + db * s.between_var) / (da + db)
        coef = (da * c.within_coef + db * s.within_coef) / (da + db)
        within = coef / c.duration_s
        total = between + within
        out.append(replace(c, n_blocks=da + db + 1, total_var=total, total_ci=variance_interval(total, da + db),
                           within_var=within, within_coef=coef, between_var=between,
                           between_ci=variance_interval(between, da + db) if between > 0 else (0.0, 0.0)))
    return tuple(out)
