"""One load host's share of a trial's load, when several hosts drive it (pure, no I/O).

Like k6's execution segments: the trial's load is the load of ``hosts × workers`` worker
processes, numbered globally; host ``h`` runs the global workers ``h·W … h·W + W - 1``
(``W`` = ``LoadSpec.workers``, the workers of each host). Each worker's part is the part it
would have in one generator of ``hosts × W`` workers:

* open model, ``constant`` arrivals: global worker ``g`` takes every ``G``-th slot of the one
  constant schedule, starting at slot ``g`` (:func:`benchlib.loadgen.schedule.arrival_offsets_ns`),
  so the union of the hosts' intended times is exactly the single-generator schedule, for any
  number of hosts: no slot twice, none missing;
* open model, ``poisson`` arrivals: global worker ``g`` runs its Poisson stream seeded by
  ``(seed, g)`` at ``rate / G``; the union is exactly the schedule of one generator with ``G``
  workers (``arrivals_in_window(..., workers=G)``), a Poisson process at ``rate``;
* closed model: the connections (and a request count, and a warm-up count) are divided over
  the ``G`` global workers as one generator divides them (:func:`split_evenly`), so the hosts'
  connections add up to ``LoadSpec.connections``;
* connection numbers (``conn``) stay unique across hosts: a worker numbers its connections
  ``g, g + G, g + 2G, …``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HostShare", "split_evenly"]


def split_evenly(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` integers differing by at most one (largest first)."""
    q, r = divmod(total, parts)
    return [q + (1 if i < r else 0) for i in range(parts)]


@dataclass(frozen=True)
class HostShare:
    """Which part of a trial's load one host runs.

    Attributes
    ----------
    host: this host's index (0-based).
    hosts: how many hosts share the trial (1: one machine, the whole load).
    """

    host: int = 0
    hosts: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.hosts, int) or isinstance(self.hosts, bool) or self.hosts < 1:
            raise ValueError(f"HostShare.hosts must be an integer >= 1; got {self.hosts!r}")
        if not isinstance(self.host, int) or isinstance(self.host, bool) or not 0 <= self.host < self.hosts:
            raise ValueError(f"HostShare.host must be an integer in 0..{self.hosts - 1}; got {self.host!r}")

    def global_workers(self, workers: int) -> range:
        """The global worker numbers this host runs, ``workers`` of them."""
        return range(self.host * workers, (self.host + 1) * workers)

    def total_workers(self, workers: int) -> int:
        """Every host's workers together (``G``)."""
        return self.hosts * workers

    def split(self, total: int, workers: int) -> list[int]:
        """This host's workers' parts of ``total`` (connections, requests), as one generator of
        :meth:`total_workers` workers divides it: the parts of every host add up to ``total``."""
        parts = split_evenly(total, self.total_workers(workers))
        g = self.global_workers(workers)
        return parts[g.start:g.stop]
