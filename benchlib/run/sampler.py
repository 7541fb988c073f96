"""Measure what the machine did to a trial: the outside signals of
:class:`benchlib.store.records.disturbance.Disturbance` (where the record, the rule and the units are
described).

:class:`DisturbanceSampler` is started right before a trial's load and stopped right after
it. It reads ``/proc/stat`` (per CPU: busy, steal, interrupts; ticks of ``SC_CLK_TCK``),
``/proc/pressure/cpu`` (µs) and the schedstat of the service's threads (ns) at both ends, and
runs a canary thread in this process (which the runner pins to the client's CPUs while trials
run): every :data:`CANARY_INTERVAL_S` it times a fixed loop of :data:`CANARY_LOOP` iterations
on its own thread's CPU clock. A second canary thread, pinned to the service's CPUs (when they
are not the client's), times :data:`SERVER_CANARY_LOOP` iterations every
:data:`SERVER_CANARY_INTERVAL_S`: the speed of the CPUs the service ran on. Our own processes'
CPU time (the caller passes the service's; this process and the children it waited for, i.e.
the load workers, are read from ``os.times``; the server canary's loops are moved from the
client's side to the server's) is taken off each CPU set's busy time, leaving the other
processes' share.

Linux only; where a file is missing (no PSI, no ``/proc``) the signal reads NaN and never
disturbs a trial.
"""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from benchlib.core import settings
from benchlib.store.records.disturbance import (
    DEFAULT_BOUNDS,
    CpuSet,
    Disturbance,
    DisturbanceBounds,
    judge,
    with_references,
)

__all__ = ["CANARY_INTERVAL_S", "CANARY_LOOP", "SERVER_CANARY_INTERVAL_S", "SERVER_CANARY_LOOP", "DisturbanceSampler",
           "bounds_from_settings", "canary_loop_us", "group_pids", "handle_pids"]

#: Seconds between two canary loops (the canary costs about 0.2 ms of CPU per loop: ~0.4% of
#: one client CPU).
CANARY_INTERVAL_S = 0.05
#: Iterations of the canary's fixed loop.
CANARY_LOOP = 5000
#: Seconds between two loops of the server canary (on the service's CPUs).
SERVER_CANARY_INTERVAL_S = 0.1
#: Iterations of the server canary's loop (about 0.1 ms of CPU: ~0.1% of one server CPU).
SERVER_CANARY_LOOP = 2000

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def bounds_from_settings(environ: Mapping[str, str] | None = None) -> DisturbanceBounds | None:
    """The bounds the runner judges trials by: ``None`` under ``BENCHLIB_DISTURBANCE_RULE=record``
    (measured and reported only), else the defaults with ``BENCHLIB_SERVER_SLOWDOWN_BOUND`` as
    the server canary's bound (unset: none). ``environ``: read instead of ``os.environ``."""
    if settings.DISTURBANCE_RULE.value(environ) != "judge":
        return None
    return replace(DEFAULT_BOUNDS, server_slowdown=settings.SERVER_SLOWDOWN_BOUND.get(environ))


def canary_loop_us(n: int = CANARY_LOOP) -> float:
    """CPU time of one fixed loop of ``n`` iterations on this thread's CPU clock, µs."""
    t = time.thread_time_ns()
    x = 0
    for i in range(n):
        x += i * i
    return (time.thread_time_ns() - t) / 1e3


def _proc_stat() -> dict[int, list[int]]:
    """Per CPU id: the ``/proc/stat`` counters (user nice system idle iowait irq softirq steal
    guest guest_nice), ticks."""
    out: dict[int, list[int]] = {}
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("cpu") and line[3:4].isdigit():
                    parts = line.split()
                    out[int(parts[0][3:])] = [int(x) for x in parts[1:]]
    except OSError:
        pass
    return out


def _psi_some_us() -> float:
    """``/proc/pressure/cpu``'s ``some total``, µs (NaN without PSI)."""
    try:
        for line in Path("/proc/pressure/cpu").read_text().splitlines():
            if line.startswith("some"):
                return float(line.split("total=")[1])
    except (OSError, IndexError, ValueError):
        pass
    return math.nan


