"""The server's CPU time over a trial's measured window, per request (pure).

The runtimes sample each service's cumulative CPU time (``resources``: ``t_monotonic_ns``,
``cpu_s``) about once a second, and once more right as benchlib's load starts and ends
(``benchlib.run.runner``); a front (nginx before FastCGI applications) is sampled the same way
(``front.resources``). The load generator records where its measured phase lies on the same
clock (``load.t0_monotonic_ns`` plus ``measure_start_ns`` / ``measure_stop_ns``).

:func:`server_cpu` interpolates the cumulative CPU time linearly at both ends of the measured
window and divides by the requests completed in it: the CPU cost per request, which still
compares two servers when neither saturates its CPU (a client-bound arm) and the throughput
says nothing about them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchlib.store.records import rows as R
from benchlib.store.records.interleave import InterleaveRecord
from benchlib.store.records.load import LoadMeta

__all__ = ["ServerCpu", "cpu_at", "server_cpu"]


@dataclass(frozen=True)
class ServerCpu:
    """CPU use of the server side over the measured window of one trial.

    Attributes
    ----------
    service_s, front_s: CPU seconds of the service and of its front (0 without a front) in
        the window; NaN when the samples do not cover it.
    window_s: length of the window, s. requests: requests completed in it.
    """

    service_s: float
    front_s: float
    window_s: float
    requests: int

    @property
    def total_s(self) -> float:
        """CPU seconds of the service and its front together."""
        return self.service_s + self.front_s

    @property
    def per_request_us(self) -> float:
        """Server CPU time per completed request, µs (service and front)."""
        return 1e6 * self.total_s / self.requests if self.requests > 0 else math.nan

    @property
    def front_per_request_us(self) -> float:
        """The front's share of :attr:`per_request_us`, µs."""
        return 1e6 * self.front_s / self.requests if self.requests > 0 else math.nan

    @property
    def fraction(self) -> float:
        """Server CPU seconds per second of the window (1.0 = one CPU fully busy)."""
        return self.total_s / self.window_s if self.window_s > 0 else math.nan


def cpu_at(samples: Sequence[Mapping[str, Any]], t_ns: int) -> float:
    """Cumulative CPU seconds at monotonic time ``t_ns``, linearly interpolated between the
    two samples around it; NaN when ``t_ns`` lies outside the samples."""
    pts = sorted((int(s["t_monotonic_ns"]), float(s["cpu_s"])) for s in samples
                 if s.get("t_monotonic_ns") is not None and s.get("cpu_s") is not None)
    if len(pts) < 2 or not pts[0][0] <= t_ns <= pts[-1][0]:
        return math.nan
    t = np.array([p[0] for p in pts], dtype=np.float64)
    c = np.array([p[1] for p in pts], dtype=np.float64)
    return float(np.interp(float(t_ns), t, c))


def _interleaved_cpu(meta: Mapping[str, Any], rows: np.ndarray | None) -> ServerCpu | None:
    """An arm of an interleaved trial: its service's CPU in its own periods (its measured
    slices and the gap after each, read from its cgroup counter at every slice boundary) and
    its work left over into the other arms' periods beyond its idle rate
    (:attr:`~benchlib.core.slicing.SliceCpu.leftover_s`: the instance's counter is its own, so
    that work is its requests'), per measured request completed (``None``: not interleaved, or
    its counter not read)."""
    rec = InterleaveRecord.from_dict(meta.get("interleave"))
    if rec is None or rec.cpu is None:
        return None
    load = LoadMeta.from_dict(meta.get("load"))
    requests = (int(np.count_nonzero(R.measured(rows)["error"] == 0)) if rows is not None
                else load.requests_measured if load is not None else 0)
    return ServerCpu(service_s=rec.cpu.own_s + rec.cpu.leftover_s, front_s=0.0, window_s=rec.cpu.own_period_s,
                     requests=requests)


def server_cpu(meta: Mapping[str, Any], rows: np.ndarray | None = None) -> ServerCpu | None:
    """The server's CPU over the measured window of a stored trial's metadata (``None`` when
    the trial has no load or no resource samples). An arm of an interleaved trial: its CPU in
    its own slices (:func:`_interleaved_cpu`; a front's CPU is in it, not apart).

    The window runs from the earliest measured-phase start of the load generator's workers to
    the latest planned stop; a trial bounded by a request count (no planned stop) ends at its
    last measured response, which needs ``rows`` (the trial's rows). Requests are the measured
    rows completed inside the window (all of them when ``rows`` is not given).
    """
    load = LoadMeta.from_dict(meta.get("load"))
    sliced = _interleaved_cpu(meta, rows)
    if sliced is not None:
        return sliced
    samples = meta.get("resources") or []
    if load is None or load.t0_monotonic_ns is None or not load.measure_start_ns or not samples:
        return None
    t0 = load.t0_monotonic_ns
    begin = t0 + min(load.measure_start_ns)
    done = R.measured(rows)["t_done_ns"].astype(np.int64) + t0 if rows is not None else None
    if load.measure_stop_ns:
        end = t0 + max(load.measure_stop_ns)
    elif done is not None and len(done):
        end = int(done.max())
    else:
        return None
    if end <= begin:
        return None
    requests = int(np.count_nonzero((done >= begin) & (done <= end))) if done is not None else load.requests_measured

    def used(s: Sequence[Mapping[str, Any]]) -> float:
        return cpu_at(s, end) - cpu_at(s, begin)

    front = meta.get("front") or {}
    front_s = used(front.get("resources") or []) if front else 0.0
    return ServerCpu(service_s=used(samples), front_s=front_s, window_s=(end - begin) / 1e9, requests=requests)
