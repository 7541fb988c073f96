"""The load generator's account of one trial (``load`` in the trial metadata), typed (pure).

:func:`benchlib.loadgen.run_load` returns a JSON-able ``meta`` dictionary that the runner
stores as the trial's ``load``. :class:`LoadMeta` reads the fields the analysis uses and keeps
every other one: fields the load generator adds later land in ``extra`` (and all of them in
``raw``), so a reader never drops what a newer writer stored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from benchlib.store.records._convert import as_float as _f

__all__ = ["LOAD_META_VERSION", "LoadMeta", "WorkerStats"]

#: Version of :class:`LoadMeta` (1: the fields of benchlib 0.1, Dec 2026; 2: the engine's
#: failure, retry and clock fields and the per-worker statistics named, no longer in ``extra``;
#: 3: ``idle_timeouts``, 0 when read from an earlier one).
LOAD_META_VERSION = 3

_KNOWN = frozenset({
    "model", "description", "offered_rps", "achieved_rps", "measured_duration_s", "requests", "errors",
    "errors_warmup", "error_examples", "client_cpu", "client_cpus", "valid", "invalid_reason", "loadspec",
    "schedule_lag_ns", "status_counts", "coordinated_omission_risk", "workers", "retries", "unsolicited_responses",
    "idle_timeouts", "abandoned", "failed", "failure", "worker_errors", "longest_pause_ns", "worker_stats", "t0_monotonic_ns",
    "measure_start_ns", "measure_stop_ns", "record_bytes_per_request",
})


def _i(v: Any) -> int | None:
    """``v`` as an int; ``None`` when missing or not a number."""
    f = _f(v)
    return None if f != f else int(f)


def _count(v: Any) -> int:
    """A count as stored: an int, or (an early shape) counts by kind, summed; 0 when missing."""
    if isinstance(v, Mapping):
        return sum(_count(x) for x in v.values())
    return _i(v) or 0


@dataclass(frozen=True)
class WorkerStats:
    """One load worker process in one trial (``worker_stats`` in the load generator's meta).

    Attributes
    ----------
    worker: its number; pid: its process id; cpus: the CPUs it was pinned to.
    cpu_s, wall_s: CPU and wall time of its whole event loop, s.
    traffic_cpu_s, traffic_wall_s: the same from its first request to its last row, s.
    cpu_fraction: ``traffic_cpu_s / traffic_wall_s`` (1.0 = one CPU busy).
    spin_ns: idle spinning of the open model's dispatcher, ns (not counted as busy).
    runqueue_wait_s: time it was runnable but waiting for a CPU, s (from
        ``/proc/thread-self/schedstat``; NaN where not available).
    records, record_buffer_bytes: rows recorded and the record buffer's size, bytes.
    peak_rss_bytes, peak_rss_growth_bytes: its peak resident memory and its growth in the trial.
    retries, unsolicited_responses, idle_timeouts, idle_connect_failures: its share of the trial's
        counts.
    abandoned: the hard deadline (or a failure) cut its traffic short.
    raw: the stored dictionary.
    """

    worker: int
    pid: int | None = None
    cpus: tuple[int, ...] = ()
    cpu_s: float = math.nan
    wall_s: float = math.nan
    traffic_cpu_s: float = math.nan
    traffic_wall_s: float = math.nan
    cpu_fraction: float = math.nan
    spin_ns: int = 0
    runqueue_wait_s: float = math.nan
    records: int = 0
    record_buffer_bytes: int = 0
    peak_rss_bytes: int | None = None
    peak_rss_growth_bytes: int | None = None
    retries: int = 0
    unsolicited_responses: int = 0
    idle_timeouts: int = 0
    idle_connect_failures: int = 0
    abandoned: bool = False
    raw: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], index: int = 0) -> WorkerStats:
        """Read one stored ``worker_stats`` entry (``index``: its place, when it names no worker)."""
        worker = _i(d.get("worker"))
        return cls(
            worker=index if worker is None else worker, pid=_i(d.get("pid")),
            cpus=tuple(int(c) for c in d.get("cpus") or ()), cpu_s=_f(d.get("cpu_s")), wall_s=_f(d.get("wall_s")),
            traffic_cpu_s=_f(d.get("traffic_cpu_s")), traffic_wall_s=_f(d.get("traffic_wall_s")),
            cpu_fraction=_f(d.get("cpu_fraction")), spin_ns=_i(d.get("spin_ns")) or 0,
            runqueue_wait_s=_f(d.get("runqueue_wait_s")), records=_i(d.get("records")) or 0,
            record_buffer_bytes=_i(d.get("record_buffer_bytes")) or 0, peak_rss_bytes=_i(d.get("peak_rss_bytes")),
            peak_rss_growth_bytes=_i(d.get("peak_rss_growth_bytes")), retries=_count(d.get("retries")),
            unsolicited_responses=_count(d.get("unsolicited_responses")),
            idle_timeouts=_count(d.get("idle_timeouts")), idle_connect_failures=_count(d.get("idle_connect_failures")),
            abandoned=bool(d.get("abandoned")),
            raw=dict(d),
        )


@dataclass(frozen=True)
class LoadMeta:
    """What the load generator did and measured in one trial (``docs/loadgen.md``, "meta").

    Attributes
    ----------
    model: ``open`` or ``closed``. description: the load in words.
    offered_rps, achieved_rps: requests/s offered (open model; NaN for closed) and achieved.
    measured_duration_s: length of the measured phase, s.
    requests_measured, requests_warmup, requests_total: requests sent in each phase, and in all.
    errors, errors_warmup: failed requests by kind (``connect``, ``reset``, ...), measured
        phase and warm-up. error_examples: one message per error kind.
    status_counts: HTTP statuses of the measured requests that got a response (``{"200": n}``).
    client_cpu: the client's CPU use per CPU (share of one CPU, keyed by CPU number).
    client_cpus: the CPUs the load generator ran on.
    valid, invalid_reason: the guard's decision (a client that could not keep the load).
    failed, failure, worker_errors: a worker failed during the trial; why (one line); each
        failed worker's traceback, by worker number. The rows measured before are kept.
    retries: requests resent after a stale keep-alive connection.
    unsolicited_responses: connections closed for bytes nobody asked for (invalidates the trial).
    idle_timeouts: idle connections the server closed with a ``408 Request Timeout`` (the trial
        stays valid).
    abandoned: the hard deadline (or a failure) cut the trial short.
    coordinated_omission_risk: ``True`` for the closed model.
    longest_pause_ns: the longest stretch of the measured phase with no response completing.
    loadspec: the :class:`~benchlib.core.model.LoadSpec` as stored.
    schedule_lag_ns: percentiles of send time minus due time.
    workers: client worker processes; worker_stats: each one's statistics.
    t0_monotonic_ns: the trial's ``t0`` on ``CLOCK_MONOTONIC`` (the rows' times are relative
        to it); measure_start_ns, measure_stop_ns: each worker's measured phase, ns after t0.
    record_bytes_per_request: record buffer allocated per request, bytes.
    extra: stored fields this reader does not know (newer load generators add some).
    raw: the stored dictionary, unchanged.
    """

    model: str = ""
    description: str = ""
    offered_rps: float = math.nan
    achieved_rps: float = math.nan
    measured_duration_s: float = math.nan
    requests_measured: int = 0
    requests_warmup: int = 0
    requests_total: int = 0
    errors: Mapping[str, int] = field(default_factory=dict)
    errors_warmup: Mapping[str, int] = field(default_factory=dict)
    error_examples: Mapping[str, str] = field(default_factory=dict)
    status_counts: Mapping[str, int] = field(default_factory=dict)
    client_cpu: Mapping[str, float] = field(default_factory=dict)
    client_cpus: tuple[int, ...] = ()
    valid: bool = True
    invalid_reason: str | None = None
    failed: bool = False
    failure: str | None = None
    worker_errors: Mapping[str, str] = field(default_factory=dict)
    retries: int = 0
    unsolicited_responses: int = 0
    idle_timeouts: int = 0
    abandoned: bool = False
    coordinated_omission_risk: bool = False
    longest_pause_ns: int | None = None
    loadspec: Mapping[str, Any] = field(default_factory=dict)
    schedule_lag_ns: Mapping[str, float] = field(default_factory=dict)
    workers: int = 0
    worker_stats: tuple[WorkerStats, ...] = ()
    t0_monotonic_ns: int | None = None
    measure_start_ns: tuple[int, ...] = ()
    measure_stop_ns: tuple[int, ...] = ()
    record_bytes_per_request: float = math.nan
    extra: Mapping[str, Any] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict)
    version: int = LOAD_META_VERSION

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> LoadMeta | None:
        """Read a stored ``load`` dictionary; ``None`` when the trial has none (it failed first)."""
        if not d:
            return None
        req = d.get("requests") or {}
        cpu = (d.get("client_cpu") or {}).get("per_cpu") or {}
        model = str(d.get("model") or (d.get("loadspec") or {}).get("model") or "")
        return cls(
            model=model, description=str(d.get("description") or ""), offered_rps=_f(d.get("offered_rps")),
            achieved_rps=_f(d.get("achieved_rps")), measured_duration_s=_f(d.get("measured_duration_s")),
            requests_measured=int(req.get("measure") or 0), requests_warmup=int(req.get("warmup") or 0),
            requests_total=int(req.get("total") or (req.get("measure") or 0) + (req.get("warmup") or 0)),
            errors=_counts(d.get("errors")), errors_warmup=_counts(d.get("errors_warmup")),
            error_examples={str(k): str(v) for k, v in (d.get("error_examples") or {}).items()},
            status_counts=_counts(d.get("status_counts")),
            client_cpu={str(k): float(v) for k, v in cpu.items()},
            client_cpus=tuple(int(c) for c in d.get("client_cpus") or ()), valid=bool(d.get("valid", True)),
            invalid_reason=d.get("invalid_reason"), failed=bool(d.get("failed")), failure=d.get("failure"),
            worker_errors={str(k): str(v) for k, v in (d.get("worker_errors") or {}).items()},
            retries=_count(d.get("retries")), unsolicited_responses=_count(d.get("unsolicited_responses")),
            idle_timeouts=_count(d.get("idle_timeouts")), abandoned=bool(d.get("abandoned")),
            coordinated_omission_risk=bool(d.get("coordinated_omission_risk", model == "closed")),
            longest_pause_ns=_i(d.get("longest_pause_ns")),
            loadspec=dict(d.get("loadspec") or {}), schedule_lag_ns=dict(d.get("schedule_lag_ns") or {}),
            workers=int(d.get("workers") or 0),
            worker_stats=tuple(WorkerStats.from_dict(w, i) for i, w in enumerate(d.get("worker_stats") or ())),
            t0_monotonic_ns=_i(d.get("t0_monotonic_ns")),
            measure_start_ns=tuple(int(x) for x in d.get("measure_start_ns") or ()),
            measure_stop_ns=tuple(int(x) for x in d.get("measure_stop_ns") or ()),
            record_bytes_per_request=_f(d.get("record_bytes_per_request")),
            extra={k: v for k, v in d.items() if k not in _KNOWN}, raw=dict(d),
        )

    @property
    def client_cpu_busiest(self) -> float:
        """The busiest client CPU's use (share of one CPU; the load generator's workers summed
        on it); NaN when not recorded."""
        return max(self.client_cpu.values()) if self.client_cpu else math.nan

    @property
    def runqueue_wait_s(self) -> float:
        """Time the workers were runnable but waited for a CPU, summed over workers, s (NaN
        when no worker recorded it)."""
        waits = [w.runqueue_wait_s for w in self.worker_stats if w.runqueue_wait_s == w.runqueue_wait_s]
        return float(sum(waits)) if waits else math.nan

    def measured_window_ns(self) -> tuple[int, int] | None:
        """The measured phase on ``CLOCK_MONOTONIC``: from the earliest worker's start to the
        latest planned stop, ns; ``None`` without a ``t0`` or without planned stops (a trial
        bounded by a request count ends at its last response: see the rows)."""
        if self.t0_monotonic_ns is None or not self.measure_start_ns or not self.measure_stop_ns:
            return None
        return self.t0_monotonic_ns + min(self.measure_start_ns), self.t0_monotonic_ns + max(self.measure_stop_ns)


def _counts(v: Any) -> dict[str, int]:
    return {str(k): int(x) for k, x in (v or {}).items()}
