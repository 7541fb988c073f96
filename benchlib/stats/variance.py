"""Variance components of per-trial metrics, a cost model, and the trials x duration planner (pure).

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
splitting each trial's measured phase into ``k`` equal windows (batch means): the variance of
the window metrics at window length ``w`` is ``c / w``, so ``c`` estimated at several ``k``
checks the model, and so does re-measuring the ratio's variance on a prefix of each trial
(the first half, the first quarter), which is what a shorter trial would have measured.

The planner then chooses blocks x duration: for each measured duration ``d`` the blocks the
paired rank test needs (:func:`benchlib.stats.power.mde`, each row at ``alpha / m``) to reach
the target MDE on every row, times the wall time of a block
(:class:`CostModel`: start-up, warm-up, ``d``, peer tools, pause, per arm), and takes the
cheapest. Where the between-trial variance dominates, more and shorter trials win. It plans
on an upper confidence bound of each row's between-trial variance (80% one-sided,
chi-square with the pilot's ``n_blocks - 1`` df; :meth:`PairComponents.upper`), not on the
point estimate, and says what the point estimate would need: the range of blocks a pilot's
uncertainty implies.

Everything here is computed from a pilot's stored requests and timestamps; nothing is assumed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy import stats

from benchlib.core.errors import ParameterError
from benchlib.core.schema import ERROR_CODES, PHASE_CODES
from benchlib.stats._checks import probability
from benchlib.stats.power import mde_shift, min_trials, planning_alpha
from benchlib.stats.quantiles import quantile_column, quantile_of
from benchlib.stats.summary import MIN_TAIL_COUNT, required_requests, trial_columns, trial_quantiles

if TYPE_CHECKING:
    from benchlib.stats.sequential import SequentialDesign

__all__ = [
    "DEFAULT_DURATIONS",
    "VARIANCE_CONFIDENCE",
    "ArmComponents",
    "PairComponents",
    "ArmCost",
    "CostModel",
    "DesignOption",
    "DesignPlan",
    "window_metrics",
    "arm_components",
    "pair_components",
    "components_table",
    "cost_model",
    "plan_design",
    "predicted_mde",
    "mde_text",
]

#: Measured durations (s) the planner considers unless told otherwise.
DEFAULT_DURATIONS: tuple[float, ...] = (0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 15.0, 20.0, 30.0, 60.0)
#: One-sided confidence of the upper bound of the between-trial variance the planner plans
#: on (:meth:`PairComponents.upper`): 80%, Browne's (1995) choice for pilot-based sizing.
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


def _chi2_ci(var: float, df: int, confidence: float = 0.95) -> tuple[float, float]:
    """Interval of a variance from its estimate with ``df`` degrees of freedom (normal data)."""
    if df < 1 or not np.isfinite(var):
        return math.nan, math.nan
    a = (1.0 - confidence) / 2.0
    return var * df / float(stats.chi2.ppf(1.0 - a, df)), var * df / float(stats.chi2.ppf(a, df))


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
        total = self.total_var * df / float(stats.chi2.ppf(1.0 - confidence, df))
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
            lo, hi = _chi2_ci(total, len(common) - 1)
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
        pair = isinstance(c, PairComponents)
        rec.update(metric=c.metric, baseline=c.baseline if pair else "", arm=c.arm,
                   n=c.n_blocks if pair else c.n_trials, duration_s=c.duration_s,
                   total_sd_pct=100 * math.sqrt(c.total_var),
                   within_sd_pct=100 * math.sqrt(c.within_var) if np.isfinite(c.within_var) else math.nan,
                   between_sd_pct=100 * math.sqrt(c.between_var) if np.isfinite(c.between_var) else math.nan,
                   between_share_pct=100 * c.between_share)
        if pair:
            rec.update(between_sd_ci_pct=tuple(100 * math.sqrt(x) if np.isfinite(x) else math.nan
                                               for x in c.between_ci),
                       block_share_pct=100 * c.block_var / (c.total_var + 2 * c.block_var)
                       if c.total_var + 2 * c.block_var > 0 else math.nan)
            for f, (d, obs, pred) in c.prefix_check.items():
                rec[f"sd_at_{d:g}s_obs_pct"] = 100 * math.sqrt(obs)
                rec[f"sd_at_{d:g}s_pred_pct"] = 100 * math.sqrt(pred) if np.isfinite(pred) else math.nan
        else:
            for k, coef in c.within_check.items():
                rec[f"within_sd_k{k}_pct"] = 100 * math.sqrt(coef / c.duration_s)
        recs.append(rec)
    return pd.DataFrame.from_records(recs)


# ---------------------------------------------------------------------------------------
# Cost


@dataclass(frozen=True)
class ArmCost:
    """Wall time of one trial of an arm, in seconds.

    ``trial_seconds(d) = fixed_s + warmup_s + d * (1 + peer_factor)``: ``fixed_s`` is what a
    trial costs beyond its warm-up, measured phase and peer tool (start-up, readiness and
    contract check, stop, the pause between trials, repeats of failed attempts);
    ``peer_factor`` the peer tool's seconds per measured second (its run lasts as long as
    the measured phase; 0 without a peer check). ``n``: trials it was measured on.
    """

    arm: str
    fixed_s: float
    warmup_s: float
    peer_factor: float
    n: int

    def trial_seconds(self, duration_s: float) -> float:
        """One trial's wall time (s) at ``duration_s`` measured seconds."""
        return self.fixed_s + self.warmup_s + float(duration_s) * (1.0 + self.peer_factor)


