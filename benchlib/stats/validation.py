"""The validation suite of the statistics (reference section 5.11), as runnable simulations.

Each function simulates many replicate experiments with a seeded generator and returns
rates: A/A rejection (size), interval coverage, power against ``plan()``, a tail-only
change, drift, the pooled-request pitfall, a Holm family, the change-point detector and
coordinated omission. :func:`compare_rates` and :func:`single_trial_aa` run the whole of
:func:`~benchlib.stats.compare` (Holm, the minimum-p guard, the verdicts) instead of the
estimator alone, and count verdicts. ``tests/stats/test_validation.py`` asserts them at a reduced size in
the default test run and at full size under ``-m slow``;
``python -m benchlib.stats.validation --full`` prints the figures.

Model per trial (see :mod:`benchlib.stats.simulate`): lognormal body (log-SD 0.35), AR(1)
within-trial correlation ``phi``, trial random effect ``trial_sd``, 0.5% spikes x5-x20,
optional session drift; 2,000 requests per trial unless said otherwise.

Tolerances: with R replicates the Monte-Carlo SD of a rate p is ``sqrt(p (1-p) / R)``; for
size at 0.05 and R = 1,000 the 99% band is [0.032, 0.068].
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import signal, stats

from benchlib.stats.estimate import estimate
from benchlib.stats.multiplicity import adjust
from benchlib.stats.planning.sample_size import plan, plan_sequential
from benchlib.stats.simulate import session_drift

__all__ = [
    "band",
    "simulate_arm_pairs",
    "aa_size",
    "pooled_pitfall",
    "coverage",
    "power_vs_plan",
    "tail_only",
    "holm_family",
    "compare_rates",
    "early_stop_bias",
    "early_stop_checks",
    "single_trial_aa",
    "changepoint_rates",
    "coordinated_omission",
    "run_all",
]

METHODS = ("rank", "parametric", "bootstrap")
DESIGNS = ("unpaired", "paired")


def band(p: float, reps: int, z: float = 2.576) -> tuple[float, float]:
    """The ``z``-SD Monte-Carlo band around a rate ``p`` for ``reps`` replicates (99% default)."""
    sd = math.sqrt(p * (1.0 - p) / reps)
    return p - z * sd, p + z * sd


def _latencies(n_trials: int, n_req: int, rng: np.random.Generator, *, phi: float, trial_sd: float,
               sigma: float = 0.35, spike_rate: float = 0.005, log_offsets: np.ndarray | None = None,
               tail_factor: float = 1.0) -> np.ndarray:
    """``n_trials x n_req`` latencies (ms), vectorised over trials."""
    innov = rng.normal(0.0, sigma * math.sqrt(1.0 - phi * phi), (n_trials, n_req))
    if phi:
        innov[:, 0] = rng.normal(0.0, sigma, n_trials)
        innov = signal.lfilter([1.0], [1.0, -phi], innov, axis=1)
    x = math.log(5.0) + innov + rng.normal(0.0, trial_sd, (n_trials, 1)) if trial_sd else math.log(5.0) + innov
    if log_offsets is not None:
        x = x + log_offsets[:, None]
    lat = np.exp(x)
    if spike_rate:
        spikes = rng.random(lat.shape) < spike_rate
        lat[spikes] *= rng.uniform(5.0, 20.0, int(spikes.sum()))
    if tail_factor != 1.0:
        ranks = np.argsort(np.argsort(lat, axis=1), axis=1)
        u = (ranks + 0.5) / n_req
        lat = lat * np.exp(math.log(tail_factor) * np.clip((u - 0.90) / 0.09, 0.0, 1.0))
    return lat


def simulate_arm_pairs(
    rng: np.random.Generator, *, trials: int = 10, n_req: int = 2000, phi: float = 0.0, trial_sd: float = 0.0,
    ratio: float = 1.0, drift: float = 0.0, order: str = "blocks", quantiles: Sequence[float] = (0.5,),
    tail_factor: float = 1.0, keep_requests: bool = False,
) -> dict[str, Any]:
    """One simulated two-arm experiment: per-trial quantiles of A and B, aligned by block.

    ``order``: ``"blocks"`` (each block A and B in random order), ``"sequential"``
    (all A, then all B). ``ratio`` multiplies every latency of B; ``tail_factor`` stretches
    B's tail only. Returns ``a``, ``b`` (trials x quantiles) and, if asked, the requests.
    """
    slots = 2 * trials
    if order == "blocks":
        first_b = rng.random(trials) < 0.5
        slot_a = 2 * np.arange(trials) + first_b
        slot_b = 2 * np.arange(trials) + ~first_b
    elif order == "sequential":
        slot_a, slot_b = np.arange(trials), trials + np.arange(trials)
    else:
        raise ValueError(order)
    d = session_drift(slots, drift)
    la = _latencies(trials, n_req, rng, phi=phi, trial_sd=trial_sd, log_offsets=d[slot_a])
    lb = _latencies(trials, n_req, rng, phi=phi, trial_sd=trial_sd, log_offsets=d[slot_b] + math.log(ratio),
                    tail_factor=tail_factor)
    out: dict[str, Any] = {"a": np.quantile(la, quantiles, axis=1).T, "b": np.quantile(lb, quantiles, axis=1).T,
                           "slot_a": slot_a, "slot_b": slot_b}
    if keep_requests:
        out["req_a"], out["req_b"] = la, lb
    return out


def _decide(a: np.ndarray, b: np.ndarray, method: str, design: str, alpha: float, confidence: float,
            rng: np.random.Generator, n_resamples: int) -> Any:
    return estimate(np.log(a), np.log(b), paired=design == "paired", method=method, confidence=confidence,
                    alpha=alpha, rng=rng, n_resamples=n_resamples)


def aa_size(reps: int, *, phi: float, trial_sd: float, trials: int = 10, drift: float = 0.0, order: str = "blocks",
            methods: Sequence[str] = METHODS, designs: Sequence[str] = DESIGNS, alpha: float = 0.05,
            n_resamples: int = 1999, seed: int = 0) -> dict[str, float]:
    """A/A rejection rate of each method and design at ``alpha`` (no true difference)."""
    rng = np.random.default_rng(seed)
    hits = {f"{m}/{d}": 0 for m in methods for d in designs}
    for _ in range(reps):
        sim = simulate_arm_pairs(rng, trials=trials, phi=phi, trial_sd=trial_sd, drift=drift, order=order)
        for m in methods:
            for d in designs:
                e = _decide(sim["a"][:, 0], sim["b"][:, 0], m, d, alpha, 0.95, rng, n_resamples)
                hits[f"{m}/{d}"] += e.pvalue < alpha
    return {k: v / reps for k, v in hits.items()}


def pooled_pitfall(reps: int, *, phi: float = 0.9, trial_sd: float = 0.03, trials: int = 10,
                   alpha: float = 0.05, seed: int = 1) -> dict[str, float]:
    """A/A rejection of Mann-Whitney and KS on pooled requests vs Mann-Whitney on trial medians."""
    rng = np.random.default_rng(seed)
    pooled_mwu = pooled_ks = trial_mwu = 0
    for _ in range(reps):
        sim = simulate_arm_pairs(rng, trials=trials, phi=phi, trial_sd=trial_sd, keep_requests=True)
        pa, pb = sim["req_a"].ravel(), sim["req_b"].ravel()
        pooled_mwu += stats.mannwhitneyu(pb, pa).pvalue < alpha
        pooled_ks += stats.ks_2samp(pb, pa).pvalue < alpha
        trial_mwu += stats.mannwhitneyu(sim["b"][:, 0], sim["a"][:, 0], method="exact").pvalue < alpha
    return {"pooled_mwu": pooled_mwu / reps, "pooled_ks": pooled_ks / reps, "trial_mwu": trial_mwu / reps}


def coverage(reps: int, *, ratio: float, trials: int = 10, phi: float = 0.9, trial_sd: float = 0.03,
             methods: Sequence[str] = METHODS, designs: Sequence[str] = DESIGNS, confidence: float = 0.95,
             n_resamples: int = 1999, seed: int = 2) -> dict[str, dict[str, float]]:
    """How often each method's interval covers the true ratio, and its mean achieved level."""
    rng = np.random.default_rng(seed)
    cov = {f"{m}/{d}": 0 for m in methods for d in designs}
    ach = {k: 0.0 for k in cov}
    for _ in range(reps):
        sim = simulate_arm_pairs(rng, trials=trials, phi=phi, trial_sd=trial_sd, ratio=ratio)
        for m in methods:
            for d in designs:
                e = _decide(sim["a"][:, 0], sim["b"][:, 0], m, d, 0.05, confidence, rng, n_resamples)
                cov[f"{m}/{d}"] += e.lo <= math.log(ratio) <= e.hi
                ach[f"{m}/{d}"] += e.achieved
    return {k: {"coverage": cov[k] / reps, "achieved": ach[k] / reps} for k in cov}


