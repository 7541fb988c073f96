"""Arms side by side: where each arm's slices fall in an interleaved trial (pure).

An interleaved trial (``Experiment(interleave=Interleave(...))``, ``docs/statistics.md``,
"Arms side by side") loads every arm's fresh instance in turn: slices of ``slice_ms`` each
followed by an idle gap of ``gap_ms``, so a change of the machine that lasts longer than a few
slices (a CPU switching speed for seconds) falls on every arm alike.

* :func:`slice_order`: the order of one cycle of slices. Every ordered pair of arms is
  adjacent exactly once per cycle (the de Bruijn sequence B(k, 2): ``AABB`` for two arms, i.e.
  ABBA, ``AABACBBCC`` for three), rotated to a random phase per trial, so every arm is
  preceded by every arm (itself included) equally often: an arm's slice depends on the arm
  before it, and an order balanced only by position (ABC CBA) biased a three-arm comparison
  by 4% where the balanced one did not (``docs/dev/interleave-step1.md``).
* :func:`plan_slices`: every arm's windows (ns from the trial's start) through the warm-up
  and the measured phase; the measured phase starts on a cycle boundary, so every arm gets the
  same number of measured slices.
* :func:`slice_cpu`: each arm's service CPU in its own periods and in the other arms', from
  its CPU counter read at every slice boundary: its carry-over.

The load engine that sends in these windows is :mod:`benchlib.loadgen.slices`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchlib.core.errors import LoadSpecError

__all__ = ["SliceCpu", "SlicePlan", "de_bruijn_pairs", "plan_slices", "slice_cpu", "slice_order"]


def de_bruijn_pairs(n: int) -> list[int]:
    """A cyclic sequence of ``n * n`` indices ``0..n-1`` in which every ordered pair ``(i, j)``
    (``i == j`` included) is adjacent exactly once (the de Bruijn sequence B(n, 2))."""
    if n < 1:
        raise LoadSpecError(f"an interleaved trial needs at least one arm, got {n}")
    a = [0] * (2 * n + 1)
    seq: list[int] = []

    def db(t: int, p: int) -> None:
        if t > 2:
            if 2 % p == 0:
                seq.extend(a[1:p + 1])
            return
        a[t] = a[t - p]
        db(t + 1, p)
        for j in range(a[t - p] + 1, n):
            a[t] = j
            db(t + 1, t)

    db(1, 1)
    return seq


def slice_order(n_arms: int, seed: int) -> list[int]:
    """One cycle of :func:`de_bruijn_pairs` rotated to a phase drawn from ``seed``."""
    base = de_bruijn_pairs(n_arms)
    k = random.Random(seed).randrange(len(base))
    return base[k:] + base[:k]


@dataclass(frozen=True)
class SlicePlan:
    """Where each arm's slices fall in one interleaved trial.

    Attributes
    ----------
    windows: per arm, an ``(n, 2)`` array of ``[start, end)`` in ns from the trial's start.
    warmup_s: the warm-up's length (s): the measured phase starts there, on a cycle boundary.
    total_s: the trial's length (s), the last gap included.
    order: one cycle's order of arm indices (:func:`slice_order`).
    slice_ms, gap_ms: a slice's and a gap's length (ms).
    """

    windows: tuple[np.ndarray, ...]
    warmup_s: float
    total_s: float
    order: tuple[int, ...]
    slice_ms: float
    gap_ms: float

    def measured_s(self, arm: int) -> float:
        """Seconds of the arm's slices in the measured phase."""
        w = self.windows[arm]
        start = int(round(self.warmup_s * 1e9))
        return float(np.clip(w[:, 1] - np.maximum(w[:, 0], start), 0, None).sum()) / 1e9

    def boundaries_ns(self) -> list[int]:
        """Every slice's start and end (ns from the trial's start), sorted: where an arm's CPU
        counters are read for its carry-over."""
        return sorted({int(b) for w in self.windows for b in w.ravel()})

    def owner_at(self, t_ns: int) -> int | None:
        """The arm whose slice (or the gap after it) holds ``t_ns``; ``None`` before the first."""
        best: tuple[int, int] | None = None
        for arm, w in enumerate(self.windows):
            i = int(np.searchsorted(w[:, 0], t_ns, side="right")) - 1
            if i >= 0 and (best is None or w[i, 0] > best[0]):
                best = (int(w[i, 0]), arm)
        return None if best is None else best[1]


