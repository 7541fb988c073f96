"""The report's lines on disturbed trials: what the machine did to each trial (outside
signals, :mod:`benchlib.store.records.disturbance`), the trials the rule repeated, per arm, and the
verdicts with and without them.

* :func:`disturbance_table`: one row per stored trial and per attempt the rule set aside;
* :func:`repeats_by_arm`: per condition and arm, trials, attempts set aside as disturbed, and
  trials still disturbed when the repeats ran out (``Experiment.repeat_disturbed``);
* :func:`canary_at_level_shifts`: the trials whose latency shifted level, and at how many
  shifts the canary changed speed too;
* :func:`sensitivity`: the families answered again with each repeated slot's first disturbed
  attempt in place of its repeat: which verdicts the repeats changed;
* :func:`speed_link`: how closely the trials' throughput and p50 followed the speed of the
  service's CPU (the server canary) within arms: how much of the trial-to-trial spread was
  the machine's;
* :func:`speed_adjusted`: the families compared again with each trial's value moved to one speed
  of the service's CPU (its within-arm slope on the server canary): how much of the spread was
  the CPU's speed, in MDEs and p-values (a sensitivity line, never a verdict);
* :func:`disturbance_markdown`: all of them in words for the design section (called by
  :func:`benchlib.analysis.pilot.design_section`).

Reads only; nothing stored is changed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib.stats.fmt import fmt_pct
from benchlib.stats.metrics import with_microseconds
from benchlib.store.records import TrialRecord
from benchlib.store.records.disturbance import DEFAULT_BOUNDS, canary_at_shifts, is_disturbed
from benchlib.store.results import Run, trial_summary

__all__ = ["SpeedAdjusted", "adjust_for_speed", "speed_adjusted", "speed_adjusted_markdown", "speed_adjusted_of",
           "SpeedLink", "canary_at_level_shifts", "disturbance_markdown", "speed_link", "speed_link_markdown",
           "speed_link_of", "machine_during_trials", "disturbance_table", "disturbed_attempts", "repeats_by_arm",
           "sensitivity"]


def disturbed_attempts(run: Run) -> dict[tuple[str, str, int], TrialRecord]:
    """Per slot (condition, arm, block) the rule repeated: its first attempt set aside as
    disturbed (read from its ``.failed-N.parquet`` file)."""
    import pyarrow.parquet as pq

    out: dict[tuple[str, str, int], TrialRecord] = {}
    for t in run.trials:
        if not any(is_disturbed(a.reason) for a in t.attempts) or t.path is None:
            continue
        for p in sorted(Path(t.path).parent.glob(f"b{t.block:03d}.failed-*.parquet"),
                        key=lambda x: int(x.stem.rsplit("-", 1)[1])):
            meta = json.loads((pq.read_metadata(p).metadata or {})[b"benchlib.trial"])
            if is_disturbed(meta.get("reason")):
                out[(t.condition, t.arm, t.block)] = TrialRecord.from_meta(meta, path=p)
                break
    return out


def _row(t: TrialRecord, kind: str) -> dict[str, Any]:
    d = t.disturbance
    f = d.figures() if d is not None else {}
    nan = math.nan
    return {"condition": t.condition, "arm": t.arm, "block": t.block, "trial": kind, "status": t.status,
            "server_contention": f.get("server_contention", nan), "server_excess": f.get("server_excess", nan),
            "client_contention": f.get("client_contention", nan), "client_excess": f.get("client_excess", nan),
            "steal": f.get("steal", nan), "slowdown": f.get("slowdown", nan),
            "slowdown_worst_bin": f.get("slowdown_worst_bin", nan),
            "server_slowdown": f.get("server_slowdown", nan), "service_wait": f.get("service_wait", nan),
            "psi_some": f.get("psi_some", nan), "reason": d.verdict if d is not None else "not measured"}


def disturbance_table(run: Run) -> Any:
    """One row per stored trial (``trial`` "kept") and per first disturbed attempt the rule set
    aside (``"set aside"``): ``condition``, ``arm``, ``block``, ``status``, the rule's figures
    (``server_contention``, ``server_excess``, ``client_contention``, ``client_excess``,
    shares 0..1; ``steal``, share; ``slowdown``, ``slowdown_worst_bin``, ratios to the run's
    ordinary canary; ``server_slowdown``, the server canary's ratio; ``service_wait``, s of run-queue wait per s of
    the service's CPU;
    ``psi_some``, share of the window) and ``reason`` (the rule's, "" when not disturbed; "not
    measured" for trials stored without the signals). Empty when no trial has them."""
    import pandas as pd

    rows = [_row(t, "kept") for t in run.trials if t.ran]
    rows += [_row(t, "set aside") for t in disturbed_attempts(run).values()]
    df = pd.DataFrame(rows)
    if not len(df) or (df["reason"] == "not measured").all():
        return pd.DataFrame()
    return df.sort_values(["condition", "block", "arm", "trial"]).reset_index(drop=True)


def repeats_by_arm(run: Run) -> Any:
    """Per condition and arm: ``trials``, ``repeated`` (trials the rule found disturbed and ran
    again), ``attempts set aside`` (as disturbed), ``still disturbed`` (invalid as disturbed
    when the repeats ran out: left out of the analysis)."""
    import pandas as pd

    acc: dict[tuple[str, str], dict[str, int]] = {}
    for t in run.trials:
        d = acc.setdefault((t.condition, t.arm), {"trials": 0, "repeated": 0, "attempts set aside": 0,
                                                  "still disturbed": 0})
        n = sum(is_disturbed(a.reason) for a in t.attempts)
        d["trials"] += 1
        d["repeated"] += n > 0
        d["attempts set aside"] += n
        d["still disturbed"] += t.status == "invalid" and is_disturbed(t.reason)
    return pd.DataFrame([{"condition": c, "arm": a, **v} for (c, a), v in acc.items()],
                        columns=["condition", "arm", "trials", "repeated", "attempts set aside", "still disturbed"])


def _default_rerun(run: Run) -> Callable[[Any, Any], Any]:
    from benchlib.analysis.questions import run_family

    return lambda summaries, family: run_family(summaries, family, unavailable=run.unavailable)


def _verdicts(answer: Any, *, missing: bool = False) -> dict[tuple[str, str, str, str], Any]:
    """The answer's verdicts by (condition, baseline, arm, metric); with ``missing``, also the
    rows it could not compare (not run, no valid trial)."""
    comp = getattr(answer, "comparison", None)
    verdicts = list(comp.verdicts) if comp is not None else []
    if missing:
        verdicts += list(getattr(answer, "missing", []))
    return {(str(v.labels.get("condition", "")), v.baseline, v.arm, v.metric): v for v in verdicts}


def _kinds(answer: Any) -> dict[tuple[str, str, str, str], str]:
    return {k: v.kind.value for k, v in _verdicts(answer, missing=True).items()}


def _rerunnable(family: Any, columns: Sequence[str]) -> bool:
    """Can ``family`` be answered again from the trials' summaries: does it compare at least one
    of their columns? (A family answered from another table, e.g. a peer tool's or a derived
    per-path figure, cannot; :func:`sensitivity` leaves it out and the text names it.)"""
    return any(m in columns for m in getattr(family, "metrics", ()))


def sensitivity(run: Run, answers: Sequence[Any], *,
                rerun: Callable[[Any, Any], Any] | None = None) -> list[tuple[str, str, str]]:
    """The rows whose verdict the repeats changed: each family of ``answers`` (their
    ``family``) answered again (``rerun(summaries, family)``; default
    :func:`~benchlib.analysis.questions.run_family` with the compare defaults) on the kept
    trials and on the same trials with each repeated slot's first disturbed attempt in its
    place (counted as valid). Returns ``(row, verdict with the repeats, verdict with the
    disturbed attempts)`` for each row that differs; ``[]`` when none does or nothing was repeated."""
    import pandas as pd

    swapped = disturbed_attempts(run)
    if not swapped:
        return []
    rerun = rerun or _default_rerun(run)
    kept = run.summaries()
    other = []
    for t in swapped.values():
        row = trial_summary(t)
        row["valid"] = True
        other.append(row)
    keys = set(swapped)
    mask = [(c, a, int(b)) not in keys for c, a, b in zip(kept["condition"], kept["arm"], kept["block"])]
    with_disturbed = pd.concat([kept[mask], pd.DataFrame(other)], ignore_index=True)
    families = [f for f in (getattr(a, "family", None) for a in answers) if f is not None]
    wanted = [m for f in families for m in f.metrics]  # e.g. study 05 compares p50_us
    kept, with_disturbed = with_microseconds(kept, wanted), with_microseconds(with_disturbed, wanted)
    out = []
    for ans in answers:
        family = getattr(ans, "family", None)
        if family is None or not _rerunnable(family, kept.columns):
            continue
        a, b = _kinds(rerun(kept, family)), _kinds(rerun(with_disturbed, family))
        for k in a:
            if k in b and a[k] != b[k]:
                group, base, arm, metric = k
                out.append((f"{group}: {arm} vs {base}, {metric}", a[k], b[k]))
    return out


def canary_at_level_shifts(run: Run) -> tuple[int, int]:
    """(trials whose latency shifted level, by the summaries' ``change_at_s``: the largest
    shift beyond the "not steady" threshold; those of them at whose shift the canary changed
    speed by more than 15%, :func:`~benchlib.store.records.disturbance.canary_at_shifts`). A shift the
    canary saw is the machine's; one it did not see may be the service's own (or a disturbance
    on the server's CPU only, which the contention figures show)."""
    s = run.summaries()
    if "change_at_s" not in s.columns:
        return 0, 0
    at = {(c, a, int(b)): float(x) for c, a, b, x in zip(s["condition"], s["arm"], s["block"], s["change_at_s"])}
    shifted = seen = 0
    for t in run.trials:
        x = at.get((t.condition, t.arm, t.block), math.nan)
        d = t.disturbance
        if not math.isfinite(x) or d is None or t.load is None:
            continue
        if d.t0_monotonic_ns is None or t.load.t0_monotonic_ns is None:
            continue
        shifted += 1
        seen += canary_at_shifts(d, [x], offset_s=(t.load.t0_monotonic_ns - d.t0_monotonic_ns) / 1e9)[0]
    return shifted, seen


def _pct(x: float) -> str:
    return "–" if not math.isfinite(x) else f"{x:.0%}"


def disturbance_markdown(run: Run, answers: Sequence[Any] = (), *,
                         rerun: Callable[[Any, Any], Any] | None = None) -> str:
    """The design section's paragraph on disturbed trials (Markdown): the signals over the
    run's trials (median and largest), the repeats per arm, trials still disturbed, and the
    sensitivity line (:func:`sensitivity`); "" for a run stored before the signals were measured."""
    t = disturbance_table(run)
    if not len(t):
        return ""
    kept = t[t["trial"] == "kept"]

    def spread(col: str, fmt: Callable[[float], str]) -> str:
        v = kept[col].astype(float)
        v = v[v.map(math.isfinite)]
        return f"{fmt(float(v.median()))} (largest {fmt(float(v.max()))})" if len(v) else "not measured"

    b = DEFAULT_BOUNDS
    lines = [f"**Disturbed trials.** Outside signals of every trial, on the CPUs the service and the client were "
             f"pinned to (median over the trials, and the largest): others' share of the service's CPUs' time "
             f"{spread('server_contention', _pct)}, of the client's CPUs' time "
             f"{spread('client_contention', _pct)}; hypervisor steal {spread('steal', lambda x: f'{x:.1%}')}; canary "
             f"slowdown {spread('slowdown', lambda x: f'{x:.2f}x')} on the client's CPUs, "
             f"{spread('server_slowdown', lambda x: f'{x:.2f}x')} on the service's; the service's run-queue wait "
             f"{spread('service_wait', lambda x: f'{x:.2f} s per CPU-s')}; CPU pressure (PSI some) "
             f"{spread('psi_some', _pct)}. A trial is disturbed when others took more than +{b.server_excess:.0%} "
             f"(client: +{b.client_excess:.0%}) of their CPUs' time above the run's ordinary level, steal exceeded "
             f"{b.steal:.0%} or the canary ran {b.slowdown:.2f}x slower than the run's ordinary"
             + (f" ({b.server_slowdown:.2f}x on the service's CPUs)" if b.server_slowdown is not None else "")
             + "; one rule for every "
             "arm, from outside signals only; such a trial is run again in its place "
             f"(at most {run.experiment.repeat_disturbed if run.experiment is not None else 2} times)."]
    link = speed_link_markdown(speed_link(run))
    if link:
        lines.append(link)
        if answers:
            adjusted = speed_adjusted_markdown(speed_adjusted(run, answers, rerun=rerun))
            if adjusted:
                lines.append(adjusted)
    shifted, seen = canary_at_level_shifts(run)
    if shifted:
        lines.append(f"Level shifts: {shifted} trial(s) shifted level inside the measured window (\"not steady\"); the "
                     f"canary changed speed at the shift in {seen} of them (a diagnostic, never a reason to repeat: a "
                     "shift the canary did not see may be the service's own).")
    reps = repeats_by_arm(run)
    moved = reps[(reps["repeated"] > 0) | (reps["still disturbed"] > 0)]
    if not len(moved):
        lines.append("No trial was disturbed beyond the bounds: none was repeated.")
    else:
        per = "; ".join(f"{r['arm']} ({r['condition']}): {r['repeated']} of {r['trials']} repeated"
                        + (f", {r['still disturbed']} still disturbed and left out" if r["still disturbed"] else "")
                        for r in moved.to_dict("records"))
        lines.append(f"Repeats per arm: {per}.")
        still = int(reps["still disturbed"].sum())
        if still:
            lines.append(f"{still} trial(s) were still disturbed when their repeats ran out: the machine was too busy "
                         "for them; they are left out of the analysis.")
        if answers:
            changed = sensitivity(run, answers, rerun=rerun)
            families = [f for f in (getattr(a, "family", None) for a in answers) if f is not None]
            columns = with_microseconds(run.summaries(), [m for f in families for m in f.metrics]).columns
            other = [str(getattr(f, "key", f)) for f in families if not _rerunnable(f, columns)]
            lines.append("Sensitivity: with the disturbed attempts in place of their repeats, " + (
                "no verdict changes" if not changed else
                f"{len(changed)} verdict(s) change: " + "; ".join(f"{r} {a} → {w}" for r, a, w in changed))
                + (f" (not re-answered, as they compare columns the trials' summaries do not hold: {', '.join(other)})"
                   if other else "") + ".")
    return "\n\n".join(lines)


#: Fewest trials with a server canary (over all arms) for :func:`speed_link` to say anything.
SPEED_LINK_MIN_TRIALS = 12
#: A trial ran in the service CPU's slow state when its server canary median was at least this
#: factor above the run's fast level (the 10th percentile of the trials' medians).
SLOW_STATE_FACTOR = 1.25


@dataclass(frozen=True)
class SpeedLink:
    """How the trials followed the speed of the service's CPU (:func:`speed_link_of`).

    Attributes
    ----------
    trials: valid trials with a server canary median. slow: of them, those whose median was
        :data:`SLOW_STATE_FACTOR` or more above the run's fast level (its 10th percentile).
    fast_us: that fast level, µs per loop. r: per metric (``throughput_rps``, ``p50_ms``), the
        correlation of the trial's log value with its log server canary median, both taken
        relative to their condition and arm's mean (within arms; NaN where either does not vary).
    """

    trials: int
    slow: int
    fast_us: float
    r: dict[str, float]


def speed_link_of(frame: Any) -> SpeedLink | None:
    """:class:`SpeedLink` of a table with one row per valid trial: ``condition``, ``arm``,
    ``server_canary_us`` and the metrics ``throughput_rps`` and ``p50_ms`` (those present);
    ``None`` with fewer than :data:`SPEED_LINK_MIN_TRIALS` rows with a canary."""
    import numpy as np

    df = frame[np.isfinite(frame["server_canary_us"].astype(float)) & (frame["server_canary_us"] > 0)]
    if len(df) < SPEED_LINK_MIN_TRIALS:
        return None
    fast = float(np.percentile(df["server_canary_us"], 10))
    groups = [df["condition"], df["arm"]]
    lc = np.log(df["server_canary_us"].astype(float))
    lc = lc - lc.groupby(groups).transform("mean")
    r: dict[str, float] = {}
    for m in ("throughput_rps", "p50_ms"):
        if m not in df:
            continue
        v = df[m].astype(float)
        ok = np.isfinite(v) & (v > 0)
        lv = np.log(v[ok])
        lv = lv - lv.groupby([g[ok] for g in groups]).transform("mean")
        x = lc[ok]
        r[m] = float(np.corrcoef(lv, x)[0, 1]) if len(lv) > 2 and lv.std() > 0 and x.std() > 0 else math.nan
    return SpeedLink(trials=len(df), slow=int((df["server_canary_us"] >= SLOW_STATE_FACTOR * fast).sum()),
                     fast_us=fast, r=r)


def speed_link(run: Run) -> SpeedLink | None:
    """:func:`speed_link_of` the run's valid stored trials (``None`` for a run without server
    canaries, e.g. one stored before they were measured)."""
    s = _with_server_canary(run)
    return None if s is None else speed_link_of(s[s["valid"].astype(bool)])


def _with_server_canary(run: Run, metrics: Sequence[str] = ()) -> Any:
    """The run's trial summaries (:meth:`~benchlib.store.results.Run.summaries`, with the ``<x>_us``
    of ``metrics`` added, :func:`~benchlib.stats.metrics.with_microseconds`) and a
    ``server_canary_us`` column: each trial's server canary median, µs per loop (NaN for a
    trial without one); ``None`` for a run with no server canary at all."""
    canary = {(t.condition, t.arm, t.block): t.disturbance.server_canary_median_us
              for t in run.trials if t.disturbance is not None}
    if not any(math.isfinite(v) for v in canary.values()):
        return None
    s = with_microseconds(run.summaries(), metrics).copy()
    s["server_canary_us"] = [canary.get((c, a, int(b)), math.nan)
                             for c, a, b in zip(s["condition"], s["arm"], s["block"])]
    return s


def speed_link_markdown(link: SpeedLink | None) -> str:
    """The design section's sentence on :class:`SpeedLink` ("" without one)."""
    if link is None:
        return ""
    names = {"throughput_rps": "throughput", "p50_ms": "p50"}
    rs = ", ".join(f"{names[m]} r = {v:+.2f} ({v * v:.0%} of its within-arm variance)"
                   for m, v in link.r.items() if math.isfinite(v))
    text = (f"**The service's CPU speed.** A short loop timed on the service's CPU through each trial (the server "
            f"canary) ran {SLOW_STATE_FACTOR:.2f}x or more above the run's fast level ({link.fast_us:.0f} µs) in "
            f"{link.slow} of {link.trials} valid trials.")
    if rs:
        text += (f" Within arms, a trial's log value moved with that loop's log median: {rs}. The CPU's own load "
                 "moves its speed too, so this is reported, not used to repeat or adjust trials (docs/statistics.md, "
                 "\"The service's CPU has a speed of its own\").")
    return text


#: At most this many changed rows are named in :func:`speed_adjusted_markdown` (the rest counted).
SPEED_ADJUSTED_NAMED = 6


def adjust_for_speed(frame: Any, metrics: Sequence[str], *,
                     better: Mapping[str, str] | None = None) -> tuple[Any, dict[str, float]]:
    """``frame`` (one row per trial: ``condition``, ``arm``, ``valid``, ``server_canary_us`` and
    the ``metrics``) with each log-scale metric adjusted for the speed of the service's CPU, and
    the slopes used.

    Per metric, the slope ``b`` is the pooled within-(condition, arm) least-squares slope of the
    valid trials' log value on their log server canary median (µs per loop); a trial's value
    becomes ``exp(log value - b * (log canary - its condition's mean log canary))``: every
    trial is moved to one CPU speed, the condition's mean, so the arms are compared at the same
    speed. An arm that drew more slow trials than another by chance loses that level as well as
    the spread it gave (centred on each arm's own mean, an adjustment would keep the level while
    taking the spread away, and an A/A comparison then reads the chance difference as an
    effect: most simulated A/A pairs then read "faster" or "slower"). The price: an arm whose
    own load moves the canary on its CPU has that part of its effect taken out too. Trials
    without a canary, invalid trials, difference-scale metrics (error rates) and metrics whose
    slope cannot be estimated (fewer than 3 trials with a canary, or no spread) are left
    unchanged."""
    import numpy as np

    from benchlib.core.errors import ParameterError
    from benchlib.stats.metrics import metric_info

    out = frame.copy()
    slopes: dict[str, float] = {}
    c = out["server_canary_us"].astype(float)
    valid = out["valid"].astype(bool) if "valid" in out else np.ones(len(out), dtype=bool)
    groups = [out["condition"], out["arm"]]
    for m in metrics:
        if m not in out.columns:
            continue
        try:
            if metric_info(m, better).scale != "log":
                continue
        except ParameterError:
            continue
        v = out[m].astype(float)
        ok = valid & np.isfinite(v) & (v > 0) & np.isfinite(c) & (c > 0)
        if int(ok.sum()) < 3:
            continue
        lc = np.log(c[ok])
        lv = np.log(v[ok])
        g = [x[ok] for x in groups]
        xc = lc - lc.groupby(g).transform("mean")
        yc = lv - lv.groupby(g).transform("mean")
        sxx = float((xc * xc).sum())
        if not sxx > 0:
            continue
        b = float((xc * yc).sum()) / sxx
        slopes[m] = b
        out.loc[ok, m] = np.exp(lv - b * (lc - lc.groupby(g[0]).transform("mean")))
    return out, slopes


@dataclass(frozen=True)
class SpeedAdjusted:
    """The families compared again on speed-adjusted trials (:func:`speed_adjusted_of`): a
    sensitivity figure, never a verdict.

    Attributes
    ----------
    slopes: per metric, the within-arm slope of log value on log server canary.
    rows: rows compared again (log-scale metrics with figures: not error rates, not arms without
        valid trials).
    significant, significant_adjusted: of them, rows whose Holm-adjusted p-value is below the
        family's alpha as run and after the adjustment.
    mde, mde_adjusted: the rows' median MDE (relative, 80% power, each row at its Holm level)
        as run and after the adjustment (NaN when no row has one).
    changed: ``(row, Holm p as run, Holm p adjusted)`` for each row whose p-value crossed alpha.
    """

    slopes: dict[str, float]
    rows: int
    significant: int
    significant_adjusted: int
    mde: float
    mde_adjusted: float
    changed: list[tuple[str, float, float]]


def speed_adjusted_of(frame: Any, families: Sequence[Any],
                      rerun: Callable[[Any, Any], Any]) -> SpeedAdjusted | None:
    """Each family compared (``rerun(summaries, family)``) on ``frame`` (the run's trial
    summaries with ``server_canary_us``) and on :func:`adjust_for_speed` of it; ``None`` when
    no slope could be estimated or no row was compared again."""
    import numpy as np

    families = [f for f in families if _rerunnable(f, frame.columns)]
    metrics = list(dict.fromkeys(m for f in families for m in f.metrics))
    better = {m: d for f in families for m, d in (f.better or {}).items()}  # e.g. a family's cpu_per_req
    adjusted, slopes = adjust_for_speed(frame, metrics, better=better)
    if not slopes:
        return None
    rows = sig = sig_adj = 0
    mdes: list[float] = []
    mdes_adj: list[float] = []
    changed: list[tuple[str, float, float]] = []
    for family in families:
        before, after = _verdicts(rerun(frame, family)), _verdicts(rerun(adjusted, family))
        for k, v in before.items():
            w = after.get(k)
            if w is None or k[3] not in slopes or v.kind.without_figures:
                continue
            rows += 1
            a, b = bool(v.p_adj < v.alpha), bool(w.p_adj < w.alpha)
            sig += a
            sig_adj += b
            mdes += [float(v.mde)] if math.isfinite(v.mde) else []
            mdes_adj += [float(w.mde)] if math.isfinite(w.mde) else []
            if a != b:
                group, base, arm, metric = k
                changed.append((f"{group}: {arm} vs {base}, {metric}", float(v.p_adj), float(w.p_adj)))
    if not rows:
        return None
    med = lambda xs: float(np.median(xs)) if xs else math.nan  # noqa: E731
    return SpeedAdjusted(slopes=slopes, rows=rows, significant=sig, significant_adjusted=sig_adj,
                         mde=med(mdes), mde_adjusted=med(mdes_adj), changed=changed)


def speed_adjusted(run: Run, answers: Sequence[Any], *,
                   rerun: Callable[[Any, Any], Any] | None = None) -> SpeedAdjusted | None:
    """:func:`speed_adjusted_of` the run's trial summaries and the families of ``answers``
    (default ``rerun``: :func:`~benchlib.analysis.questions.run_family` with the compare
    defaults); ``None`` for a run without server canaries."""
    families = [f for f in (getattr(a, "family", None) for a in answers) if f is not None]
    s = _with_server_canary(run, [m for f in families for m in f.metrics])
    return None if s is None else speed_adjusted_of(s, families, rerun or _default_rerun(run))


def speed_adjusted_markdown(adj: SpeedAdjusted | None) -> str:
    """The design section's sensitivity line on :class:`SpeedAdjusted` ("" without one): the
    spread and the p-values with the CPU's speed taken out, in numbers, never in verdict words
    (the verdicts are the tables')."""
    if adj is None:
        return ""
    from benchlib.stats.fmt import fmt_p

    slopes = ", ".join(f"{m} {b:+.2f}" for m, b in adj.slopes.items())
    text = (f"**Sensitivity: adjusted for the CPU's speed** (a sensitivity figure, not a verdict). With each "
            f"trial's value moved along its arm's slope on the server canary (log value on log canary, within "
            f"arms: {slopes}) to the condition's mean canary, so that every arm is compared at one CPU speed, the "
            f"median MDE of the {adj.rows} row(s) is {fmt_pct(100 * adj.mde_adjusted)} (as run: {fmt_pct(100 * adj.mde)}), "
            f"and {adj.significant_adjusted} of them have a Holm-adjusted p-value below alpha (as run: "
            f"{adj.significant}).")
    if adj.changed:
        named = "; ".join(f"{r}: p {fmt_p(a)} → {fmt_p(w)}" for r, a, w in adj.changed[:SPEED_ADJUSTED_NAMED])
        more = len(adj.changed) - SPEED_ADJUSTED_NAMED
        text += f" Across alpha: {named}" + (f"; and {more} more" if more > 0 else "") + "."
    return text + (" This shows how much of the spread was the CPU's speed. The slope is estimated from the same "
                   "trials, and the canary also moves with the service's own load, which the adjustment takes out "
                   "with the speed (docs/statistics.md, \"The service's CPU has a speed of its own\").")


def machine_during_trials(run: Run) -> str:
    """One line for the provenance block: what other processes and the hypervisor took of the
    pinned CPUs during the run's stored trials (outside signals of
    :class:`~benchlib.store.records.disturbance.TrialDisturbance`), as the median and the largest
    share over the trials (percent of the CPUs' time), and how many trials the rule judged
    disturbed; says so when the run recorded no disturbance measure."""
    import numpy as np

    recs = [t.disturbance for t in run.trials if t.disturbance is not None]
    if not recs:
        return "- the machine during the trials: not measured (a run from before the disturbance measure)"

    def spread(xs: Sequence[float]) -> str:
        v = np.array([x for x in xs if math.isfinite(x)], dtype=float)
        return f"median {100 * np.median(v):.1f}% (max {100 * v.max():.1f}%)" if v.size else "not measured"

    judged = sum(1 for d in recs if d.verdict)
    return ("- the machine during the trials (other processes' share of the pinned CPUs, per trial): service CPUs "
            f"{spread([d.server_foreign for d in recs])}, load generator CPUs {spread([d.client_foreign for d in recs])}; "
            f"hypervisor steal {spread([d.steal for d in recs])}; {judged} of {len(recs)} stored trials beyond the "
            "disturbance bounds")