def _sigma_of_log_median(rng: np.random.Generator, *, phi: float, trial_sd: float, n_req: int = 2000,
                         q: float = 0.5, n: int = 600) -> float:
    lat = _latencies(n, n_req, rng, phi=phi, trial_sd=trial_sd)
    return float(np.std(np.log(np.quantile(lat, q, axis=1)), ddof=1))


def power_vs_plan(reps: int, *, ratio: float, trials: int, phi: float = 0.9, trial_sd: float = 0.03,
                  designs: Sequence[str] = DESIGNS, alpha: float = 0.05, seed: int = 3) -> dict[str, Any]:
    """Rank-method power for a planted slowdown, the planner's prediction, and the rate of
    significant results in the wrong direction (type S)."""
    rng = np.random.default_rng(seed)
    sigma = _sigma_of_log_median(rng, phi=phi, trial_sd=trial_sd)
    out: dict[str, Any] = {"sigma": sigma}
    hits = {d: 0 for d in designs}
    wrong = {d: 0 for d in designs}
    for _ in range(reps):
        sim = simulate_arm_pairs(rng, trials=trials, phi=phi, trial_sd=trial_sd, ratio=ratio)
        for d in designs:
            e = _decide(sim["a"][:, 0], sim["b"][:, 0], "rank", d, alpha, 0.95, rng, 999)
            if e.pvalue < alpha:
                hits[d] += 1
                wrong[d] += (e.effect > 0) != (ratio > 1)
    for d in designs:
        s = sigma * math.sqrt(2.0) if d == "paired" else sigma
        p = plan(sigma=s, design=d, target_mde=ratio - 1.0, alpha=alpha, method="rank")
        out[d] = {"power": hits[d] / reps, "predicted": p.power(trials), "type_s": wrong[d] / max(1, hits[d]),
                  "plan_trials_80": int(p)}
    return out


