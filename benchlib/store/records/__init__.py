"""Typed, versioned records of what a run stored, and the row helpers.

* :mod:`benchlib.store.records.trial`: :class:`TrialRecord` (one trial's metadata, read by
  :meth:`TrialRecord.from_meta` and written by its mirror :meth:`TrialRecord.to_meta`; its front,
  :class:`FrontRecord`, its dependencies, :class:`DependencyRecord`, and its server CPU,
  :meth:`TrialRecord.server_cpu`); a whole run is read by :func:`benchlib.store.results.open_run`;
* :mod:`benchlib.store.records.load`: :class:`LoadMeta` (the load generator's account of a trial) and
  :class:`WorkerStats` (each load worker's);
* :mod:`benchlib.store.records.cpu`: :class:`ServerCpu`, the server's CPU time over the measured
  window;
* :mod:`benchlib.store.records.limits`: :class:`EnforcedLimits` (what the runtime enforced, one shape
  for every runtime);
* :mod:`benchlib.store.records.peer`: :class:`PeerReport` (a peer tool's report, normalized) and the
  per-tool adapters;
* :mod:`benchlib.store.records.rows`: which requests count (measured, warm-up, successful) and their
  latencies;
* :mod:`benchlib.store.records.run`: :class:`~benchlib.store.records.run.RunRecord`, a run's
  ``run.json`` (written and read only through it).

Readers accept every format stored so far and keep the stored dictionaries (``meta``,
``raw``): nothing is lost. A trial's metadata is read as it is; an older run.json is brought
to the current format as it is read (``update_to_<N>``), its file left as it is.
"""

from __future__ import annotations

from benchlib.store.records.cpu import ServerCpu
from benchlib.store.records.limits import EnforcedLimits
from benchlib.store.records.load import LoadMeta, WorkerStats
from benchlib.store.records.peer import ADAPTERS, PeerReport, peer_report
from benchlib.store.records.trial import (
    TRIAL_RECORD_VERSION,
    Attempt,
    DependencyRecord,
    FrontRecord,
    ServiceLog,
    TrialRecord,
)

__all__ = ["ADAPTERS", "Attempt", "DependencyRecord", "EnforcedLimits", "FrontRecord", "LoadMeta", "PeerReport",
           "ServerCpu", "ServiceLog", "TRIAL_RECORD_VERSION", "TrialRecord", "WorkerStats", "peer_report"]
