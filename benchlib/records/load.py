"""The load generator's account of one trial (``load`` in the trial metadata), typed (pure).

:func:`benchlib.loadgen.run_load` returns a JSON-able ``meta`` dictionary that the runner
stores as the trial's ``load``. :class:`LoadMeta` reads the fields the analysis uses and keeps
every other one: fields the load generator adds later land in ``extra`` (and all of them in
``raw``), so a reader never drops what a newer writer stored.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from benchlib.records._convert import as_float as _f

__all__ = ["LOAD_META_VERSION", "LoadMeta"]

#: Version of :class:`LoadMeta` (1: the fields of benchlib 0.1, Dec 2026).
LOAD_META_VERSION = 1

_KNOWN = frozenset({
    "model", "description", "offered_rps", "achieved_rps", "measured_duration_s", "requests", "errors",
    "errors_warmup", "client_cpu", "client_cpus", "valid", "invalid_reason", "loadspec", "schedule_lag_ns",
    "status_counts", "coordinated_omission_risk", "workers",
})


@dataclass(frozen=True)
class LoadMeta:
    """What the load generator did and measured in one trial.

    Attributes
    ----------
    model: ``open`` or ``closed``. description: the load in words.
    offered_rps, achieved_rps: requests/s offered (open model; NaN for closed) and achieved.
    measured_duration_s: length of the measured phase, s.
    requests_measured, requests_warmup, requests_total: requests sent in each phase, and in all.
    errors: failed measured requests by kind (``connect``, ``reset``, ...).
    status_counts: HTTP statuses of the measured requests that got a response (``{"200": n}``).
    client_cpu: the client's CPU use per CPU (share of one CPU, keyed by CPU number).
    client_cpus: the CPUs the load generator ran on.
    valid, invalid_reason: the guard's decision (a client that could not keep the load).
    loadspec: the :class:`~benchlib.model.LoadSpec` as stored.
    schedule_lag_ns: percentiles of send time minus due time.
    workers: client worker processes.
    extra: stored fields this reader does not know (newer load generators add some).
    raw: the stored dictionary, unchanged.
    """

    model: str = ""
    description: str = ""
    offered_rps: float = math.nan
    achieved_rps: float = math.nan
    measured_duration_s: float = math.nan
    requests_measured: int = 0
    requests_warmup: int = 0
    requests_total: int = 0
    errors: Mapping[str, int] = field(default_factory=dict)
    status_counts: Mapping[str, int] = field(default_factory=dict)
    client_cpu: Mapping[str, float] = field(default_factory=dict)
    client_cpus: tuple[int, ...] = ()
    valid: bool = True
    invalid_reason: str | None = None
    loadspec: Mapping[str, Any] = field(default_factory=dict)
    schedule_lag_ns: Mapping[str, float] = field(default_factory=dict)
    workers: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict)
    version: int = LOAD_META_VERSION

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> LoadMeta | None:
        """Read a stored ``load`` dictionary; ``None`` when the trial has none (it failed first)."""
        if not d:
            return None
        req = d.get("requests") or {}
        cpu = (d.get("client_cpu") or {}).get("per_cpu") or {}
        return cls(
            model=str(d.get("model") or (d.get("loadspec") or {}).get("model") or ""),
            description=str(d.get("description") or ""), offered_rps=_f(d.get("offered_rps")),
            achieved_rps=_f(d.get("achieved_rps")), measured_duration_s=_f(d.get("measured_duration_s")),
            requests_measured=int(req.get("measure") or 0), requests_warmup=int(req.get("warmup") or 0),
            requests_total=int(req.get("total") or (req.get("measure") or 0) + (req.get("warmup") or 0)),
            errors={str(k): int(v) for k, v in (d.get("errors") or {}).items()},
            status_counts={str(k): int(v) for k, v in (d.get("status_counts") or {}).items()},
            client_cpu={str(k): float(v) for k, v in cpu.items()},
            client_cpus=tuple(int(c) for c in d.get("client_cpus") or ()), valid=bool(d.get("valid", True)),
            invalid_reason=d.get("invalid_reason"), loadspec=dict(d.get("loadspec") or {}),
            schedule_lag_ns=dict(d.get("schedule_lag_ns") or {}), workers=int(d.get("workers") or 0),
            extra={k: v for k, v in d.items() if k not in _KNOWN}, raw=dict(d),
        )

    @property
    def client_cpu_busiest(self) -> float:
        """The busiest client CPU's use (share of one CPU; the load generator's workers summed
        on it); NaN when not recorded."""
        return max(self.client_cpu.values()) if self.client_cpu else math.nan
