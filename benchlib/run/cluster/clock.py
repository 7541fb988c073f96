"""Clock offsets between the driver and the load hosts, and the trial's start skew (pure).

Latency never crosses clocks: each host measures intended → done on its own monotonic
clock. Wall clocks matter for one thing only, the common start: every host converts the same
wall-clock instant to its monotonic clock, so a host whose wall clock is ``offset`` ahead of
the driver's starts ``offset`` early. The offsets are measured the NTP way, by round trips:
the driver reads its clock (``t_send``), asks the host for its wall clock (``t_remote``) and
reads its clock again (``t_recv``); the offset is ``t_remote - (t_send + t_recv) / 2``, within
± half the round trip; the sample with the shortest round trip is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ClockSample", "ClockOffset", "StartSkew", "estimate_offset", "start_skew", "START_SKEW_BOUND_NS"]

#: Largest start skew between load hosts before a trial is flagged invalid (ns). Hosts whose
#: clocks agree within it (NTP on a LAN: well under a millisecond) start their parts of the one
#: schedule close enough that the offered load is the planned one.
START_SKEW_BOUND_NS = 10_000_000


@dataclass(frozen=True)
class ClockSample:
    """One round trip: the driver's wall clock before and after, the host's in between (ns)."""

    t_send_ns: int
    t_remote_ns: int
    t_recv_ns: int

    @property
    def rtt_ns(self) -> int:
        """The round trip, ns."""
        return self.t_recv_ns - self.t_send_ns

    @property
    def offset_ns(self) -> float:
        """The host's clock minus the driver's, ns (within ± half the round trip)."""
        return self.t_remote_ns - (self.t_send_ns + self.t_recv_ns) / 2


@dataclass(frozen=True)
class ClockOffset:
    """A host's clock offset from the driver: ``offset_ns`` (host - driver), ``rtt_ns`` the
    round trip of the sample it came from (its uncertainty is ± ``rtt_ns / 2``), ``samples``."""

    offset_ns: int
    rtt_ns: int
    samples: int


def estimate_offset(samples: Sequence[ClockSample]) -> ClockOffset:
    """The offset from the sample with the shortest round trip (the least queueing)."""
    if not samples:
        raise ValueError("estimate_offset needs at least one round trip")
    best = min(samples, key=lambda s: s.rtt_ns)
    return ClockOffset(offset_ns=round(best.offset_ns), rtt_ns=best.rtt_ns, samples=len(samples))


@dataclass(frozen=True)
class StartSkew:
    """How far apart the hosts began the common schedule (ns, on the driver's clock).

    Attributes
    ----------
    skew_ns: the latest host's start minus the earliest's.
    uncertainty_ns: ± on ``skew_ns`` (the two hosts' half round trips).
    starts_ns: each host's start relative to the common instant (negative: early).
    bound_ns: the bound; ``exceeded``: ``skew_ns > bound_ns``.
    """

    skew_ns: int
    uncertainty_ns: int
    starts_ns: tuple[int, ...]
    bound_ns: int
    exceeded: bool


def start_skew(offsets: Sequence[ClockOffset], late_ns: Sequence[int], *,
               bound_ns: int = START_SKEW_BOUND_NS) -> StartSkew:
    """The start skew of hosts with these clock offsets that began ``late_ns`` after the common
    instant by their own clocks (0 when they were ready in time).

    A host whose clock is ``offset`` ahead reaches the instant ``offset`` early on the driver's
    clock; one that was ready only ``late`` after it starts that much later.
    """
    if len(offsets) != len(late_ns) or not offsets:
        raise ValueError("start_skew needs one offset and one lateness per host")
    starts = tuple(int(-o.offset_ns + late) for o, late in zip(offsets, late_ns))
    hi = max(range(len(starts)), key=lambda i: starts[i])
    lo = min(range(len(starts)), key=lambda i: starts[i])
    skew = starts[hi] - starts[lo]
    unc = (offsets[hi].rtt_ns + offsets[lo].rtt_ns) // 2 if hi != lo else offsets[hi].rtt_ns // 2
    return StartSkew(skew_ns=skew, uncertainty_ns=unc, starts_ns=starts, bound_ns=bound_ns, exceeded=skew > bound_ns)
