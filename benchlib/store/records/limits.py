"""What a runtime enforced on a service, as one typed record whatever the runtime (pure).

The runtimes store a dictionary in each trial's metadata (``enforced``) whose keys differ:
the local runtime writes the cgroup read-back (:func:`benchlib.runtime.cgroups.compare_limits`:
``cpus``, ``cpu_quota``, ``memory_mb``, ``swap``, ``cpuset``/``cpu``/``memory`` phrases) plus
the process's CPU affinity (``cpus_read_back``) and, when cgroups are unusable, one
``limits: "not enforced: why"``; the Docker runtime writes the same read-back plus ``source``,
``container``, ``host_config`` and ``image``, or ``not verified`` phrases when nothing could
be read back. :class:`EnforcedLimits` reads every form; unknown keys stay in ``raw``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from benchlib.store.records._convert import as_float_or_none as _float

__all__ = ["ENFORCED_VERSION", "EnforcedLimits"]

#: Version of :class:`EnforcedLimits` (1: the read-back keys of both runtimes, Dec 2026).
ENFORCED_VERSION = 1


def _cpus(v: Any) -> tuple[int, ...] | None:
    if v is None:
        return None
    try:
        return tuple(int(c) for c in v)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True)
class EnforcedLimits:
    """The limits in force for one service instance, as read back.

    Attributes
    ----------
    runtime: ``local`` or ``docker`` ("" when not recorded).
    cpus: the CPUs the service could run on (the process's affinity when recorded, else the
        cpuset read back); ``None`` when not read back.
    cpu_quota: the CFS quota in CPUs (``None``: no quota).
    memory_mb: the memory cap in MiB (``None``: no cap).
    swap: ``"disabled"``, a size, or ``None`` when not read.
    cpuset, cpu, memory: what each limit's read-back says (``"enforced (cgroup v1)"``,
        ``"no limit requested"``, ``"not enforced: why"``, ``"not verified: ..."``).
    cgroup: ``v1``/``v2`` ("" when none). source: where Docker read the values.
    note: a runtime-wide ``"not enforced: why"`` (no usable cgroups), else "".
    memory_peak_mb: the cgroup's peak memory use in MiB when the runtime recorded it.
    raw: the stored dictionary, unchanged.
    """

    runtime: str = ""
    cpus: tuple[int, ...] | None = None
    cpu_quota: float | None = None
    memory_mb: float | None = None
    swap: str | None = None
    cpuset: str = ""
    cpu: str = ""
    memory: str = ""
    cgroup: str = ""
    source: str = ""
    note: str = ""
    memory_peak_mb: float | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)
    version: int = ENFORCED_VERSION

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, *, runtime: str = "") -> EnforcedLimits | None:
        """Read a stored ``enforced`` dictionary (any runtime, any version); ``None`` for none."""
        if not d:
            return None
        cpus = _cpus(d.get("cpus_read_back"))
        if cpus is None:
            cpus = _cpus(d.get("cpus"))
        swap = d.get("swap")
        return cls(
            runtime=str(d.get("runtime") or runtime), cpus=cpus, cpu_quota=_float(d.get("cpu_quota")),
            memory_mb=_float(d.get("memory_mb")), swap=None if swap is None else str(swap),
            cpuset=str(d.get("cpuset", "")), cpu=str(d.get("cpu", "")), memory=str(d.get("memory", "")),
            cgroup=str(d.get("cgroup") or ""), source=str(d.get("source") or ""), note=str(d.get("limits") or ""),
            memory_peak_mb=_float(d.get("memory_peak_mb")), raw=dict(d),
        )

    @property
    def cpu_text(self) -> str:
        """``"1.0 CPU: enforced (cgroup v1 CFS quota)"`` (``–`` for what was not recorded)."""
        return f"{'–' if self.cpu_quota is None else self.cpu_quota} CPU: {self.cpu or self.note or '–'}"

    @property
    def memory_cap(self) -> str:
        """The cap in MiB as printed: ``512``, ``255.5``; ``–`` when there is none."""
        if self.memory_mb is None:
            return "–"
        return f"{self.memory_mb:g}"

    @property
    def memory_text(self) -> str:
        """``"512 MB: enforced (cgroup v1)"``."""
        return f"{self.memory_cap} MB: {self.memory or self.note or '–'}"

    def describe(self) -> str:
        """One line: CPUs, the three limits' phrases, the cap and the quota."""
        bits = []
        if self.cpus is not None:
            bits.append("CPUs " + ",".join(map(str, self.cpus)))
        bits += [f"{label} {value}" for label, value in (("CPU set", self.cpuset), ("CPU quota", self.cpu),
                                                         ("memory", self.memory)) if value]
        if self.memory_mb:
            bits.append(f"cap {self.memory_cap} MB")
        if self.cpu_quota:
            bits.append(f"quota {self.cpu_quota:g} CPU")
        if self.note:
            bits.append(self.note)
        return "; ".join(bits) or "nothing recorded"
