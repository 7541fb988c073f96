"""Compare arms against a baseline across trials: effects, intervals, tests, verdicts (pure).

See :func:`compare` and ``docs/statistics.md``. The unit of replication is the trial: every
number here comes from per-trial summaries, never from pooled requests.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from benchlib.core.errors import ParameterError
from benchlib.stats import footnotes as fn
from benchlib.stats._checks import choose, probability
from benchlib.stats.comparison import Comparison, PairInfo
from benchlib.stats.estimate import BOOTSTRAP_MIN_TRIALS, estimate, test_name
from benchlib.stats.exact import median_interval_rank, min_p_paired, min_p_unpaired
from benchlib.stats.fmt import fmt_p
from benchlib.stats.metrics import MetricInfo, metric_info
from benchlib.stats.multiplicity import CORRECTIONS, adjust, best_case_adjusted
from benchlib.stats.pairing import Pair, pair_design
from benchlib.stats.power import METHODS, mde_shift, min_trials, planning_alpha
from benchlib.stats.quantiles import quantile_of
from benchlib.stats.sequential import (
    SequentialDesign,
    analyse_row,
    budget_mde,
    check_sequential,
    conditional_power,
    early_stop_estimate,
    first_crossing,
    need_blocks,
    row_mde,
)
from benchlib.stats.sequential import blocks_run as seq_blocks_run
from benchlib.stats.shift import shift_function_table
from benchlib.stats.verdict import Verdict, decide, render

__all__ = ["compare", "DESIGNS", "DEFAULT_METRICS", "IDENTITY_COLUMNS", "pair_design"]

DESIGNS: tuple[str, ...] = ("auto", "paired", "unpaired")
FAMILIES: tuple[str, ...] = ("all", "by")
DEFAULT_METRICS: tuple[str, ...] = ("p50_ms", "p99_ms", "throughput_rps")
#: Columns that must not vary within one comparison unless named in ``by``.
IDENTITY_COLUMNS: tuple[str, ...] = ("condition", "endpoint", "offered_rps", "load_model", "connections", "study")


def _centre(x: np.ndarray, confidence: float, log: bool) -> tuple[float, float, float]:
    """Median of trials, the half-width of its order-statistic CI (relative % for log
    metrics, absolute otherwise; as ``scipy.stats.quantile_test(...).confidence_interval``)
    and that interval's achieved confidence (at least ``confidence``: 97.9% for 10 trials
    at 95%); NaN half-width and level when there are too few trials for that CI."""
    c = float(np.median(x))
    k, level = median_interval_rank(int(x.size), float(confidence)) if x.size >= 2 else (0, math.nan)
    if k == 0:
        return c, math.nan, math.nan
    xs = np.sort(x)
    lo, hi = float(xs[k - 1]), float(xs[x.size - k])
    if log:
        return c, (100.0 * max(hi / c - 1.0, 1.0 - lo / c) if c > 0 else math.nan), level
    return c, max(hi - c, c - lo), level


def _rng_for(seed: int, key: str) -> np.random.Generator:
    return np.random.default_rng([int(seed), zlib.crc32(key.encode("utf-8"))])


def _check_params(
    design: str, method: str, alpha: float, confidence: float, correction: str, margin: float,
    family: str, n_resamples: int, power: float,
) -> None:
    choose("design", design, DESIGNS)
    choose("method", method, METHODS)
    choose("correction", correction, CORRECTIONS)
    choose("family", family, FAMILIES)
    probability("alpha", alpha)
    probability("confidence", confidence)
    probability("power", power)
    if alpha >= 0.5:
        raise ParameterError(f"alpha={alpha} leaves no room for the equivalence interval (1 - 2 alpha); use alpha < 0.5")
    if not (np.isfinite(margin) and 0.0 <= margin < 1.0):
        raise ParameterError(f"margin must be a relative change in [0, 1) (0.02 = 2%), got {margin!r}")
    if int(n_resamples) < 999:
        raise ParameterError(f"n_resamples must be at least 999, got {n_resamples!r}")


def _prepare(summaries: pd.DataFrame, by: Sequence[str], metrics: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    if not isinstance(summaries, pd.DataFrame):
        raise ParameterError(f"summaries must be a pandas DataFrame (one row per trial), got {type(summaries).__name__}")
    if "arm" not in summaries.columns:
        raise ParameterError(f"summaries need an 'arm' column; they have {sorted(map(str, summaries.columns))}")
    missing_by = [c for c in by if c not in summaries.columns]
    if missing_by:
        raise ParameterError(
            f"summaries lack the column(s) {missing_by} named in by=; pass by=() for one group, "
            f"or one of {sorted(map(str, summaries.columns))}"
        )
    missing = [m for m in metrics if m not in summaries.columns]
    if missing:
        numeric = sorted(str(c) for c in summaries.columns if pd.api.types.is_numeric_dtype(summaries[c]))
        raise ParameterError(f"metric(s) {missing} are not columns of summaries; numeric columns: {numeric}")
    for c in ("arm", *by):
        if summaries[c].isna().any():
            raise ParameterError(f"column {c!r} holds NaN/None in {int(summaries[c].isna().sum())} row(s)")
    data = summaries.reset_index(drop=True).copy()
    data["arm"] = data["arm"].astype(str)
    if "valid" in data.columns:
        if data["valid"].isna().any():
            raise ParameterError("column 'valid' holds NaN; each trial must be marked True or False")
        keep = data["valid"].astype(bool)
        return data[keep].copy(), data[~keep].copy()
    return data, data.iloc[0:0].copy()


def _check_identity(g: pd.DataFrame, by: Sequence[str], key_text: str) -> None:
    for col in IDENTITY_COLUMNS:
        if col in by or col not in g.columns:
            continue
        vals = g[col].dropna().unique()
        if len(vals) > 1:
            shown = sorted(map(str, vals))[:6]
            raise ParameterError(
                f"the trials of {key_text} mix several values of {col!r} ({shown}): arms of different "
                f"{col}s cannot be compared; add {col!r} to by="
            )


def compare(
    summaries: pd.DataFrame,
    *,
    baseline: str | None = None,
    metrics: Sequence[str] = DEFAULT_METRICS,
    design: str = "auto",
    method: str = "rank",
    alpha: float = 0.05,
    confidence: float = 0.95,
    correction: str = "holm",
    margin: float = 0.02,
    seed: int = 0,
    by: Sequence[str] = ("condition",),
    n_resamples: int = 9999,
    power: float = 0.8,
    family: str = "all",
    better: Mapping[str, str] | None = None,
    shift: bool = True,
    contrasts: Sequence[tuple[str, str]] | None = None,
    sequential: SequentialDesign | None = None,
) -> Comparison:
    """Compare every arm with ``baseline`` (or the ``contrasts``) on each metric, across trials.

    Parameters
    ----------
    summaries:
        One row per trial: ``arm``, the ``by`` columns (default ``condition``), optionally
        ``block``, ``position``, ``seq``, ``valid`` (invalid trials are left out and counted
        in a note), and the metric columns (from :func:`summarize_trial`). Diagnostic
        columns (``change_point``, ``mvalue``, ``n_eff``, ``offered_rps``, ``load_model``,
        ``error_rate``...) feed the footnotes when present.
    baseline:
        The arm every other arm is compared with (``None`` when ``contrasts`` are given).
    metrics:
        Summary columns to compare. ``*_ms``/``*_s`` (lower is better) and ``*_rps``
        (higher is better) are compared as ratios arm/baseline on the log scale;
        ``error_rate`` as a difference in percentage points.
    design:
        ``"auto"`` (paired by block when the trials are in complete blocks, else unpaired),
        ``"paired"`` or ``"unpaired"``.
    method:
        ``"rank"`` (Hodges-Lehmann with exact Moses/Walsh intervals and exact Mann-Whitney /
        signed-rank p-values), ``"parametric"`` (Welch or paired t on logs) or
        ``"bootstrap"`` (trial-level BCa of the Hodges-Lehmann shift).
    alpha:
        Significance level for adjusted p-values; the equivalence test uses ``1 - 2 alpha``
        intervals.
    confidence:
        Level of the reported intervals (the exact rank intervals reach at least this; the
        achieved level is reported).
    correction:
        ``"holm"``, ``"bh"``, ``"by"`` or ``"none"``, over the family of rows.
    margin:
        Practical margin: changes within ``[1/(1+margin), 1+margin]`` are negligible.
    seed:
        Seed of the bootstrap (results are identical for the same data and seed).
    by:
        Columns that define separate comparisons (one table each), such as ``condition``
        or ``endpoint``.
    n_resamples:
        Bootstrap replicates (``method="bootstrap"``).
    power:
        Power at which the minimum detectable effect is quoted.
    family:
        ``"all"``: one multiplicity family over every row; ``"by"``: one per ``by`` group.
    better:
        Directions for metrics whose name does not say (``{"cpu_pct": "lower"}``).
    shift:
        Also compute the shift function across deciles when ``d1_ms``..``d9_ms`` exist.
    contrasts:
        Instead of ``baseline``: explicit ``(baseline, arm)`` pairs, so that one family (one
        Holm adjustment) can hold comparisons against different baselines, e.g.
        ``[("go-fair", "rust-fair"), ("rust-fair", "rust-faithful")]``. In each group the
        pairs whose two arms have valid trials are compared, in the given order; a pair
        with an arm missing there is skipped and said in a note.
    sequential:
        A :class:`~benchlib.stats.sequential.SequentialDesign`: the blocks were run with
        planned looks at which the question could stop (group-sequential design). Each
        row's p-value is then its sequential p-value over the looks so far (``p_fixed``
        keeps the fixed-sample one, for reference), its interval the repeated confidence
        interval, equivalence the repeated ``1 - 2 alpha`` interval, the MDE and the
        minimum-p guard those of the sequential test, and the verdict says how many of the
        design's blocks it rests on: the blocks both of its arms ran (valid or not), so a
        row whose question stopped at a look while its baseline ran on for another question
        is read at that look. Rank method, paired blocks only; no shift function.

    Returns
    -------
    Comparison
        ``.table`` (one row per group, metric and arm), ``.footnotes``, ``.shift``,
        ``.to_text()``, ``.to_json()``.

    Raises
    ------
    ParameterError
        Unknown method/design/correction, missing columns, NaN labels, a baseline absent from
        a group, mixed endpoints or conditions within one group, non-positive values of a
        ratio metric.
    """
    _check_params(design, method, alpha, confidence, correction, margin, family, n_resamples, power)
    if sequential is not None:
        check_sequential(sequential, method, design)
    by = tuple(by)
    metrics = tuple(dict.fromkeys(metrics))
    if not metrics:
        raise ParameterError("metrics is empty; name at least one summary column")
    infos = {m: metric_info(m, better) for m in metrics}
    data, invalid = _prepare(summaries, by, metrics)
    baseline = None if baseline is None else str(baseline)
    pair_list = _check_contrasts(baseline, contrasts)
    book = fn.FootnoteBook()
    rows: list[dict[str, Any]] = []
    extras: list[dict[str, Any]] = []  # per-row internals used after adjustment
    pairs: list[PairInfo] = []
    groups = [((), data)] if not by else list(data.groupby(list(by), sort=False, dropna=False))
    seq_runs: list[int] = []
    if not len(data):
        raise ParameterError("no valid trials in summaries (every row has valid == False)")
    for key, g in groups:
        key_t = key if isinstance(key, tuple) else (key,)
        labels = dict(zip(by, key_t, strict=True))
        key_text = ", ".join(f"{k}={v}" for k, v in labels.items()) or "the summaries"
        _check_identity(g, by, key_text)
        run_blocks = 0
        if sequential is not None:
            bad_here = invalid
            for k, v in labels.items():
                bad_here = bad_here[bad_here[k] == v] if len(bad_here) else bad_here
            run_blocks = seq_blocks_run([g, bad_here])
            sequential.counts(run_blocks)  # more blocks than the design allows: a clear error
            seq_runs.append(run_blocks)
        arms = _arm_order(summaries, g)
        if pair_list is None:
            if baseline not in arms:
                raise ParameterError(f"baseline {baseline!r} has no valid trial in {key_text}; arms there: {arms}")
            here = [(str(baseline), a) for a in arms if a != baseline]
            if not here:
                raise ParameterError(f"only the baseline {baseline!r} has valid trials in {key_text}; nothing to compare")
        else:
            here = [(b, a) for b, a in pair_list if b in arms and a in arms]
            for b, a in pair_list:
                if (b, a) not in here:
                    gone = " and ".join(x for x in (b, a) if x not in arms)
                    book.add("missing_contrast", f"{a} vs {b} in {key_text}: not compared, {gone} has no valid trial "
                             "there")
            if not here:
                raise ParameterError(f"none of the contrasts has valid trials of both arms in {key_text}; "
                                     f"arms there: {arms}")
        group_rows: list[int] = []
        for base, arm in here:
            # sequential: always by block; a pair with fewer than two complete blocks (an
            # invalid trial in a short run) reads "insufficient trials" like any other
            pair = pair_design(g, base, arm, "paired" if sequential is not None else design)
            if sequential is not None and not pair.paired:
                raise ParameterError(f"sequential analysis needs blocks: {arm} vs {base} in {key_text} could not be "
                                     "paired by block (each block must hold at most one trial of each arm)")
            pair_rows: list[int] = []
            row_blocks = run_blocks
            if sequential is not None:
                # the row's own blocks: those both arms ran (valid or not); an arm whose
                # question stopped at a look has no block after it, though its partner may
                row_blocks = min(seq_blocks_run([f[f["arm"] == x] for f in (g, bad_here) if len(f)])
                                 for x in (base, arm)) or run_blocks
            for metric in metrics:
                idx = len(rows)
                row, extra = _row(
                    pair, labels, base, arm, metric, infos[metric], method, confidence, alpha,
                    seed, n_resamples, book, idx, g, sequential, row_blocks, margin,
                )
                rows.append(row)
                extras.append(extra)
                pair_rows.append(idx)
            group_rows.extend(pair_rows)
            if pair.dropped:
                book.add("unpaired_trials",
                         f"{pair.dropped} trial(s) of {arm} or {base} in {key_text} had no partner in their "
                         "block and are left out of the paired analysis", pair_rows)
            note = _outlier_note(pair, metrics)
            if note:
                book.add("outlier", note, pair_rows)
            for kind, text in fn.order_notes(g, base, arm):
                book.add(kind, text, pair_rows)
            if "error_rate" in g.columns:
                note = fn.error_rate_note(pair.a["error_rate"], pair.b["error_rate"], base, arm, alpha)
                if note:
                    lat_rows = [i for i in pair_rows if infos[rows[i]["metric"]].unit in ("ms", "µs", "s")]
                    book.add("error_rates", note, lat_rows or pair_rows)
            pairs.append(PairInfo(labels, base, arm, pair.paired, len(pair.a), len(pair.b), pair_rows,
                                  _context(pd.concat([pair.a, pair.b]))))
        for kind, text in fn.trial_notes(g):
            book.add(kind, text, group_rows)
        bad = invalid
        for k, v in labels.items():
            bad = bad[bad[k] == v] if len(bad) else bad
        if len(bad):
            reasons = ""
            rcol = next((c for c in ("invalid_reason", "reason") if c in bad.columns), None)
            if rcol is not None:
                rs = sorted(set(map(str, bad[rcol].dropna())))
                reasons = f" ({'; '.join(rs[:3])})" if rs else ""
            book.add("invalid", f"{len(bad)} invalid trial(s) in {key_text} left out{reasons}", group_rows)
    verdicts = _adjust_and_decide(rows, extras, by, alpha, correction, margin, method, power, family, book, infos,
                                  sequential)
    if correction == "none" and len(rows) > 1:
        book.add("no_correction",
                 f"no correction for multiple comparisons over {len(rows)} rows: about {alpha:.0%} of rows "
                 "with no real change will still look significant", list(range(len(rows))))
    for i, row in enumerate(rows):
        row["notes"] = ",".join(str(n) for n in book.for_row(i))
    table = pd.DataFrame.from_records(rows)
    shift_table = None
    if shift and sequential is None and all(f"d{i}_ms" in data.columns for i in range(1, 10)):
        shift_table = shift_function_table(
            data, baseline=str(baseline), by=by, design=design, alpha=alpha, confidence=confidence, pairs=pairs
        )
    params: dict[str, Any] = {
        "baseline": baseline, "metrics": list(metrics), "design": design, "method": method, "alpha": alpha,
        "confidence": confidence, "correction": correction, "margin": margin, "seed": int(seed), "by": list(by),
        "n_resamples": int(n_resamples), "power": power, "family": family,
    }
    if pair_list is not None:
        params["baseline"] = None
        params["contrasts"] = [list(c) for c in pair_list]
    if sequential is not None:
        params["sequential"] = {**sequential.to_dict(), "blocks_run": max(seq_runs, default=0)}
    return Comparison(table=table, notes=book.notes, shift=shift_table, params=params, pairs=pairs,
                      verdicts=verdicts)


def _check_contrasts(baseline: str | None, contrasts: Sequence[tuple[str, str]] | None) -> list[tuple[str, str]] | None:
    """The contrasts as a list of (baseline, arm) string pairs, or ``None`` for "every arm
    vs ``baseline``"; exactly one of the two must be given."""
    if contrasts is None:
        if baseline is None:
            raise ParameterError("compare needs baseline= (every arm against it) or contrasts= ((baseline, arm) pairs)")
        return None
    if baseline is not None:
        raise ParameterError("give baseline= or contrasts=, not both (each contrast names its own baseline)")
    out: list[tuple[str, str]] = []
    for c in contrasts:
        if isinstance(c, str) or len(c) != 2 or str(c[0]) == str(c[1]):
            raise ParameterError(f"each contrast must be a (baseline, arm) pair of two different arms, got {c!r}")
        pair = (str(c[0]), str(c[1]))
        if pair in out:
            raise ParameterError(f"contrast {pair!r} is given twice")
        out.append(pair)
    if not out:
        raise ParameterError("contrasts is empty; give at least one (baseline, arm) pair")
    return out