def tail_only(reps: int, *, tail_factor: float = 1.2, phi: float = 0.9, trial_sd: float = 0.03, n_req: int = 5000,
              power: float = 0.8, alpha: float = 0.05, seed: int = 4) -> dict[str, Any]:
    """A change of the tail only (p99 x ``tail_factor``, median unchanged): the p99 row's power
    at the trial count ``plan()`` designs for it (Holm over the p50 and p99 rows, paired), and
    the p50 row's rejection rate (its size)."""
    rng = np.random.default_rng(seed)
    s99 = _sigma_of_log_median(rng, phi=phi, trial_sd=trial_sd, n_req=n_req, q=0.99, n=400)
    p = plan(sigma=s99 * math.sqrt(2.0), design="paired", target_mde=tail_factor - 1.0, power=power,
             n_comparisons=2, alpha=alpha)
    n = int(p)
    p99_hits = p50_hits = 0
    for _ in range(reps):
        sim = simulate_arm_pairs(rng, trials=n, n_req=n_req, phi=phi, trial_sd=trial_sd, quantiles=(0.5, 0.99),
                                 tail_factor=tail_factor)
        e50 = _decide(sim["a"][:, 0], sim["b"][:, 0], "rank", "paired", alpha, 0.95, rng, 999)
        e99 = _decide(sim["a"][:, 1], sim["b"][:, 1], "rank", "paired", alpha, 0.95, rng, 999)
        p99_hits += adjust(np.array([e50.pvalue, e99.pvalue]), "holm")[1] < alpha
        p50_hits += e50.pvalue < alpha
    return {"trials": n, "sigma_p99": s99, "p99_power": p99_hits / reps, "predicted": p.power(n),
            "p50_size": p50_hits / reps}


def holm_family(reps: int, *, rows: int = 20, trials: int = 10, phi: float = 0.9, trial_sd: float = 0.03,
                alpha: float = 0.05, seed: int = 5) -> dict[str, float]:
    """Family-wise A/A rejection with Holm over ``rows`` arms compared with one baseline."""
    rng = np.random.default_rng(seed)
    any_raw = any_holm = 0
    for _ in range(reps):
        lat = _latencies((rows + 1) * trials, 1000, rng, phi=phi, trial_sd=trial_sd)
        med = np.median(lat, axis=1).reshape(rows + 1, trials)
        ps = np.array([estimate(np.log(med[0]), np.log(med[k]), paired=False, method="rank", confidence=0.95,
                                alpha=alpha).pvalue for k in range(1, rows + 1)])
        any_raw += bool((ps < alpha).any())
        any_holm += bool((adjust(ps, "holm") < alpha).any())
    return {"fwer_holm": any_holm / reps, "fwer_uncorrected": any_raw / reps}


def _summaries(values: np.ndarray, arms: Sequence[str], metric: str = "p50_ms") -> pd.DataFrame:
    """Per-trial summaries in the shape :func:`~benchlib.stats.compare` takes: ``values[k, i]``
    is arm ``arms[k]``'s trial in block ``i`` (arms run in a fresh random order per block)."""
    k, n = values.shape
    return pd.DataFrame({"condition": "sim", "arm": np.repeat(np.asarray(arms, dtype=object), n),
                         "block": np.tile(np.arange(n), k), "valid": True, metric: values.ravel()})


