"""Where a study's variance comes from: one row per measured cell (issue 23 step 1).

A *cell* is one (service starts, condition, arm, metric): a grid point of trial length,
warm-up or request count, run with a fresh service per trial (``mode = "fresh"``, the
default design) or one service for all the cell's trials (``mode = "kept"``,
``Experiment(service_starts="cell")``). For each cell:

* the between-trial and within-trial components of the log per-trial metric
  (:func:`benchlib.stats.variance.arm_components`: within from batch means of the trial's
  windows, between = total - within), as relative SDs in percent (``100 * sqrt(var)``);
* the MDE they imply for the default design at that trial length: the paired rank test over
  ``blocks`` blocks at ``alpha``, on a log ratio of two arms like this one with no shared block
  effect, SD ``sqrt(2 * total_var)`` (an upper bound: pairing removes what blocks share);
* the restart cost: the median gap before a fresh trial's load (from the previous trial's last
  response to this trial's first request, on the monotonic clock: stop, start, health and
  contract checks, the pause) minus that before a kept trial of the same condition and arm,
  s per trial;
* whether the measured window starts after the warm-up the change-point diagnostics detect
  (:func:`warmup_end`), as trials-after / trials;
* the client's CPU (busiest client CPU, share of one) and the disturbance figures
  (:class:`benchlib.store.records.disturbance.Disturbance`, the server canary's slowdown among them):
  the worst trial's, and how many trials the rule found disturbed.

:func:`trial_facts` reads the per-trial facts of a stored run; :func:`variance_table` is pure
(windows and facts in, table out); :func:`table_markdown` renders it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from benchlib.core.errors import ParameterError
from benchlib.core.schema import ERROR_CODES, PHASE_CODES
from benchlib.stats.changepoint import MIN_SHIFT, detect_changes
from benchlib.stats.power import mde_shift
from benchlib.stats.summary import trial_columns
from benchlib.stats.variance import arm_components
from benchlib.store.results import Run

__all__ = ["MODES", "TABLE_COLUMNS", "table_markdown", "trial_facts", "variance_table", "warmup_end"]

#: The two ways of starting services the table compares.
MODES = ("fresh", "kept")
#: The table's columns, in order.
TABLE_COLUMNS = ("mode", "condition", "arm", "metric", "trials", "trial_s", "warmup_s", "requests", "between_pct",
                 "within_pct", "total_pct", "between_share_pct", "mde_pct", "restart_s", "after_warmup",
                 "warmup_end_s", "client_cpu", "disturbed", "server_excess", "client_excess", "steal", "slowdown",
                 "server_slowdown", "run_id")
_FACTS = ("mode", "condition", "arm", "block", "valid", "gap_s", "warmup_s", "requests", "window_start_s",
          "warmup_end_s", "client_cpu", "disturbed", "server_excess", "client_excess", "steal", "slowdown",
          "server_slowdown", "run_id")


def warmup_end(t_s: np.ndarray, log_latency: np.ndarray, *, min_shift: float = MIN_SHIFT) -> float:
    """When the warm-up ends by the change-point diagnostics (:func:`detect_changes`) over a
    whole trial (warm-up and measured phase, requests in schedule order, ``t_s`` seconds from
    the trial's first request): the time of the last level shift larger than ``min_shift`` in
    the trial's first half (a later one is a level shift, not warm-up); 0 when there is none;
    NaN when the trial is too short to check."""
    t = np.asarray(t_s, dtype=float)
    cp = detect_changes(np.asarray(log_latency, dtype=float), t, min_shift=min_shift)
    if cp.steady is None:
        return math.nan
    half = float(t.max()) / 2.0 if t.size else 0.0
    ends = [at for at, s in zip(cp.at_s, cp.shifts, strict=True) if abs(s) > min_shift and at <= half]
    return max(ends, default=0.0)


def _window_timing(rows: np.ndarray) -> tuple[float, float, float, float]:
    """(measured window start, detected warm-up end), s from the trial's first request, and
    the first request's and the last response's times, ns from the trial's ``t0``."""
    cols = trial_columns(rows)
    if not len(cols["phase"]):
        return math.nan, math.nan, math.nan, math.nan
    order = np.argsort(cols["t_intended_ns"], kind="stable")
    t0 = int(cols["t_intended_ns"][order[0]])
    measured = cols["phase"][order] == PHASE_CODES["measure"]
    t = (cols["t_intended_ns"][order] - t0) / 1e9
    start = float(t[measured][0]) if measured.any() else math.nan
    ok = (cols["error"][order] == ERROR_CODES["none"]) & (cols["status"][order] >= 100) & (cols["status"][order] < 400)
    lat = (cols["t_done_ns"][order] - cols["t_intended_ns"][order]) / 1e6
    ok &= lat > 0
    return (start, warmup_end(t[ok], np.log(lat[ok])), float(t0),
            float(np.max(cols["t_done_ns"][cols["t_done_ns"] > 0], initial=t0)))


def trial_facts(run: Run, *, mode: str) -> pd.DataFrame:
    """One row per trial of ``run`` that sent requests: ``mode`` (one of :data:`MODES`),
    ``condition``, ``arm``, ``block``, ``valid``, ``gap_s`` (from the previous trial's last
    response to this trial's first request, monotonic clock, s; NaN for the first), ``warmup_s``
    and ``requests`` (the load's), ``window_start_s`` and ``warmup_end_s`` (s from the first
    request, :func:`warmup_end`), ``client_cpu`` (busiest client CPU, share of one),
    ``disturbed`` and the disturbance figures, ``run_id``."""
    if mode not in MODES:
        raise ParameterError(f"mode must be one of {', '.join(MODES)}; got {mode!r}")
    out = []
    last_done = math.nan  # the previous trial's last response, monotonic ns
    for t in sorted(run.trials, key=lambda x: x.seq):
        if not t.ran:
            last_done = math.nan
            continue
        spec = (t.load.loadspec if t.load is not None else {}) or {}
        start, end, first_ns, done_ns = _window_timing(t.rows())
        t0 = t.load.t0_monotonic_ns if t.load is not None else None
        gap = (t0 + first_ns - last_done) / 1e9 if t0 is not None else math.nan
        last_done = t0 + done_ns if t0 is not None else math.nan
        d = t.disturbance
        fig = d.figures() if d is not None else {}
        out.append({"mode": mode, "condition": t.condition, "arm": t.arm, "block": t.block, "valid": t.valid,
                    "gap_s": gap, "warmup_s": float(spec.get("warmup_s") or 0.0),
                    "requests": float(spec.get("requests") or math.nan), "window_start_s": start, "warmup_end_s": end,
                    "client_cpu": t.load.client_cpu_busiest if t.load is not None else math.nan,
                    "disturbed": bool(d is not None and d.disturbed),
                    **{k: float(fig.get(k, math.nan))
                       for k in ("server_excess", "client_excess", "steal", "slowdown", "server_slowdown")},
                    "run_id": run.run_id})
    return pd.DataFrame.from_records(out, columns=list(_FACTS))


def _max(x: pd.Series) -> float:
    x = x.astype(float)
    return float(x.max()) if x.notna().any() else math.nan


def _median(x: pd.Series) -> float:
    x = x.astype(float)
    return float(x.median()) if x.notna().any() else math.nan


def variance_table(windows: pd.DataFrame, facts: pd.DataFrame, *, metrics: Sequence[str] = ("p50_ms", "throughput_rps"),
                   blocks: int = 10, alpha: float = 0.05, power: float = 0.8) -> pd.DataFrame:
    """One row per (mode, condition, arm, metric) with the columns :data:`TABLE_COLUMNS`
    (see the module's docstring).

    Parameters
    ----------
    windows:
        :func:`benchlib.analysis.pilot.pilot_windows` of each run with a ``mode`` column.
    facts:
        :func:`trial_facts` of the same runs.
    metrics:
        Window metrics to decompose (``p50_ms``, ``p99_ms``, ``throughput_rps``).
    blocks, alpha, power:
        The default design the MDE is given for: blocks, the row's level, the power.
    """
    missing = sorted({"mode", "condition", "arm", "block"} - set(windows.columns)) if len(windows) else []
    if missing:
        raise ParameterError(f"windows lack column(s) {missing}; add mode= to pilot_windows()'s rows")
    if blocks < 2:
        raise ParameterError(f"blocks must be at least 2, got {blocks!r}")
    rows = []
    for metric in metrics:
        if not len(windows) or metric not in windows.columns:
            continue
        for c in arm_components(windows, metric, by=("mode", "condition")):
            mode, cond = str(c.labels["mode"]), str(c.labels["condition"])
            f = facts[(facts["mode"] == mode) & (facts["condition"] == cond) & (facts["arm"] == c.arm)]
            other = facts[(facts["mode"] != mode) & (facts["condition"] == cond) & (facts["arm"] == c.arm)]
            fresh, kept = (f, other) if mode == "fresh" else (other, f)
            restart = _median(fresh["gap_s"]) - _median(kept["gap_s"]) if len(fresh) and len(kept) else math.nan
            sd = math.sqrt(2.0 * c.total_var) if c.total_var >= 0 else math.nan
            mde = math.expm1(mde_shift(blocks, sd, alpha=alpha, power=power, paired=True, method="rank"))
            timed = f.dropna(subset=["window_start_s", "warmup_end_s"])
            after = int((timed["window_start_s"] >= timed["warmup_end_s"]).sum())
            rows.append({
                "mode": mode, "condition": cond, "arm": c.arm, "metric": metric, "trials": c.n_trials,
                "trial_s": c.duration_s, "warmup_s": _median(f["warmup_s"]), "requests": _median(f["requests"]),
                "between_pct": 100.0 * math.sqrt(c.between_var) if c.between_var >= 0 else math.nan,
                "within_pct": 100.0 * math.sqrt(c.within_var) if c.within_var >= 0 else math.nan,
                "total_pct": 100.0 * math.sqrt(c.total_var), "between_share_pct": 100.0 * c.between_share,
                "mde_pct": 100.0 * mde, "restart_s": restart, "after_warmup": f"{after}/{len(timed)}",
                "warmup_end_s": _median(f["warmup_end_s"]), "client_cpu": _median(f["client_cpu"]),
                "disturbed": int(f["disturbed"].astype(bool).sum()), "server_excess": _max(f["server_excess"]),
                "client_excess": _max(f["client_excess"]), "steal": _max(f["steal"]), "slowdown": _max(f["slowdown"]),
                "server_slowdown": _max(f["server_slowdown"]),
                "run_id": ",".join(dict.fromkeys(str(r) for r in f["run_id"])),
            })
    return pd.DataFrame.from_records(rows, columns=list(TABLE_COLUMNS))


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return "–" if not math.isfinite(v) else f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)


def table_markdown(table: pd.DataFrame) -> str:
    """The table as a Markdown table (numbers to 3 significant digits, "–" for NaN)."""
    cols = [c for c in TABLE_COLUMNS if c in table.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_cell(r[c]) for c in cols) + " |" for _, r in table.iterrows()]
    return "\n".join(lines)