@dataclass(frozen=True)
class CostModel:
    """Wall time of a block (every arm once), from stored trials' timestamps."""

    arms: tuple[ArmCost, ...]

    def block_seconds(self, duration_s: float, arms: Sequence[str] | None = None) -> float:
        """Seconds per block at ``duration_s`` (of ``arms``, default all)."""
        use = [a for a in self.arms if arms is None or a.arm in arms]
        return float(sum(a.trial_seconds(duration_s) for a in use))

    def table(self) -> pd.DataFrame:
        """One row per arm: fixed seconds, warm-up, peer factor, trials measured."""
        return pd.DataFrame([{"arm": a.arm, "fixed_s": a.fixed_s, "warmup_s": a.warmup_s,
                              "peer_factor": a.peer_factor, "n": a.n} for a in self.arms])


def cost_model(trials: pd.DataFrame) -> CostModel:
    """The cost of each arm's trials from stored timestamps.

    ``trials``: one row per stored trial slot with ``arm``, ``started`` and ``next_started``
    (timestamps: this slot's first attempt and the next slot's; ``next_started`` NaT for the
    last, which then counts ``finished`` plus ``between_s``), ``finished``, ``warmup_s``,
    ``duration_s`` (measured), ``peer_s`` (the peer tool's run, 0 if none) and optionally
    ``between_s``. A slot's cycle is ``next_started - started``; what is left after its warm-up,
    measured phase and peer run is its fixed cost. Timestamps with one-second resolution
    average out over the trials.
    """
    need = {"arm", "started", "next_started", "finished", "warmup_s", "duration_s", "peer_s"}
    missing = sorted(need - set(trials.columns))
    if missing:
        raise ParameterError(f"trials lack column(s) {missing}")
    t = trials.copy()
    between = t["between_s"].astype(float) if "between_s" in t.columns else pd.Series(0.0, index=t.index)
    cycle = (pd.to_datetime(t["next_started"]) - pd.to_datetime(t["started"])).dt.total_seconds()
    last = (pd.to_datetime(t["finished"]) - pd.to_datetime(t["started"])).dt.total_seconds() + between
    t["cycle_s"] = cycle.where(cycle.notna(), last)
    out = []
    for arm, g in t.groupby("arm", sort=False):
        g = g[g["cycle_s"].notna()]
        if not len(g):
            continue
        d = g["duration_s"].astype(float)
        peer = g["peer_s"].astype(float).fillna(0.0)
        fixed = g["cycle_s"] - g["warmup_s"].astype(float) - d - peer
        out.append(ArmCost(str(arm), float(fixed.mean()), float(g["warmup_s"].astype(float).median()),
                           float((peer / d).mean()), int(len(g))))
    return CostModel(tuple(out))


# ---------------------------------------------------------------------------------------
# The planner


