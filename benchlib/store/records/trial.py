"""The stored trial as a typed, versioned record (nothing is migrated).

A trial's metadata (``benchlib.trial`` in its Parquet file, written by the runner) grew over
time; :class:`TrialRecord` reads every form stored so far and keeps the dictionary itself in
``meta``, so nothing stored is lost:

* format 1: trials written before this module (no ``record_version``). Fields added along
  the way and absent from older trials: ``log_sink``, ``previous_attempts``, ``service_log``,
  ``started_utc``/``finished_utc``, ``cross_check`` (and its ``order``), ``dependencies``,
  ``resources``, the Docker keys of ``enforced``. Each reads as empty when missing.
* format 2: the same fields, stamped ``record_version: 2`` by the runner.

The runner writes a trial as :meth:`TrialRecord.to_meta`, the mirror of
:meth:`TrialRecord.from_meta` (``from_meta(r.to_meta()) == r``): the record's own keys from its
typed fields, the runtime's, the load generator's and the peer tool's dictionaries as they
produced them (``raw``), keys this reader does not know from ``extra``. Empty optional values
are not written: every reader takes a missing key for an empty one.

A whole stored run is read by :func:`benchlib.store.results.open_run`.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchlib.core.errors import StorageError
from benchlib.store.records._convert import as_float_or_none
from benchlib.store.records.cpu import ServerCpu, server_cpu
from benchlib.store.records.disturbance import Disturbance
from benchlib.store.records.interleave import InterleaveRecord
from benchlib.store.records.limits import EnforcedLimits
from benchlib.store.records.load import LoadMeta
from benchlib.store.records.peer import PeerReport, peer_report

__all__ = ["Attempt", "DependencyRecord", "FrontRecord", "ServiceLog", "TRIAL_RECORD_VERSION", "TrialRecord"]

#: The trial metadata format the runner writes (see the module docstring for the history).
TRIAL_RECORD_VERSION = 2

_STAMP = "%Y-%m-%dT%H:%M:%SZ"


def _when(v: Any) -> dt.datetime | None:
    if not v:
        return None
    try:
        return dt.datetime.strptime(str(v), _STAMP).replace(tzinfo=dt.UTC)
    except ValueError:
        return None


def utc_stamp(when: dt.datetime) -> str:
    """``when`` as stored (``2026-12-03T16:29:19Z``, UTC, to the second)."""
    return when.astimezone(dt.UTC).strftime(_STAMP)


def utc_now() -> dt.datetime:
    """Now, in UTC, to the second (what a stored time keeps)."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0)


def _enforced_dict(e: EnforcedLimits | None) -> dict[str, Any]:
    return dict(e.raw) if e is not None else {}


@dataclass(frozen=True)
class Attempt:
    """An attempt of a trial set aside and run again (the guard invalidated it)."""

    status: str
    reason: str | None
    started: dt.datetime | None
    finished: dt.datetime | None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Attempt:
        """Read one stored ``previous_attempts`` entry."""
        return cls(str(d.get("status")), d.get("reason"), _when(d.get("started_utc")), _when(d.get("finished_utc")))

    def to_dict(self) -> dict[str, Any]:
        """The stored form (the mirror of :meth:`from_dict`)."""
        return {"status": self.status, "reason": self.reason,
                "started_utc": utc_stamp(self.started) if self.started else None,
                "finished_utc": utc_stamp(self.finished) if self.finished else None}


@dataclass(frozen=True)
class ServiceLog:
    """The service's log in one trial: where it went and what the runtime counted."""

    sink: str
    lines: int | None
    bytes: int | None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> ServiceLog | None:
        """Read a stored ``service_log``; ``None`` when not recorded."""
        return cls(str(d.get("sink") or ""), d.get("lines"), d.get("bytes")) if d else None

    def to_dict(self) -> dict[str, Any]:
        """The stored form (the mirror of :meth:`from_dict`)."""
        return {"sink": self.sink, "lines": self.lines, "bytes": self.bytes}


