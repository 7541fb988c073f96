"""The stored trial and run, as typed, versioned records (reading only; nothing is migrated).

A trial's metadata (``benchlib.trial`` in its Parquet file, written by the runner) grew over
time; :class:`TrialRecord` reads every form stored so far and keeps the dictionary itself in
``meta``, so nothing stored is lost:

* format 1: trials written before this module (no ``record_version``). Fields added along
  the way and absent from older trials: ``log_sink``, ``previous_attempts``, ``service_log``,
  ``started_utc``/``finished_utc``, ``cross_check`` (and its ``order``), ``dependencies``,
  ``resources``, the Docker keys of ``enforced``. Each reads as empty when missing.
* format 2: the same fields, stamped ``record_version: 2`` by the runner.

:func:`read_run` gives a :class:`RunRecord`: run.json's facts and every trial's record.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchlib.errors import StorageError
from benchlib.records.cpu import ServerCpu, server_cpu
from benchlib.records.limits import EnforcedLimits
from benchlib.records.load import LoadMeta
from benchlib.records.peer import PeerReport, peer_report

__all__ = ["Attempt", "FrontRecord", "RunRecord", "ServiceLog", "TRIAL_RECORD_VERSION", "TrialRecord", "read_run", "read_trials"]

#: The trial metadata format the runner writes (see the module docstring for the history).
TRIAL_RECORD_VERSION = 2

_STAMP = "%Y-%m-%dT%H:%M:%SZ"


def _when(v: Any) -> dt.datetime | None:
    if not v:
        return None
    try:
        return dt.datetime.strptime(str(v), _STAMP).replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return None


@dataclass(frozen=True)
class Attempt:
    """An attempt of a trial set aside and run again (the guard invalidated it)."""

    status: str
    reason: str | None
    started: dt.datetime | None
    finished: dt.datetime | None


@dataclass(frozen=True)
class ServiceLog:
    """The service's log in one trial: where it went and what the runtime counted."""

    sink: str
    lines: int | None
    bytes: int | None


@dataclass(frozen=True)
class FrontRecord:
    """The front (a reverse proxy, ``Arm(front=...)``) before the service in one trial.

    Attributes
    ----------
    service, variant: which front. port: where it listened (the load went there).
    enforced: what the runtime enforced on it (``None`` when not recorded).
    resources: its CPU and memory samples (``t_monotonic_ns``, ``cpu_s``, ...).
    stop: how it ended (``exit_code``, ``oom_killed``, ``died_early``, ``detail``).
    log: its log's line and byte counts (``None`` when not recorded).
    raw: the stored dictionary.
    """

    service: str
    variant: str = ""
    port: int | None = None
    enforced: EnforcedLimits | None = None
    resources: tuple[Mapping[str, Any], ...] = ()
    stop: Mapping[str, Any] = field(default_factory=dict)
    log: ServiceLog | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, *, runtime: str = "") -> FrontRecord | None:
        """Read a trial's stored ``front``; ``None`` for an arm without one."""
        if not d:
            return None
        log = d.get("log")
        return cls(service=str(d.get("service") or ""), variant=str(d.get("variant") or ""),
                   port=None if d.get("port") is None else int(d["port"]),
                   enforced=EnforcedLimits.from_dict(d.get("enforced"), runtime=runtime),
                   resources=tuple(d.get("resources") or ()), stop=dict(d.get("stop") or {}),
                   log=ServiceLog("pipe", log.get("lines"), log.get("bytes")) if log else None, raw=dict(d))


