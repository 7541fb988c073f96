"""Was a trial disturbed by the machine? The record and the rule (pure).

:mod:`benchlib.run.sampler` measures, over each trial's load, signals from *outside* the
service under test, on the CPUs the service and the client were pinned to; the runner stores
them as the trial's ``disturbance`` (:meth:`Disturbance.to_dict`) and :func:`judge` decides, by
the same bounds for every arm and before any other arm is looked at, whether the trial was
disturbed beyond a bound: then it is ``invalid`` with a reason naming the signal and its value,
and the runner repeats it (``Experiment.repeat_invalid`` caps the repeats). Nothing the trial
measured of the service (its latencies, its throughput, their level shifts) enters the rule: a
level shift can be the service's own behaviour (a GC cycle, a cache filling), so level shifts
stay a reported diagnostic (:func:`canary_at_shifts` says whether the canary saw one too).

The signals (all per trial, over the load's wall time ``window_s``):

* **steal**: hypervisor steal time of the pinned CPUs (``/proc/stat``), CPU seconds;
* **foreign CPU**: the pinned CPUs' busy time (user + nice + system, ``/proc/stat``) less our
  own processes' CPU time on them (the service, its front and its dependencies on the
  server's CPUs; the runner and its load workers on the client's), CPU seconds: what other
  processes took from those CPUs; the rule reads it as **contention**, that time beyond the
  ticks' rounding as a share of the CPUs' time over the window (:meth:`CpuSet.contention`),
  relative to the run's ordinary level (its median over the run's earlier attempts, of every
  arm): the same foreign time reads the same whatever the arm did with its CPU;
* **run-queue waits**: time our service's threads (``/proc/<pid>/task/*/schedstat``) and the
  load workers were runnable but waiting for a CPU, s;
* **PSI**: the share of the window in which some task of the machine waited for a CPU
  (``/proc/pressure/cpu``, ``some``);
* **canary**: the CPU time of a fixed calibration loop run on the client's CPUs every
  :data:`~benchlib.run.sampler.CANARY_INTERVAL_S` through the trial, µs per loop: a slower
  machine (a busy neighbour on the host, a lower clock) takes more CPU time for the same work,
  which steal does not show. Its **slowdown** is the trial's median loop time over the
  reference (the median of the run's earlier attempts' trial medians);
* **server canary**: the same loop, shorter and sparser, timed on the *service's* CPUs
  (:data:`~benchlib.run.sampler.SERVER_CANARY_INTERVAL_S`), its **server slowdown** likewise:
  on a VM each virtual CPU's speed can change on its own (on the 2-CPU machines of
  docs/statistics.md the service's CPU switched between two speeds about 1.5x apart for
  seconds at a time, which the client's canary did not see), and the service's speed is what
  its throughput and latency follow. The loop costs the service's CPUs about 0.1% of their
  time, alike for every arm.

Every reference is the run's own ordinary level, so a machine busy alike through the whole run
(which every arm meets alike in the randomized blocks, and which a repeat would meet again) is
reported but repeats nothing, while a disturbance that comes and goes is repeated; the run's
first trial is its own reference. Steal is judged absolutely. The service's run-queue wait and
PSI are reported only: a service with several busy threads waits behind itself, so they
depend on the arm.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from benchlib.core.errors import ParameterError
from benchlib.store.records._convert import as_float

__all__ = ["CANARY_BIN_S", "MIN_CANARY_SAMPLES", "MIN_WINDOW_S", "TICK_FLOOR_S", "CpuSet", "Disturbance",
           "DisturbanceBounds", "DEFAULT_BOUNDS", "DISTURBED_PREFIX", "canary_at_shifts", "is_disturbed", "judge",
           "with_references"]

#: How the reason of a trial the rule invalidated begins.
DISTURBED_PREFIX = "disturbed: "

#: Width of the canary's time bins, s (a bin's median is one point of the slowdown over time).
CANARY_BIN_S = 0.5
#: Shortest window whose CPU shares are judged, s: ``/proc/stat`` counts 10 ms ticks, so a
#: shorter window's shares are mostly rounding.
MIN_WINDOW_S = 1.0
#: Foreign CPU time per pinned CPU that is ``/proc/stat``'s rounding, not another process: its
#: 10 ms ticks are read at both ends of the window, against our own CPU time in ns, s.
TICK_FLOOR_S = 0.02
#: Fewest canary samples whose median is judged.
MIN_CANARY_SAMPLES = 10


def _samples_median(samples: Sequence[tuple[float, float]]) -> float:
    """Median loop time of canary samples ``(t_s, µs)``, µs (NaN with fewer than
    :data:`MIN_CANARY_SAMPLES`)."""
    return statistics.median(c for _, c in samples) if len(samples) >= MIN_CANARY_SAMPLES else math.nan


def _r(v: float) -> float | None:
    """A figure as stored: ``None`` for NaN (JSON has none)."""
    return None if v is None or not math.isfinite(v) else float(v)


@dataclass(frozen=True)
class CpuSet:
    """What happened on one role's pinned CPUs over a trial.

    Attributes
    ----------
    cpus: the CPU ids. busy_s: their user + nice + system time, CPU s. steal_s: their
    hypervisor steal, CPU s. irq_s: their interrupt and soft-interrupt time, CPU s (network
    processing of the trial's own traffic lands here, so it is not counted as foreign).
    own_s: our processes' CPU time on them, CPU s (NaN when not known).
    """

    cpus: tuple[int, ...]
    busy_s: float
    steal_s: float
    irq_s: float = 0.0
    own_s: float = math.nan

    @property
    def foreign_s(self) -> float:
        """CPU seconds other processes took on these CPUs (busy less ours, at least 0)."""
        return max(self.busy_s - self.own_s, 0.0) if math.isfinite(self.own_s) else math.nan

    def contention(self, window_s: float) -> float:
        """The CPU time other processes took on these CPUs, beyond :data:`TICK_FLOOR_S` per CPU
        of tick rounding, as a share of the CPUs' time over ``window_s`` (0..1): near 0 on a
        quiet machine; NaN for a window shorter than :data:`MIN_WINDOW_S`. It does not depend on
        how busy our processes kept the CPUs: 30 ms of another process in a 5 s window reads
        the same for a service that used 1 s of it and for one that used all of it (the share
        of the time ours left free read 0.01 and 1.0 there, so a CPU-bound arm drew the
        repeats)."""
        n = max(len(self.cpus), 1)
        if not math.isfinite(self.foreign_s) or window_s < MIN_WINDOW_S:
            return math.nan
        return min(max(self.foreign_s - TICK_FLOOR_S * n, 0.0) / (window_s * n), 1.0)

    def share(self, cpu_s: float, window_s: float) -> float:
        """``cpu_s`` as a share of these CPUs' capacity over ``window_s`` (1.0 = all of it)."""
        cap = window_s * max(len(self.cpus), 1)
        return cpu_s / cap if cap > 0 else math.nan

    def to_dict(self) -> dict[str, Any]:
        """The stored form (the mirror of :meth:`from_dict`)."""
        return {"cpus": list(self.cpus), "busy_s": _r(self.busy_s), "steal_s": _r(self.steal_s),
                "irq_s": _r(self.irq_s), "own_s": _r(self.own_s)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> CpuSet:
        """Read a stored CPU set (missing figures read as NaN)."""
        d = d or {}
        return cls(cpus=tuple(int(c) for c in d.get("cpus") or ()), busy_s=as_float(d.get("busy_s")),
                   steal_s=as_float(d.get("steal_s")), irq_s=as_float(d.get("irq_s")), own_s=as_float(d.get("own_s")))


@dataclass(frozen=True)
class Disturbance:
    """The outside signals of one trial (see the module docstring).

    Attributes
    ----------
    window_s: wall time sampled (the load's, warm-up included), s.
    server, client: the service's and the client's pinned CPUs (:class:`CpuSet`).
    service_run_s, service_wait_s: CPU time of the service's threads, and their run-queue wait,
        s (NaN where the runtime gives no process ids, e.g. Docker).
    client_wait_s: the load workers' run-queue wait, s (NaN when not recorded).
    psi_some: share of the window in which some runnable task of the machine waited for a CPU
        (``/proc/pressure/cpu``), 0..1 (NaN without PSI).
    canary: the calibration loop's samples, ``(t_s, cpu_us)``: when it ran (s from the start
        of the window) and the CPU time of one loop, µs.
    server_canary: the server canary's samples (the loop timed on the service's CPUs), alike;
        empty where it did not run (older runs, or the service sharing the client's CPUs).
    reference_us: the canary reference the rule used: the median of the trial medians of the
        run's attempts before this one (the first trial: its own), µs; NaN without samples.
    server_reference, client_reference: the run's ordinary contention on the server's and on
        the client's CPUs: the median of :meth:`CpuSet.contention` over the same attempts (0..1).
    server_reference_us: the server canary's reference, as ``reference_us``, µs.
    verdict: the rule's reason when the trial was disturbed beyond a bound ("" when not).
    t0_monotonic_ns: where the window starts on ``CLOCK_MONOTONIC``, ns (to align the canary
        with the load's rows: ``LoadMeta.t0_monotonic_ns``; ``None`` when not recorded).
    """

    window_s: float
    server: CpuSet
    client: CpuSet
    service_run_s: float = math.nan
    service_wait_s: float = math.nan
    client_wait_s: float = math.nan
    psi_some: float = math.nan
    canary: tuple[tuple[float, float], ...] = ()
    reference_us: float = math.nan
    server_reference: float = math.nan
    client_reference: float = math.nan
    verdict: str = ""
    t0_monotonic_ns: int | None = None
    server_canary: tuple[tuple[float, float], ...] = ()
    server_reference_us: float = math.nan

    # -- derived figures (what the report and the rule read) -------------------------------
    @property
    def server_foreign(self) -> float:
        """Other processes' share of the server's CPUs over the window (0..1)."""
        return self.server.share(self.server.foreign_s, self.window_s)

    @property
    def client_foreign(self) -> float:
        """Other processes' share of the client's CPUs over the window (0..1)."""
        return self.client.share(self.client.foreign_s, self.window_s)

    @property
    def server_contention(self) -> float:
        """Other processes' share of the server CPUs' time, beyond the ticks' rounding (0..1;
        see :meth:`CpuSet.contention`)."""
        return self.server.contention(self.window_s)

    @property
    def client_contention(self) -> float:
        """The same on the client's CPUs."""
        return self.client.contention(self.window_s)

    @property
    def server_excess(self) -> float:
        """:attr:`server_contention` above the run's ordinary level (``server_reference``)."""
        return self.server_contention - self.server_reference

    @property
    def client_excess(self) -> float:
        """:attr:`client_contention` above the run's ordinary level (``client_reference``)."""
        return self.client_contention - self.client_reference

    @property
    def steal(self) -> float:
        """Hypervisor steal's share of the pinned CPUs (server and client together, 0..1; NaN
        for a window shorter than :data:`MIN_WINDOW_S`)."""
        cap = self.window_s * (len(self.server.cpus) + len(self.client.cpus))
        ok = cap > 0 and self.window_s >= MIN_WINDOW_S
        return (self.server.steal_s + self.client.steal_s) / cap if ok else math.nan

    @property
    def service_wait(self) -> float:
        """Run-queue wait of the service's threads per second of their CPU time (s/s; 1.0: they
        waited as long as they ran)."""
        return self.service_wait_s / self.service_run_s if self.service_run_s > 0 else math.nan

    @property
    def canary_median_us(self) -> float:
        """Median CPU time of one canary loop in the trial, µs (NaN with fewer than
        :data:`MIN_CANARY_SAMPLES` samples)."""
        return _samples_median(self.canary)

    @property
    def server_canary_median_us(self) -> float:
        """Median CPU time of one server-canary loop in the trial, µs (NaN with fewer than
        :data:`MIN_CANARY_SAMPLES` samples)."""
        return _samples_median(self.server_canary)

    def canary_bins(self, bin_s: float = CANARY_BIN_S, *, server: bool = False) -> list[tuple[float, float]]:
        """``(bin start s, median loop µs)`` of the canary (``server``: the server canary) per
        ``bin_s`` of the window."""
        bins: dict[int, list[float]] = {}
        for t, c in (self.server_canary if server else self.canary):
            bins.setdefault(int(t // bin_s), []).append(c)
        return [(k * bin_s, statistics.median(v)) for k, v in sorted(bins.items())]

    @property
    def server_slowdown(self) -> float:
        """The server canary's median over its reference (1.0: the service's CPUs as fast as in
        the run's ordinary trial)."""
        return self.server_canary_median_us / self.server_reference_us if self.server_reference_us > 0 else math.nan

    @property
    def slowdown(self) -> float:
        """The canary's median over the reference (1.0: as fast as the run's ordinary trial)."""
        return self.canary_median_us / self.reference_us if self.reference_us > 0 else math.nan

    @property
    def slowdown_worst_bin(self) -> float:
        """The slowest canary bin's median over the reference (a transient slowdown)."""
        bins = self.canary_bins()
        return max(c for _, c in bins) / self.reference_us if bins and self.reference_us > 0 else math.nan

    def figures(self) -> dict[str, float]:
        """The figures of the rule and the report, by name: ``server_contention``,
        ``client_contention``, ``server_excess``, ``client_excess``, ``server_foreign``, ``client_foreign``,
        ``steal``, ``service_wait``,
        ``psi_some``, ``slowdown``, ``slowdown_worst_bin``, ``canary_median_us``, ``server_slowdown``,
        ``server_canary_median_us``."""
        return {"server_contention": self.server_contention, "client_contention": self.client_contention,
                "server_excess": self.server_excess, "client_excess": self.client_excess,
                "server_foreign": self.server_foreign, "client_foreign": self.client_foreign, "steal": self.steal,
                "service_wait": self.service_wait, "psi_some": self.psi_some, "slowdown": self.slowdown,
                "slowdown_worst_bin": self.slowdown_worst_bin, "canary_median_us": self.canary_median_us,
                "server_slowdown": self.server_slowdown, "server_canary_median_us": self.server_canary_median_us}

    @property
    def disturbed(self) -> bool:
        """The rule found the trial disturbed beyond a bound."""
        return bool(self.verdict)

    def to_dict(self) -> dict[str, Any]:
        """The stored form (``disturbance`` in the trial's metadata; the mirror of :meth:`from_dict`)."""
        return {"window_s": _r(self.window_s), "server": self.server.to_dict(), "client": self.client.to_dict(),
                "service_run_s": _r(self.service_run_s), "service_wait_s": _r(self.service_wait_s),
                "client_wait_s": _r(self.client_wait_s), "psi_some": _r(self.psi_some),
                "canary": [[t, c] for t, c in self.canary], "reference_us": _r(self.reference_us),
                "server_reference": _r(self.server_reference), "client_reference": _r(self.client_reference),
                "verdict": self.verdict, "t0_monotonic_ns": self.t0_monotonic_ns,
                "server_canary": [[t, c] for t, c in self.server_canary],
                "server_reference_us": _r(self.server_reference_us)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> Disturbance | None:
        """Read a stored ``disturbance``; ``None`` for a trial stored without one (older runs)."""
        if not d:
            return None
        return cls(window_s=as_float(d.get("window_s")), server=CpuSet.from_dict(d.get("server")),
                   client=CpuSet.from_dict(d.get("client")), service_run_s=as_float(d.get("service_run_s")),
                   service_wait_s=as_float(d.get("service_wait_s")), client_wait_s=as_float(d.get("client_wait_s")),
                   psi_some=as_float(d.get("psi_some")),
                   canary=tuple((as_float(t), as_float(c)) for t, c in d.get("canary") or ()),
                   reference_us=as_float(d.get("reference_us")), server_reference=as_float(d.get("server_reference")),
                   client_reference=as_float(d.get("client_reference")), verdict=str(d.get("verdict") or ""),
                   t0_monotonic_ns=None if d.get("t0_monotonic_ns") is None else int(d["t0_monotonic_ns"]),
                   server_canary=tuple((as_float(t), as_float(c)) for t, c in d.get("server_canary") or ()),
                   server_reference_us=as_float(d.get("server_reference_us")))


@dataclass(frozen=True)
class DisturbanceBounds:
    """The bounds beyond which a trial is disturbed (one set for every arm of a run).

    Attributes
    ----------
    server_excess: how far the share of the service's CPUs' time that other processes took
        (:meth:`CpuSet.contention`, 0..1) may rise above the run's ordinary
        level (its median over the run's trials so far): relative to the run, so that a machine
        busy alike through the run (which repeating would not change, and which every arm meets
        alike in the randomized blocks) does not flag every trial, while a disturbance that comes
        and goes does.
    client_excess: the same on the client's CPUs (the runner and its load workers).
    steal: largest hypervisor steal share of the pinned CPUs.
    slowdown: largest canary slowdown (trial median over the run's ordinary), a ratio.
    server_slowdown: largest server-canary slowdown (the loop on the service's CPUs), a ratio.
    ``None`` turns a bound off. Chosen by measurement: ``bench/disturbance_calibration.py``
    and docs/statistics.md, "Disturbed trials".
    """

    server_excess: float | None = 0.3
    client_excess: float | None = 0.3
    steal: float | None = 0.10
    slowdown: float | None = 1.5
    server_slowdown: float | None = None

    def __post_init__(self) -> None:
        for name in ("server_excess", "client_excess", "steal", "slowdown", "server_slowdown"):
            v = getattr(self, name)
            if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ParameterError(f"DisturbanceBounds.{name} must be a positive number or None (off); got {v!r}")


#: The bounds the runner applies unless told otherwise.
DEFAULT_BOUNDS = DisturbanceBounds()

_WORDS = {"server_excess": "other processes took {c:.0%} of the service's CPUs' time, "
                         "{v:.0%} above the run's ordinary {r:.0%} (bound +{b:.0%})",
          "client_excess": "other processes took {c:.0%} of the client's CPUs' time, "
                         "{v:.0%} above the run's ordinary {r:.0%} (bound +{b:.0%})",
          "steal": "hypervisor steal {v:.1%} of the pinned CPUs (bound {b:.0%})",
          "slowdown": "canary slowdown {v:.2f}x the run's ordinary (bound {b:.2f}x)",
          "server_slowdown": "the service's CPUs ran the server canary {v:.2f}x slower than the run's ordinary "
                             "(bound {b:.2f}x)"}


def _median(values: Sequence[float]) -> float:
    v = [x for x in values if math.isfinite(x)]
    return statistics.median(v) if v else math.nan


def with_references(d: Disturbance, history: Sequence[Disturbance]) -> Disturbance:
    """``d`` with the run's references: the medians over ``history`` (the run's attempts
    before this one, of every arm: outside signals only, never what a trial measured of its
    service) of the canary's trial median and of each side's contention; the run's first trial
    is its own reference (nothing to compare it with: it is never found disturbed by these)."""
    every = list(history) or [d]
    return replace(d, reference_us=_median([h.canary_median_us for h in every]),
                   server_reference_us=_median([h.server_canary_median_us for h in every]),
                   server_reference=_median([h.server_contention for h in every]),
                   client_reference=_median([h.client_contention for h in every]))


def is_disturbed(reason: str | None) -> bool:
    """Does a trial's reason say the rule found it disturbed (not the load generator's guard)?"""
    return bool(reason) and str(reason).startswith(DISTURBED_PREFIX)


def judge(d: Disturbance, bounds: DisturbanceBounds = DEFAULT_BOUNDS) -> str:
    """The reason a trial was disturbed beyond ``bounds`` (every signal over its bound, with
    its value, after :data:`DISTURBED_PREFIX`), or "" when none is. A signal not measured
    (NaN) never disturbs a trial."""
    figs = d.figures()
    out = []
    for name, template in _WORDS.items():
        b = getattr(bounds, name)
        v = figs[name]
        if b is not None and math.isfinite(v) and v > b:
            side = d.server if name.startswith("server") else d.client
            ref = d.server_reference if name.startswith("server") else d.client_reference
            out.append(template.format(v=v, b=b, c=side.contention(d.window_s), r=ref))
    return DISTURBED_PREFIX + "; ".join(out) if out else ""


def canary_at_shifts(d: Disturbance, shift_at_s: Sequence[float], *, offset_s: float = 0.0,
                     bin_s: float = CANARY_BIN_S, span_s: float = 1.0, slower: float = 1.15) -> list[bool]:
    """For each level shift found in the trial (``shift_at_s``: its times, s from the load's
    start; ``offset_s``: where the load's start lies in the window, s), whether the canary's
    bins in the ``span_s`` after it differ from those in the ``span_s`` before it by more than
    a factor ``slower`` (either way): did the machine's speed change where the trial's latency
    did?"""
    bins = d.canary_bins(bin_s)
    out = []
    for at in shift_at_s:
        t = at + offset_s
        before = [c for s, c in bins if t - span_s <= s and s + bin_s <= t]
        after = [c for s, c in bins if t <= s < t + span_s]
        if not before or not after:
            out.append(False)
            continue
        r = statistics.median(after) / statistics.median(before)
        out.append(r > slower or r < 1 / slower)
    return out
