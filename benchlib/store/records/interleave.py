"""How an arm ran in an interleaved trial: the trial's slices and the arm's CPU in them (pure).

An interleaved trial (``Experiment(interleave=...)``) measures every arm of a condition side by
side; each arm's rows and record are stored as a trial of its own (``trials/<condition>/<arm>/
b<block>.parquet``, as in the sequential design), so every reader pairs them by block as
before. The trial metadata's ``interleave`` key (:class:`InterleaveRecord`) says which arms
shared the trial, how the slices fell (:class:`benchlib.core.slicing.SlicePlan`) and what the
arm's service used of the CPU in its own slices and in the others' (its carry-over,
:func:`benchlib.core.slicing.slice_cpu`); a trial stored without the key ran alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from benchlib.core.slicing import SliceCpu

__all__ = ["InterleaveRecord"]


def _float(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


@dataclass(frozen=True)
class InterleaveRecord:
    """One arm's part in an interleaved trial.

    Attributes
    ----------
    arms: the trial's arms, by slice index (their order in the trial's slice plan).
    index: this arm's index in ``arms``.
    slice_ms, gap_ms: a slice's and a gap's length (ms).
    order: one cycle's order of arm indices (every ordered pair adjacent once).
    slices: this arm's slices, warm-up included.
    warmup_s, measured_s, total_s: the warm-up's length, this arm's measured slices' seconds,
        the trial's length (s).
    cpu: the arm's service CPU over the measured phase (its front's included), from its cgroup
        counter read at every slice boundary (``None``: not measured, see ``readable``).
    readable: whether the arm's instances had a CPU counter of their own to read (``False``:
        none, so its carry-over cannot be known; ``True`` with ``cpu`` ``None``: read, but no CPU
        fell in its own periods, e.g. readings delayed past them on a saturated machine).
    raw: the stored dictionary.
    """

    arms: tuple[str, ...]
    index: int
    slice_ms: float
    gap_ms: float
    order: tuple[int, ...] = ()
    slices: int = 0
    warmup_s: float = math.nan
    measured_s: float = math.nan
    total_s: float = math.nan
    cpu: SliceCpu | None = None
    readable: bool = True
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_dict(cls, d: Any) -> InterleaveRecord | None:
        """Read the stored ``interleave`` key (``None``: the trial ran alone)."""
        if not isinstance(d, Mapping) or not d.get("arms"):
            return None
        c = d.get("cpu")
        cpu = None
        if isinstance(c, Mapping):
            cpu = SliceCpu(*(_float(c.get(k)) for k in ("own_s", "others_s", "own_period_s", "others_period_s",
                                                        "idle_cpu_per_s", "carry_pct")))
        return cls(arms=tuple(str(a) for a in d["arms"]), index=int(d.get("index") or 0),
                   slice_ms=_float(d.get("slice_ms")), gap_ms=_float(d.get("gap_ms")),
                   order=tuple(int(i) for i in d.get("order") or ()), slices=int(d.get("slices") or 0),
                   warmup_s=_float(d.get("warmup_s")), measured_s=_float(d.get("measured_s")),
                   total_s=_float(d.get("total_s")), cpu=cpu, readable=d.get("readable", True) is not False,
                   raw=dict(d))

    def to_dict(self) -> dict[str, Any]:
        """The stored form (the mirror of :meth:`from_dict`; NaN as ``None``)."""
        def num(x: float) -> float | None:
            return None if math.isnan(x) else x

        out: dict[str, Any] = {"arms": list(self.arms), "index": self.index, "slice_ms": num(self.slice_ms),
                               "gap_ms": num(self.gap_ms), "order": list(self.order), "slices": self.slices,
                               "warmup_s": num(self.warmup_s), "measured_s": num(self.measured_s),
                               "total_s": num(self.total_s)}
        if not self.readable:
            out["readable"] = False
        if self.cpu is not None:
            out["cpu"] = {k: num(getattr(self.cpu, k)) for k in ("own_s", "others_s", "own_period_s", "others_period_s",
                                                                 "idle_cpu_per_s", "carry_pct")}
        return out

    @property
    def carry_pct(self) -> float:
        """The arm's carry-over, % of its own CPU (NaN when its CPU could not be read)."""
        return self.cpu.carry_pct if self.cpu is not None else math.nan

    @property
    def carry_cpu_pct(self) -> float:
        """The arm's carry-over, % of the service CPU (:attr:`SliceCpu.carry_cpu_pct`; NaN when
        its CPU could not be read)."""
        return self.cpu.carry_cpu_pct if self.cpu is not None else math.nan