@dataclass(frozen=True)
class TrialRecord:
    """One stored trial.

    Attributes
    ----------
    condition, arm, block, position, seq: where it sits in the plan.
    status: ``ok``, ``invalid`` (the load generator's guard) or ``failed``; reason: why not ok.
    service, variant, log_sink, runtime: what ran, and where its log went.
    limits: the limits asked for (``cpus``, ``memory_mb``).
    cpus: the CPU plan (``server``, ``client``, ``dependencies``).
    enforced: what the runtime enforced on the service (``None`` when it never started);
        dependencies: each dependency's enforced limits, by name.
    load: the load generator's account (``None`` when the load never ran).
    front: the front before the service (``None`` for an arm without one).
    ports: every port of a multi-process service (``()`` for a service with one port).
    resources: the service's CPU and memory samples (see :meth:`server_cpu`).
    stop: how the service ended (``exit_code``, ``oom_killed``, ``died_early``, ``detail``).
    peer: the peer tool's report when a cross-check ran in the trial.
    contract, endpoint: the contract check and the endpoint loaded (as stored).
    started, finished: UTC times. attempts: attempts set aside before this one.
    service_log: the service's log sink and line count.
    version: the metadata format read (1 or 2). meta: the stored metadata, unchanged.
    path: the trial's Parquet file; log_path: the service's log for the trial.
    """

    condition: str
    arm: str
    block: int
    position: int | None = None
    seq: int = 0
    status: str = ""
    reason: str | None = None
    service: str = ""
    variant: str = ""
    log_sink: str = "pipe"
    runtime: str = ""
    limits: Mapping[str, Any] = field(default_factory=dict)
    cpus: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    enforced: EnforcedLimits | None = None
    dependencies: Mapping[str, EnforcedLimits | None] = field(default_factory=dict)
    load: LoadMeta | None = None
    front: FrontRecord | None = None
    ports: tuple[int, ...] = ()
    resources: tuple[Mapping[str, Any], ...] = ()
    stop: Mapping[str, Any] = field(default_factory=dict)
    peer: PeerReport | None = None
    contract: Mapping[str, Any] = field(default_factory=dict)
    endpoint: Mapping[str, Any] = field(default_factory=dict)
    started: dt.datetime | None = None
    finished: dt.datetime | None = None
    attempts: tuple[Attempt, ...] = ()
    service_log: ServiceLog | None = None
    version: int = 1
    meta: Mapping[str, Any] = field(default_factory=dict)
    path: Path | None = None
    log_path: Path | None = None

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any], *, path: Path | None = None,
                  log_path: Path | None = None) -> TrialRecord:
        """Read a stored trial's metadata (any format so far).

        Raises
        ------
        StorageError  when ``condition``, ``arm`` or ``block`` is missing (not a trial).
        """
        missing = [k for k in ("condition", "arm", "block") if k not in meta]
        if missing:
            raise StorageError(f"{path or 'trial metadata'}: not a trial record, {missing} missing")
        runtime = str(meta.get("runtime") or "")
        sl = meta.get("service_log")
        x = meta.get("cross_check")
        deps = meta.get("dependencies") or {}
        return cls(
            condition=str(meta["condition"]), arm=str(meta["arm"]), block=int(meta["block"]),
            position=None if meta.get("position") is None else int(meta["position"]), seq=int(meta.get("seq") or 0),
            status=str(meta.get("status") or ""), reason=meta.get("reason"), service=str(meta.get("service") or ""),
            variant=str(meta.get("variant") or ""), log_sink=str(meta.get("log_sink") or "pipe"), runtime=runtime,
            limits=dict(meta.get("limits") or {}),
            cpus={str(k): tuple(int(c) for c in v or ()) for k, v in (meta.get("cpus") or {}).items()},
            enforced=EnforcedLimits.from_dict(meta.get("enforced"), runtime=runtime),
            dependencies={str(n): EnforcedLimits.from_dict((d or {}).get("enforced"), runtime=runtime)
                          for n, d in deps.items()},
            load=LoadMeta.from_dict(meta.get("load")), front=FrontRecord.from_dict(meta.get("front"), runtime=runtime),
            ports=tuple(int(p) for p in meta.get("ports") or ()), resources=tuple(meta.get("resources") or ()),
            stop=dict(meta.get("stop") or {}), peer=peer_report(x) if x else None,
            contract=dict(meta.get("contract") or {}), endpoint=dict(meta.get("endpoint") or {}),
            started=_when(meta.get("started_utc")), finished=_when(meta.get("finished_utc")),
            attempts=tuple(Attempt(str(a.get("status")), a.get("reason"), _when(a.get("started_utc")),
                                   _when(a.get("finished_utc"))) for a in meta.get("previous_attempts") or ()),
            service_log=ServiceLog(str(sl.get("sink") or ""), sl.get("lines"), sl.get("bytes")) if sl else None,
            version=int(meta.get("record_version") or 1), meta=dict(meta), path=path, log_path=log_path,
        )

    @property
    def valid(self) -> bool:
        """The trial counts in the analysis (status ``ok``)."""
        return self.status == "ok"

    @property
    def ran(self) -> bool:
        """The service ran and was loaded (``ok`` or ``invalid``: requests were sent)."""
        return self.status in ("ok", "invalid")

    @property
    def repeated(self) -> bool:
        """The trial was run again in place after the guard invalidated an attempt."""
        return bool(self.attempts)

    @property
    def client_cpu(self) -> float:
        """The busiest client CPU's use in the trial (NaN when not recorded)."""
        return self.load.client_cpu_busiest if self.load is not None else math.nan

    def server_cpu(self, rows: np.ndarray | None = None) -> ServerCpu | None:
        """The server's CPU time over the measured window (the service and its front;
        :func:`benchlib.records.cpu.server_cpu`): per completed request, and CPUs busy.
        ``rows``: the trial's rows when at hand, else they are read from the trial's file (the
        requests completed inside the window are counted from them); ``None`` when the trial
        has no load or no resource samples."""
        if rows is None and self.path is not None:
            rows = self.rows()
        return server_cpu(self.meta, rows)

    def rows(self) -> np.ndarray:
        """The trial's per-request rows (:data:`benchlib.schema.ROW_DTYPE`), read and checked
        as :meth:`benchlib.store.StoredTrial.rows` does."""
        from benchlib.store import StoredTrial

        if self.path is None:
            raise StorageError(f"trial {self.condition}/{self.arm}/b{self.block:03d} has no stored file")
        return StoredTrial(self.path, self.meta).rows()