@dataclass(frozen=True)
class DesignOption:
    """Blocks x measured duration, with its predicted cost and MDEs.

    ``mde``: metric -> the largest MDE (relative) over the rows of that metric at ``power``,
    each row at ``alpha / m``; ``minutes``: ``blocks`` x the block's wall time;
    ``reaches``: every row's MDE is at most its target (with a budget: within the budget);
    ``extrapolated``: the duration lies outside the pilot's measured range.
    """

    duration_s: float
    blocks: int
    minutes: float
    mde: Mapping[str, float]
    reaches: bool = True
    extrapolated: bool = False


@dataclass(frozen=True)
class DesignPlan:
    """The planner's choice and what it rests on (:func:`plan_design`).

    Attributes
    ----------
    chosen:
        The cheapest option reaching every row's target (with a time budget: the option
        with the smallest MDE relative to the targets within it); when none reaches the
        targets, the cheapest option at ``max_blocks`` whose MDEs are within 10% of the
        closest to them (``chosen.reaches`` False).
    options:
        The best blocks for each duration considered (the trade-off curve).
    current:
        The design passed as ``current`` (e.g. today's defaults), evaluated the same way.
    targets:
        Metric -> target MDE (relative).
    components, cost:
        What the predictions rest on.
    sequential:
        With ``sequential=True``: the group-sequential plan at the chosen duration
        (:class:`~benchlib.stats.sequential.SequentialPlan`) for the row that needs most
        blocks.
    variance_confidence:
        The plan (``chosen``, ``options``, ``current``, ``sequential``) rests on each row's
        between-trial variance at this one-sided upper confidence bound
        (:meth:`PairComponents.upper`); ``None``: on the point estimates.
    point:
        With a bound: the chosen duration planned on the point estimates instead (fewer
        blocks for a target; smaller MDEs within a budget): with ``chosen`` it gives the range
        of designs the pilot's uncertainty implies. ``None`` without a bound.
    notes:
        Caveats (extrapolation beyond the pilot's durations, durations too short for a
        quantile, a target out of reach).
    """

    targets: Mapping[str, float]
    power: float
    alpha: float
    n_comparisons: int
    correction: str
    chosen: DesignOption
    options: tuple[DesignOption, ...]
    current: DesignOption | None
    components: tuple[PairComponents, ...]
    cost: CostModel
    budget_minutes: float | None = None
    sequential: Any = None
    notes: tuple[str, ...] = ()
    variance_confidence: float | None = None
    point: DesignOption | None = None

    def basis(self) -> str:
        """What the plan rests on, in words (for reports)."""
        if self.variance_confidence is None:
            return "the point estimates of the variance components"
        df = sorted({c.n_blocks - 1 for c in self.components})
        dfs = f"{df[0]}" if len(df) == 1 else f"{df[0]}-{df[-1]}"
        return (f"the {self.variance_confidence:.0%} upper confidence bound of each row's between-trial variance "
                f"(chi-square, {dfs} df)")

    def blocks_range(self) -> str:
        """The blocks the pilot's uncertainty implies at the chosen duration: ``"8-12 blocks"``
        (point estimate to upper bound), or the chosen blocks alone."""
        c = self.chosen
        if self.point is None or self.point.blocks == c.blocks or self.budget_minutes is not None:
            return f"{c.blocks} blocks"
        return f"{min(self.point.blocks, c.blocks)}-{max(self.point.blocks, c.blocks)} blocks"

    def table(self) -> pd.DataFrame:
        """One row per duration (and the current design): blocks, minutes, MDE per metric."""
        recs = []
        for tag, opts in (("option", self.options), ("current", (self.current,) if self.current else ())):
            for o in opts:
                rec: dict[str, Any] = {"design": "chosen" if o == self.chosen and tag == "option" else tag,
                                       "duration_s": o.duration_s, "blocks": o.blocks, "minutes": o.minutes,
                                       "reaches": o.reaches}
                rec.update({f"mde_{m}_pct": 100 * v for m, v in o.mde.items()})
                recs.append(rec)
        return pd.DataFrame.from_records(recs)

    def _goal(self) -> str:
        tg = sorted(set(self.targets.values()))
        words = (f"{100 * tg[0]:g}%" if len(tg) == 1 else
                 ", ".join(f"{m} {100 * v:g}%" for m, v in self.targets.items()))
        if self.budget_minutes is not None:
            return f"smallest MDE within {self.budget_minutes:g} min (targets {words})"
        return f"target MDE {words}"

    def to_markdown(self) -> str:
        """The chosen design, the alternatives and the components, for a report."""
        c = self.chosen
        mdes = ", ".join(f"{m} {mde_text(v)}" for m, v in c.mde.items())
        lines = [
            f"**Design**: {c.blocks} blocks × {c.duration_s:g} s measured per trial, about {c.minutes:.1f} min; "
            f"predicted MDE at {self.power:.0%} power, each of {self.n_comparisons} rows at α = "
            f"{self.alpha:g}/{self.n_comparisons}: {mdes} ({self._goal()}"
            + ("" if c.reaches else "; not reached") + f"). Planned on {self.basis()}.",
        ]
        if self.point is not None:
            p = self.point
            pm = ", ".join(f"{m} {mde_text(v)}" for m, v in p.mde.items())
            lines.append(f"On the point estimates the same duration would need {p.blocks} blocks "
                         f"(about {p.minutes:.1f} min; MDE {pm}): the pilot's uncertainty spans "
                         f"{self.blocks_range()}." if self.budget_minutes is None else
                         f"On the point estimates the same design would reach MDE {pm}.")
        if self.current is not None:
            cur = self.current
            lines.append(f"Current design {cur.blocks} blocks × {cur.duration_s:g} s: about {cur.minutes:.1f} min, "
                         "predicted MDE " + ", ".join(f"{m} {mde_text(v)}" for m, v in cur.mde.items()) + ".")
        if self.sequential is not None:
            sp = self.sequential
            per_block = c.minutes / c.blocks if c.blocks else math.nan
            e2 = sp.expected_blocks[2 * sp.target_mde]
            lines.append(f"Group-sequential alternative: up to {sp.design.max_blocks} blocks "
                         f"(looks at {', '.join(map(str, sp.design.looks))}), at most "
                         f"{sp.design.max_blocks * per_block:.1f} min; expected {e2:.1f} blocks ({e2 * per_block:.1f} min) "
                         "when the true change is twice the target.")
        lines += ["", "| measured s | blocks | minutes | " + " | ".join(f"MDE {m}" for m in c.mde) + " |",
                  "|---|---|---|" + "---|" * len(c.mde)]
        for o in self.options:
            tags = [t for t, on in (("**chosen**", o == c), ("extrapolated", o.extrapolated),
                                    ("target not reached", not o.reaches)) if on]
            lines.append(f"| {o.duration_s:g}{' (' + ', '.join(tags) + ')' if tags else ''} | {o.blocks} | "
                         f"{o.minutes:.1f} | " + " | ".join(mde_text(o.mde[m]) for m in c.mde) + " |")
        lines += ["", "| metric | arm vs baseline | blocks | SD of log ratio | between | within (at the pilot's d) | "
                  "between share | between SD, 95% CI |", "|---|---|---|---|---|---|---|---|"]
        for p in self.components:
            lo, hi = p.between_ci
            lines.append(f"| {p.metric} | {p.arm} vs {p.baseline} | {p.n_blocks} | {100 * math.sqrt(p.total_var):.1f}% | "
                         f"{100 * math.sqrt(p.between_var):.1f}% | {100 * math.sqrt(p.within_var):.1f}% "
                         f"({p.duration_s:g} s) | {100 * p.between_share:.0f}% | [{100 * math.sqrt(lo):.1f}%, "
                         f"{100 * math.sqrt(hi):.1f}%] |")
        if self.notes:
            lines += [""] + [f"* {n}" for n in self.notes]
        return "\n".join(lines)