def _row(
    pair: Pair, labels: dict[str, Any], baseline: str, arm: str, metric: str, info: MetricInfo,
    method: str, confidence: float, alpha: float, seed: int, n_resamples: int,
    book: fn.FootnoteBook, idx: int, group: pd.DataFrame, sequential: SequentialDesign | None = None,
    run_blocks: int = 0, margin: float = 0.0,
) -> tuple[dict[str, Any], dict[str, Any]]:
    a_all = pair.a[metric].astype(float)
    b_all = pair.b[metric].astype(float)
    if pair.paired:
        ok = a_all.notna().to_numpy() & b_all.notna().to_numpy()
        a_s, b_s = a_all[ok], b_all[ok]
    else:
        a_s, b_s = a_all.dropna(), b_all.dropna()
    n_missing = int(a_all.isna().sum() + b_all.isna().sum())
    key_text = ", ".join(f"{k}={v}" for k, v in labels.items())
    if n_missing:
        q = None
        if "omitted" in group.columns and group["omitted"].astype(str).str.contains(metric, regex=False).any():
            q = quantile_of(metric)
        book.add("omitted", fn.omitted_note(metric, n_missing, len(a_all) + len(b_all), q), [idx])
    a = a_s.to_numpy()
    b = b_s.to_numpy()
    log = info.scale == "log"
    if log:
        for name, x in ((baseline, a), (arm, b)):
            if np.any(x <= 0) or np.any(~np.isfinite(x)):
                raise ParameterError(
                    f"{metric} of {name} ({key_text}) holds non-positive or infinite values; a ratio needs positive "
                    f"numbers (mark failed trials valid=False)"
                )
    elif np.any(~np.isfinite(a)) or np.any(~np.isfinite(b)):
        raise ParameterError(f"{metric} ({key_text}) holds infinite values")
    tr = np.log if log else (lambda v: v)
    paired = pair.paired
    row: dict[str, Any] = dict(labels)
    row.update(
        metric=metric, better=info.better, arm=arm, baseline=baseline,
        design="paired" if paired else "unpaired", method=method,
        test=test_name(method, paired), n_baseline=int(a.size), n_arm=int(b.size),
        n_blocks=int(a.size) if paired else 0, unit=info.unit,
        effect="ratio" if log else "difference",
    )
    for side, x in (("baseline", a), ("arm", b)):
        c, pm, level = _centre(x, confidence, log) if x.size else (math.nan, math.nan, math.nan)
        row[f"centre_{side}"] = c
        row[f"pm_{side}"] = pm
        row[f"pm_confidence_{side}"] = level
    row["ratio_of_medians"] = (
        float(np.median(b) / np.median(a)) if log and a.size and b.size and np.median(a) > 0 else math.nan
    )
    if a.size and b.size:
        diffs = np.subtract.outer(b, a)
        a12 = float((np.count_nonzero(diffs > 0) + 0.5 * np.count_nonzero(diffs == 0)) / diffs.size)
        row["prob_better"] = 1.0 - a12 if info.better == "lower" else a12
    else:
        row["prob_better"] = math.nan
    extra: dict[str, Any] = {"status": "ok", "paired": paired, "n": min(a.size, b.size), "info": info,
                             "arm": arm, "baseline": baseline, "labels": labels, "n_tied": 0}
    if sequential is not None:
        extra["blocks_run"] = run_blocks
    row["n_tied"] = 0
    # single trial per arm: degraded block-bootstrap mode from per-trial standard errors
    lse = f"{metric}_lse"
    if (
        a.size == 1 and b.size == 1 and log and lse in pair.a.columns and lse in pair.b.columns
        and np.isfinite(float(pair.a[lse].iloc[0])) and np.isfinite(float(pair.b[lse].iloc[0]))
    ):
        # pseudo-replication: the requests' block bootstrap gives a within-run interval, but no
        # test across runs is possible, so the row is never given a direction (issue 11)
        se = math.hypot(float(pair.a[lse].iloc[0]), float(pair.b[lse].iloc[0]))
        eff = float(np.log(b[0]) - np.log(a[0]))
        z = float(stats.norm.ppf(0.5 + confidence / 2))
        row.update(design="single trial", test="none: circular block bootstrap interval (one trial per arm)")
        extra.update(status="single", effect=eff, lo=eff - z * se, hi=eff + z * se, se=se, p=math.nan,
                     min_p=math.nan, sigma=math.nan, achieved=confidence, floor=1)
        book.add("single_trial",
                 "single-trial analysis (one trial per arm): the interval comes from a block bootstrap of the "
                 "requests and does not include the variation between runs, so it is too narrow; run at least "
                 f"{min_trials(alpha=alpha)} trials per arm", [idx])
        return row, extra
    floor = {"rank": 1, "parametric": 2, "bootstrap": BOOTSTRAP_MIN_TRIALS}[method]
    if a.size < floor or b.size < floor or (paired and a.size < 2) or (a.size + b.size < 3):
        extra.update(status="too_few", floor=max(floor, 2))
        if a.size + b.size == 0:
            extra.update(status="omitted")
        return row, extra
    if not log and np.all(a == a[0]) and np.all(b == a[0]):
        extra.update(effect=0.0, lo=0.0, hi=0.0, tost_lo=0.0, tost_hi=0.0, p=1.0,
                     min_p=_design_min_p(method, paired, a.size, b.size, n_resamples), sigma=0.0,
                     achieved=confidence, floor=floor, all_equal=float(a[0]))
        row["test"] = "none (all trials equal)"
        return row, extra
    x_a, x_b = tr(a), tr(b)
    eq_margin = math.log1p(margin) if log and margin > 0 else math.nan  # equivalence: ratio metrics only
    key = "|".join([*(str(v) for v in labels.values()), baseline, arm, metric])
    if sequential is not None:
        blocks = pair.a["block"].to_numpy()[ok] if paired else None
        srow = analyse_row(x_a, x_b, np.asarray(blocks), sequential, blocks_run=run_blocks, confidence=confidence,
                           alpha=alpha, margin=eq_margin)
        est = srow.estimate
        extra.update(seq_row=srow)
        row.update(p_fixed=srow.p_fixed, blocks_run=srow.blocks_run, blocks_max=sequential.max_blocks)
        if srow.drift:
            book.add("drift", "the looks disagree: their repeated intervals do not overlap (no effect is consistent "
                     "with every look), or a look's estimate lies on the other side of no change than the interval "
                     "the row was decided on: the effect moved between looks; the interval shown is the one the row "
                     "was decided on (the latest look's when none was), and the row is not called equivalent", [idx])
        if srow.unplanned:
            book.add("unplanned_look", f"analysed after {srow.blocks_run} blocks, which is not one of the planned "
                     f"looks ({', '.join(map(str, sequential.looks))}): that count is added as a look", [idx])
    else:
        est = estimate(
            x_a, x_b, paired=paired, method=method, confidence=confidence, alpha=alpha,
            rng=_rng_for(seed, key) if method == "bootstrap" else None, n_resamples=n_resamples, margin=eq_margin,
        )
    row["test"] = est.test
    if est.ties and method == "rank":
        book.add("ties", "tied per-trial values: the rank p-value is exact given the ties, the interval "
                 "uses the no-ties critical values (approximate coverage)", [idx])
    if method == "bootstrap" and min(a.size, b.size) < 10:
        book.add("bootstrap_small", "bootstrap intervals with fewer than 10 trials per arm are approximate "
                 "(BCa is unreliable for small samples); the rank method is exact", [idx])
    if est.n_tied:
        book.add("tied_blocks", f"{est.n_tied} of {a.size} blocks tied exactly (same value in both arms): "
                 "they carry no sign, so the signed-rank test, the minimum-p guard, the estimate and the "
                 "interval all count only the blocks that differ", [idx])
    extra.update(
        effect=est.effect, lo=est.lo, hi=est.hi, tost_lo=est.tost_lo, tost_hi=est.tost_hi, p=est.pvalue,
        min_p=est.min_p, sigma=est.sigma, achieved=est.achieved, floor=floor, n=min(a.size, b.size) - est.n_tied,
        n_tied=est.n_tied, tost_p=est.tost_p,
    )
    row["n_tied"] = est.n_tied
    if method == "rank" and not paired and est.ties:
        # the ties raise the exact test's floor above the untied 2 / C(m+n, n) (issue 19, item 10)
        _, counts = np.unique(np.concatenate([x_a, x_b]), return_counts=True)
        extra.update(min_p_untied=min_p_unpaired(a.size, b.size), n_in_ties=int(counts[counts > 1].sum()))
    return row, extra