def compare_rates(reps: int, *, ratio: float = 1.0, rows: int = 1, trials: int = 10, phi: float = 0.9,
                  trial_sd: float = 0.03, n_req: int = 2000, designs: Sequence[str] = DESIGNS, alpha: float = 0.05,
                  seed: int = 20) -> dict[str, Any]:
    """Verdict rates through :func:`~benchlib.stats.compare` itself (default rank method, Holm,
    the minimum-p guard and the typed verdicts in the loop), per design.

    Each replicate simulates a baseline ``A`` and ``rows`` arms ``B1..Bk`` (every latency of
    an arm multiplied by ``ratio``), ``trials`` trials each in blocks, reduces every trial to
    its median, and compares every arm with ``A`` on ``p50_ms``: one Holm family of ``rows``
    rows. Returned per design: ``directional`` (share of replicates with at least one
    "faster"/"slower" row: the family-wise rate in an A/A), ``per_row`` (share of rows),
    ``slower``/``faster`` (share of rows), ``insufficient`` (share of rows), and for
    ``ratio != 1`` the power ``plan()`` predicts for one such row and the type-S rate
    (directional rows in the wrong direction).
    """
    from benchlib.stats.compare import compare
    from benchlib.stats.verdict import VerdictKind

    rng = np.random.default_rng(seed)
    arms = ["A", *(f"B{k + 1}" for k in range(rows))]
    offsets = np.repeat(np.r_[0.0, np.full(rows, math.log(ratio))], trials)
    counts = {d: {"directional": 0, "per_row": 0, "slower": 0, "faster": 0, "insufficient": 0} for d in designs}
    for _ in range(reps):
        lat = _latencies((rows + 1) * trials, n_req, rng, phi=phi, trial_sd=trial_sd, log_offsets=offsets)
        df = _summaries(np.median(lat, axis=1).reshape(rows + 1, trials), arms)
        for d in designs:
            verdicts = compare(df, baseline="A", metrics=("p50_ms",), design=d, alpha=alpha, shift=False).verdicts
            c = counts[d]
            kinds = [v.kind for v in verdicts]
            c["directional"] += any(k.directional for k in kinds)
            c["per_row"] += sum(k.directional for k in kinds)
            c["slower"] += kinds.count(VerdictKind.SLOWER)
            c["faster"] += kinds.count(VerdictKind.FASTER)
            c["insufficient"] += kinds.count(VerdictKind.INSUFFICIENT)
    out: dict[str, Any] = {}
    sigma = _sigma_of_log_median(np.random.default_rng(seed + 1), phi=phi, trial_sd=trial_sd, n_req=n_req,
                                 n=3000) if ratio != 1.0 else math.nan
    for d in designs:
        c = counts[d]
        res: dict[str, Any] = {"directional": c["directional"] / reps}
        res.update({k: c[k] / (reps * rows) for k in ("per_row", "slower", "faster", "insufficient")})
        if ratio != 1.0:
            s = sigma * math.sqrt(2.0) if d == "paired" else sigma
            p = plan(sigma=s, design=d, target_mde=ratio - 1.0, alpha=alpha, n_comparisons=rows, method="rank")
            right, wrong = ("slower", "faster") if ratio > 1 else ("faster", "slower")
            res.update(power=res[right], predicted=p.power(trials), type_s=c[wrong] / max(1, c[right] + c[wrong]))
        out[d] = res
    return out


def paired_sigma(phi: float = 0.9, trial_sd: float = 0.03, n_req: int = 2000, seed: int = 1) -> float:
    """SD of the within-block log ratio of per-trial medians in the suite's model (``sqrt(2)``
    times the SD of one arm's log median)."""
    return math.sqrt(2.0) * _sigma_of_log_median(np.random.default_rng(seed), phi=phi, trial_sd=trial_sd,
                                                 n_req=n_req, n=3000)


