"""Export a trial for other tools: HdrHistogram (``hdrhistogram`` package) and a
``wrk --latency``-shaped report.

Latency here is ``t_done - t_intended`` (coordinated-omission-correct) unless
``kind="service"`` asks for ``t_done - t_sent``; successful requests of the measured phase
by default. Values are recorded in microseconds.

HdrHistogram notes (``hdrhistogram`` 0.10.8):

* :meth:`HistogramLogWriter.output_start_time` raises ``AttributeError`` (it calls
  ``datetime.iso_format``) and takes milliseconds where it means seconds; we write the
  ``#[StartTime: ...]`` line ourselves with ``output_comment``.
* The writer never writes a ``Tag=`` prefix; write one ``.hlog`` per trial.
* ``output_percentile_distribution`` scales values but not the standard deviation in its
  footer; the ``Mean`` is scaled.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchlib.core.schema import PHASE_CODES

__all__ = [
    "latency_us",
    "to_hdr_histogram",
    "write_hgrm",
    "write_hlog",
    "wrk_latency_table",
    "format_time_us",
    "HDR_HIGHEST_US",
]

#: The largest latency an exported histogram can hold: one hour, in microseconds.
HDR_HIGHEST_US = 3_600_000_000


def _rows_of(result_or_rows: Any) -> np.ndarray:
    rows = getattr(result_or_rows, "rows", result_or_rows)
    if not isinstance(rows, np.ndarray) or rows.dtype.names is None or "t_done_ns" not in rows.dtype.names:
        raise TypeError("expected a LoadResult or an array of benchlib.core.schema.ROW_DTYPE rows")
    return rows


def _select(rows: np.ndarray, phase: str | None, ok_only: bool) -> np.ndarray:
    if phase is not None:
        if phase not in PHASE_CODES:
            raise ValueError(f"unknown phase {phase!r}; valid: {', '.join(PHASE_CODES)} or None for all")
        rows = rows[rows["phase"] == PHASE_CODES[phase]]
    if ok_only:
        rows = rows[rows["error"] == 0]
    return rows


def latency_us(result_or_rows: Any, *, phase: str | None = "measure", ok_only: bool = True,
               kind: str = "latency") -> np.ndarray:
    """Latencies (``kind="latency"``: from the intended send) or service times
    (``kind="service"``: from the actual send), in whole microseconds (int64, rounded)."""
    rows = _select(_rows_of(result_or_rows), phase, ok_only)
    if kind == "latency":
        ns = rows["t_done_ns"] - rows["t_intended_ns"]
    elif kind == "service":
        ns = rows["t_done_ns"] - rows["t_sent_ns"]
    else:
        raise ValueError(f"unknown kind {kind!r}; valid: latency, service")
    return np.maximum((ns + 500) // 1000, 0).astype(np.int64)


def _histogram(values_us: np.ndarray, significant_figures: int) -> Any:
    from hdrh.histogram import HdrHistogram

    h = HdrHistogram(1, HDR_HIGHEST_US, significant_figures)
    if values_us.size:
        vals, counts = np.unique(np.clip(values_us, 1, HDR_HIGHEST_US), return_counts=True)
        for v, c in zip(vals.tolist(), counts.tolist()):
            h.record_value(v, c)
    return h


def to_hdr_histogram(result_or_rows: Any, *, phase: str | None = "measure", ok_only: bool = True,
                     kind: str = "latency", significant_figures: int = 3) -> Any:
    """An ``hdrh.histogram.HdrHistogram`` of the trial's latencies in microseconds
    (1 µs .. 1 h, ``significant_figures`` digits). ``h.encode()`` gives the portable blob."""
    return _histogram(latency_us(result_or_rows, phase=phase, ok_only=ok_only, kind=kind), significant_figures)


def write_hgrm(result_or_rows: Any, path: str | Path, *, phase: str | None = "measure", ok_only: bool = True,
               kind: str = "latency") -> Path:
    """Write the ``.hgrm`` percentile distribution (values in milliseconds), the format the
    HdrHistogram plotters read."""
    h = to_hdr_histogram(result_or_rows, phase=phase, ok_only=ok_only, kind=kind)
    path = Path(path)
    with open(path, "wb") as f:
        h.output_percentile_distribution(f, 1000.0)
    return path


def write_hlog(result_or_rows: Any, path: str | Path, *, interval_s: float = 1.0, start_epoch_s: float | None = None,
               t0_monotonic_ns: int | None = None, phase: str | None = None, ok_only: bool = True,
               kind: str = "latency") -> Path:
    """Write an HdrHistogram interval log (``.hlog``): one histogram per ``interval_s`` of
    completion time, timestamps in seconds from the trial's ``t0``.

    ``start_epoch_s`` is the wall-clock time of ``t0``; by default it is derived from
    ``t0_monotonic_ns`` (or the result's ``meta["t0_monotonic_ns"]``) and the current offset
    between the wall clock and the monotonic clock.
    """
    from hdrh.log import HistogramLogWriter

    if interval_s <= 0:
        raise ValueError(f"interval_s must be positive, got {interval_s!r}")
    rows = _select(_rows_of(result_or_rows), phase, ok_only)
    if start_epoch_s is None:
        t0 = t0_monotonic_ns
        if t0 is None:
            t0 = getattr(result_or_rows, "meta", {}).get("t0_monotonic_ns")
        start_epoch_s = time.time() - (time.monotonic_ns() - t0) / 1e9 if t0 is not None else time.time()
    vals = latency_us(rows, phase=None, ok_only=False, kind=kind)
    bins = (rows["t_done_ns"] // int(interval_s * 1e9)).astype(np.int64)
    path = Path(path)
    with open(path, "w", encoding="utf-8") as f:
        w = HistogramLogWriter(f)
        w.output_comment("Logged with benchlib (latency in microseconds, from the intended send time)"
                         if kind == "latency" else "Logged with benchlib (service time in microseconds)")
        w.output_log_format_version()
        # written by hand: hdrhistogram's output_start_time() raises AttributeError
        iso = _dt.datetime.fromtimestamp(start_epoch_s, tz=_dt.UTC).isoformat(" ")
        w.output_comment(f"[StartTime: {start_epoch_s:.3f} (seconds since epoch), {iso}]")
        w.output_legend()
        if bins.size:
            for b in range(int(bins.min()), int(bins.max()) + 1):
                sel = vals[bins == b]
                if not sel.size:
                    continue
                h = _histogram(sel, 3)
                w.output_interval_histogram(h, start_time_stamp_sec=b * interval_s if b else 1e-9,
                                            end_time_stamp_sec=(b + 1) * interval_s, max_value_unit_ratio=1000.0)
    return path


def format_time_us(us: float) -> str:
    """wrk's time format: ``281.00us``, ``3.80ms``, ``1.20s``, ``2.00m``, ``1.00h``."""
    for limit, scale, unit in ((1e3, 1.0, "us"), (1e6, 1e3, "ms"), (60e6, 1e6, "s"), (3600e6, 60e6, "m")):
        if us < limit:
            return f"{us / scale:.2f}{unit}"
    return f"{us / 3600e6:.2f}h"


def _format_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024:
            return f"{n:.2f}{unit}"
        n /= 1024
    return f"{n:.2f}TB"


def _units(text: str, width: int) -> str:
    # wrk's print_units: right-align, with the unit's letters eating into a two-space pad
    pad = 2 - sum(1 for c in text[-2:] if c.isalpha())
    return f"{text:>{width - pad}}" + " " * pad


def wrk_latency_table(result_or_rows: Any, *, phase: str | None = "measure", kind: str = "latency",
                      percentiles: Sequence[float] = (50, 75, 90, 99), duration_s: float | None = None) -> str:
    """A report in the shape of ``wrk --latency``, from the rows.

    Percentiles are the smallest latency with at least that fraction of requests at or
    below it (as wrk computes them). Requests/sec uses ``duration_s`` (default: the result's
    ``meta["measured_duration_s"]``, else the span of the rows).
    """
    rows_all = _rows_of(result_or_rows)
    rows = _select(rows_all, phase, ok_only=False)
    ok = rows[rows["error"] == 0]
    lat = latency_us(ok, phase=None, ok_only=False, kind=kind).astype(np.float64)
    meta = getattr(result_or_rows, "meta", {}) or {}
    if duration_s is None:
        duration_s = meta.get("measured_duration_s")
    if duration_s is None:
        duration_s = float(rows["t_done_ns"].max() - rows["t_intended_ns"].min()) / 1e9 if len(rows) else 0.0
    lines = [f"  {meta.get('description', 'benchlib trial')}",
             f"  Thread Stats{'Avg':>6}{'Stdev':>11}{'Max':>8}{'+/- Stdev':>12}"]
    if lat.size:
        mean, sd, mx = float(lat.mean()), float(lat.std()), float(lat.max())
        within = float(np.mean(np.abs(lat - mean) <= sd) * 100)
        lines.append(f"    {'Latency':<10}" + _units(format_time_us(mean), 8) + _units(format_time_us(sd), 10)
                     + _units(format_time_us(mx), 9) + f"{within:8.2f}%")
        lines.append("  Latency Distribution" + (" (from the intended send time)" if kind == "latency" else " (service time)"))
        for p in percentiles:
            v = float(np.percentile(lat, p, method="inverted_cdf"))
            lines.append(f"{p:7.0f}%" + _units(format_time_us(v), 10).rstrip())
    nbytes = float(rows["bytes"].sum())
    lines.append(f"  {len(rows)} requests in {duration_s:.2f}s, {_format_bytes(nbytes)} read")
    errs = len(rows) - len(ok)
    if errs:
        lines.append(f"  Errors (benchlib kinds): {errs}")
    non2xx = int(np.count_nonzero((ok["status"] < 200) | (ok["status"] > 399)))
    if non2xx:
        lines.append(f"  Non-2xx or 3xx responses: {non2xx}")
    rps = len(ok) / duration_s if duration_s else float("nan")
    lines.append(f"Requests/sec: {rps:9.2f}")
    lines.append(f"Transfer/sec: {_format_bytes(nbytes / duration_s) if duration_s else '-':>10}")
    return "\n".join(lines)
