"""Progress display for long runs, kept out of exported reports.

The runner emits typed events (:mod:`benchlib.run.events`: the run started, each planned
trial run, skipped or settled, each block done, a note, the run done); :class:`Estimate` adds
to each what a long run needs to show (:class:`~benchlib.run.events.Progress`): trials and
blocks done of those planned, the seconds elapsed, and the seconds left, estimated from the
trials' measured wall times (each (condition, arm, peer tool or not) by its own mean; the
overall mean until it has one). A block event may carry ``decided``: the questions already
decided on the trials so far, in words that say on what basis (see
:func:`benchlib.analysis.questions.decided_questions`: what the sequential stopping rule says
at its looks, or a fixed analysis marked "uncorrected", since looking after every block is not
covered by any correction). ``settled`` trials (not run: sequential stopping found their
questions settled) count as done and take no time. A renderer shows them:

* in JupyterLab: a tqdm bar (``tqdm.auto``) with the time left, and one line per block;
* on the CLI (``benchlib run`` / ``report``): one line per trial. The CLI sets
  ``$BENCHLIB_PROGRESS_FILE`` for the notebook's kernel; the runner appends one JSON line per
  event there (:class:`ProgressLine`: the text, and the seconds left) and the CLI prints the
  text as it comes, so the exported HTML stays clean
  (:func:`benchlib.publish.report.build_reports` adds the study's number and the time left
  over every study);
* otherwise (plain scripts): one line per event on stderr.

``progress=False`` shows nothing; a callback gets each :class:`~benchlib.run.events.Progress`.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from benchlib.core import settings
from benchlib.run.events import BlockDone, Event, Note, PlanSlot, Progress, RunDone, RunStarted, TrialEvent

__all__ = ["Estimate", "ProgressCallback", "ProgressLine", "Show", "format_duration", "format_event", "make_progress",
           "not_run_words", "parse_line"]

#: What gets the run's progress: each event with its counts and times.
ProgressCallback = Callable[[Progress], None]

#: What the runner calls with each event (:func:`make_progress` makes one).
Show = Callable[[Event], None]


def format_duration(seconds: float | None) -> str:
    """``42 s``, ``3.5 min``, ``1 h 05 min``; ``?`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    s = max(0.0, float(seconds))
    if s < 90:
        return f"{s:.0f} s"
    if s < 3600:
        return f"{s / 60:.1f} min"
    h, m = divmod(int(round(s / 60)), 60)
    return f"{h} h {m:02d} min"


class Estimate:
    """Counts and time left of one run, fed with the runner's events in order (pure: the
    clock is ``now``, a function returning seconds).

    :class:`~benchlib.run.events.RunStarted` carries the plan (each planned trial's condition,
    arm and whether a peer tool runs in it, in execution order); a ``trial`` event carries the
    trial's wall time (repeats included); ``skip`` (trials stored before) and ``settled`` count
    as done and take no time.
    """

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self.now = now
        self.t0: float | None = None
        self.plan: list[PlanSlot] = []
        self.total = 0
        self.blocks = 0
        self.done = 0
        self.ran = 0
        self.blocks_done = 0
        self.seconds: dict[PlanSlot, list[float]] = {}

    def _mean(self, key: PlanSlot) -> float | None:
        own = self.seconds.get(key)
        if own:
            return sum(own) / len(own)
        same_arm = [s for k, v in self.seconds.items() if (k.condition, k.arm) == (key.condition, key.arm) for s in v]
        every = same_arm or [s for v in self.seconds.values() for s in v]
        return sum(every) / len(every) if every else None

    def left_s(self) -> float | None:
        """Seconds left: the mean wall time of each remaining planned trial's kind; ``None``
        before any trial has been timed (or the plan is unknown)."""
        if not self.plan:
            return None
        total = 0.0
        for key in self.plan[self.done:]:
            m = self._mean(key)
            if m is None:
                return None
            total += m
        return total

    def update(self, ev: Event) -> Progress:
        """``ev`` with the trials and blocks done, the blocks planned, the seconds elapsed and
        the seconds left."""
        if isinstance(ev, RunStarted):
            self.t0 = self.now()
            self.plan = list(ev.plan)
            self.total = ev.total
            self.blocks = ev.blocks
        elif isinstance(ev, TrialEvent):
            if ev.kind == "trial" and self.done < len(self.plan) and ev.seconds is not None:
                self.seconds.setdefault(self.plan[self.done], []).append(float(ev.seconds))
                self.ran += 1
            self.done += 1
        elif isinstance(ev, BlockDone):
            self.blocks_done = ev.block + 1
        elif isinstance(ev, Note) and ev.undone:  # trials set aside to run again (a block after a lost host)
            self.done = max(0, self.done - ev.undone)
        elapsed = self.now() - self.t0 if self.t0 is not None else 0.0
        left = 0.0 if isinstance(ev, RunDone) else self.left_s()
        return Progress(ev, self.done, self.blocks_done, self.blocks, elapsed, left)


def _clock(p: Progress) -> str:
    return f"{format_duration(p.elapsed_s)} elapsed, ~{format_duration(p.left_s)} left"


def not_run_words(unavailable: Mapping[str, str]) -> str:
    """``; not run: a, b (why); c (why)``: the arms a run skips, those with the same reason
    together (empty when every arm runs)."""
    by_reason: dict[str, list[str]] = {}
    for arm, why in unavailable.items():
        by_reason.setdefault(str(why), []).append(str(arm))
    return "".join(f"; not run: {', '.join(arms)} ({why})" for why, arms in by_reason.items())


def format_event(p: Progress | Event) -> str:
    """One human line for an event (with the counts and times :class:`Estimate` adds, when given
    a :class:`~benchlib.run.events.Progress`)."""
    timed = p if isinstance(p, Progress) else None
    ev = p.event if isinstance(p, Progress) else p
    study = f"[{ev.study}]"
    if isinstance(ev, RunStarted):
        blocks = f" in {ev.blocks} blocks" if ev.blocks else ""
        return f"{study} run {ev.run_id}: {ev.total} trials planned{blocks}" + not_run_words(ev.unavailable)
    if isinstance(ev, RunDone):
        took = f" in {format_duration(timed.elapsed_s)}" if timed is not None else ""
        return f"{study} run {ev.run_id}: done ({ev.ran} run, {ev.skipped} stored before){took}"
    if isinstance(ev, Note):  # a line the runner has to say (e.g. the wait for a quiet machine)
        return f"{study} {ev.text}"
    if isinstance(ev, BlockDone):
        words = ("; decided so far: " + "; ".join(ev.decided) if ev.decided else "; no question decided yet"
                 ) if ev.decided is not None else ""
        done = (f"{timed.trials_done}/{ev.total} trials; {_clock(timed)}" if timed is not None else
                f"?/{ev.total} trials")
        planned = timed.blocks_planned if timed is not None else "?"
        return f"{study} block {ev.block + 1}/{planned} done ({done}){words}"
    head = f"{study} trial {ev.seq + 1}/{ev.total} {ev.condition}/{ev.arm} b{ev.block}"
    if ev.kind == "skip":
        return head + ": already stored, skipped"
    if ev.kind == "settled":
        return head + ": not run, its questions are settled (sequential stopping)"
    tail = f" [{_clock(timed)}]" if timed is not None else ""
    if ev.status != "ok":
        return head + f": {ev.status} ({ev.reason})" + tail
    rate = f"{ev.achieved_rps:,.0f} req/s" if ev.achieved_rps is not None else ""
    return head + ": " + rate + tail


@dataclass(frozen=True)
class ProgressLine:
    """A line of ``$BENCHLIB_PROGRESS_FILE``: an event's text, its kind and study, and the
    run's seconds left (``None``: not known)."""

    text: str
    kind: str = ""
    study: str = ""
    left_s: float | None = None

    @classmethod
    def of(cls, p: Progress) -> ProgressLine:
        """The line of an event."""
        return cls(format_event(p), p.kind, p.event.study, p.left_s)

    def to_json(self) -> str:
        """The line as written (one JSON object)."""
        return json.dumps({"event": self.kind, "study": self.study, "left_s": self.left_s, "text": self.text})


def parse_line(line: str) -> ProgressLine:
    """A line of ``$BENCHLIB_PROGRESS_FILE`` (:meth:`ProgressLine.to_json`); plain text lines
    (older kernels) come back as their text."""
    try:
        ev = json.loads(line)
    except ValueError:
        return ProgressLine(line)
    if not isinstance(ev, dict) or "text" not in ev:
        return ProgressLine(line)
    left = ev.get("left_s")
    return ProgressLine(str(ev["text"]), str(ev.get("event") or ""), str(ev.get("study") or ""),
                        float(left) if isinstance(left, (int, float)) and math.isfinite(left) else None)


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython  # type: ignore[attr-defined]
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and ip.__class__.__name__ == "ZMQInteractiveShell"


def _estimated(render: ProgressCallback) -> Show:
    est = Estimate()
    return lambda ev: render(est.update(ev))


def make_progress(progress: bool | ProgressCallback = True) -> Show:
    """What the runner calls with each event, for ``progress`` (``True`` = pick a renderer
    automatically, ``False`` = none, or a callback, which gets each event with
    :class:`Estimate`'s counts and times: a :class:`~benchlib.run.events.Progress`)."""
    if callable(progress):
        return _estimated(progress)
    if not progress:
        return lambda ev: None
    path = settings.PROGRESS_FILE.get()
    if path:
        def to_file(p: Progress) -> None:
            with open(path, "a") as fh:
                fh.write(ProgressLine.of(p).to_json() + "\n")

        return _estimated(to_file)
    if _in_notebook():
        from tqdm.auto import tqdm

        state: dict[str, Any] = {}

        def bar(p: Progress) -> None:
            ev = p.event
            if isinstance(ev, RunStarted):
                state["bar"] = tqdm(total=ev.total, desc=ev.study, unit="trial")
                if ev.unavailable:
                    state["bar"].write(f"[{ev.study}]" + not_run_words(ev.unavailable).removeprefix(";"))
            elif isinstance(ev, TrialEvent) and "bar" in state:
                state["bar"].set_postfix_str(f"~{format_duration(p.left_s)} left; "
                                             + format_event(p).split(": ", 1)[-1].split(" [")[0][:50])
                state["bar"].update(1)
            elif isinstance(ev, (BlockDone, Note)) and "bar" in state:
                state["bar"].write(format_event(p))
                if isinstance(ev, Note) and ev.undone:
                    state["bar"].update(-ev.undone)
            elif isinstance(ev, RunDone) and "bar" in state:
                state["bar"].close()

        return _estimated(bar)

    def to_stderr(p: Progress) -> None:
        print(format_event(p), file=sys.stderr, flush=True)

    return _estimated(to_stderr)