@dataclass(frozen=True)
class DependencyRecord:
    """A dependency (``requires``) of the service in one trial.

    Attributes
    ----------
    port: where it listened. enforced: what the runtime enforced on it (``None``: not recorded).
    shared: ``"block"`` when the block's trials shared it (``Experiment(dependencies="block")``),
        else "". reset_s: seconds its reset steps took before this trial (``None``: it was
        started for this trial, or not shared).
    """

    port: int | None = None
    enforced: EnforcedLimits | None = None
    shared: str = ""
    reset_s: float | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, *, runtime: str = "") -> DependencyRecord:
        """Read one stored ``dependencies.<name>``."""
        d = d or {}
        return cls(port=None if d.get("port") is None else int(d["port"]),
                   enforced=EnforcedLimits.from_dict(d.get("enforced"), runtime=runtime),
                   shared=str(d.get("shared") or ""), reset_s=as_float_or_none(d.get("reset_s")))

    def to_dict(self) -> dict[str, Any]:
        """The stored form (the mirror of :meth:`from_dict`)."""
        out: dict[str, Any] = {"port": self.port, "enforced": _enforced_dict(self.enforced)}
        if self.shared:
            out.update(shared=self.shared, reset_s=self.reset_s)
        return out


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
    raw: the stored dictionary (not compared: two fronts are equal when their fields are).
    """

    service: str
    variant: str = ""
    port: int | None = None
    enforced: EnforcedLimits | None = None
    resources: tuple[Mapping[str, Any], ...] = ()
    stop: Mapping[str, Any] = field(default_factory=dict)
    log: ServiceLog | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)

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

    def to_dict(self) -> dict[str, Any]:
        """The stored form (the mirror of :meth:`from_dict`): the front as started, then, once
        the load ran, its resource samples, how it stopped and its log's counts."""
        out: dict[str, Any] = {"service": self.service, "variant": self.variant, "port": self.port,
                               "enforced": _enforced_dict(self.enforced)}
        if self.resources or self.stop:
            out["resources"] = [dict(r) for r in self.resources]
        if self.stop:
            out["stop"] = dict(self.stop)
        if self.log is not None:
            out["log"] = {"lines": self.log.lines, "bytes": self.log.bytes}
        return out