def group_pids(pgid: int) -> list[int]:
    """The live processes of process group ``pgid`` (a local service and what it started)."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
            if int(stat[2]) == pgid:
                out.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return out


def handle_pids(handles: Iterable[object]) -> list[int]:
    """The process ids of running service handles that have their own process group (the
    local runtime's); a Docker handle has none here."""
    out: list[int] = []
    for h in handles:
        proc = getattr(h, "proc", None)
        pid = getattr(proc, "pid", None)
        if isinstance(pid, int):
            out += group_pids(pid)
    return out


def _cpu_since(handle: object, t0_ns: int) -> float:
    """CPU seconds a handle's resource samples grew by from the first sample at or after
    ``t0_ns`` to the last (0.0 with fewer than two such samples; NaN for a handle without
    samples)."""
    samples = getattr(handle, "resource_samples", None)
    if samples is None:
        return math.nan
    pts = [(int(x["t_monotonic_ns"]), float(x["cpu_s"])) for x in samples()
           if x.get("t_monotonic_ns") is not None and x.get("cpu_s") is not None and int(x["t_monotonic_ns"]) >= t0_ns]
    return pts[-1][1] - pts[0][1] if len(pts) >= 2 else math.nan


def _schedstat(pids: Iterable[int]) -> dict[int, tuple[int, int]]:
    """Per thread of ``pids``: (run ns, run-queue wait ns) from its schedstat."""
    out: dict[int, tuple[int, int]] = {}
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                run, wait, _ = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
                out[int(tid)] = (int(run), int(wait))
            except (OSError, ValueError):
                continue
    return out


def _own_times() -> float:
    """CPU seconds of this process and of the children it waited for."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _cpu_set(cpus: Sequence[int], a: dict[int, list[int]], b: dict[int, list[int]], own_s: float) -> CpuSet:
    busy = steal = irq = 0.0
    for c in cpus:
        if c not in a or c not in b:
            return CpuSet(tuple(cpus), math.nan, math.nan, math.nan, own_s)
        d = [y - x for x, y in zip(a[c], b[c])]
        busy += (d[0] + d[1] + d[2]) / _TICK
        irq += (d[5] + d[6]) / _TICK if len(d) > 6 else 0.0
        steal += d[7] / _TICK if len(d) > 7 else 0.0
    return CpuSet(tuple(cpus), busy, steal, irq, own_s)


def _canary(owner: weakref.ref[DisturbanceSampler], stop: threading.Event, samples: list[tuple[float, float]],
            t0_ns: int, interval_s: float, loop: int = CANARY_LOOP, cpus: Sequence[int] = ()) -> None:
    """A canary thread: a loop of ``loop`` iterations timed every ``interval_s`` until ``stop``
    is set or its sampler is gone (a trial that raised before :meth:`DisturbanceSampler.stop`);
    ``cpus``: pin this thread (only) to them first (empty: the process's CPUs)."""
    if cpus:
        try:
            os.sched_setaffinity(0, set(cpus))  # 0: the calling thread
        except OSError:
            return  # the CPUs are not ours to use: no samples, the signal reads NaN
    while not stop.wait(interval_s) and owner() is not None:
        t = (time.monotonic_ns() - t0_ns) / 1e9
        samples.append((round(t, 3), round(canary_loop_us(loop), 2)))  # ms and 0.01 µs: compact


class DisturbanceSampler:
    """Samples one trial's outside signals (see the module docstring).

    Parameters
    ----------
    server_cpus, client_cpus: the CPUs the service and the client were pinned to.
    service_pids: returns the service's process ids (read at both ends; ``None``: the
        service's run-queue wait is not measured, e.g. Docker).
    canary: run the canary thread (``False``: no canary samples).
    """

    def __init__(self, server_cpus: Sequence[int], client_cpus: Sequence[int], *,
                 service_pids: Callable[[], Iterable[int]] | None = None, canary: bool = True,
                 interval_s: float = CANARY_INTERVAL_S) -> None:
        self.server_cpus = tuple(server_cpus)
        self.client_cpus = tuple(client_cpus)
        self.service_pids = service_pids
        self.interval_s = interval_s
        self._canary_on = canary
        self._samples: list[tuple[float, float]] = []
        self._server_samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._server_thread: threading.Thread | None = None
        self._t0 = 0

    @classmethod
    def for_trial(cls, server_cpus: Sequence[int], client_cpus: Sequence[int], dependency_cpus: Sequence[int],
                  handle: object, front: object | None, deps: Sequence[object], *,
                  beside: Sequence[object] = (), canary: bool = True) -> DisturbanceSampler:
        """A sampler for one trial of the runner: the service, its front and the dependencies
        that share the server's CPUs are ours there (their CPU time is taken off, their
        threads' run-queue waits are the service's), and in an interleaved trial every other
        arm's instances (``beside``: their services and fronts; their dependencies follow
        ``dependency_cpus`` as above); call :meth:`start`, then :meth:`finish`."""
        on_server = [handle, *([front] if front is not None else []), *beside,
                     *(deps if set(dependency_cpus) & set(server_cpus) else [])]
        local = all(isinstance(getattr(getattr(h, "proc", None), "pid", None), int) for h in on_server)
        s = cls(server_cpus, client_cpus, service_pids=(lambda: handle_pids(on_server)) if local else None,
                canary=canary)
        s._handles = on_server
        return s

    def finish(self, load_meta: object | None = None, *, history: Sequence[Disturbance] = (),
               bounds: DisturbanceBounds | None = DEFAULT_BOUNDS) -> Disturbance:
        """:meth:`stop` for a sampler of :meth:`for_trial`: our CPU time on the server's CPUs
        from the handles' resource samples taken in the window (each handle is sampled now),
        the load workers' run-queue waits from ``load_meta`` (a
        :class:`~benchlib.store.records.LoadMeta`), the run's references from ``history`` (the
        records of the run's attempts so far) and this one, and the rule's verdict under
        ``bounds`` (``None``: not judged)."""
        handles = getattr(self, "_handles", [])
        for h in handles:
            if hasattr(h, "sample_now"):
                h.sample_now()
        own = sum(_cpu_since(h, self._t0) for h in handles) if handles else math.nan
        waits = [w.runqueue_wait_s for w in getattr(load_meta, "worker_stats", ()) or ()]
        cw = math.fsum(waits) if waits and all(math.isfinite(w) for w in waits) else math.nan
        d = with_references(self.stop(own_server_s=own, client_wait_s=cw), history)
        return replace(d, verdict=judge(d, bounds)) if bounds is not None else d

    def start(self) -> DisturbanceSampler:
        """Take the first snapshot and start the canary."""
        self._stat0 = _proc_stat()
        self._psi0 = _psi_some_us()
        self._own0 = _own_times()
        self._sched0 = _schedstat(self.service_pids()) if self.service_pids is not None else {}
        self._t0 = time.monotonic_ns()
        for h in getattr(self, "_handles", []):
            if hasattr(h, "sample_now"):
                h.sample_now()
        if self._canary_on:
            self._thread = threading.Thread(target=_canary, args=(weakref.ref(self), self._stop, self._samples,
                                                                  self._t0, self.interval_s),
                                            name="benchlib-canary", daemon=True)
            self._thread.start()
            if self.server_cpus and not set(self.server_cpus) & set(self.client_cpus):
                self._server_thread = threading.Thread(
                    target=_canary, args=(weakref.ref(self), self._stop, self._server_samples, self._t0,
                                          SERVER_CANARY_INTERVAL_S, SERVER_CANARY_LOOP, self.server_cpus),
                    name="benchlib-server-canary", daemon=True)
                self._server_thread.start()
        return self

    def stop(self, *, own_server_s: float = math.nan, client_wait_s: float = math.nan) -> Disturbance:
        """Take the last snapshot; the record (no references, its ``verdict`` empty: see
        :func:`with_references` and :func:`~benchlib.store.records.disturbance.judge`).

        ``own_server_s``: CPU seconds our processes (service, front, dependencies on those
        CPUs) used on the server's CPUs in the window; ``client_wait_s``: the load workers'
        run-queue wait, s."""
        self._stop.set()
        for th in (self._thread, self._server_thread):
            if th is not None:
                th.join()
        moved = math.fsum(c for _, c in self._server_samples) / 1e6  # the server canary's CPU s (ours, on the server's CPUs)
        sched1 = _schedstat(self.service_pids()) if self.service_pids is not None else {}
        stat1 = _proc_stat()
        psi1 = _psi_some_us()
        own1 = _own_times()
        window = (time.monotonic_ns() - self._t0) / 1e9
        run = wait = 0
        for tid, (r, w) in sched1.items():
            r0, w0 = self._sched0.get(tid, (0, 0))
            run += r - r0
            wait += w - w0
        return Disturbance(
            window_s=window, server=_cpu_set(self.server_cpus, self._stat0, stat1, own_server_s + moved),
            client=_cpu_set(self.client_cpus, self._stat0, stat1, own1 - self._own0 - moved),
            service_run_s=run / 1e9 if self.service_pids is not None else math.nan,
            service_wait_s=wait / 1e9 if self.service_pids is not None else math.nan,
            client_wait_s=client_wait_s, psi_some=(psi1 - self._psi0) / 1e6 / window if window > 0 else math.nan,
            canary=tuple(self._samples), t0_monotonic_ns=self._t0, server_canary=tuple(self._server_samples))