def sequential_rates(reps: int, *, design: Any, ratio: float = 1.0, rows: int = 1, phi: float = 0.9,
                     trial_sd: float = 0.03, n_req: int = 2000, alpha: float = 0.05, seed: int = 40) -> dict[str, Any]:
    """The group-sequential procedure through :func:`~benchlib.stats.compare` itself, as the
    runner would use it: blocks arrive, at each planned look of ``design`` the question
    (baseline ``A`` and ``rows`` arms ``B1..Bk``, every latency of an arm multiplied by
    ``ratio``, per-trial medians, paired rank method, Holm, the guard and the verdicts in
    the loop) is compared with ``sequential=design``, and it stops when
    :func:`benchlib.stats.sequential.status` says so.

    Returned: ``directional`` (share of replicates with a "faster"/"slower" row: the
    family-wise rate in an A/A), ``per_row``, ``slower``, ``faster``, ``equivalent``,
    ``undecidable`` (shares of rows; the last only with a futility target,
    ``SequentialDesign(target_mde=...)``), ``blocks_mean`` (blocks run), ``blocks_max``, ``saving`` (1 - mean / max),
    ``stopped_early`` (share of replicates), the fixed-size analysis of all ``blocks_max``
    blocks for reference (``fixed_directional``), and for ``ratio != 1`` ``power`` (share of
    rows "slower"), ``predicted`` (:meth:`SequentialDesign.power` at the row level
    ``alpha / rows``), ``predicted_blocks`` (:meth:`SequentialDesign.expected_blocks`) and
    ``type_s``.
    """
    from benchlib.stats.compare import compare
    from benchlib.stats.sequential import status
    from benchlib.stats.verdict import VerdictKind

    rng = np.random.default_rng(seed)
    n_max = design.max_blocks
    arms = ["A", *(f"B{k + 1}" for k in range(rows))]
    offsets = np.repeat(np.r_[0.0, np.full(rows, math.log(ratio))], n_max)
    c = {"directional": 0, "per_row": 0, "slower": 0, "faster": 0, "equivalent": 0, "undecidable": 0, "blocks": 0,
         "early": 0, "fixed": 0}
    reported: dict[int, list[float]] = {}
    for _ in range(reps):
        lat = _latencies((rows + 1) * n_max, n_req, rng, phi=phi, trial_sd=trial_sd, log_offsets=offsets)
        df = _summaries(np.median(lat, axis=1).reshape(rows + 1, n_max), arms)
        for look in design.looks:
            comp = compare(df[df["block"] < look], baseline="A", metrics=("p50_ms",), alpha=alpha, shift=False,
                           sequential=design)
            st = status(comp)
            if st.stop:
                break
        kinds = [v.kind for v in comp.verdicts]
        for v in comp.verdicts:
            if v.kind is not VerdictKind.INSUFFICIENT and math.isfinite(v.estimate):
                reported.setdefault(design.looks.index(st.blocks) + 1 if st.blocks in design.looks else 0,
                                    []).append(math.log(v.estimate))
        c["directional"] += any(k.directional for k in kinds)
        c["per_row"] += sum(k.directional for k in kinds)
        c["slower"] += kinds.count(VerdictKind.SLOWER)
        c["faster"] += kinds.count(VerdictKind.FASTER)
        c["equivalent"] += kinds.count(VerdictKind.EQUIVALENT)
        c["undecidable"] += kinds.count(VerdictKind.UNDECIDABLE)
        c["blocks"] += st.blocks
        c["early"] += st.blocks < n_max
        fixed = compare(df, baseline="A", metrics=("p50_ms",), alpha=alpha, shift=False, design="paired")
        c["fixed"] += any(v.directional for v in fixed.verdicts)
    res: dict[str, Any] = {"looks": list(design.looks), "directional": c["directional"] / reps,
                           "blocks_mean": c["blocks"] / reps, "blocks_max": n_max,
                           "saving": 1.0 - c["blocks"] / (reps * n_max), "stopped_early": c["early"] / reps,
                           "fixed_directional": c["fixed"] / reps}
    res.update({k: c[k] / (reps * rows) for k in ("per_row", "slower", "faster", "equivalent", "undecidable")})
    res["reported_by_look"] = {k: {"rows": len(v), "bias_pp": 100.0 * (float(np.mean(v)) - math.log(ratio))}
                               for k, v in sorted(reported.items())}
    if ratio != 1.0:
        sigma = paired_sigma(phi, trial_sd, n_req, seed + 1)
        row_alpha = alpha / rows
        right, wrong = ("slower", "faster") if ratio > 1 else ("faster", "slower")
        res.update(power=res[right], predicted=design.power(ratio - 1.0, sigma, alpha=row_alpha), sigma=sigma,
                   predicted_blocks=design.expected_blocks(ratio - 1.0, sigma, alpha=row_alpha),
                   type_s=c[wrong] / max(1, c[right] + c[wrong]))
    return res