def _design_min_p(method: str, paired: bool, m: int, n: int, n_resamples: int) -> float:
    """The smallest p-value a method can give for this design (the minimum-p guard's input)."""
    if method == "rank":
        return min_p_paired(m) if paired else min_p_unpaired(m, n)
    if method == "bootstrap":
        return 1.0 / (n_resamples + 1)
    return 0.0


def _outlier_note(pair: Pair, metrics: Sequence[str]) -> str | None:
    """Outlier trials of a pair, judged on the log median (else the first ratio metric)."""
    cols = [c for c in ("p50_ms", *metrics) if c in pair.a.columns and metric_info(c, {c: "lower"}).scale == "log"]
    if not cols:
        return None
    col = cols[0]
    hits: list[str] = []
    for frame in (pair.a, pair.b):
        vals = frame[col].to_numpy(dtype=float)
        keep = np.isfinite(vals) & (vals > 0)
        if keep.sum() >= 3:
            labels = fn.trial_labels(frame)
            hits += fn.outlier_hits(pd.Series(vals[keep]), [lab for lab, k in zip(labels, keep, strict=True) if k])
    return fn.outlier_note(hits, col)


def _arm_order(summaries: pd.DataFrame, g: pd.DataFrame) -> list[str]:
    """Arms in the categorical order of ``summaries.arm`` if it has one, else sorted by name."""
    present = set(g["arm"])
    if isinstance(summaries["arm"].dtype, pd.CategoricalDtype):
        return [str(c) for c in summaries["arm"].cat.categories if str(c) in present]
    return sorted(present)


