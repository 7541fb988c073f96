"""What the runner needs around an interleaved trial's load (arms side by side).

The load itself is :func:`benchlib.loadgen.launch.run_interleaved` (the seam
:class:`InterleavedLoadFunction`); around it the runner reads each arm's CPU counter
(:meth:`benchlib.runtime.base.ServiceHandle.cpu_counter_ns`: its service's and its front's own
cgroups) for half a second with no load, its idle rate, then at every slice boundary
(:class:`BoundaryReader`, a thread on the client's CPUs), so that
:func:`benchlib.core.slicing.slice_cpu` gives each arm's CPU in its own slices (its server CPU
per request) and in the others' (its carry-over). :func:`slice_of_rows` gives each row the
index of the arm's slice it was due in, stored as the trial's ``slice`` column.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from benchlib.core.model import LoadSpec, Target
from benchlib.core.schema import NO_SLICE, SLICE_DTYPE
from benchlib.core.slicing import SlicePlan
from benchlib.loadgen.launch import LoadResult
from benchlib.runtime.base import ServiceHandle

__all__ = ["IDLE_READ_S", "BoundaryReader", "InterleavedLoadFunction", "arm_counter", "idle_rates", "slice_of_rows"]

#: Seconds the arms' instances are left idle, after their contract checks and before the load,
#: to read each one's idle CPU rate (what it uses with no request: timers, its runtime's own work).
IDLE_READ_S = 0.5


class InterleavedLoadFunction(Protocol):
    """What runs an interleaved trial's load: :func:`benchlib.loadgen.launch.run_interleaved`'s
    signature (a test may pass :meth:`benchlib.run.testing.FakeLoad.interleaved`)."""

    def __call__(self, loads: Sequence[tuple[LoadSpec, Target]], plan: SlicePlan, *,
                 client_cpus: Sequence[int] | None = None, seed: int = 0,
                 on_start: Callable[[int], None] | None = None) -> list[LoadResult]: ...


def arm_counter(handles: Sequence[ServiceHandle | None]) -> Callable[[], int | None]:
    """One arm's CPU counter (ns): its service's and its front's summed (``None`` when one of
    them cannot be read)."""
    present = [h for h in handles if h is not None]

    def read() -> int | None:
        total = 0
        for h in present:
            v = h.cpu_counter_ns()
            if v is None:
                return None
            total += v
        return total

    return read


def idle_rates(counters: Sequence[Callable[[], int | None]], seconds: float = IDLE_READ_S) -> list[float]:
    """Each counter's CPU seconds per second over ``seconds`` of no load (NaN when unreadable)."""
    t0, c0 = time.monotonic_ns(), [c() for c in counters]
    time.sleep(seconds)
    t1, c1 = time.monotonic_ns(), [c() for c in counters]
    return [math.nan if a is None or b is None else (b - a) / (t1 - t0) for a, b in zip(c0, c1)]


class BoundaryReader:
    """Reads every arm's counter at each slice boundary of ``plan`` once the trial has started
    (:meth:`start_at`, the load's ``on_start``), in a daemon thread; :attr:`times_ns` (from the
    trial's start) and :attr:`values` (one row of counters per reading) when :meth:`join` returns."""

    def __init__(self, plan: SlicePlan, counters: Sequence[Callable[[], int | None]]) -> None:
        self.plan = plan
        self.counters = list(counters)
        self.times_ns: list[int] = []
        self.values: list[list[int | None]] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start_at(self, t0_ns: int) -> None:
        """Begin reading at the trial's start ``t0_ns`` (monotonic ns)."""
        bounds = self.plan.boundaries_ns()

        def run() -> None:
            for b in bounds:
                wait = (t0_ns + b - time.monotonic_ns()) / 1e9
                if wait > 0 and self._stop.wait(wait):
                    return
                self.times_ns.append(time.monotonic_ns() - t0_ns)
                self.values.append([c() for c in self.counters])

        self._thread = threading.Thread(target=run, name="benchlib-slice-cpu", daemon=True)
        self._thread.start()

    def join(self, timeout_s: float = 5.0) -> None:
        """Wait for the last boundary's reading (the load has ended by then), at most ``timeout_s``."""
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._stop.set()


def slice_of_rows(rows: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """Each row's slice index among ``windows`` (ns from the trial's start; a row due in a gap
    or before the first slice: :data:`~benchlib.core.schema.NO_SLICE`)."""
    t = rows["t_intended_ns"].astype(np.int64)
    k = np.searchsorted(windows[:, 0], t, side="right") - 1
    inside = (k >= 0) & (t < windows[np.clip(k, 0, None), 1])
    out = np.full(len(rows), NO_SLICE, SLICE_DTYPE)
    out[inside] = k[inside].astype(SLICE_DTYPE)
    return out
