"""Plots of benchmark results (seaborn/matplotlib). Pure: DataFrames in, Axes out.

Every function takes a tidy DataFrame and ``ax=None`` (a new figure when None), returns the
Axes, puts units in the axis labels and never calls ``plt.show()``.

* :func:`ecdf`: per-request latency distribution per arm (log x).
* :func:`trial_strip`: one dot per trial of a summary metric, per arm, with the median.
* :func:`percentiles`: latency against percentile on a "nines" axis (50, 90, 99, 99.9 ...),
  each arm's curve stopping where its sample stops supporting the quantile.
* :func:`shift_plot`: the shift function (ratio per decile with simultaneous intervals).
* :func:`run_sequence`: latency over a trial's time with window medians and change points.
* :func:`throughput_latency`: latency quantile against achieved throughput across load levels.
* :func:`trial_timeline`: every trial's completion rate and p99 latency over its time, per window.

Inputs come from :func:`benchlib.stats.requests_frame` (per-request), the summaries table
(per-trial), ``Comparison.shift`` and :func:`benchlib.stats.changepoint.detect_changes`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from benchlib.core.errors import ParameterError

__all__ = ["ecdf", "trial_strip", "percentiles", "shift_plot", "run_sequence", "throughput_latency", "trial_timeline", "nines"]

_LABELS = {
    "latency_ms": "latency (ms)",
    "service_ms": "service time (ms)",
    "throughput_rps": "achieved throughput (req/s)",
    "goodput_rps": "successful responses (req/s)",
    "offered_rps": "offered rate (req/s)",
    "error_rate": "error rate (fraction)",
    "server_cpu_us_per_req": "server CPU time per request (µs)",
    "front_cpu_us_per_req": "front CPU time per request (µs)",
    "server_cpu_frac": "server CPU use (CPUs)",
}


def _axes(ax: Any) -> Any:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=(7, 4))
    return ax


def _label(col: str) -> str:
    if col in _LABELS:
        return _LABELS[col]
    for suffix, unit in (("_ms", "ms"), ("_rps", "req/s"), ("_s", "s")):
        if col.endswith(suffix):
            name = col[: -len(suffix)]
            if name.startswith("p") and name[1:].isdigit():
                digits = name[1:]
                pct = digits if len(digits) <= 2 else digits[:2] + "." + digits[2:]
                name = f"p{pct} latency"
            return f"{name} ({unit})"
    return col


def _need(df: pd.DataFrame, cols: Sequence[str], what: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise ParameterError(f"{what} needs a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ParameterError(f"{what} needs the column(s) {missing}; the DataFrame has {sorted(map(str, df.columns))}")


def _order(df: pd.DataFrame, col: str | None, order: Sequence[str] | None) -> list[Any] | None:
    if col is None:
        return None
    return list(order) if order is not None else list(dict.fromkeys(df[col]))


def ecdf(
    requests: pd.DataFrame,
    *,
    x: str = "latency_ms",
    hue: str | None = "arm",
    ax: Any = None,
    log: bool = True,
    only_ok: bool = True,
    order: Sequence[str] | None = None,
) -> Any:
    """Empirical CDF of per-request latency, one curve per ``hue`` (log x axis).

    Parameters
    ----------
    requests:
        Tidy per-request rows (for example :func:`benchlib.stats.requests_frame` of each
        trial, concatenated with an ``arm`` label).
    x:
        The latency column (ms).
    hue:
        Column that separates curves (``arm``), or None.
    ax:
        Axes to draw on.
    log:
        Log-scale x axis.
    only_ok:
        Drop failed requests (``ok == False``) when that column exists.
    order:
        Order of the hue levels.
    """
    import seaborn as sns

    _need(requests, [x] + ([hue] if hue else []), "ecdf")
    data = requests
    if only_ok and "ok" in data.columns:
        data = data[data["ok"].astype(bool)]
    data = data[data[x] > 0] if log else data
    ax = _axes(ax)
    sns.ecdfplot(data=data, x=x, hue=hue, hue_order=_order(data, hue, order), log_scale=log, ax=ax)
    ax.set_xlabel(_label(x) + (", log scale" if log else ""))
    ax.set_ylabel("fraction of requests")
    ax.grid(True, which="both", alpha=0.3)
    return ax


def trial_strip(
    summaries: pd.DataFrame,
    *,
    metric: str = "p50_ms",
    x: str = "arm",
    hue: str | None = None,
    ax: Any = None,
    order: Sequence[str] | None = None,
    log: bool = False,
) -> Any:
    """One dot per trial of a summary metric per arm, with each arm's median as a bar.

    Parameters
    ----------
    summaries:
        Per-trial summaries (one row per trial; ``valid == False`` rows are drawn hollow).
    metric:
        The summary column.
    x:
        Column on the x axis (``arm``).
    hue:
        Optional column for colours (``condition`` or ``block``).
    ax:
        Axes to draw on.
    order:
        Order of the x levels.
    log:
        Log-scale y axis.
    """
    import seaborn as sns

    _need(summaries, [metric, x] + ([hue] if hue else []), "trial_strip")
    data = summaries.copy()
    data[x] = data[x].astype(str)
    if "valid" in data.columns:
        valid = data[data["valid"].astype(bool)]
        invalid = data[~data["valid"].astype(bool)]
    else:
        valid, invalid = data, data.iloc[0:0]
    lv = _order(data, x, order)
    ax = _axes(ax)
    sns.stripplot(data=valid, x=x, y=metric, hue=hue, order=lv, ax=ax, jitter=0.15, size=6, alpha=0.8,
                  legend=hue is not None)
    if len(invalid):
        pos = {v: i for i, v in enumerate(lv or [])}
        ax.scatter([pos[v] for v in invalid[x]], invalid[metric], facecolors="none", edgecolors="grey",
                   label="invalid trial")
    med = valid.groupby(x, sort=False)[metric].median()
    for i, level in enumerate(lv or []):
        if level in med.index and np.isfinite(med[level]):
            ax.hlines(med[level], i - 0.3, i + 0.3, colors="black", linewidth=2, zorder=5)
    values = pd.to_numeric(data[metric], errors="coerce").to_numpy(dtype=float)
    drawn = values[np.isfinite(values)]
    if log and (drawn > 0).any():  # a log axis needs a positive value (a summary may omit them all)
        ax.set_yscale("log")
    if not drawn.size:
        ax.text(0.5, 0.5, f"no trial has {_label(metric)}\n(every trial omitted it: see the summaries)",
                transform=ax.transAxes, ha="center", va="center", color="grey")
    ax.set_ylabel(_label(metric))
    ax.set_xlabel(x)
    ax.set_title(f"{_label(metric)} per trial (bar: median of trials)", fontsize="medium")
    ax.grid(True, axis="y", alpha=0.3)
    return ax


def nines(q: np.ndarray) -> np.ndarray:
    """The "nines" coordinate of quantiles: ``-log10(1 - q)`` (0.9 -> 1, 0.99 -> 2)."""
    return -np.log10(1.0 - np.asarray(q, dtype=float))


def percentiles(
    requests: pd.DataFrame,
    *,
    x: str = "latency_ms",
    hue: str | None = "arm",
    ax: Any = None,
    min_tail: int = 50,
    max_nines: float = 5.0,
    order: Sequence[str] | None = None,
) -> Any:
    """Latency against percentile on a "nines" axis (50%, 90%, 99%, 99.9% ... evenly spaced).

    Each curve stops at the highest quantile its sample supports: at least ``min_tail``
    requests above it (``n (1 - q) >= min_tail``), the rule per-trial summaries use.

    Parameters
    ----------
    requests:
        Tidy per-request rows with ``x`` and ``hue``.
    x:
        Latency column (ms), plotted on a log y axis.
    hue:
        Curves per level of this column.
    ax:
        Axes to draw on.
    min_tail:
        Requests needed above a quantile to plot it.
    max_nines:
        Upper end of the axis (5 = 99.999%).
    order:
        Order of the hue levels.
    """
    _need(requests, [x] + ([hue] if hue else []), "percentiles")
    data = requests
    if "ok" in data.columns:
        data = data[data["ok"].astype(bool)]
    ax = _axes(ax)
    groups = [(None, data)] if hue is None else [(lv, data[data[hue] == lv]) for lv in _order(data, hue, order) or []]
    top = 0.3
    for level, g in groups:
        v = np.sort(g[x].to_numpy(dtype=float))
        n = v.size
        if n < 2:
            continue
        q_max = 1.0 - min_tail / n
        if q_max <= 0.0:
            continue
        hi = min(max_nines, float(nines(q_max)))
        z = np.linspace(0.0, hi, 300)
        q = 1.0 - 10.0 ** (-z)
        ax.plot(z, np.quantile(v, q), label=str(level) if level is not None else None)
        top = max(top, hi)
    ticks = [t for t in range(0, int(math.floor(top)) + 1)]
    ax.set_xticks(ticks)
    ax.set_xticklabels([_pct_label(1.0 - 10.0 ** (-t)) for t in ticks])
    ax.set_yscale("log")
    ax.set_xlabel("percentile (nines scale)")
    ax.set_title(f"each curve ends where fewer than {min_tail} requests lie beyond", fontsize="small")
    ax.set_ylabel(_label(x) + ", log scale")
    if hue is not None:
        ax.legend(title=hue)
    ax.grid(True, which="both", alpha=0.3)
    return ax


def _pct_label(q: float) -> str:
    pct = 100.0 * q
    return f"{pct:.10g}%"


def shift_plot(shift: pd.DataFrame, *, ax: Any = None, hue: str | None = "arm", margin: float | None = 0.02) -> Any:
    """The shift function: arm/baseline ratio of per-trial deciles with simultaneous intervals.

    Parameters
    ----------
    shift:
        ``Comparison.shift`` or :func:`benchlib.stats.shift_function` output (``decile``,
        ``ratio``, ``ci_lo``, ``ci_hi``; optionally ``arm``, ``significant``).
    ax:
        Axes to draw on.
    hue:
        Column with one line per level (``arm``), if present.
    margin:
        Draw the practical margin band ``[1/(1+margin), 1+margin]`` (None: no band).
    """
    _need(shift, ["decile", "ratio", "ci_lo", "ci_hi"], "shift_plot")
    ax = _axes(ax)
    use_hue = hue if hue is not None and hue in shift.columns else None
    groups = [(None, shift)] if use_hue is None else list(shift.groupby(use_hue, sort=False))
    unbounded = False
    for level, g in groups:
        g = g.sort_values("decile")
        pct = 100.0 * (g["ratio"] - 1.0)
        lo = 100.0 * (g["ci_lo"] - 1.0)
        hi = 100.0 * (g["ci_hi"] - 1.0)
        line = ax.plot(100.0 * g["decile"], pct, marker="o", label=str(level) if level is not None else None)[0]
        finite = np.isfinite(lo) & np.isfinite(hi)
        ax.fill_between(100.0 * g["decile"], lo.where(finite), hi.where(finite), alpha=0.2, color=line.get_color())
        if not finite.all():
            unbounded = True
        if "significant" in g.columns:
            sig = g[g["significant"].astype(bool)]
            ax.scatter(100.0 * sig["decile"], 100.0 * (sig["ratio"] - 1.0), s=80, facecolors="none",
                       edgecolors=line.get_color(), zorder=5)
    ax.axhline(0.0, color="black", linewidth=1)
    if margin:
        ax.axhspan(100.0 * (1.0 / (1.0 + margin) - 1.0), 100.0 * margin, color="grey", alpha=0.15,
                   label=f"±{100 * margin:g}% margin")
    ax.set_xlabel("decile of latency (%)")
    ax.set_ylabel("arm vs baseline (% change, per-trial deciles)")
    if unbounded:
        ax.set_title("shaded: simultaneous intervals (missing where too few trials bound them)", fontsize="small")
    ax.set_xticks([10, 20, 30, 40, 50, 60, 70, 80, 90])
    ax.legend()
    ax.grid(True, alpha=0.3)
    return ax


def run_sequence(
    requests: pd.DataFrame,
    *,
    x: str = "t_s",
    y: str = "latency_ms",
    ax: Any = None,
    change_at_s: Sequence[float] = (),
    windows: int = 100,
    sample: int = 20_000,
    seed: int = 0,
) -> Any:
    """One trial's latency over time: a sample of requests, window medians, change points.

    Parameters
    ----------
    requests:
        One trial's per-request rows (``t_s``, ``latency_ms``; optionally ``phase``: the
        warm-up is shaded).
    x, y:
        Time (s) and latency (ms) columns.
    ax:
        Axes to draw on.
    change_at_s:
        Times of detected change points (``ChangePoints.at_s``), drawn as vertical lines.
    windows:
        Number of equal-count windows for the median line.
    sample:
        At most this many requests are drawn as dots (a seeded random sample).
    seed:
        Seed of that sample.
    """
    _need(requests, [x, y], "run_sequence")
    data = requests.sort_values(x, kind="stable")
    if "ok" in data.columns:
        data = data[data["ok"].astype(bool)]
    ax = _axes(ax)
    pts = data
    if len(pts) > sample:
        pts = pts.iloc[np.sort(np.random.default_rng(seed).choice(len(pts), sample, replace=False))]
    ax.scatter(pts[x], pts[y], s=2, alpha=0.25, color="grey", label="requests (sample)")
    n = len(data)
    w = max(1, min(windows, n // 10)) if n else 0
    if w:
        size = n // w
        t = data[x].to_numpy()[: size * w].reshape(w, size)
        v = data[y].to_numpy()[: size * w].reshape(w, size)
        ax.plot(t.mean(axis=1), np.median(v, axis=1), color="C0", linewidth=2, label="window median")
    if "phase" in data.columns and (data["phase"] == "warmup").any():
        wu = data[data["phase"] == "warmup"][x]
        ax.axvspan(float(wu.min()), float(wu.max()), color="orange", alpha=0.1, label="warm-up")
    for i, c in enumerate(change_at_s):
        ax.axvline(float(c), color="red", linestyle="--", label="change point" if i == 0 else None)
    ax.set_yscale("log")
    ax.set_xlabel("time since trial start (s)")
    ax.set_ylabel(_label(y) + ", log scale")
    ax.legend(loc="upper right", fontsize="small")
    ax.grid(True, which="both", alpha=0.3)
    return ax


def throughput_latency(
    summaries: pd.DataFrame,
    *,
    x: str = "throughput_rps",
    y: str = "p99_ms",
    hue: str = "arm",
    ax: Any = None,
    order: Sequence[str] | None = None,
) -> Any:
    """Latency quantile against achieved throughput, one curve per arm across load levels.

    Each trial is a dot; the line joins each arm's medians per offered rate (``offered_rps``
    column, else per ``condition``), in order of throughput.

    Parameters
    ----------
    summaries:
        Per-trial summaries of several load levels.
    x, y:
        Throughput (req/s) and latency (ms) columns.
    hue:
        One curve per level of this column.
    ax:
        Axes to draw on.
    order:
        Order of the hue levels.
    """
    _need(summaries, [x, y, hue], "throughput_latency")
    data = summaries
    if "valid" in data.columns:
        data = data[data["valid"].astype(bool)]
    level_col = "offered_rps" if "offered_rps" in data.columns else ("condition" if "condition" in data.columns else None)
    ax = _axes(ax)
    for lv in _order(data, hue, order) or []:
        g = data[data[hue] == lv]
        sc = ax.scatter(g[x], g[y], s=12, alpha=0.5)
        if level_col is not None:
            med = g.groupby(level_col)[[x, y]].median().sort_values(x)
            ax.plot(med[x], med[y], marker="o", color=sc.get_facecolor()[0], label=str(lv))
        else:
            sc.set_label(str(lv))
    log = bool((pd.to_numeric(data[y], errors="coerce") > 0).any())  # a log axis needs a positive value
    if log:  # (a quantile the trials were too short for is missing in every one of them)
        ax.set_yscale("log")
    ax.set_xlabel(_label(x))
    ax.set_ylabel(_label(y) + (", log scale" if log else ""))
    ax.legend(title=hue)
    ax.grid(True, which="both", alpha=0.3)
    return ax


def trial_timeline(windows: pd.DataFrame, *, axes: Sequence[Any] | None = None, hue: str = "arm") -> Any:
    """Every trial over its own time: completion rate (top) and p99 latency (bottom, log) per
    window, one line per trial coloured by ``hue`` (the warm-up included, shaded).

    Parameters
    ----------
    windows:
        One row per trial and window (:func:`benchlib.analysis.run_info.trial_windows`):
        ``trial`` (a trial's key), ``hue``, ``t_s`` (window centre, s since the trial's start),
        ``rate_rps`` (completed requests/s), ``p99_ms`` and ``warmup`` (bool).
    axes:
        Two Axes (rate, p99); a new figure with two rows when None.
    hue:
        Column colouring the lines.

    Returns the two Axes.
    """
    _need(windows, ["trial", hue, "t_s", "rate_rps", "p99_ms", "warmup"], "trial_timeline")
    if axes is None:
        import matplotlib.pyplot as plt

        _, axes = plt.subplots(2, 1, figsize=(12, 5.5), sharex=True)
    ax_rate, ax_p99 = axes
    levels = list(dict.fromkeys(windows[hue]))
    colours = {h: f"C{i % 10}" for i, h in enumerate(levels)}
    for _, w in windows.groupby("trial", sort=False):
        c = colours[w[hue].iloc[0]]
        ax_rate.plot(w["t_s"], w["rate_rps"], color=c, alpha=0.6, linewidth=1)
        ax_p99.plot(w["t_s"], w["p99_ms"], color=c, alpha=0.6, linewidth=1)
    warm = windows[windows["warmup"].astype(bool)]
    for ax in (ax_rate, ax_p99):
        if len(warm):
            ax.axvspan(0.0, float(warm["t_s"].max()), color="orange", alpha=0.08)
        ax.grid(True, which="both", alpha=0.3)
    for h in levels:
        ax_rate.plot([], [], color=colours[h], label=str(h))
    if len(warm):
        ax_rate.fill_between([], [], color="orange", alpha=0.2, label="warm-up")
    ax_rate.legend(loc="lower right", fontsize="small")
    ax_rate.set_ylabel("completed (req/s)")
    ax_p99.set_ylabel("p99 latency (ms), log scale")
    ax_p99.set_yscale("log")
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    ax_p99.yaxis.set_major_formatter(ScalarFormatter())
    ax_p99.yaxis.set_minor_formatter(NullFormatter())
    ax_p99.set_xlabel("time since the trial's start (s)")
    return axes