def _context(trials: pd.DataFrame) -> dict[str, Any]:
    """Load model, offered rate and trial length of a pair, for the text header."""
    ctx: dict[str, Any] = {}
    model = None
    if "load_model" in trials.columns and trials["load_model"].notna().any():
        models = sorted(set(map(str, trials["load_model"].dropna())))
        model = "/".join(models)
    if "offered_rps" in trials.columns and trials["offered_rps"].notna().any():
        rates = sorted(set(float(v) for v in trials["offered_rps"].dropna()))
        rate = "/".join(f"{r:,.0f}" for r in rates)
        ctx["load"] = f"{model + ' loop ' if model else ''}{rate} req/s offered"
    elif model:
        ctx["load"] = f"{model} loop"
    if "duration_s" in trials.columns and trials["duration_s"].notna().any():
        ctx["duration"] = f"{float(trials['duration_s'].median()):.3g} s/trial measured"
    return ctx


def _adjust_and_decide(
    rows: list[dict[str, Any]], extras: list[dict[str, Any]], by: Sequence[str], alpha: float,
    correction: str, margin: float, method: str, power: float, family: str,
    book: fn.FootnoteBook, infos: Mapping[str, MetricInfo], sequential: SequentialDesign | None = None,
) -> list[Verdict]:
    """Multiplicity adjustment, minimum-p guard and MDE; the verdicts (decided by
    :func:`benchlib.stats.verdict.decide`) and their table columns, in place."""
    families: dict[tuple[Any, ...], list[int]] = {}
    for i, r in enumerate(rows):
        fam_key = tuple(r[c] for c in by) if family == "by" else ()
        families.setdefault(fam_key, []).append(i)
    verdicts: list[Verdict | None] = [None] * len(rows)
    for members in families.values():
        tested = [i for i in members if extras[i]["status"] == "ok"]
        m = max(1, len(tested))
        # the family once every row has enough trials: what "need" is computed for
        m_need = max(1, sum(1 for i in members if extras[i]["status"] != "omitted"))
        padj = adjust(np.array([extras[i]["p"] for i in tested]), correction) if tested else np.empty(0)
        adj_of = dict(zip(tested, padj, strict=True))
        # equivalence (TOST) p-values: adjusted over the family's rows that can be called
        # equivalent (ratio metrics), like the difference p-values over the tested rows
        tadj = (adjust(np.array([extras[i].get("tost_p", math.nan) for i in tested]), correction)
                if tested else np.empty(0))
        tost_adj_of = dict(zip(tested, tadj, strict=True))
        for i in members:
            r, e = rows[i], extras[i]
            info: MetricInfo = e["info"]
            paired = e["paired"]
            status = e["status"]
            r["family_size"] = m
            r["correction"] = correction
            kw: dict[str, Any] = dict(
                status=status, alpha=alpha, margin=margin, correction=correction, family_size=m, power=power,
                paired=paired, n_baseline=r["n_baseline"] - e["n_tied"], n_arm=r["n_arm"] - e["n_tied"],
                n_tied=e["n_tied"], arm=e["arm"], baseline=e["baseline"], labels=e["labels"],
            )
            need_m = m_need if status in ("too_few", "single") else m
            need = (min_trials(alpha=alpha, n_comparisons=need_m, correction=correction, paired=paired)
                    if method == "rank" else None)
            if sequential is not None:
                kw.update(blocks_run=e.get("blocks_run", 0), blocks_max=sequential.max_blocks,
                          drift=bool(e["seq_row"].drift) if "seq_row" in e else False)
                need = need_blocks(sequential, alpha=alpha, n_comparisons=need_m, correction=correction) or need
            if status == "too_few":
                kw["need"] = max(e["floor"], need) if need is not None else e["floor"]
            elif status == "single":
                row_alpha = planning_alpha(alpha, m_need, correction)
                z = float(stats.norm.ppf(1.0 - row_alpha / 2.0) + stats.norm.ppf(power))
                kw.update(need=min_trials(alpha=alpha, n_comparisons=m_need, correction=correction),
                          effect=e["effect"], lo=e["lo"], hi=e["hi"], achieved=e["achieved"], mde=z * e["se"])
            elif status == "ok":
                row_alpha = planning_alpha(alpha, m, correction)
                kw.update(
                    effect=e["effect"], lo=e["lo"], hi=e["hi"], tost_lo=e["tost_lo"], tost_hi=e["tost_hi"],
                    achieved=e["achieved"], p_raw=e["p"], p_adj=float(adj_of[i]), min_p=e["min_p"],
                    best_adjusted=best_case_adjusted(e["min_p"], m, correction),
                    mde=(row_mde(e["seq_row"], sequential, alpha_row=row_alpha, power=power)
                         if sequential is not None and "seq_row" in e else
                         mde_shift(e["n"], e["sigma"], alpha=row_alpha, power=power, paired=paired, method=method)),
                    need=need if need is not None else e["floor"] + 1,
                    all_equal=e.get("all_equal", math.nan),
                    p_tost=e.get("tost_p", math.nan), p_tost_adj=float(tost_adj_of[i]),
                )
                if ("min_p_untied" in e and e["min_p"] > e["min_p_untied"]
                        and best_case_adjusted(e["min_p_untied"], m, correction) < alpha):
                    # enough trials, but their ties keep the exact p above what the family needs
                    kw["reason"] = (f"{e['n_in_ties']} of {r['n_baseline'] + r['n_arm']} trials tied: "
                                    f"smallest possible p {fmt_p(e['min_p'])}")
            if status == "ok" and sequential is not None and "seq_row" in e:
                kw.update(_early_stop(e, sequential, kw["p_adj"], alpha, m, correction))
                if sequential.target_mde is not None:  # futility: the MDE reachable by the last look, and
                    # the chance of a decision by then at the effect seen so far
                    row_alpha = planning_alpha(alpha, m, correction)
                    kw.update(target_mde=sequential.target_mde,
                              mde_budget=budget_mde(e["seq_row"], sequential, alpha_row=row_alpha, power=power),
                              conditional_power=conditional_power(e["seq_row"], sequential, alpha_row=row_alpha))
            v = decide(info, **kw)
            verdicts[i] = v
            _fill_row(r, v)
    return [v for v in verdicts if v is not None]