def mde_text(x: float) -> str:
    """A relative MDE in percent; "∞ (too few blocks)" when the design can never be significant."""
    return "∞ (too few blocks)" if math.isinf(x) else f"{100 * x:.1f}%"


def predicted_mde(c: PairComponents, duration_s: float, blocks: int, *, row_alpha: float, power: float = 0.8,
                  sequential: SequentialDesign | None = None,
                  variance_confidence: float | None = VARIANCE_CONFIDENCE) -> float:
    """The relative MDE (0.05 = 5%) one row with components ``c`` is predicted to reach at
    ``blocks`` x ``duration_s`` measured seconds, at ``power`` and row level ``row_alpha``
    (``alpha / its Holm family``): the exact paired signed-rank test's on ``blocks`` blocks,
    or with ``sequential`` the group-sequential test's over its looks (its ``max_blocks``;
    what a sequential run's verdicts use), for the SD of the log ratio :meth:`PairComponents.sd`
    at ``duration_s``, with the between-trial variance at its ``variance_confidence``
    one-sided upper bound (:meth:`PairComponents.upper`; ``None``: the point estimate).

    The one home of a predicted MDE: the planner's options (:func:`plan_design`, hence
    :func:`~benchlib.stats.budget.plan_within_budget`) and a report's design section
    (:func:`benchlib.analysis.pilot.design_table`) both call it, so the design section shows
    the MDE the plan was made on. ``inf``: the design can never be significant; NaN: no spread."""
    cc = c.upper(variance_confidence) if variance_confidence is not None else c
    sd = cc.sd(duration_s)
    if not (math.isfinite(sd) and sd >= 0):
        return math.nan
    if sequential is None:
        return math.expm1(mde_shift(blocks, sd, alpha=row_alpha, power=power, paired=True, method="rank"))
    units = math.log1p(sequential.mde(1.0, alpha=row_alpha, power=power))  # shift in SDs of the log ratio
    return math.expm1(units * sd) if math.isfinite(units) else math.inf


