"""Open-model sweeps at fractions of a measured capacity (pure).

Latency comparisons are only meaningful at equal offered load (statistics.md 3.5). A closed
model run measures each arm's capacity (its throughput with N connections); a sweep then
offers the *same* arrival rates to every arm, at fractions of the slowest arm's capacity, so
every arm can sustain every step and coordinated omission plays no part.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from benchlib.core.errors import ParameterError
from benchlib.core.model import Condition, LoadSpec

__all__ = ["capacity", "sweep_conditions"]


def capacity(summaries: Any, *, arms: Iterable[str] | None = None, metric: str = "throughput_rps",
             condition: str | None = None) -> dict[str, float]:
    """Each arm's capacity: the median over its valid trials of ``metric`` (requests/s).

    Raises ParameterError when an arm has no valid trial or the column is missing.
    """
    df = summaries
    all_arms = sorted(df["arm"].unique()) if "arm" in df.columns else []
    if metric not in df.columns:
        raise ParameterError(f"summaries have no column {metric!r}; valid: {', '.join(map(str, df.columns))}")
    if "valid" in df.columns:
        df = df[df["valid"].astype(bool)]
    if condition is not None:
        df = df[df["condition"] == condition]
    wanted = list(arms) if arms is not None else all_arms
    out = {}
    for arm in wanted:
        vals = df.loc[df["arm"] == arm, metric].dropna()
        if vals.empty:
            raise ParameterError(f"arm {arm!r} has no valid trial to measure its capacity from")
        out[arm] = float(vals.median())
    return out


def sweep_conditions(capacities: dict[str, float], fractions: Sequence[float], base: LoadSpec, *,
                     basis: str = "slowest", prefix: str = "open") -> tuple[Condition, ...]:
    """Open-model conditions at ``fractions`` of the basis capacity.

    Parameters
    ----------
    capacities: arm -> capacity in requests/s (from :func:`capacity`).
    fractions: e.g. ``(0.25, 0.5, 0.75, 0.9)``; each in (0, 1].
    base: the LoadSpec to derive from (connections = the most in flight, duration, warm-up,
        workers); its model becomes ``open`` with ``rate_rps`` set.
    basis: ``"slowest"`` (the minimum capacity: every arm can sustain every step) or an arm name.
    prefix: condition names are ``<prefix>-<percent>`` (e.g. ``open-75``).
    """
    if not capacities:
        raise ParameterError("no capacities to sweep from")
    if basis == "slowest":
        ref = min(capacities.values())
    elif basis in capacities:
        ref = capacities[basis]
    else:
        raise ParameterError(f"unknown basis {basis!r}; valid: slowest, {', '.join(capacities)}")
    conds = []
    for f in fractions:
        if not 0 < f <= 1:
            raise ParameterError(f"sweep fractions must be in (0, 1], got {f!r}")
        rate = round(ref * f, 1)
        load = base.with_(model="open", rate_rps=rate, requests=None, stages=())
        conds.append(Condition(f"{prefix}-{round(f * 100):d}", load))
    return tuple(conds)
