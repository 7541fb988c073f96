"""What a run planned within a budget stored about its plan (pure).

A study given a time budget (:func:`benchlib.analysis.planned.run_planned`) runs a pilot, plans
the design within the budget and runs that design; the main run's run.json keeps, under
``pilot``, the pilot's study and run id and the plan
(:meth:`benchlib.stats.planning.budget.BudgetPlan.to_dict`). :class:`PlanRecord` reads it back:
:attr:`benchlib.store.results.Run.plan`. With the run's ``notebook_parameters`` (what the user
asked) and its experiment (the design that ran: ``parameters``), a stored budget run says both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from benchlib.store.records._convert import as_float

__all__ = ["PlanRecord"]


@dataclass(frozen=True)
class PlanRecord:
    """The design a pilot chose for a run, as stored.

    Attributes
    ----------
    pilot_study, pilot_run_id: where the pilot is stored (``<study>-pilot`` / ``<run_id>-pilot``).
    budget_min, target_mde: the budget (minutes, the pilot included) and the target MDE
        (relative, 0.05 = 5%) asked.
    pilot_blocks, pilot_minutes: the pilot's blocks and the wall minutes they took.
    source: where the variance components came from, in words.
    trials, duration_s, warmup_s: the design planned: blocks (the last look), measured seconds
        and warm-up seconds per trial (a load of a request count keeps its length: its
        ``duration_s`` is then the pilot's measured seconds).
    minutes: the planned design's predicted wall time (the pilot excluded).
    mde: metric -> the largest predicted MDE (relative) of its rows at that design.
    reaches: the target is predicted to be reached on every row within the budget.
    looks: the sequential looks (block counts) the run was analysed at; ``()``: the fixed test.
    notes: the planner's caveats, in words.
    raw: the stored dictionary.
    """

    pilot_study: str
    pilot_run_id: str
    budget_min: float
    target_mde: float
    pilot_blocks: int
    pilot_minutes: float
    source: str
    trials: int
    duration_s: float
    warmup_s: float
    minutes: float
    mde: Mapping[str, float] = field(default_factory=dict)
    reaches: bool = False
    looks: tuple[int, ...] = ()
    notes: tuple[str, ...] = ()
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any] | None) -> PlanRecord | None:
        """The record of run.json's ``pilot`` entry; ``None`` for a run without a budget (no
        entry, or one without a planned design)."""
        if not isinstance(d, Mapping) or d.get("trials") is None:
            return None
        return cls(
            pilot_study=str(d.get("study") or ""), pilot_run_id=str(d.get("run_id") or ""),
            budget_min=as_float(d.get("budget_min")), target_mde=as_float(d.get("target_mde")),
            pilot_blocks=int(d.get("pilot_blocks") or 0), pilot_minutes=as_float(d.get("pilot_minutes")),
            source=str(d.get("source") or ""), trials=int(d["trials"]), duration_s=as_float(d.get("duration_s")),
            warmup_s=as_float(d.get("warmup_s")), minutes=as_float(d.get("minutes")),
            mde={str(k): as_float(v) for k, v in (d.get("mde") or {}).items()}, reaches=bool(d.get("reaches")),
            looks=tuple(int(x) for x in d.get("looks") or ()), notes=tuple(str(n) for n in d.get("notes") or ()),
            raw=dict(d))

    def describe(self) -> str:
        """The design that ran, in words: ``"a pilot of 3 blocks (run `r-pilot`), then 14 blocks
        × 2.6 s measured after 0.7 s of warm-up (sequential looks at 8, 10, 12, 14 blocks), planned
        within 20 min for a target MDE of 5%"``."""
        looks = (f" (sequential looks at {', '.join(map(str, self.looks))} blocks)" if self.looks else "")
        return (f"a pilot of {self.pilot_blocks} blocks (run `{self.pilot_run_id}`), then {self.trials} blocks × "
                f"{self.duration_s:.3g} s measured after {self.warmup_s:.3g} s of warm-up{looks}, planned within "
                f"{self.budget_min:g} min for a target MDE of {100 * self.target_mde:g}%")