def _holm_rows(p: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values of each row of ``p`` (replicates x hypotheses)."""
    m = p.shape[1]
    order = np.argsort(p, axis=1, kind="stable")
    ps = np.take_along_axis(p, order, axis=1) * (m - np.arange(m))
    adj_sorted = np.minimum(1.0, np.maximum.accumulate(ps, axis=1))
    out = np.empty_like(p)
    np.put_along_axis(out, order, adj_sorted, axis=1)
    return out


def early_stop_bias(reps: int, *, design: Any, ratio: float = 1.0, sigma: float = 0.066, rows: int = 1,
                    alpha: float = 0.05, margin: float = 0.02, seed: int = 60) -> dict[str, Any]:
    """Bias of the estimates of rows whose question stopped at each look, vectorised.

    Each replicate is one question: a baseline and ``rows`` arms over ``design.max_blocks``
    blocks, normal per-trial log values with the within-block log ratio's SD ``sigma``, every
    arm's values shifted by ``log(ratio)``. At each look, as :func:`~benchlib.stats.compare`
    does it with ``sequential=design``: the rows' exact signed-rank p-values, their weighted
    running maximum ``W`` and sequential p-values, Holm over the rows; the sequential TOST
    p-values at ``±log(1 + margin)``, Holm over the rows; the question stops at the first look
    where every row is significant or equivalent. A row that stopped before the last look
    reports :func:`~benchlib.stats.sequential.early_stop_estimate` (not clipped into its
    repeated interval, which ``compare`` also does: see :func:`sequential_rates` for the whole
    path).

    Returned per look (1-based, as the verdicts number them): ``rows`` (rows that stopped
    there), ``bias_plain_pp`` and ``bias_adjusted_pp`` (mean log-ratio estimate minus the true
    log ratio, in percentage points), ``adjusted`` (whether the row reports the adjusted
    estimate: every look but the last).
    """
    from benchlib.stats.sequential import (
        _null,
        _rank_p,
        _weights,
        _z,
        early_stop_estimate,
        first_crossing,
    )

    rng = np.random.default_rng(seed)
    counts = tuple(design.looks)
    shape = float(design.shape)
    k_looks, n_max = len(counts), counts[-1]
    theta = math.log(ratio)
    eq = math.log1p(margin)
    s_arm = sigma / math.sqrt(2.0)
    base = rng.normal(0.0, s_arm, (reps, n_max))
    d = np.stack([theta + rng.normal(0.0, s_arm, (reps, n_max)) - base for _ in range(rows)], axis=1)
    null = _null(counts, shape)
    w = _weights(counts, shape)

    def p_of(wv: np.ndarray) -> np.ndarray:
        if k_looks == 1:
            return np.asarray(wv)  # not used: one look is the fixed test (below)
        above = null.size - np.searchsorted(null, wv - 1e-9 * np.maximum(1.0, np.abs(wv)), side="left")
        return (1.0 + above) / (null.size + 1.0)

    def hl_of(x: np.ndarray) -> np.ndarray:
        i, j = np.triu_indices(x.shape[-1])
        return np.median((x[..., i] + x[..., j]) / 2.0, axis=-1)

    zs = np.zeros((reps, rows, k_looks))
    best = np.zeros((reps, rows))
    best_lo = np.zeros((reps, rows))
    best_hi = np.zeros((reps, rows))
    stop = np.full(reps, k_looks - 1)
    done = np.zeros(reps, dtype=bool)
    p_seq_at = np.zeros((reps, rows))
    p_adj_at = np.zeros((reps, rows))
    for k, n in enumerate(counts):
        x = d[:, :, :n].reshape(reps * rows, n)
        z = (_z(_rank_p(x)) * w[k]).reshape(reps, rows)
        zs[:, :, k] = z
        best = np.maximum(best, z)
        best_hi = np.maximum(best_hi, (_z(_rank_p(x - eq)) * w[k]).reshape(reps, rows))
        best_lo = np.maximum(best_lo, (_z(_rank_p(x + eq)) * w[k]).reshape(reps, rows))
        p = p_of(best)
        hl = hl_of(x).reshape(reps, rows)
        half_hi, half_lo = p_of(best_hi) / 2.0, p_of(best_lo) / 2.0
        tost = np.maximum(np.where(hl < eq, half_hi, 1.0 - half_hi), np.where(hl > -eq, half_lo, 1.0 - half_lo))
        padj = _holm_rows(p)
        settled = (padj < alpha) | (_holm_rows(tost) < alpha)
        now = ~done & settled.all(axis=1)
        if k == k_looks - 1:
            now = ~done
        stop[now] = k
        p_seq_at[now], p_adj_at[now] = p[now], padj[now]
        done |= now
    # each row's estimate at its question's stopping look
    plain = np.empty((reps, rows))
    sd = np.empty((reps, rows))
    for k, n in enumerate(counts):
        sel = stop == k
        if sel.any():
            plain[sel] = hl_of(d[sel, :, :n])
            sd[sel] = d[sel, :, :n].std(axis=2, ddof=1)
    adjusted = plain.copy()
    early = np.nonzero(stop < k_looks - 1)[0]
    if early.size:
        p_raw, p_adj = p_seq_at[early], p_adj_at[early]
        sig = (p_adj < alpha) & (p_raw > 0)
        level = np.where(sig, alpha * p_raw / np.where(sig, p_adj, 1.0), alpha / rows)
        keys: dict[tuple[float, int, int], list[tuple[int, int]]] = {}
        for a_i, r_i in np.ndindex(len(early), rows):
            rep = int(early[a_i])
            lev = float(level[a_i, r_i])
            look = int(stop[rep])
            crossed = first_crossing(zs[rep, r_i, : look + 1], counts, shape, lev)
            keys.setdefault((lev, crossed, look), []).append((rep, r_i))
        for (lev, crossed, look), members in keys.items():
            ri = tuple(np.array(members).T)
            adjusted[ri] = early_stop_estimate(plain[ri], sd[ri], counts, shape, lev, crossed, look)
    out: dict[str, Any] = {"looks": list(counts), "ratio": ratio, "sigma": sigma, "rows_per_question": rows,
                           "replicates": reps, "by_look": {}}
    for k in range(k_looks):
        sel = stop == k
        n_rows = int(sel.sum()) * rows
        out["by_look"][k + 1] = {
            "rows": n_rows, "adjusted": k < k_looks - 1,
            "bias_plain_pp": float(100.0 * (plain[sel].mean() - theta)) if n_rows else math.nan,
            "bias_adjusted_pp": float(100.0 * (adjusted[sel].mean() - theta)) if n_rows else math.nan,
        }
    return out


def early_stop_checks(reps: int, *, plans: dict[str, Any] | None = None, seed: int = 60) -> dict[str, Any]:
    """:func:`early_stop_bias` for the designs the studies use, at true effects 0, +5% and
    +10% (within-block SD of the log ratio 6.6%, the suite's model): the validated one-row
    design (:func:`sequential_designs`, looks at 10, 12, ..., 20 blocks) and the design
    :func:`~benchlib.analysis.stopping.stopping_rule` makes for a two-row question over 12
    blocks (study 05: looks at 9, 11, 12). ``plans``: :func:`sequential_designs` if already
    computed."""
    from benchlib.stats.sequential import SequentialDesign

    plans = plans if plans is not None else sequential_designs()
    designs = {"one_row": (plans["one_row"].design, 1),
               "two_rows_12_blocks": (SequentialDesign.every(12, n_comparisons=2), 2)}
    out: dict[str, Any] = {}
    for i, (name, (design, rows)) in enumerate(designs.items()):
        for j, ratio in enumerate((1.0, 1.05, 1.10)):
            out[f"{name}/{round(100 * (ratio - 1))}pct"] = early_stop_bias(
                reps, design=design, ratio=ratio, rows=rows, sigma=plans["sigma"], seed=seed + 10 * i + j)
    return out


def sequential_designs(target_mde: float = 0.05, power: float = 0.8) -> dict[str, Any]:
    """The group-sequential designs the suite validates: planned with
    :func:`~benchlib.stats.planning.sample_size.plan_sequential` for a ``target_mde`` change at ``power``
    in the suite's model (lag-1 0.9, 3% run effect, per-trial medians of 2,000 requests), for
    one row (``"one_row"``) and for a Holm family of four rows (``"four_rows"``)."""
    sigma = paired_sigma()
    return {"sigma": sigma,
            "one_row": plan_sequential(sigma, target_mde=target_mde, power=power),
            "four_rows": plan_sequential(sigma, target_mde=target_mde, power=power, n_comparisons=4)}


def single_trial_aa(reps: int, *, n_req: int = 20000, phi: float = 0.9, trial_sd: float = 0.03,
                    seed: int = 21) -> dict[str, Any]:
    """One trial per arm of two identical services, through :func:`summarize_trial` (block
    bootstrap of the requests) and :func:`compare`: how often a direction is claimed (it must
    be never: one trial per arm cannot estimate the variance between runs), what the
    verdicts are, and how often the within-run interval covers the true ratio 1."""
    from benchlib.stats.compare import compare
    from benchlib.stats.simulate import trial_latencies_ms, trial_rows
    from benchlib.stats.summary import summarize_trial

    rng = np.random.default_rng(seed)
    directional = covered = 0
    kinds: dict[str, int] = {}
    for r in range(reps):
        recs = []
        for arm in ("A", "B"):
            lat = trial_latencies_ms(n_req, rng, phi=phi, trial_sd=trial_sd)
            recs.append({"condition": "sim", "arm": arm, "block": 0, "valid": True,
                         **summarize_trial(trial_rows(lat, rate_rps=2000.0), block_bootstrap=200, seed=r)})
        c = compare(pd.DataFrame(recs), baseline="A", metrics=("p50_ms",), shift=False)
        v = c.verdicts[0]
        directional += v.directional
        covered += bool(v.ci_lo <= 1.0 <= v.ci_hi)
        kinds[v.kind.value] = kinds.get(v.kind.value, 0) + 1
    return {"directional": directional / reps, "kinds": kinds, "within_run_ci_covers_1": covered / reps}


def changepoint_rates(reps: int, *, n_req: int = 20000, phis: Sequence[float] = (0.0, 0.9), seed: int = 6) -> dict[str, float]:
    """False alarms on stationary trials and detection of a 30% shift in the first 20%."""
    from benchlib.stats.changepoint import detect_changes

    rng = np.random.default_rng(seed)
    out: dict[str, float] = {}
    for phi in phis:
        fa = det = 0
        for _ in range(reps):
            x = np.log(_latencies(1, n_req, rng, phi=phi, trial_sd=0.0)[0])
            fa += detect_changes(x).steady is False
            y = np.log(_latencies(1, n_req, rng, phi=phi, trial_sd=0.0)[0])
            y[: n_req // 5] += math.log(1.3)
            det += detect_changes(y).steady is False
        out[f"false_alarm/phi={phi:g}"] = fa / reps
        out[f"detect_30pct/phi={phi:g}"] = det / reps
    return out


def coordinated_omission(*, rate_rps: float = 1000.0, duration_s: float = 60.0, service_ms: float = 0.5,
                         stall_s: float = 1.0, every_s: float = 10.0, connections: int = 10) -> dict[str, float]:
    """A server that stalls ``stall_s`` every ``every_s``, measured open- and closed-loop.

    Open loop: requests due every ``1/rate``; a FIFO server (Lindley recursion); latency from
    the intended start. Closed loop: ``connections`` connections each send when the last
    response arrived. Returns both p99s (ms) from :func:`summarize_trial`.
    """
    from benchlib.core.schema import ROW_DTYPE
    from benchlib.stats.summary import summarize_trial

    def free_at(t: float) -> float:
        """When the server can next work if asked at ``t`` (s): not inside a stall."""
        k = math.floor(t / every_s)
        start = k * every_s + (every_s - stall_s)
        return start + stall_s if start <= t < start + stall_s else t

    def rows(t_int: np.ndarray, t_done: np.ndarray) -> np.ndarray:
        r = np.zeros(t_int.size, dtype=ROW_DTYPE)
        r["t_intended_ns"] = np.round(t_int * 1e9).astype(np.int64)
        r["t_sent_ns"] = r["t_intended_ns"]
        r["t_done_ns"] = np.round(t_done * 1e9).astype(np.int64)
        r["status"] = 200
        r["phase"] = 1
        return r

    n = int(rate_rps * duration_s)
    due = np.arange(n) / rate_rps
    done = np.empty(n)
    busy = 0.0
    s = service_ms / 1000.0
    for i, t in enumerate(due):
        start = free_at(max(t, busy))
        busy = start + s
        done[i] = busy
    open_p99 = summarize_trial(rows(due, done))["p99_ms"]
    # closed loop: each connection waits for its response; one server
    t_conn = np.zeros(connections)
    sent: list[float] = []
    fin: list[float] = []
    busy = 0.0
    while len(sent) < n:
        c = int(np.argmin(t_conn))
        t = t_conn[c]
        start = free_at(max(t, busy))
        busy = start + s
        sent.append(t)
        fin.append(busy)
        t_conn[c] = busy
    closed = summarize_trial(rows(np.array(sent), np.array(fin)))
    return {"open_p99_ms": float(open_p99), "closed_p99_ms": float(closed["p99_ms"]),
            "closed_rps": float(closed["throughput_rps"])}


def run_all(full: bool = False, *, seed: int = 0) -> dict[str, Any]:
    """Every figure of the suite: R = 1,000 (``full``) or 200 replicates."""
    r = 1000 if full else 200
    res: dict[str, Any] = {"replicates": r}
    t0 = time.time()
    res["aa_size"] = {
        f"phi={phi:g},trial_sd={sd:g}": aa_size(r, phi=phi, trial_sd=sd, seed=seed + i,
                                                 n_resamples=9999 if full else 1999)
        for i, (phi, sd) in enumerate([(0.0, 0.0), (0.0, 0.03), (0.9, 0.0), (0.9, 0.03)])
    }
    res["aa_size_drift_10pct"] = aa_size(r, phi=0.9, trial_sd=0.03, drift=0.10, methods=("rank",), seed=seed + 10)
    res["pitfall"] = pooled_pitfall(max(100, r // 4), seed=seed + 11)
    res["coverage_1.00"] = coverage(r, ratio=1.0, seed=seed + 12, n_resamples=9999 if full else 1999)
    res["coverage_1.05"] = coverage(r, ratio=1.05, seed=seed + 13, n_resamples=9999 if full else 1999)
    res["power_5pct_20"] = power_vs_plan(r, ratio=1.05, trials=20, seed=seed + 14)
    res["power_5pct_10"] = power_vs_plan(r, ratio=1.05, trials=10, seed=seed + 15)
    res["power_10pct_10"] = power_vs_plan(r, ratio=1.10, trials=10, seed=seed + 16)
    res["tail_only"] = tail_only(r, seed=seed + 17)
    res["holm_family_20"] = holm_family(r, seed=seed + 18)
    res["compare_aa_1_row"] = compare_rates(r, seed=seed + 20)
    res["compare_aa_holm_5_rows"] = compare_rates(r, rows=5, seed=seed + 21)
    for ratio, n in ((1.05, 10), (1.05, 20), (1.10, 10), (1.10, 20)):
        res[f"compare_power_{round(100 * (ratio - 1))}pct_{n}"] = compare_rates(r, ratio=ratio, trials=n,
                                                                               seed=seed + 22 + n)
    plans = sequential_designs()
    res["sequential_aa_1_row"] = sequential_rates(r, design=plans["one_row"].design, seed=seed + 40)
    res["sequential_aa_holm_4_rows"] = sequential_rates(r, design=plans["four_rows"].design, rows=4, seed=seed + 41)
    for ratio in (1.05, 1.10):
        res[f"sequential_power_{round(100 * (ratio - 1))}pct"] = sequential_rates(
            r, design=plans["one_row"].design, ratio=ratio, seed=seed + 42 + round(100 * (ratio - 1)))
    res["early_stop_bias"] = early_stop_checks(10_000 if full else 1000, plans=plans, seed=seed + 60)
    res["single_trial_aa"] = single_trial_aa(max(100, r // 5), seed=seed + 23)
    res["changepoint"] = changepoint_rates(r, seed=seed + 19)
    res["coordinated_omission"] = coordinated_omission()
    res["elapsed_s"] = round(time.time() - t0, 1)
    return res


def main(argv: Sequence[str] | None = None) -> int:
    """Print the suite's figures as JSON (``--full`` for R = 1,000)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="R = 1,000 replicates (slow)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    json.dump(run_all(args.full, seed=args.seed), sys.stdout, indent=1, sort_keys=True, default=float)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
