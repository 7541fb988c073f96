"""The load engine of an interleaved trial: sending only inside one arm's slices.

:mod:`benchlib.core.slicing` says where each arm's slices fall; :class:`SlicedEngine` sends in
them. Closed model: each connection sends only in its arm's slices (a request in flight at a
slice's end completes in the gap; an idle connection waits for the next slice); open model:
each arm's schedule runs on its own clock, the seconds of its slices laid end to end, and each
arrival is due at the instant its slice puts it (its intended time, kept whatever the server
does, so coordinated omission is handled as in any open-model trial). An arm thus gets exactly
``rate x its slices' seconds`` of arrivals (a constant schedule) wherever its slices fall, even
where a slice holds less than one arrival. :func:`benchlib.loadgen.launch.run_interleaved` runs
one engine per arm in each worker.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from benchlib.core.errors import LoadSpecError
from benchlib.loadgen.engine import Engine, EngineConfig
from benchlib.loadgen.schedule import arrival_offsets_ns, segments_for

__all__ = ["SlicedEngine", "check_sliceable", "until_ns"]

_clock = time.monotonic_ns


class SlicedEngine(Engine):
    """benchlib's HTTP/1 engine sending only inside one arm's windows (``windows_rel``: ns from
    the trial's start; absolute after :meth:`set_start`). Run :meth:`run` and, for the closed
    model, :meth:`activate` together in one event loop."""

    def __init__(self, cfg: EngineConfig, start_ns: int, windows_rel: np.ndarray,
                 progress: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.win_rel = np.asarray(windows_rel, dtype=np.int64)
        super().__init__(cfg, start_ns, progress)

    def set_start(self, start_ns: int) -> None:
        super().set_start(start_ns)
        self.win = self.win_rel + start_ns
        self.wi = 0
        self.t_end = int(self.win[-1, 1])
        self.t_simple_stop = -1  # every closed-model send asks may_send

    def in_window(self, now: int) -> bool:
        w, i = self.win, self.wi
        while i < len(w) and now >= w[i, 1]:
            i += 1
        self.wi = i
        return i < len(w) and now >= w[i, 0]

    def may_send(self, now: int) -> bool:
        if now >= self.t_end:
            self.stopping = True
            return False
        return self.in_window(now)

    def _schedule_blocks(self) -> Iterator[np.ndarray]:
        """The arm's arrivals (ns from the trial's start): its schedule on its own clock (warm-up:
        the seconds of its slices before ``cfg.warmup_s``; measured: the rest), each offset
        mapped into the slice that holds it."""
        cfg = self.cfg
        lo, hi = self.win_rel[:, 0], self.win_rel[:, 1]
        cum = np.concatenate([[0], np.cumsum(hi - lo)])  # the arm's clock at each slice's start
        warm_ns = int(cum[np.searchsorted(lo, round(cfg.warmup_s * 1e9), side="left")])
        segs = segments_for(cfg.rate_rps, (int(cum[-1]) - warm_ns) / 1e9, (), warm_ns / 1e9)
        for block in arrival_offsets_ns(segs, arrival=cfg.arrival, worker=cfg.worker, workers=cfg.workers,
                                        seed=cfg.seed):
            i = np.searchsorted(cum, block, side="right") - 1
            yield lo[i] + (block - cum[i])

    async def activate(self) -> None:
        """Closed model: at each of this arm's windows, send on its idle connections and open
        those it lacks; after its last window, stop (the first window's connections are
        opened by :meth:`run` itself)."""
        for s in self.win[:, 0].tolist():
            if s <= self.start_ns:
                continue
            await until_ns(s)
            if self.abandoned:
                return
            now = _clock()
            idle, self.idle = self.idle, []
            for conn in idle:
                if not conn.dead:
                    conn.send(now)
            for _ in range(self.cfg.connections - self.nconns):
                self.open_conn(now)
        await until_ns(self.t_end)
        self.stopping = True
        self.check_done()


async def until_ns(t_ns: int) -> None:
    """Sleep until the monotonic instant ``t_ns`` (timers have 1 ms granularity: the last 2 ms
    are spun through the event loop, which keeps serving I/O)."""
    gap = (t_ns - _clock()) / 1e9
    if gap > 0.002:
        await asyncio.sleep(gap - 0.002)
    while _clock() < t_ns:
        await asyncio.sleep(0)


def check_sliceable(models: Sequence[str], protocols: Sequence[str], bounded_by_count: Sequence[bool],
                    staged: Sequence[bool]) -> None:
    """Refuse, in one line, a trial the sliced engine cannot interleave: HTTP/2 or gRPC loads
    (their engine does not interleave), a load bounded by a request count (slices are time), or
    an open load in stages (a stage's seconds are the trial's, not an arm's)."""
    if any(p != "http1" for p in protocols):
        raise LoadSpecError("an interleaved trial runs HTTP/1.1 loads only; HTTP/2 and gRPC loads run in the "
                            "sequential design (Experiment(interleave=None))")
    if any(bounded_by_count):
        raise LoadSpecError("an interleaved trial needs a load bounded by time (duration_s), not by a request "
                            "count: slices are time; use duration_s, or the sequential design (interleave=None)")
    if any(staged):
        raise LoadSpecError("an interleaved trial runs an open load at one rate (rate_rps, duration_s), not in "
                            "stages; run stages in the sequential design (interleave=None)")
    if any(m not in ("open", "closed") for m in models):
        raise LoadSpecError(f"unknown load model(s) {sorted(set(models))}")