def _early_stop(e: Mapping[str, Any], design: SequentialDesign, p_adj: float, alpha: float, m: int,
                correction: str) -> dict[str, Any]:
    """A sequential row analysed before its schedule's last look: the bias-adjusted estimate
    (:func:`~benchlib.stats.sequential.early_stop_estimate`, conditional on the look at which
    the row's test first crossed its boundary at the level it had to reach in the family,
    ``alpha * p_raw / p_adj``, or ``alpha / m`` under Holm when not significant), kept inside
    the row's repeated interval; the look and the plain estimate for the verdict."""
    srow = e["seq_row"]
    k_looks, done = len(srow.counts), srow.looks_done
    if not (1 <= done < k_looks) or not srow.z_path:
        return {}
    p_raw = float(e["p"])
    level = (alpha * p_raw / p_adj if 0.0 < p_raw and p_adj < alpha and math.isfinite(p_adj)
             else planning_alpha(alpha, m, correction))
    crossed = first_crossing(srow.z_path, srow.counts, design.shape, level)
    plain = srow.plain if math.isfinite(srow.plain) else e["effect"]
    eff = float(early_stop_estimate(plain, e["sigma"], srow.counts, design.shape, level, crossed, done - 1))
    eff = min(max(eff, e["lo"]), e["hi"])  # an effect the repeated interval rejects is not reported
    return {"effect": eff, "effect_unadjusted": plain, "look": done, "looks": k_looks}