def plan_slices(n_arms: int, *, warmup_s: float, measured_s: float, slice_ms: float, gap_ms: float,
                seed: int, order: Sequence[int] | None = None) -> SlicePlan:
    """The slices of a trial of ``n_arms`` arms: at least ``warmup_s`` of warm-up slices per arm
    and at least ``measured_s`` of measured slices per arm (whole cycles, rounded up: a
    condition's seconds are a floor its counts rely on, e.g. 10 s at 10 requests/s is the 100
    requests a p50 needs), each slice followed by ``gap_ms`` of idle time. ``order``: one cycle's order of arm
    indices, each arm equally often (default :func:`slice_order` of ``seed``; another order
    serves only to show why that one: ``bench/interleave.py``)."""
    if not (slice_ms > 0 and gap_ms >= 0 and measured_s > 0 and warmup_s >= 0):
        raise LoadSpecError(f"an interleaved trial needs slice_ms > 0, gap_ms >= 0, measured seconds > 0 and "
                            f"warm-up seconds >= 0; got {slice_ms}, {gap_ms}, {measured_s}, {warmup_s}")
    order = list(order) if order is not None else slice_order(n_arms, seed)
    if sorted(set(order)) != list(range(n_arms)) or len(order) % n_arms or \
            any(order.count(a) != len(order) // n_arms for a in range(n_arms)):
        raise LoadSpecError(f"a slice order must hold each of the {n_arms} arms equally often, got {order}")
    per_cycle = len(order) // n_arms  # slices of each arm in one cycle
    s_ns, g_ns = int(round(slice_ms * 1e6)), int(round(gap_ms * 1e6))
    warm_cycles = math.ceil(warmup_s * 1e3 / slice_ms / per_cycle) if warmup_s > 0 else 0
    meas_cycles = max(1, math.ceil(measured_s * 1e3 / slice_ms / per_cycle - 1e-9))
    wins: list[list[tuple[int, int]]] = [[] for _ in range(n_arms)]
    t = t_measure = 0
    for c in range(warm_cycles + meas_cycles):
        if c == warm_cycles:
            t_measure = t
        for arm in order:
            wins[arm].append((t, t + s_ns))
            t += s_ns + g_ns
    return SlicePlan(tuple(np.array(w, dtype=np.int64) for w in wins), t_measure / 1e9, t / 1e9, tuple(order),
                     float(slice_ms), float(gap_ms))


@dataclass(frozen=True)
class SliceCpu:
    """One arm's service CPU over the measured phase of an interleaved trial, from its cgroup
    counter read at every slice boundary.

    Attributes
    ----------
    own_s: CPU seconds in its own periods (its slices and the gap after each).
    others_s: CPU seconds in the other arms' periods.
    own_period_s, others_period_s: the wall seconds of those periods.
    idle_cpu_per_s: its CPU seconds per second with no load, measured before the trial.
    carry_pct: carry-over, ``(others_s - idle_cpu_per_s * others_period_s) / own_s``, in %:
        work its slices left behind that ran in the other arms' slices, relative to its own CPU
        (large for an arm that barely uses the CPU: 11.7% of 0.018 CPU s/s is 0.2% of the CPU).
    """

    own_s: float
    others_s: float
    own_period_s: float
    others_period_s: float
    idle_cpu_per_s: float
    carry_pct: float

    @property
    def leftover_s(self) -> float:
        """CPU seconds of its own work that ran in the other arms' periods: ``others_s`` beyond
        its idle rate (at least 0). Its instance's counter is its own, so this CPU is its own
        requests' wherever it ran."""
        return max(0.0, self.others_s - self.idle_cpu_per_s * self.others_period_s)

    @property
    def carry_cpu_pct(self) -> float:
        """Carry-over as a share of the service CPU, in %: its work beyond idle in the other arms'
        periods per second of its own periods, ``(others_s - idle_cpu_per_s * others_period_s) /
        own_period_s``. It is the share of the CPU the arms after it lose to it, on average,
        which is what can move their latency and throughput (NaN without own periods)."""
        if not self.own_period_s > 0:
            return math.nan
        return 100.0 * (self.others_s - self.idle_cpu_per_s * self.others_period_s) / self.own_period_s


def slice_cpu(plan: SlicePlan, times_ns: Sequence[int], counters_ns: Sequence[Sequence[int | None]],
              idle_cpu_per_s: Sequence[float]) -> list[SliceCpu | None]:
    """Each arm's :class:`SliceCpu` from readings of every arm's CPU counter (``counters_ns[k][arm]``,
    ns) at the times ``times_ns[k]`` (ns from the trial's start, near the plan's boundaries): each
    interval between two readings in the measured phase is the period of the arm whose slice
    holds its middle. ``None`` for an arm with a missing reading, no idle rate, or no CPU in its
    own periods."""
    n = len(plan.windows)
    t = np.asarray(times_ns, dtype=np.int64)
    start = int(round(plan.warmup_s * 1e9))
    out: list[SliceCpu | None] = []
    for arm in range(n):
        vals = [row[arm] for row in counters_ns]
        if len(vals) < 2 or any(v is None for v in vals):
            out.append(None)
            continue
        c = np.asarray(vals, dtype=np.float64)
        own = others = own_t = others_t = 0.0
        for k in range(len(t) - 1):
            mid = int((t[k] + t[k + 1]) // 2)
            if mid < start:
                continue
            owner = plan.owner_at(mid)
            d, dt = (c[k + 1] - c[k]) / 1e9, (t[k + 1] - t[k]) / 1e9
            if owner == arm:
                own, own_t = own + d, own_t + dt
            else:
                others, others_t = others + d, others_t + dt
        idle = float(idle_cpu_per_s[arm])
        if not (own > 0 and math.isfinite(idle)):
            out.append(None)  # no CPU of its own in its slices, or no idle rate: no carry-over to compute
            continue
        out.append(SliceCpu(own, others, own_t, others_t, idle, 100.0 * (others - idle * others_t) / own))
    return out