def _blocks_for(shift: float, sigma: float, row_alpha: float, power: float, floor: int, cap: int) -> int | None:
    """Fewest blocks whose paired rank MDE (log shift) at ``row_alpha`` is at most ``shift``."""
    for n in range(floor, cap + 1):
        if mde_shift(n, sigma, alpha=row_alpha, power=power, paired=True, method="rank") <= shift:
            return n
    return None


def plan_design(
    components: Sequence[PairComponents],
    cost: CostModel,
    *,
    target_mde: float | Mapping[str, float] = 0.05,
    budget_minutes: float | None = None,
    power: float = 0.8,
    alpha: float = 0.05,
    n_comparisons: int | None = None,
    correction: str = "holm",
    durations: Sequence[float] = DEFAULT_DURATIONS,
    min_duration_s: float = 0.0,
    current: tuple[int, float] | None = None,
    arms: Sequence[str] | None = None,
    sequential: bool = False,
    max_blocks: int = 200,
    variance_confidence: float | None = VARIANCE_CONFIDENCE,
    looks: Callable[[int], SequentialDesign | None] | None = None,
    families: Mapping[tuple[str, str, str, str], int] | None = None,
) -> DesignPlan:
    """Choose blocks x measured duration: the least wall time reaching ``target_mde`` on
    every row, or (with ``budget_minutes``) the smallest MDE within that time.

    Parameters
    ----------
    components:
        One :class:`PairComponents` per row of the question (metric x arm vs baseline),
        from a pilot (:func:`pair_components`).
    cost:
        The wall time of a block (:func:`cost_model`); ``arms`` restricts it to the arms the
        question runs (default: the arms of ``components``).
    target_mde:
        Relative MDE to reach on every row (0.05 = 5%), or one per metric
        (``{"p50_ms": 0.05, "p99_ms": 0.2}``).
    budget_minutes:
        Instead of the least time for the target: the design whose worst MDE relative to
        its metric's target is smallest within this wall time.
    power, alpha, n_comparisons, correction:
        MDEs at ``power``, each row at ``alpha / m`` with ``m = n_comparisons`` (default: the
        number of ``components``).
    durations, min_duration_s:
        Measured durations (s) to consider, and a floor (e.g. what steady state needs); a
        duration too short for a quantile metric (fewer than 50 requests beyond it at the
        slower arm's rate) is left out.
    current:
        ``(blocks, duration_s)`` of today's design, evaluated for comparison.
    sequential:
        Also plan a group-sequential design at the chosen duration.
    max_blocks:
        The most blocks considered.
    variance_confidence:
        Plan on each row's between-trial variance at this one-sided upper confidence bound
        (:meth:`PairComponents.upper`, default 80%): a pilot's point estimate is as likely
        too small as too large, and a plan on it reaches its power in about half of the
        runs. ``None``: plan on the point estimates. With a bound, ``DesignPlan.point`` holds
        the plan on the point estimates at the chosen duration (the range of blocks).
    looks:
        The analysis the run will get: blocks -> its
        :class:`~benchlib.stats.sequential.SequentialDesign` (``None``: the fixed test), e.g.
        :func:`benchlib.analysis.stopping.analysis_design`. A sequential run's verdicts have the
        sequential test's MDE over its looks, larger than the fixed test's at the same blocks:
        the MDEs (and the blocks a target needs) are then that test's. Default: the fixed test.
    families:
        Each row's Holm family size, by :attr:`PairComponents.row`: its MDE at ``alpha / its
        family`` (a row not in it at ``alpha / n_comparisons``).

    Every MDE is :func:`predicted_mde`'s.
    """
    probability("power", power)
    probability("alpha", alpha)
    if variance_confidence is not None:
        probability("variance_confidence", variance_confidence)
    comps = tuple(components)
    if not comps:
        raise ParameterError("plan_design() needs at least one PairComponents (a pilot with 3+ complete blocks)")
    metrics = list(dict.fromkeys(c.metric for c in comps))
    if isinstance(target_mde, Mapping):
        missing = [m for m in metrics if m not in target_mde]
        if missing:
            raise ParameterError(f"target_mde has no target for {missing}; give one per metric or one number")
        targets = {m: float(target_mde[m]) for m in metrics}
    else:
        targets = {m: float(target_mde) for m in metrics}
    for m, t in targets.items():
        if not (np.isfinite(t) and t > 0):
            raise ParameterError(f"target_mde of {m} must be a positive relative change (0.05 = 5%), got {t!r}")
    if budget_minutes is not None and not (np.isfinite(budget_minutes) and budget_minutes > 0):
        raise ParameterError(f"budget_minutes must be a positive number of minutes, got {budget_minutes!r}")
    bad = [f"{c.metric} {c.arm} vs {c.baseline}" for c in comps if not np.isfinite(c.within_coef)]
    if bad:
        raise ParameterError(f"no within-trial variance for {bad}: the pilot's windows are too short for that metric")
    m = len(comps) if n_comparisons is None else int(n_comparisons)
    row_alpha = planning_alpha(alpha, m, correction)
    fam = dict(families or {})
    floor = min_trials(alpha=alpha, n_comparisons=max([m, *fam.values()]) if fam else m, correction=correction,
                       paired=True)

    def alpha_of(c: PairComponents) -> float:
        return planning_alpha(alpha, int(fam[c.row]), correction) if c.row in fam else row_alpha

    designs: dict[int, Any] = {}

    def design_at(n: int) -> SequentialDesign | None:
        if looks is None:
            return None
        if n not in designs:
            designs[n] = looks(int(n))
        return designs[n]

    def mde_at(c: PairComponents, d: float, n: int) -> float:
        return predicted_mde(c, d, n, row_alpha=alpha_of(c), power=power, sequential=design_at(n),
                             variance_confidence=None)

    def blocks_for(c: PairComponents, d: float) -> int | None:
        target = math.log1p(targets[c.metric])
        n = _blocks_for(target, c.sd(d), alpha_of(c), power, floor, max_blocks)
        if n is None or looks is None:
            return n
        # the sequential test needs at least the fixed test's blocks: more, by the price of its looks
        while n <= max_blocks:
            if mde_at(c, d, n) <= targets[c.metric] + 1e-12:
                return n
            n += 1
        return None
    use_arms = list(arms) if arms is not None else list(dict.fromkeys(a for c in comps for a in (c.baseline, c.arm)))
    d_lo = min(c.duration_s for c in comps) * min((f for c in comps for f in c.prefix_check), default=1.0)
    d_hi = max(c.duration_s for c in comps)
    notes: list[str] = []

    def shortest(c: PairComponents) -> float:
        q = quantile_of(c.metric)
        return required_requests(q) / c.rate_rps if q is not None and c.rate_rps > 0 else 0.0

    plan_comps = tuple(c.upper(variance_confidence) for c in comps) if variance_confidence is not None else comps

    def evaluate(d: float, n: int, reaches: bool, cs: Sequence[PairComponents] = plan_comps) -> DesignOption:
        worst: dict[str, float] = {}
        for c in cs:
            worst[c.metric] = max(worst.get(c.metric, 0.0), mde_at(c, d, n))
        return DesignOption(float(d), int(n), n * cost.block_seconds(d, use_arms) / 60.0,
                            {k: worst[k] for k in metrics}, reaches, not (d_lo - 1e-9 <= d <= d_hi + 1e-9))

    def for_target(d: float, cs: Sequence[PairComponents] = plan_comps) -> DesignOption:
        need = [blocks_for(c, d) for c in cs]
        if any(x is None for x in need):
            return evaluate(d, max_blocks, False, cs)
        return evaluate(d, max(x for x in need if x is not None), True, cs)

    def for_budget(d: float, cs: Sequence[PairComponents] = plan_comps) -> DesignOption:
        assert budget_minutes is not None
        n = min(max_blocks, int(budget_minutes * 60.0 // cost.block_seconds(d, use_arms)))
        if n < floor:
            return evaluate(d, floor, False, cs)
        return evaluate(d, n, True, cs)

    def badness(o: DesignOption) -> float:
        return max(o.mde[k] / targets[k] for k in metrics)

    short = max(shortest(c) for c in comps)
    ds = [float(d) for d in durations if d >= max(min_duration_s, short) - 1e-12]
    if not ds:
        raise ParameterError(f"every duration in {list(durations)} is below the shortest usable one "
                             f"({max(min_duration_s, short):.3g} s)")
    if len(ds) < len(durations) and short > min_duration_s:
        notes.append(f"durations below {short:.2g} s left out: the slower arm's rate gives fewer than "
                     f"{MIN_TAIL_COUNT} requests beyond the highest quantile")
    opts = [for_budget(d) if budget_minutes is not None else for_target(d) for d in ds]
    ok = [o for o in opts if o.reaches]
    if budget_minutes is not None:
        chosen = min(ok, key=badness) if ok else min(opts, key=lambda o: o.minutes)
        if not ok:
            notes.append(f"no duration fits the {min_blocks_text(floor)} the test needs into {budget_minutes:g} min")
    elif ok:
        chosen = min(ok, key=lambda o: (o.minutes, -o.duration_s))
    else:
        best = min(badness(o) for o in opts)
        chosen = min((o for o in opts if badness(o) <= 1.1 * best), key=lambda o: o.minutes)
        notes.append(f"no duration reaches the target within {max_blocks} blocks; shown: the MDEs at {max_blocks} "
                     "blocks, and chosen the cheapest duration within 10% of the best of them")
    if chosen.extrapolated:
        notes.append(f"the chosen {chosen.duration_s:g} s lies outside the pilot's measured range "
                     f"({d_lo:g}-{d_hi:g} s): the within-trial model c/d is extrapolated there")
    cur = evaluate(float(current[1]), int(current[0]), True) if current is not None else None
    if cur is not None:
        cur = DesignOption(cur.duration_s, cur.blocks, cur.minutes, cur.mde,
                           all(cur.mde[k] <= targets[k] + 1e-12 for k in metrics), cur.extrapolated)
    seq = None
    if sequential and chosen.reaches and budget_minutes is None:
        from benchlib.stats.sequential import plan_sequential

        worst = max(plan_comps, key=lambda c: c.sd(chosen.duration_s) / math.log1p(targets[c.metric]))
        try:
            seq = plan_sequential(worst.sd(chosen.duration_s), target_mde=targets[worst.metric], power=power,
                                  alpha=alpha, n_comparisons=m, correction=correction,
                                  max_blocks=min(60, max(max_blocks, chosen.blocks)))
        except ParameterError as exc:
            notes.append(f"no group-sequential plan: {exc}")
    point = None
    if variance_confidence is not None:
        point = (for_budget(chosen.duration_s, comps) if budget_minutes is not None
                 else for_target(chosen.duration_s, comps))
    return DesignPlan(targets, float(power), float(alpha), m, correction, chosen, tuple(opts), cur, comps, cost,
                      budget_minutes, seq, tuple(notes), variance_confidence, point)


def min_blocks_text(floor: int) -> str:
    """``"6 blocks"``: the smallest design the exact test can decide with."""
    return f"{floor} blocks"