@dataclass(frozen=True)
class RunRecord:
    """One stored run: run.json's facts and its trials.

    Attributes
    ----------
    study, run_id, path: which run, and where it is stored.
    trials: every stored trial (set-aside attempts excluded), in execution order.
    unavailable: arms that did not run, with why.
    arms, conditions: names in the experiment's order.
    parameters, notebook_parameters, cpus, provenance, runtime: as run.json stores them.
    run: run.json itself.
    """

    study: str
    run_id: str
    path: Path
    trials: tuple[TrialRecord, ...]
    unavailable: Mapping[str, str] = field(default_factory=dict)
    arms: tuple[str, ...] = ()
    conditions: tuple[str, ...] = ()
    parameters: Mapping[str, Any] = field(default_factory=dict)
    notebook_parameters: Mapping[str, Any] = field(default_factory=dict)
    cpus: Mapping[str, Any] = field(default_factory=dict)
    provenance: Mapping[str, Any] = field(default_factory=dict)
    runtime: Mapping[str, Any] = field(default_factory=dict)
    run: Mapping[str, Any] = field(default_factory=dict)

    def arm_order(self, names: Any) -> list[str]:
        """``names`` in the experiment's arm order (unknown names last, sorted)."""
        names = list(dict.fromkeys(str(n) for n in names))
        known = [a for a in self.arms if a in names]
        return known + sorted(set(names) - set(known))


def _store_of(source: Any) -> Any:
    from benchlib.store import RunStore

    if isinstance(source, (str, Path)):
        return RunStore(Path(source))
    return getattr(source, "store", source)


def read_trials(source: Any) -> list[TrialRecord]:
    """Every stored trial of ``source`` (an :class:`~benchlib.runner.ExperimentResult`, a
    :class:`~benchlib.store.RunStore` or a run folder), in execution order."""
    store = _store_of(source)
    return [TrialRecord.from_meta(t.meta, path=t.path, log_path=store.log_path(t.condition, t.arm, t.block))
            for t in store.trials()]


def read_run(source: Any) -> RunRecord:
    """The :class:`RunRecord` of ``source`` (a :class:`RunRecord` is returned as is; an
    :class:`~benchlib.runner.ExperimentResult`, a :class:`~benchlib.store.RunStore` or a run
    folder is read)."""
    if isinstance(source, RunRecord):
        return source
    store = _store_of(source)
    run = store.read_run()
    params = run.get("parameters") or {}
    exp = getattr(source, "experiment", None)
    arms = tuple(a.name for a in exp.arms) if exp is not None else tuple(
        str(a.get("name")) for a in params.get("arms") or ())
    conds = tuple(c.name for c in exp.conditions) if exp is not None else tuple(
        str(c.get("name")) for c in params.get("conditions") or ())
    unavailable = getattr(source, "unavailable", None)
    return RunRecord(
        study=store.study, run_id=store.run_id, path=store.path, trials=tuple(read_trials(store)),
        unavailable=dict(unavailable if unavailable is not None else run.get("unavailable") or {}),
        arms=arms, conditions=conds, parameters=params, notebook_parameters=run.get("notebook_parameters") or {},
        cpus=run.get("cpus") or {}, provenance=run.get("provenance") or {}, runtime=run.get("runtime") or {},
        run=run,
    )
