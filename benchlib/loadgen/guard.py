"""The saturation guard: can the trial's numbers be trusted as the server's?

Pure (numpy only). A trial is marked invalid, with the reason, when

* a client CPU was busy for at least :data:`CPU_BUSY_LIMIT` of the traffic's wall time
  (workers pinned to one CPU are summed), or one worker process was (a worker is one
  thread: at that point it, not the server, sets the pace, whatever CPUs it may run on).
  Busy is the worker's CPU time from the first request to the last row, less the time the
  open model's dispatcher spent spinning idle for precise send times (only the spinning
  passes of the event loop in which no I/O was handled count as idle);
* open model: the dispatcher sent requests late, with the 99th percentile of the schedule
  lag (dispatch time minus due time, per arrival) above :data:`LAG_P99_LIMIT_NS`;
* no request of the measured phase got a complete response (there is nothing to measure);
* the server sent bytes nobody asked for (see :mod:`benchlib.loadgen.engine`): an HTTP/1.1
  client without pipelining cannot tell such bytes from the answer to a request it has just
  sent, so some rows of that trial may carry another request's response.

Offered vs achieved rate is reported but not by itself a reason: an open-model trial whose
server cannot keep up achieves less than offered and shows it in its latency, which is the
measurement, not a fault of the client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "CPU_BUSY_LIMIT",
    "LAG_P99_LIMIT_NS",
    "LAG_PERCENTILES",
    "lag_percentiles",
    "busy_fraction",
    "busy_by_worker",
    "cpu_by_cpu",
    "assess",
    "CLIENT_REASONS",
    "START_SKEW_REASON",
    "client_side_only",
]

#: Fraction of one CPU's wall time the client may use before its trial is invalid (k6
#: advises staying below 80 %; we flag at 90 %, where queueing in the client shows).
CPU_BUSY_LIMIT = 0.90

#: Largest acceptable 99th percentile of the open-model schedule lag (ns).
LAG_P99_LIMIT_NS = 5_000_000

LAG_PERCENTILES = (50.0, 90.0, 99.0, 99.9, 100.0)

#: How the reason for load hosts that began the common schedule too far apart begins
#: (:mod:`benchlib.run.cluster`).
START_SKEW_REASON = "load hosts started"
#: How the reasons that blame the client (not the server or the data) begin: a busy client
#: CPU, a busy load worker, an open-model schedule the dispatcher could not keep, load hosts
#: that did not start together.
CLIENT_REASONS = ("client CPU ", "load worker ", "requests were sent late", START_SKEW_REASON)
#: How the other reasons begin: nothing to measure, or responses that may be another's.
DATA_REASONS = ("no request of the measured phase", "the server sent bytes nobody asked for")


def lag_percentiles(lag_ns: np.ndarray) -> dict[str, int | None]:
    """``{"p50": ns, "p90": ..., "p99": ..., "p99.9": ..., "max": ...}`` of a lag sample."""
    keys = ["p50", "p90", "p99", "p99.9", "max"]
    if lag_ns.size == 0:
        return {k: None for k in keys}
    vals = np.percentile(lag_ns, LAG_PERCENTILES, method="inverted_cdf")
    return {k: int(v) for k, v in zip(keys, vals)}


def busy_fraction(worker: Mapping[str, Any]) -> float:
    """One worker's busy fraction of its traffic's wall time: (CPU s − idle spin s) / wall s.

    Uses ``traffic_cpu_s`` / ``traffic_wall_s`` (from the first request to the last row)
    when the worker reports them, else ``cpu_s`` / ``wall_s`` (the whole run of its loop).
    """
    if worker.get("traffic_wall_s"):
        cpu, wall = float(worker.get("traffic_cpu_s") or 0.0), float(worker["traffic_wall_s"])
    else:
        cpu, wall = float(worker.get("cpu_s") or 0.0), float(worker.get("wall_s") or 0.0)
    return max(cpu - float(worker.get("spin_ns") or 0) / 1e9, 0.0) / max(wall, 1e-9)


def busy_by_worker(workers: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Each worker's :func:`busy_fraction`, keyed by its number."""
    return {str(w.get("worker", i)): busy_fraction(w) for i, w in enumerate(workers)}


def cpu_by_cpu(workers: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Busy fraction of each client CPU: the workers pinned to it, summed.

    A worker allowed on several CPUs counts its share evenly on each (its own saturation is
    judged by :func:`busy_by_worker`).
    """
    out: dict[str, float] = {}
    for w in workers:
        cpus = w.get("cpus") or ["any"]
        busy = busy_fraction(w)
        for c in cpus:
            out[str(c)] = out.get(str(c), 0.0) + busy / len(cpus)
    return out


def assess(
    model: str,
    lags: Mapping[str, int | None],
    cpu: Mapping[str, float],
    *,
    worker_busy: Mapping[str, float] | None = None,
    ok_measured: int | None = None,
    unsolicited: int = 0,
) -> tuple[bool, str | None]:
    """``(valid, reason)`` for a trial (see the module docstring).

    Parameters
    ----------
    model: ``"open"`` or ``"closed"``.
    lags: schedule-lag percentiles (ns), as :func:`lag_percentiles`.
    cpu: busy fraction per client CPU, as :func:`cpu_by_cpu`.
    worker_busy: busy fraction per worker, as :func:`busy_by_worker`.
    ok_measured: complete responses in the measured phase (``None``: not judged).
    unsolicited: connections closed because the server sent bytes nobody asked for.
    """
    reasons = []
    busy = {c: f for c, f in cpu.items() if f >= CPU_BUSY_LIMIT}
    if busy:
        worst = max(busy, key=lambda c: busy[c])
        reasons.append(
            f"client CPU {worst} was {busy[worst]:.0%} busy (limit {CPU_BUSY_LIMIT:.0%}): "
            "the client, not the server, may have limited the load; add client CPUs or workers, or lower the load"
        )
    else:
        wbusy = {w: f for w, f in (worker_busy or {}).items() if f >= CPU_BUSY_LIMIT}
        if wbusy:
            worst = max(wbusy, key=lambda w: wbusy[w])
            reasons.append(
                f"load worker {worst} was {wbusy[worst]:.0%} busy (limit {CPU_BUSY_LIMIT:.0%}): "
                "the client, not the server, may have limited the load; add workers, or lower the load"
            )
    p99 = lags.get("p99")
    if model == "open" and p99 is not None and p99 > LAG_P99_LIMIT_NS:
        reasons.append(
            f"requests were sent late: schedule lag p99 {p99 / 1e6:.1f} ms > {LAG_P99_LIMIT_NS / 1e6:g} ms; "
            "the client could not keep to the schedule"
        )
    if ok_measured is not None and ok_measured == 0:
        reasons.append("no request of the measured phase got a complete response")
    if unsolicited:
        reasons.append(
            f"the server sent bytes nobody asked for on {unsolicited} connection(s) (closed, not counted as "
            "responses); responses read on such a server's connections may belong to other requests"
        )
    return (not reasons, "; ".join(reasons) if reasons else None)


def client_side_only(reason: str | None) -> bool:
    """``True`` when every part of an :func:`assess` reason blames the client (see
    :data:`CLIENT_REASONS`): the trial's responses are sound, but the machine's client side
    was too busy that minute for its figures to be the server's."""
    parts = [p for p in (reason or "").split("; ") if p]  # reasons, and the advice after some
    return any(p.startswith(CLIENT_REASONS) for p in parts) and not any(p.startswith(DATA_REASONS) for p in parts)