#: The keys :class:`TrialRecord` reads into its fields (any other lands in ``extra``).
_TRIAL_KEYS = frozenset({
    "record_version", "seq", "condition", "block", "position", "arm", "previous_attempts", "service", "variant",
    "log_sink", "runtime", "limits", "cpus", "started_utc", "enforced", "ports", "dependencies", "front", "endpoint",
    "contract", "cross_check", "load", "resources", "stop", "service_log", "log_tail", "traceback", "status", "reason",
    "finished_utc", "disturbance", "interleave",
})


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
        dependencies: each dependency (port, enforced limits, shared), by name.
    load: the load generator's account (``None`` when the load never ran).
    front: the front before the service (``None`` for an arm without one).
    ports: every port of a multi-process service (``()`` for a service with one port).
    resources: the service's CPU and memory samples (see :meth:`server_cpu`).
    stop: how the service ended (``exit_code``, ``oom_killed``, ``died_early``, ``detail``).
    peer: the peer tool's report when a cross-check ran in the trial.
    contract, endpoint: the contract check and the endpoint loaded (as stored).
    started, finished: UTC times. attempts: attempts set aside before this one.
    service_log: the service's log sink and line count.
    interleave: the arm's part in an interleaved trial (the trial's arms, its slices, the arm's
        CPU in them: :class:`~benchlib.store.records.interleave.InterleaveRecord`); ``None``
        for a trial that measured this arm alone.
    disturbance: what the machine did to the trial, from outside the service
        (:class:`~benchlib.store.records.disturbance.Disturbance`; ``None`` for trials stored
        before it was measured, or when the load never ran).
    log_tail: the log's last lines of a trial that failed; traceback: the error's traceback
        when the runner caught one ("" when none).
    version: the metadata format (1 or 2). extra: stored keys this reader does not know.
    meta: the stored metadata, unchanged (``{}`` for a record not read from a store).
    path: the trial's Parquet file; log_path: the service's log for the trial.
    ``meta``, ``path`` and ``log_path`` say where a record was read from, not what it holds:
    they are not compared.
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
    dependencies: Mapping[str, DependencyRecord] = field(default_factory=dict)
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
    log_tail: str = ""
    traceback: str = ""
    disturbance: Disturbance | None = None
    interleave: InterleaveRecord | None = None
    version: int = 1
    extra: Mapping[str, Any] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False)
    path: Path | None = field(default=None, compare=False)
    log_path: Path | None = field(default=None, compare=False)

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
        x = meta.get("cross_check")
        return cls(
            condition=str(meta["condition"]), arm=str(meta["arm"]), block=int(meta["block"]),
            position=None if meta.get("position") is None else int(meta["position"]), seq=int(meta.get("seq") or 0),
            status=str(meta.get("status") or ""), reason=meta.get("reason"), service=str(meta.get("service") or ""),
            variant=str(meta.get("variant") or ""), log_sink=str(meta.get("log_sink") or "pipe"), runtime=runtime,
            limits=dict(meta.get("limits") or {}),
            cpus={str(k): tuple(int(c) for c in v or ()) for k, v in (meta.get("cpus") or {}).items()},
            enforced=EnforcedLimits.from_dict(meta.get("enforced"), runtime=runtime),
            dependencies={str(n): DependencyRecord.from_dict(d, runtime=runtime)
                          for n, d in (meta.get("dependencies") or {}).items()},
            load=LoadMeta.from_dict(meta.get("load")), front=FrontRecord.from_dict(meta.get("front"), runtime=runtime),
            ports=tuple(int(p) for p in meta.get("ports") or ()), resources=tuple(meta.get("resources") or ()),
            stop=dict(meta.get("stop") or {}), peer=peer_report(x) if x else None,
            contract=dict(meta.get("contract") or {}), endpoint=dict(meta.get("endpoint") or {}),
            started=_when(meta.get("started_utc")), finished=_when(meta.get("finished_utc")),
            attempts=tuple(Attempt.from_dict(a) for a in meta.get("previous_attempts") or ()),
            service_log=ServiceLog.from_dict(meta.get("service_log")),
            log_tail=str(meta.get("log_tail") or ""), traceback=str(meta.get("traceback") or ""),
            disturbance=Disturbance.from_dict(meta.get("disturbance")),
            interleave=InterleaveRecord.from_dict(meta.get("interleave")),
            version=int(meta.get("record_version") or 1),
            extra={k: v for k, v in meta.items() if k not in _TRIAL_KEYS},
            meta=dict(meta), path=path, log_path=log_path,
        )

    def to_meta(self) -> dict[str, Any]:
        """The trial's stored metadata (``benchlib.trial``), the mirror of :meth:`from_meta`:
        ``TrialRecord.from_meta(r.to_meta()) == r``. Optional values that are empty are left
        out (a reader takes a missing key for an empty one), except ``dependencies``, written
        once the service started; a variant not known (the service never started) is written
        ``null``; ``record_version`` is written from format 2 on (format 1 had none)."""
        out: dict[str, Any] = {"record_version": self.version} if self.version >= 2 else {}
        out.update(seq=self.seq, condition=self.condition, block=self.block, position=self.position, arm=self.arm)
        if self.attempts:
            out["previous_attempts"] = [a.to_dict() for a in self.attempts]
        out.update(service=self.service, variant=self.variant or None, log_sink=self.log_sink, runtime=self.runtime,
                   limits=dict(self.limits), cpus={k: list(v) for k, v in self.cpus.items()})
        if self.started is not None:
            out["started_utc"] = utc_stamp(self.started)
        if self.enforced is not None:
            out["enforced"] = _enforced_dict(self.enforced)
        if self.ports:
            out["ports"] = list(self.ports)
        if self.dependencies or self.enforced is not None:  # recorded once the service started
            out["dependencies"] = {n: d.to_dict() for n, d in self.dependencies.items()}
        if self.front is not None:
            out["front"] = self.front.to_dict()
        for key, value in (("endpoint", self.endpoint), ("contract", self.contract)):
            if value:
                out[key] = dict(value)
        if self.peer is not None:
            out["cross_check"] = dict(self.peer.raw)
        if self.load is not None:
            out["load"] = dict(self.load.raw)
        if self.resources:
            out["resources"] = [dict(r) for r in self.resources]
        if self.stop:
            out["stop"] = dict(self.stop)
        if self.disturbance is not None:
            out["disturbance"] = self.disturbance.to_dict()
        if self.interleave is not None:
            out["interleave"] = self.interleave.to_dict()
        if self.service_log is not None:
            out["service_log"] = self.service_log.to_dict()
        if self.log_tail:
            out["log_tail"] = self.log_tail
        if self.traceback:
            out["traceback"] = self.traceback
        out.update(status=self.status, reason=self.reason)
        if self.finished is not None:
            out["finished_utc"] = utc_stamp(self.finished)
        out.update({k: v for k, v in self.extra.items() if k not in out})
        return out

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
        :func:`benchlib.store.records.cpu.server_cpu`): per completed request, and CPUs busy.
        ``rows``: the trial's rows when at hand, else they are read from the trial's file (the
        requests completed inside the window are counted from them); ``None`` when the trial
        has no load or no resource samples."""
        if rows is None and self.path is not None:
            rows = self.rows()
        return server_cpu(self.meta, rows)

    def rows(self) -> np.ndarray:
        """The trial's per-request rows (:data:`benchlib.core.schema.ROW_DTYPE`), read and checked
        as :meth:`benchlib.store.runstore.StoredTrial.rows` does."""
        from benchlib.store.runstore import StoredTrial

        if self.path is None:
            raise StorageError(f"trial {self.condition}/{self.arm}/b{self.block:03d} has no stored file")
        return StoredTrial(self.path, self.meta).rows()

    def hosts(self) -> np.ndarray:
        """Each row's load host (an index into ``load.cluster["hosts"]``; 0 on one machine and
        for trials stored before schema version 2), in the order of :meth:`rows`."""
        from benchlib.store.runstore import StoredTrial

        if self.path is None:
            raise StorageError(f"trial {self.condition}/{self.arm}/b{self.block:03d} has no stored file")
        return StoredTrial(self.path, self.meta).hosts()
