"""Typed, versioned records of what a run stored, and the row helpers.

* :mod:`benchlib.records.trial`: :class:`TrialRecord` (one trial's metadata; its front,
  :class:`FrontRecord`, and its server CPU, :meth:`TrialRecord.server_cpu`), :class:`RunRecord`
  (run.json and every trial), :func:`read_run`, :func:`read_trials`;
* :mod:`benchlib.records.load`: :class:`LoadMeta` (the load generator's account of a trial) and
  :class:`WorkerStats` (each load worker's);
* :mod:`benchlib.records.cpu`: :class:`ServerCpu`, the server's CPU time over the measured
  window;
* :mod:`benchlib.records.limits`: :class:`EnforcedLimits` (what the runtime enforced, one shape
  for every runtime);
* :mod:`benchlib.records.peer`: :class:`PeerReport` (a peer tool's report, normalized) and the
  per-tool adapters;
* :mod:`benchlib.records.rows`: which requests count (measured, warm-up, successful) and their
  latencies.

Readers accept every format stored so far and keep the stored dictionaries (``meta``,
``raw``): nothing is migrated, nothing is lost.
"""

from __future__ import annotations

from benchlib.records.limits import EnforcedLimits
from benchlib.records.cpu import ServerCpu
from benchlib.records.load import LoadMeta, WorkerStats
from benchlib.records.peer import ADAPTERS, PeerReport, peer_report
from benchlib.records.trial import (
    TRIAL_RECORD_VERSION,
    Attempt,
    FrontRecord,
    RunRecord,
    ServiceLog,
    TrialRecord,
    read_run,
    read_trials,
)

__all__ = ["ADAPTERS", "Attempt", "EnforcedLimits", "FrontRecord", "LoadMeta", "PeerReport", "RunRecord", "ServerCpu",
           "ServiceLog", "TRIAL_RECORD_VERSION", "TrialRecord", "WorkerStats", "peer_report", "read_run",
           "read_trials"]
