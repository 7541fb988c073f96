"""One trial's result from its load hosts' results: rows with their host, the meta summed,
each host judged on its own (numpy only; no Ray).

Every host ran :func:`benchlib.loadgen.run_load` on its share (:mod:`benchlib.loadgen.shares`)
from the common start; its guard judged its own schedule lag and CPUs. The trial is valid
only when every host was, none failed, and the hosts started within the skew bound
(:mod:`benchlib.run.cluster.clock`). A host that died costs its own rows only: the others' are
kept, and the trial is ``failed`` with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchlib.core.schema import HOST_DTYPE, PHASE_CODES, ROW_DTYPE
from benchlib.loadgen.guard import CLIENT_REASONS, DATA_REASONS, LAG_PERCENTILES, START_SKEW_REASON
from benchlib.loadgen.launch import LoadResult, _longest_pause_ns
from benchlib.run.cluster.clock import ClockOffset, StartSkew, start_skew

__all__ = ["HostInfo", "HostOutcome", "merge_hosts"]


@dataclass(frozen=True)
class HostInfo:
    """A load host: its index in the trial, Ray node id, host name, address, the actor's pid
    and the benchlib version it runs."""

    host: int
    node_id: str
    hostname: str
    ip: str
    pid: int
    benchlib: str


@dataclass(frozen=True)
class HostOutcome:
    """What one host brought back: its result, or why it has none (``failure``); its clock
    offset from the driver."""

    info: HostInfo
    offset: ClockOffset
    result: LoadResult | None = None
    failure: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def _tag(reason: str, host: int) -> str:
    """A host's guard reason with the host named in each part (prefixes kept, so
    :func:`benchlib.loadgen.guard.client_side_only` still reads it)."""
    parts = [p for p in reason.split("; ") if p]
    return "; ".join(f"{p} [load host {host}]" if p.startswith(CLIENT_REASONS + DATA_REASONS) else p for p in parts)


def _add(into: dict[str, int], counts: Mapping[str, Any] | None) -> None:
    for k, v in (counts or {}).items():
        into[str(k)] = into.get(str(k), 0) + int(v)


def merge_hosts(outcomes: Sequence[HostOutcome], *, start_wall_ns: int, driver_t0_monotonic_ns: int,
                skew_bound_ns: int, overhead: Mapping[str, float] | None = None) -> LoadResult:
    """The trial's :class:`LoadResult` from every host's outcome (in host order).

    Parameters
    ----------
    outcomes: one per host, ``info.host`` = its index.
    start_wall_ns: the common start instant (wall clock, ns).
    driver_t0_monotonic_ns: that instant on the driver's monotonic clock (the window the
        runtime's resource samples are read against).
    skew_bound_ns: the start skew beyond which the trial is invalid.
    overhead: the cluster's own costs (s), stored as they are (e.g. ``{"ready_s": .., "transfer_s": ..}``).
    """
    ok = [o for o in outcomes if o.result is not None]
    rows = np.concatenate([o.result.rows for o in ok]) if ok else np.zeros(0, ROW_DTYPE)  # type: ignore[union-attr]
    hosts = np.concatenate([np.full(len(o.result.rows), o.info.host, HOST_DTYPE) for o in ok]) if ok \
        else np.zeros(0, HOST_DTYPE)  # type: ignore[union-attr]
    order = np.argsort(rows["t_intended_ns"], kind="stable")
    rows, hosts = rows[order], hosts[order]
    metas = [(o.info.host, o.result.meta) for o in ok]  # type: ignore[union-attr]
    late = [int(m.get("start_late_ns") or 0) for _, m in metas]
    skew: StartSkew | None = start_skew([o.offset for o in ok], late, bound_ns=skew_bound_ns) if ok else None

    reasons: list[str] = []
    failures: list[str] = []
    for o in outcomes:
        if o.result is None:
            failures.append(f"load host {o.info.host} ({o.info.hostname}) failed: {o.failure}")
    for h, m in metas:
        if m.get("failed"):
            failures.append(f"load host {h}: {m.get('failure')}")
        elif not m.get("valid", True) and m.get("invalid_reason"):
            reasons.append(_tag(str(m["invalid_reason"]), h))
    if skew is not None and skew.exceeded:
        reasons.append(f"{START_SKEW_REASON} {skew.skew_ns / 1e6:.1f} ms apart (bound {skew.bound_ns / 1e6:g} ms, "
                       f"± {skew.uncertainty_ns / 1e6:.1f} ms): their clocks disagree or a host was ready late")
    failure = "; ".join(failures) if failures else None
    reason = "; ".join(([failure] if failure else []) + reasons) or None

    base: dict[str, Any] = dict(metas[0][1]) if metas else {}
    for key in ("share", "start_late_ns", "start_wall_ns", "foreign_cpu"):  # per host only
        base.pop(key, None)
    requests: dict[str, int] = {}
    errors: dict[str, int] = {}
    errors_warmup: dict[str, int] = {}
    statuses: dict[str, int] = {}
    examples: dict[str, str] = {}
    per_cpu: dict[str, float] = {}
    per_worker: list[Any] = []
    worker_stats: list[dict[str, Any]] = []
    worker_errors: dict[str, str] = {}
    starts: list[int] = []
    stops: list[int] = []
    lags: dict[str, int | None] = {}
    for h, m in metas:
        _add(requests, m.get("requests"))
        _add(errors, m.get("errors"))
        _add(errors_warmup, m.get("errors_warmup"))
        _add(statuses, m.get("status_counts"))
        for k, v in (m.get("error_examples") or {}).items():
            examples.setdefault(str(k), str(v))
        cpu = m.get("client_cpu") or {}
        per_cpu.update({f"h{h}:{c}": float(v) for c, v in (cpu.get("per_cpu") or {}).items()})
        per_worker.extend(cpu.get("per_worker") or [])
        worker_stats.extend({**w, "host": h} for w in m.get("worker_stats") or [])
        worker_errors.update({f"h{h}:{k}": str(v) for k, v in (m.get("worker_errors") or {}).items()})
        starts.extend(int(x) for x in m.get("measure_start_ns") or [])
        stops.extend(int(x) for x in m.get("measure_stop_ns") or [])
        for k, v in (m.get("schedule_lag_ns") or {}).items():  # the worst host's, percentile by percentile
            if v is not None:
                lags[k] = max(int(v), int(lags.get(k) or v))
            else:
                lags.setdefault(k, None)
    measure = rows[rows["phase"] == PHASE_CODES["measure"]]
    per_host = []
    for o in outcomes:
        m = o.result.meta if o.result is not None else {}
        per_host.append({
            "host": o.info.host, "node_id": o.info.node_id, "hostname": o.info.hostname, "ip": o.info.ip,
            "pid": o.info.pid, "benchlib": o.info.benchlib,
            "rows": int(len(o.result.rows)) if o.result is not None else 0,
            "valid": bool(m.get("valid", False)) if o.result is not None else False,
            "invalid_reason": m.get("invalid_reason") if o.result is not None else o.failure,
            "failed": o.result is None or bool(m.get("failed")),
            "failure": o.failure if o.result is None else m.get("failure"),
            "achieved_rps": m.get("achieved_rps"), "requests": m.get("requests"),
            "schedule_lag_ns": m.get("schedule_lag_ns"), "client_cpu": m.get("client_cpu"),
            "errors": m.get("errors"), "start_late_ns": m.get("start_late_ns"),
            "global_workers": (m.get("share") or {}).get("global_workers"),
            "foreign_cpu": m.get("foreign_cpu"),
            "clock_offset_ns": o.offset.offset_ns, "clock_rtt_ns": o.offset.rtt_ns, **dict(o.extra),
        })
    cost = [float(m["record_bytes_per_request"]) for _, m in metas
            if m.get("record_bytes_per_request") is not None]
    base.update({
        "achieved_rps": float(sum(float(m.get("achieved_rps") or 0.0) for _, m in metas)),
        "measured_duration_s": max((float(m.get("measured_duration_s") or 0.0) for _, m in metas), default=0.0),
        "requests": requests or {"warmup": 0, "measure": 0, "total": 0},
        "errors": errors, "errors_warmup": errors_warmup, "error_examples": examples, "status_counts": statuses,
        "schedule_lag_ns": lags or {f"p{q:g}" if q < 100 else "max": None for q in LAG_PERCENTILES},
        "client_cpu": {"per_worker": per_worker, "per_cpu": per_cpu},
        "valid": reason is None, "invalid_reason": reason, "failed": failure is not None, "failure": failure,
        "worker_errors": worker_errors,
        "retries": sum(int(m.get("retries") or 0) for _, m in metas),
        "unsolicited_responses": sum(int(m.get("unsolicited_responses") or 0) for _, m in metas),
        "abandoned": any(bool(m.get("abandoned")) for _, m in metas),
        "longest_pause_ns": _longest_pause_ns(measure),
        "workers": len(worker_stats),
        "worker_stats": worker_stats,
        "t0_monotonic_ns": int(driver_t0_monotonic_ns),
        "measure_start_ns": starts, "measure_stop_ns": stops,
        "record_bytes_per_request": sum(cost) / len(cost) if cost else math.nan,
        "cluster": {
            "hosts": per_host,
            "start_wall_ns": int(start_wall_ns),
            "start_skew_ns": skew.skew_ns if skew else None,
            "start_skew_uncertainty_ns": skew.uncertainty_ns if skew else None,
            "start_skew_bound_ns": int(skew_bound_ns),
            "start_skew_exceeded": bool(skew.exceeded) if skew else False,
            "host_starts_ns": list(skew.starts_ns) if skew else [],
            "overhead_s": dict(overhead or {}),
        },
    })
    return LoadResult(rows=rows, meta=base, hosts=hosts)