def _fill_row(r: dict[str, Any], v: Verdict) -> None:
    """The verdict's numbers and words as table columns."""
    ratio = v.effect == "ratio"
    nan = math.nan
    r.update(
        ratio=v.estimate if ratio else nan, ci_lo=v.ci_lo if ratio else nan, ci_hi=v.ci_hi if ratio else nan,
        pct_change=v.pct_change, diff=nan if ratio else v.estimate, diff_lo=nan if ratio else v.ci_lo,
        diff_hi=nan if ratio else v.ci_hi, p_raw=v.p_raw, p_adj=v.p_adj, min_p=v.min_p,
        achieved_confidence=v.confidence, mde_pct=100.0 * v.mde if ratio else nan,
        mde_diff=nan if ratio else v.mde, p_tost=v.p_tost, p_tost_adj=v.p_tost_adj,
        significant=v.significant, practical=v.practical,
        equivalent=v.equivalent, verdict=render(v), verdict_kind=v.kind.value,
        between_run_variance_estimated=v.between_run_variance_estimated,
    )
    if v.sequential:
        r.update(blocks_run=v.blocks_run, blocks_max=v.blocks_max, drift=v.drift, look=v.look, looks=v.looks,
                 bias_adjusted=v.bias_adjusted, estimate_unadjusted=v.estimate_unadjusted)
        if math.isfinite(v.target_mde):
            r.update(target_mde_pct=100.0 * v.target_mde, mde_budget_pct=100.0 * v.mde_budget)
