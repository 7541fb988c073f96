"""The cost model: the wall time of a trial and of a block, measured from stored trials'
timestamps (pure).

A trial costs a fixed part (start-up, readiness and contract check, stop, the pause between
trials, repeats of failed attempts), its warm-up, its measured phase and any peer tool's run;
:func:`cost_model` measures each arm's parts from a pilot's timestamps, and
:meth:`CostModel.block_seconds` prices a block at any measured duration for the planners
(:mod:`benchlib.stats.planning`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from benchlib.core.errors import ParameterError

__all__ = ["ArmCost", "CostModel", "cost_model"]


@dataclass(frozen=True)
class ArmCost:
    """Wall time of one trial of an arm, in seconds.

    ``trial_seconds(d) = fixed_s + warmup_s + d * (1 + peer_factor)``: ``fixed_s`` is what a
    trial costs beyond its warm-up, measured phase and peer tool (start-up, readiness and
    contract check, stop, the pause between trials, repeats of failed attempts);
    ``peer_factor`` the peer tool's seconds per measured second (its run lasts as long as
    the measured phase; 0 without a peer check). ``n``: trials it was measured on.
    """

    arm: str
    fixed_s: float
    warmup_s: float
    peer_factor: float
    n: int

    def trial_seconds(self, duration_s: float) -> float:
        """One trial's wall time (s) at ``duration_s`` measured seconds."""
        return self.fixed_s + self.warmup_s + float(duration_s) * (1.0 + self.peer_factor)


@dataclass(frozen=True)
class CostModel:
    """Wall time of a block (every arm once), from stored trials' timestamps."""

    arms: tuple[ArmCost, ...]

    def block_seconds(self, duration_s: float, arms: Sequence[str] | None = None) -> float:
        """Seconds per block at ``duration_s`` (of ``arms``, default all)."""
        use = [a for a in self.arms if arms is None or a.arm in arms]
        return float(sum(a.trial_seconds(duration_s) for a in use))

    def table(self) -> pd.DataFrame:
        """One row per arm: fixed seconds, warm-up, peer factor, trials measured."""
        return pd.DataFrame([{"arm": a.arm, "fixed_s": a.fixed_s, "warmup_s": a.warmup_s,
                              "peer_factor": a.peer_factor, "n": a.n} for a in self.arms])


def cost_model(trials: pd.DataFrame) -> CostModel:
    """The cost of each arm's trials from stored timestamps.

    ``trials``: one row per stored trial slot with ``arm``, ``started`` and ``next_started``
    (timestamps: this slot's first attempt and the next slot's; ``next_started`` NaT for the
    last, which then counts ``finished`` plus ``between_s``), ``finished``, ``warmup_s``,
    ``duration_s`` (measured), ``peer_s`` (the peer tool's run, 0 if none) and optionally
    ``between_s``. A slot's cycle is ``next_started - started``; what is left after its warm-up,
    measured phase and peer run is its fixed cost. Timestamps with one-second resolution
    average out over the trials.
    """
    need = {"arm", "started", "next_started", "finished", "warmup_s", "duration_s", "peer_s"}
    missing = sorted(need - set(trials.columns))
    if missing:
        raise ParameterError(f"trials lack column(s) {missing}")
    t = trials.copy()
    between = t["between_s"].astype(float) if "between_s" in t.columns else pd.Series(0.0, index=t.index)
    cycle = (pd.to_datetime(t["next_started"]) - pd.to_datetime(t["started"])).dt.total_seconds()
    last = (pd.to_datetime(t["finished"]) - pd.to_datetime(t["started"])).dt.total_seconds() + between
    t["cycle_s"] = cycle.where(cycle.notna(), last)
    out = []
    for arm, g in t.groupby("arm", sort=False):
        g = g[g["cycle_s"].notna()]
        if not len(g):
            continue
        d = g["duration_s"].astype(float)
        peer = g["peer_s"].astype(float).fillna(0.0)
        fixed = g["cycle_s"] - g["warmup_s"].astype(float) - d - peer
        out.append(ArmCost(str(arm), float(fixed.mean()), float(g["warmup_s"].astype(float).median()),
                           float((peer / d).mean()), int(len(g))))
    return CostModel(tuple(out))
