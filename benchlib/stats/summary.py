"""Per-trial summaries: one trial's requests reduced to the numbers compared across trials.

Pure: numpy, scipy, pandas. Input is the per-request row (:data:`benchlib.core.schema.ROW_DTYPE`)
as a numpy structured array or a DataFrame with those columns (``error``/``phase`` as codes
or as the names of :data:`~benchlib.core.schema.ERROR_NAMES` / :data:`~benchlib.core.schema.PHASE_NAMES`).

How requests count
------------------
* Only the measured phase (``phase == "measure"``) is used; warm-up rows are ignored.
* A request **failed** when it got no complete response (``error != "none"``) or its HTTP
  status is not in 100-399 (k6's ``http_req_failed`` rule). ``error_rate`` = failed / all
  measured requests.
* Latency (``t_done - t_intended``, coordinated-omission-correct) and service time
  (``t_done - t_sent``) quantiles, mean and max are over the **successful** requests; the
  failed ones are counted in ``error_rate`` (never silently dropped), and a comparison warns
  when arms' error rates differ (survivorship).
* ``throughput_rps`` = measured requests (successful or not) / measured duration;
  ``goodput_rps`` counts successful ones only.
* A quantile ``q`` needs ``n (1 - q) >= 50`` successful requests (p99 needs 5,000, p99.9
  50,000); otherwise it is NaN and named in ``omitted``.
* Quantiles use linear interpolation from 1,000 requests on, Harrell-Davis below.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from benchlib.core.errors import ParameterError
from benchlib.core.schema import ERROR_CODES, ERROR_NAMES, PHASE_CODES, PHASE_NAMES, ROW_DTYPE
from benchlib.stats import diagnostics
from benchlib.stats.changepoint import MIN_SHIFT, detect_changes
from benchlib.stats.quantiles import quantile_column

__all__ = [
    "QUANTILES",
    "MIN_TAIL_COUNT",
    "HD_BELOW",
    "quantile_column",
    "required_requests",
    "trial_columns",
    "trial_quantiles",
    "summarize_trial",
    "requests_frame",
    "summarize_trials",
]

#: Quantiles reported per trial by default.
QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.99, 0.999)
#: A quantile q is reported only when at least this many requests lie above it: n(1-q) >= 50.
MIN_TAIL_COUNT = 50
#: Below this many successful requests, quantiles use Harrell-Davis instead of linear.
HD_BELOW = 1000
#: Deciles kept per trial for the shift function (``d1_ms`` ... ``d9_ms``).
DECILES: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(1, 10))

_INT_COLUMNS = ("t_intended_ns", "t_sent_ns", "t_done_ns", "status")


def required_requests(q: float) -> int:
    """Successful requests a trial needs before quantile ``q`` is reported: ``50 / (1 - q)``."""
    return int(math.ceil(MIN_TAIL_COUNT / (1.0 - q) - 1e-9))


def _codes(values: Any, names: tuple[str, ...], column: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype.kind in "iu":
        bad = (arr < 0) | (arr >= len(names))
        if bad.any():
            raise ParameterError(
                f"column {column!r} holds code(s) {sorted(set(arr[bad].tolist()))[:5]}; "
                f"valid codes are 0..{len(names) - 1} ({', '.join(names)})"
            )
        return arr.astype(np.int64)
    lookup = {name: i for i, name in enumerate(names)}
    strs = pd.Series(arr, dtype="object").astype(str).to_numpy()
    out = np.empty(strs.size, dtype=np.int64)
    for name, code in lookup.items():
        out[strs == name] = code
    unknown = ~np.isin(strs, list(names))
    if unknown.any():
        raise ParameterError(
            f"column {column!r} holds unknown value(s) {sorted(set(strs[unknown].tolist()))[:5]}; "
            f"valid values are {', '.join(names)}"
        )
    return out


def trial_columns(rows: np.ndarray | pd.DataFrame) -> dict[str, np.ndarray]:
    """The row columns as plain arrays, sorted by ``t_intended_ns``, with coded error/phase.

    Raises
    ------
    ParameterError
        When a column is missing, holds NaN, or error/phase hold unknown values.
    """
    if isinstance(rows, np.ndarray) and rows.dtype.names is not None:
        get = {name: rows[name] for name in rows.dtype.names}
    elif isinstance(rows, pd.DataFrame):
        get = {name: rows[name].to_numpy() for name in rows.columns}
    else:
        raise ParameterError(
            "rows must be a numpy array of benchlib.core.schema.ROW_DTYPE or a DataFrame with its columns, "
            f"got {type(rows).__name__}"
        )
    needed = (*_INT_COLUMNS, "error", "phase")
    missing = [c for c in needed if c not in get]
    if missing:
        raise ParameterError(f"rows lack column(s) {missing}; the row schema is {list(ROW_DTYPE.names or ())}")
    out: dict[str, np.ndarray] = {}
    for c in _INT_COLUMNS:
        v = np.asarray(get[c])
        if v.dtype.kind == "f":
            if not np.all(np.isfinite(v)):
                raise ParameterError(f"column {c!r} holds NaN or infinite values")
            v = v.astype(np.int64)
        out[c] = v.astype(np.int64, copy=False)
    out["error"] = _codes(get["error"], ERROR_NAMES, "error")
    out["phase"] = _codes(get["phase"], PHASE_NAMES, "phase")
    order = np.argsort(out["t_intended_ns"], kind="stable")
    if not np.all(order[:-1] < order[1:]):
        out = {k: v[order] for k, v in out.items()}
    return out


def trial_quantiles(x: np.ndarray, qs: Sequence[float]) -> tuple[np.ndarray, str]:
    """Quantiles of ``x``: linear for ``len(x) >= HD_BELOW``, Harrell-Davis below.

    Returns the values and the method's name.
    """
    x = np.asarray(x, dtype=float)
    if x.size == 0:
        return np.full(len(qs), np.nan), "none"
    if x.size >= HD_BELOW:
        return np.quantile(x, qs, method="linear"), "linear"
    if x.size == 1:
        return np.full(len(qs), float(x[0])), "single"
    vals = stats.quantile(x, np.asarray(qs, dtype=float), method="harrell-davis")
    return np.atleast_1d(np.asarray(vals, dtype=float)).reshape(len(qs)), "harrell-davis"


def summarize_trial(
    rows: np.ndarray | pd.DataFrame,
    *,
    quantiles: Sequence[float] = QUANTILES,
    duration_s: float | None = None,
    deciles: bool = True,
    min_shift: float = MIN_SHIFT,
    block_bootstrap: int = 0,
    seed: int = 0,
) -> dict[str, Any]:
    """Reduce one trial's requests to its per-trial summary.

    Parameters
    ----------
    rows:
        The trial's per-request rows (``ROW_DTYPE`` array or DataFrame with its columns).
    quantiles:
        Latency quantiles to report, each in (0, 1); column names from
        :func:`quantile_column` (``p50_ms``...). A quantile with fewer than 50 successful
        requests above it is NaN and listed in ``omitted``.
    duration_s:
        The measured phase's length in seconds, if the caller knows it (the load spec's
        measured duration); else from the rows: the span of send times, extended by one
        mean interval (``(last - first sent) * n / (n - 1)``).
    deciles:
        Also keep the nine deciles ``d1_ms`` ... ``d9_ms`` (for the shift function).
    min_shift:
        Level shift (relative) that marks the trial as not steady.
    block_bootstrap:
        When > 0, that many circular-block-bootstrap resamples of the request sequence give
        the standard error of each log quantile and of the log mean (columns
        ``<metric>_lse``), for the single-trial degraded comparison mode. Costs time.
    seed:
        Seed of the block bootstrap.

    Returns
    -------
    dict
        ``n``, ``n_ok``, ``n_errors``, ``n_transport_errors``, ``n_http_errors``,
        ``error_rate``, ``duration_s``, ``throughput_rps``, ``goodput_rps``, the quantile
        columns, ``mean_ms``, ``max_ms``, ``service_p50_ms``, ``d1_ms``..``d9_ms``,
        ``quantile_method``, ``omitted`` (comma-separated names), ``lag1_autocorr``,
        ``n_eff``, ``mvalue``, ``n_severe_outliers``, ``steady`` (True/False/None),
        ``change_point`` (bool), ``change_at_s``, ``change_pct``, ``change_windows``.

    Examples
    --------
    >>> from benchlib.stats.simulate import trial_rows
    >>> s = summarize_trial(trial_rows(np.full(2000, 4.0), rate_rps=1000.0))
    >>> s["n"], s["p50_ms"], round(s["throughput_rps"])
    (2000, 4.0, 1000)
    """
    qs = [float(q) for q in quantiles]
    for q in qs:
        if not 0.0 < q < 1.0:
            raise ParameterError(f"quantiles must lie strictly between 0 and 1, got {q!r}")
    if duration_s is not None and not (np.isfinite(duration_s) and duration_s > 0):
        raise ParameterError(f"duration_s must be a positive number of seconds, got {duration_s!r}")
    cols = trial_columns(rows)
    measured = cols["phase"] == PHASE_CODES["measure"]
    n = int(np.count_nonzero(measured))
    out: dict[str, Any] = {"n": n}
    if n == 0:
        raise ParameterError(
            "the trial has no rows in the measured phase (phase == 'measure'); "
            f"it holds {cols['phase'].size} warm-up row(s)"
        )
    t_int = cols["t_intended_ns"][measured]
    t_sent = cols["t_sent_ns"][measured]
    t_done = cols["t_done_ns"][measured]
    status = cols["status"][measured]
    error = cols["error"][measured]
    transport = error != ERROR_CODES["none"]
    http_bad = ~transport & ((status < 100) | (status >= 400))
    ok = ~transport & ~http_bad
    n_ok = int(np.count_nonzero(ok))
    if duration_s is None:
        # the sending span, extended by one mean interval: n requests sent over it is the
        # achieved rate (not skewed by how long the last responses took)
        span_ns = int(t_sent.max() - t_sent.min())
        duration_s = span_ns / 1e9 * n / (n - 1) if n > 1 and span_ns > 0 else math.nan
    out.update(
        n_ok=n_ok,
        n_errors=n - n_ok,
        n_transport_errors=int(np.count_nonzero(transport)),
        n_http_errors=int(np.count_nonzero(http_bad)),
        error_rate=(n - n_ok) / n,
        duration_s=float(duration_s),
        throughput_rps=n / duration_s if duration_s > 0 else math.nan,
        goodput_rps=n_ok / duration_s if duration_s > 0 else math.nan,
    )
    lat_ns = (t_done - t_int)[ok]
    svc_ns = (t_done - t_sent)[ok]
    if np.any(lat_ns < 0):
        raise ParameterError(
            f"{int(np.count_nonzero(lat_ns < 0))} request(s) completed before they were due "
            "(t_done_ns < t_intended_ns); the rows are corrupt"
        )
    lat_ms = lat_ns / 1e6
    qvals, method = trial_quantiles(lat_ms, qs)
    omitted = []
    for q, v in zip(qs, qvals, strict=True):
        name = quantile_column(q)
        if n_ok * (1.0 - q) < MIN_TAIL_COUNT - 1e-9:
            out[name] = math.nan
            omitted.append(name)
        else:
            out[name] = float(v)
    out["mean_ms"] = float(lat_ms.mean()) if n_ok else math.nan
    out["max_ms"] = float(lat_ms.max()) if n_ok else math.nan
    out["service_p50_ms"] = float(trial_quantiles(svc_ns / 1e6, [0.5])[0][0]) if n_ok else math.nan
    if deciles:
        dvals, _ = trial_quantiles(lat_ms, DECILES)
        for i, v in enumerate(dvals, start=1):
            out[f"d{i}_ms"] = float(v)
    out["quantile_method"] = method
    out["omitted"] = ",".join(omitted)
    # diagnostics on log latency, in the order the requests were due
    log_lat = np.log(np.maximum(lat_ms, 1e-6))
    phi = diagnostics.lag1_autocorrelation(log_lat)
    out["lag1_autocorr"] = phi
    out["n_eff"] = diagnostics.effective_n(n_ok, phi) if n_ok else 0.0
    out["mvalue"] = diagnostics.mvalue(log_lat)
    out["n_severe_outliers"] = diagnostics.severe_outliers(log_lat)
    cp = detect_changes(log_lat, t_int[ok] / 1e9, min_shift=min_shift)
    out["steady"] = cp.steady
    out["change_point"] = bool(cp.steady is False)
    big = [i for i, s in enumerate(cp.shifts) if abs(s) > min_shift]
    j = max(big, key=lambda i: abs(cp.shifts[i])) if big else None
    out["change_at_s"] = float(cp.at_s[j]) if j is not None and cp.at_s else math.nan
    out["change_pct"] = float(100.0 * cp.shifts[j]) if j is not None else math.nan
    out["change_windows"] = cp.windows
    if block_bootstrap > 0 and n_ok >= 2:
        from benchlib.stats.bootstrap import block_bootstrap_log_se

        names = [quantile_column(q) for q in qs]
        keep = [(q, nm) for q, nm in zip(qs, names, strict=True) if nm not in omitted]
        se, block = block_bootstrap_log_se(lat_ms, [q for q, _ in keep], n_resamples=block_bootstrap, seed=seed)
        for (_q, nm), v in zip(keep, se["quantiles"], strict=True):
            out[f"{nm}_lse"] = float(v)
        out["mean_ms_lse"] = float(se["mean"])
        out["block_len"] = int(block)
    return out


def requests_frame(rows: np.ndarray | pd.DataFrame, *, measured_only: bool = True, **labels: Any) -> pd.DataFrame:
    """A tidy per-request DataFrame for plots: ``t_s``, ``latency_ms``, ``service_ms``, ``ok``.

    Parameters
    ----------
    rows:
        One trial's rows.
    measured_only:
        Keep only the measured phase.
    **labels:
        Constant columns to add (for example ``arm="B", block=3``).
    """
    cols = trial_columns(rows)
    keep = cols["phase"] == PHASE_CODES["measure"] if measured_only else np.ones(cols["phase"].size, bool)
    status = cols["status"][keep]
    transport = cols["error"][keep] != ERROR_CODES["none"]
    ok = ~transport & (status >= 100) & (status < 400)
    frame = pd.DataFrame(
        {
            "t_s": cols["t_intended_ns"][keep] / 1e9,
            "latency_ms": (cols["t_done_ns"][keep] - cols["t_intended_ns"][keep]) / 1e6,
            "service_ms": (cols["t_done_ns"][keep] - cols["t_sent_ns"][keep]) / 1e6,
            "ok": ok,
            "phase": np.asarray(PHASE_NAMES, dtype=object)[cols["phase"][keep]],
        }
    )
    for key, value in labels.items():
        frame[key] = value
    return frame


def summarize_trials(trials: Iterable[tuple[Mapping[str, Any], np.ndarray | pd.DataFrame]], **kwargs: Any) -> pd.DataFrame:
    """Summaries of several trials, one row each.

    Parameters
    ----------
    trials:
        Pairs of (labels, rows); the labels (for example ``{"condition": "c1", "arm": "B",
        "block": 0, "position": 1, "seq": 1, "valid": True}``) become columns.
    **kwargs:
        Passed to :func:`summarize_trial`.
    """
    records = []
    for labels, rows in trials:
        rec = dict(labels)
        rec.update(summarize_trial(rows, **kwargs))
        records.append(rec)
    return pd.DataFrame.from_records(records)
