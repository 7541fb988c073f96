"""What a run says while it runs: its progress events, typed (pure).

The runner emits, in order: :class:`RunStarted`; per planned trial a :class:`TrialEvent`
(``trial``: run and stored; ``skip``: stored before, by a run resumed; ``settled``: not run,
sequential stopping found its questions settled, and with ``stopped_after`` the run ends
there); a :class:`BlockDone` as each block completes; :class:`Note` for a line the runner has
to say (a wait for a quiet machine, a make-up trial, a lost load host; with ``undone``: that
many trials done are to run again); :class:`RunDone` at the end.
:class:`benchlib.run.progress.Estimate` adds what a long run needs to show (counts and times:
:class:`Progress`), which the renderers and a progress callback get.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from benchlib.core.design import PlannedTrial

__all__ = ["BlockDone", "Event", "Note", "PlanSlot", "Progress", "RunDone", "RunStarted", "TRIAL_KINDS", "TrialEvent"]

#: The kinds of :class:`TrialEvent`.
TRIAL_KINDS: tuple[str, ...] = ("trial", "skip", "settled")


@dataclass(frozen=True)
class PlanSlot:
    """One planned trial as the time estimate sees it: its condition and arm, and whether a
    peer tool runs in it (it takes longer)."""

    condition: str
    arm: str
    peer: bool = False


@dataclass(frozen=True)
class RunStarted:
    """The run starts: ``total`` trials planned in ``blocks`` blocks (0 when nothing can run),
    ``plan`` each planned trial in execution order, ``unavailable`` the arms not run, with why."""

    study: str
    run_id: str
    total: int
    blocks: int
    plan: tuple[PlanSlot, ...] = ()
    unavailable: Mapping[str, str] = field(default_factory=dict)
    kind: ClassVar[str] = "start"


@dataclass(frozen=True)
class TrialEvent:
    """A planned trial (``seq`` of ``total``, its condition, block, position and arm) was run
    (``kind`` ``trial``: its status, why not ok, the attempts repeated in its place, the load
    generator's achieved rate, the seconds it took, repeats included), found stored
    (``skip``) or left out because its questions are settled (``settled``; ``stopped_after``:
    the run ends here, after that many blocks)."""

    kind: str
    study: str
    total: int
    seq: int
    condition: str
    block: int
    position: int
    arm: str
    status: str = ""
    reason: str | None = None
    repeated: int = 0
    achieved_rps: float | None = None
    seconds: float | None = None
    stopped_after: int | None = None

    @classmethod
    def of(cls, kind: str, study: str, total: int, planned: PlannedTrial, *, status: str = "",
           reason: str | None = None, repeated: int = 0, achieved_rps: float | None = None,
           seconds: float | None = None, stopped_after: int | None = None) -> TrialEvent:
        """The event of ``planned`` (see the class)."""
        return cls(kind, study, total, planned.seq, planned.condition, planned.block, planned.position, planned.arm,
                   status, reason, repeated, achieved_rps, seconds, stopped_after)


@dataclass(frozen=True)
class BlockDone:
    """Block ``block`` (0-based; every condition's trials of it) is stored; ``decided``: the
    questions already decided on the trials so far, in words (``None``: no ``decided`` hook)."""

    study: str
    total: int
    block: int
    decided: tuple[str, ...] | None = None
    kind: ClassVar[str] = "block"


@dataclass(frozen=True)
class Note:
    """A line the runner has to say; ``undone``: that many trials counted done run again."""

    study: str
    text: str
    undone: int = 0
    kind: ClassVar[str] = "note"


@dataclass(frozen=True)
class RunDone:
    """The run ended: ``ran`` trials run by this execution, ``skipped`` found stored."""

    study: str
    run_id: str
    ran: int
    skipped: int
    kind: ClassVar[str] = "done"


#: Any event the runner emits.
Event = RunStarted | TrialEvent | BlockDone | Note | RunDone


@dataclass(frozen=True)
class Progress:
    """An event with the counts and times of the run so far (:class:`benchlib.run.progress.Estimate`).

    Attributes
    ----------
    event: what happened. trials_done: planned trials done (run, skipped or settled).
    blocks_done: blocks complete. blocks_planned: blocks planned.
    elapsed_s: seconds since the run started. left_s: seconds left, estimated (``None``
        before any trial was timed; 0 when done).
    """

    event: Event
    trials_done: int = 0
    blocks_done: int = 0
    blocks_planned: int = 0
    elapsed_s: float = 0.0
    left_s: float | None = None

    @property
    def kind(self) -> str:
        """The event's kind: ``start``, ``trial``, ``skip``, ``settled``, ``block``, ``note``, ``done``."""
        return self.event.kind
