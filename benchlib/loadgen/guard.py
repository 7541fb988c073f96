"""The saturation guard: was the client, rather than the server, the bottleneck?

Pure (numpy only). A trial is marked invalid, with the reason, when

* a client CPU was busy for at least :data:`CPU_BUSY_LIMIT` of the trial's wall time
  (workers sharing a CPU are summed; in the open model the time spent spinning for precise
  send times is not counted as busy), or
* open model: the dispatcher sent requests late, with the 99th percentile of the schedule
  lag (send time minus due time, for requests that had a connection ready) above
  :data:`LAG_P99_LIMIT_NS`.

Offered vs achieved rate is reported but not by itself a reason: an open-model trial whose
server cannot keep up achieves less than offered and shows it in its latency, which is the
measurement, not a fault of the client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["CPU_BUSY_LIMIT", "LAG_P99_LIMIT_NS", "LAG_PERCENTILES", "lag_percentiles", "cpu_by_cpu", "assess"]

#: Fraction of one CPU's wall time the client may use before its trial is invalid (k6
#: advises staying below 80 %; we flag at 90 %, where queueing in the client shows).
CPU_BUSY_LIMIT = 0.90

#: Largest acceptable 99th percentile of the open-model schedule lag (ns).
LAG_P99_LIMIT_NS = 5_000_000

LAG_PERCENTILES = (50.0, 90.0, 99.0, 99.9, 100.0)


def lag_percentiles(lag_ns: np.ndarray) -> dict[str, int | None]:
    """``{"p50": ns, "p90": ..., "p99": ..., "p99.9": ..., "max": ...}`` of a lag sample."""
    keys = ["p50", "p90", "p99", "p99.9", "max"]
    if lag_ns.size == 0:
        return {k: None for k in keys}
    vals = np.percentile(lag_ns, LAG_PERCENTILES, method="inverted_cdf")
    return {k: int(v) for k, v in zip(keys, vals)}


def cpu_by_cpu(workers: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Busy fraction of each client CPU: the workers pinned to it, summed.

    A worker pinned to several CPUs counts its share evenly on each.
    """
    out: dict[str, float] = {}
    for w in workers:
        cpus = w.get("cpus") or ["any"]
        wall = max(float(w.get("wall_s") or 0.0), 1e-9)
        busy = max(float(w.get("cpu_s") or 0.0) - float(w.get("spin_ns") or 0) / 1e9, 0.0) / wall
        for c in cpus:
            out[str(c)] = out.get(str(c), 0.0) + busy / len(cpus)
    return out


def assess(model: str, lags: Mapping[str, int | None], cpu: Mapping[str, float]) -> tuple[bool, str | None]:
    """``(valid, reason)`` for a trial from its schedule-lag percentiles and CPU use."""
    reasons = []
    busy = {c: f for c, f in cpu.items() if f >= CPU_BUSY_LIMIT}
    if busy:
        worst = max(busy, key=lambda c: busy[c])
        reasons.append(
            f"client CPU {worst} was {busy[worst]:.0%} busy (limit {CPU_BUSY_LIMIT:.0%}): "
            "the client, not the server, may have limited the load; add client CPUs or workers, or lower the load"
        )
    p99 = lags.get("p99")
    if model == "open" and p99 is not None and p99 > LAG_P99_LIMIT_NS:
        reasons.append(
            f"requests were sent late: schedule lag p99 {p99 / 1e6:.1f} ms > {LAG_P99_LIMIT_NS / 1e6:g} ms; "
            "the client could not keep to the schedule"
        )
    return (not reasons, "; ".join(reasons) if reasons else None)
