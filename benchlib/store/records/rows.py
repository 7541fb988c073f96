"""Row helpers: which of a trial's requests count, and their latencies (pure, numpy only).

The one place that says what a *measured*, a *warm-up* and a *successful* request is, for
tables and figures computed from a trial's rows (:data:`benchlib.core.schema.ROW_DTYPE`; the
per-trial summaries in :mod:`benchlib.stats.summary` apply the same rules):

* measured: ``phase == "measure"``; warm-up: ``phase == "warmup"``;
* successful: a complete response (``error == "none"``) with an HTTP status in 100-399
  (k6's ``http_req_failed`` rule);
* latency: from the moment the request was due (``since="intended"``, coordinated-omission
  correct) or from the moment it was sent (``since="sent"``, as wrk, k6 and ab time it), to
  its last byte, in milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from benchlib.core.errors import ParameterError
from benchlib.core.schema import ERROR_CODES, PHASE_CODES
from benchlib.stats.quantiles import quantile_key

__all__ = ["SINCE", "figures", "latency_ms", "measured", "ok", "ok_measured", "warmup"]

#: Where a latency starts: the due time or the send time.
SINCE: tuple[str, ...] = ("intended", "sent")


def measured(rows: np.ndarray) -> np.ndarray:
    """The rows of the measured phase."""
    return rows[rows["phase"] == PHASE_CODES["measure"]]


def warmup(rows: np.ndarray) -> np.ndarray:
    """The rows of the warm-up phase."""
    return rows[rows["phase"] == PHASE_CODES["warmup"]]


def ok(rows: np.ndarray) -> np.ndarray:
    """The successful requests: a complete response with a status in 100-399."""
    return rows[(rows["error"] == ERROR_CODES["none"]) & (rows["status"] >= 100) & (rows["status"] < 400)]


def ok_measured(rows: np.ndarray) -> np.ndarray:
    """The successful requests of the measured phase."""
    return ok(measured(rows))


def latency_ms(rows: np.ndarray, since: str = "intended") -> np.ndarray:
    """Each row's latency in ms, from its due time (``"intended"``) or its send time (``"sent"``).

    Raises
    ------
    ParameterError  for another ``since``.
    """
    if since not in SINCE:
        raise ParameterError(f"since={since!r}; valid: {', '.join(SINCE)}")
    start = rows["t_intended_ns"] if since == "intended" else rows["t_sent_ns"]
    return (rows["t_done_ns"] - start).astype(np.float64) / 1e6


def figures(rows: np.ndarray, *, since: str = "sent", quantiles: Sequence[float] = (0.5, 0.95, 0.99),
            method: str = "summary", supported_only: bool = True) -> dict[str, float]:
    """One trial's latency figures in ms over its successful measured requests: ``n``,
    ``min``, ``mean``, ``max`` and ``p<q>`` for each quantile (``p50``, ``p95``, ``p999``).

    ``method="summary"``: the per-trial summaries' quantiles (linear from 1,000 requests,
    Harrell-Davis below); ``"linear"``: linear interpolation at any count (as wrk and k6
    compute theirs). With ``supported_only``, a quantile with fewer than 50 requests beyond it
    is NaN."""
    from benchlib.stats.summary import required_requests, trial_quantiles

    if method not in ("summary", "linear"):
        raise ParameterError(f"method={method!r}; valid: summary, linear")
    x = np.sort(latency_ms(ok_measured(rows), since))
    names = [quantile_key(q) for q in quantiles]
    if not x.size:
        return {"n": 0, "min": math.nan, "mean": math.nan, "max": math.nan, **{n: math.nan for n in names}}
    vals = trial_quantiles(x, quantiles)[0] if method == "summary" else np.quantile(x, quantiles)
    out: dict[str, float] = {"n": int(x.size), "min": float(x[0]), "mean": float(x.mean()), "max": float(x[-1])}
    for name, q, v in zip(names, quantiles, vals, strict=True):
        out[name] = float(v) if not supported_only or x.size >= required_requests(q) else math.nan
    return out
