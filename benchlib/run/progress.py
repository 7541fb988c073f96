"""Progress display for long runs, kept out of exported reports.

The runner emits events (dicts with ``event`` = ``start``, ``note``, ``trial``, ``skip``, ``settled``,
``block``, ``done``; a ``note`` with ``undone``: that many trials done are to run again);
:class:`Estimate` adds to each what a long run needs to show: trials and blocks
done of those planned, the seconds elapsed, and the seconds left, estimated from the trials'
measured wall times (each (condition, arm, peer tool or not) by its own mean; the overall
mean until it has one). A ``block`` event closes each block (every condition's trials of
that block number) and may carry ``decided``: the questions already decided on the trials
so far, in words that say on what basis (see :func:`benchlib.analysis.questions.decided_questions`:
what the sequential stopping rule says at its looks, or a fixed analysis marked
"uncorrected", since looking after every block is not covered by any correction). ``settled`` trials (not
run: sequential stopping found their questions settled) count as done and take no time. A renderer shows them:

* in JupyterLab: a tqdm bar (``tqdm.auto``) with the time left, and one line per block;
* on the CLI (``benchlib run`` / ``report``): one line per trial. The CLI sets
  ``$BENCHLIB_PROGRESS_FILE`` for the notebook's kernel; the runner appends one JSON line per
  event there (the text, and the seconds left) and the CLI prints the text as it comes, so the
  exported HTML stays clean (:func:`benchlib.publish.report.build_reports` adds the study's number
  and the time left over every study);
* otherwise (plain scripts): one line per event on stderr.

``progress=False`` shows nothing.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from benchlib.core import settings

__all__ = ["Estimate", "ProgressCallback", "format_duration", "format_event", "make_progress", "not_run_words",
           "parse_line"]

ProgressCallback = Callable[[Mapping[str, Any]], None]


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

    ``start`` carries ``total`` (trials planned), ``blocks`` and ``plan``: one
    ``[condition, arm, peer]`` per planned trial in execution order (``peer``: whether a peer
    tool runs in it). ``trial`` events carry ``seconds`` (the trial's wall time, repeats
    included); ``skip`` events (trials stored before) count as done and take no time.
    """

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self.now = now
        self.t0: float | None = None
        self.plan: list[tuple[str, str, bool]] = []
        self.total = 0
        self.blocks = 0
        self.done = 0
        self.ran = 0
        self.blocks_done = 0
        self.seconds: dict[tuple[str, str, bool], list[float]] = {}

    def _mean(self, key: tuple[str, str, bool]) -> float | None:
        own = self.seconds.get(key)
        if own:
            return sum(own) / len(own)
        same_arm = [s for k, v in self.seconds.items() if k[:2] == key[:2] for s in v]
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

    def update(self, ev: Mapping[str, Any]) -> dict[str, Any]:
        """``ev`` with ``trials_done``, ``blocks_done``, ``blocks``, ``elapsed_s`` and
        ``left_s`` added (for ``start``, ``trial``, ``skip``, ``block`` and ``done``)."""
        kind = ev.get("event")
        if kind == "start":
            self.t0 = self.now()
            self.plan = [(str(c), str(a), bool(p)) for c, a, p in ev.get("plan") or ()]
            self.total = int(ev.get("total", len(self.plan)))
            self.blocks = int(ev.get("blocks", 0))
        elif kind in ("trial", "skip", "settled"):
            if kind == "trial" and self.done < len(self.plan) and isinstance(ev.get("seconds"), (int, float)):
                self.seconds.setdefault(self.plan[self.done], []).append(float(ev["seconds"]))
                self.ran += 1
            self.done += 1
        elif kind == "block":
            self.blocks_done = int(ev.get("block", self.blocks_done - 1)) + 1
        elif kind == "note" and ev.get("undone"):  # trials set aside to run again (a block after a lost host)
            self.done = max(0, self.done - int(ev["undone"]))
        elapsed = self.now() - self.t0 if self.t0 is not None else 0.0
        left = 0.0 if kind == "done" else self.left_s()
        return {**ev, "trials_done": self.done, "blocks_done": self.blocks_done, "blocks_planned": self.blocks,
                "elapsed_s": elapsed, "left_s": left}


def _clock(ev: Mapping[str, Any]) -> str:
    if "elapsed_s" not in ev:
        return ""
    return f"{format_duration(ev.get('elapsed_s'))} elapsed, ~{format_duration(ev.get('left_s'))} left"


def not_run_words(unavailable: Mapping[str, str]) -> str:
    """``; not run: a, b (why); c (why)``: the arms a run skips, those with the same reason
    together (empty when every arm runs)."""
    by_reason: dict[str, list[str]] = {}
    for arm, why in unavailable.items():
        by_reason.setdefault(str(why), []).append(str(arm))
    return "".join(f"; not run: {', '.join(arms)} ({why})" for why, arms in by_reason.items())


def format_event(ev: Mapping[str, Any]) -> str:
    """One human line for an event (with the counts and times :class:`Estimate` adds, when present)."""
    kind = ev.get("event")
    study = f"[{ev.get('study')}]"
    if kind == "start":
        blocks = f" in {ev.get('blocks')} blocks" if ev.get("blocks") else ""
        return f"{study} run {ev.get('run_id')}: {ev.get('total')} trials planned{blocks}" + not_run_words(
            ev.get("unavailable") or {})
    if kind == "done":
        took = f" in {format_duration(ev.get('elapsed_s'))}" if "elapsed_s" in ev else ""
        return f"{study} run {ev.get('run_id')}: done ({ev.get('ran')} run, {ev.get('skipped')} stored before){took}"
    if kind == "note":  # a line the runner has to say (e.g. the wait for a quiet machine)
        return f"{study} {ev.get('text')}"
    if kind == "block":
        decided: Sequence[str] | None = ev.get("decided")
        words = ("; decided so far: " + "; ".join(decided) if decided else "; no question decided yet"
                 ) if decided is not None else ""
        return (f"{study} block {int(ev.get('block', 0)) + 1}/{ev.get('blocks_planned', ev.get('blocks'))} done "
                f"({ev.get('trials_done', '?')}/{ev.get('total')} trials; {_clock(ev)}){words}")
    head = f"{study} trial {int(ev.get('seq', 0)) + 1}/{ev.get('total')} {ev.get('condition')}/{ev.get('arm')} b{ev.get('block')}"
    if kind == "skip":
        return head + ": already stored, skipped"
    if kind == "settled":
        return head + ": not run, its questions are settled (sequential stopping)"
    tail = f" [{_clock(ev)}]" if "elapsed_s" in ev else ""
    if ev.get("status") != "ok":
        return head + f": {ev.get('status')} ({ev.get('reason')})" + tail
    rps = ev.get("achieved_rps")
    p50 = ev.get("p50_ms")
    bits = [f"{rps:,.0f} req/s" if isinstance(rps, (int, float)) else None,
            f"p50 {p50:.3f} ms" if isinstance(p50, (int, float)) else None]
    return head + ": " + ", ".join(b for b in bits if b) + tail


def parse_line(line: str) -> tuple[str, float | None]:
    """A line of ``$BENCHLIB_PROGRESS_FILE``: (its text, the run's seconds left or ``None``).
    Plain text lines (older kernels) come back as they are."""
    try:
        ev = json.loads(line)
    except ValueError:
        return line, None
    if not isinstance(ev, dict) or "text" not in ev:
        return line, None
    left = ev.get("left_s")
    return str(ev["text"]), float(left) if isinstance(left, (int, float)) and math.isfinite(left) else None


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython  # type: ignore[attr-defined]
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and ip.__class__.__name__ == "ZMQInteractiveShell"


def _estimated(render: ProgressCallback) -> ProgressCallback:
    est = Estimate()
    return lambda ev: render(est.update(ev))


def make_progress(progress: bool | ProgressCallback = True) -> ProgressCallback:
    """The renderer for ``progress`` (``True`` = pick automatically, ``False`` = none, or a
    callback, which gets the events with :class:`Estimate`'s counts and times added)."""
    if callable(progress):
        return _estimated(progress)
    if not progress:
        return lambda ev: None
    path = settings.PROGRESS_FILE.get()
    if path:
        def to_file(ev: Mapping[str, Any]) -> None:
            with open(path, "a") as fh:
                fh.write(json.dumps({"event": ev.get("event"), "study": ev.get("study"), "left_s": ev.get("left_s"),
                                     "text": format_event(ev)}) + "\n")

        return _estimated(to_file)
    if _in_notebook():
        from tqdm.auto import tqdm

        state: dict[str, Any] = {}

        def bar(ev: Mapping[str, Any]) -> None:
            if ev.get("event") == "start":
                state["bar"] = tqdm(total=int(ev.get("total", 0)), desc=str(ev.get("study")), unit="trial")
                if ev.get("unavailable"):
                    state["bar"].write(f"[{ev.get('study')}]" + not_run_words(ev["unavailable"]).removeprefix(";"))
            elif ev.get("event") in ("trial", "skip", "settled") and "bar" in state:
                state["bar"].set_postfix_str(f"~{format_duration(ev.get('left_s'))} left; "
                                             + format_event(ev).split(": ", 1)[-1].split(" [")[0][:50])
                state["bar"].update(1)
            elif ev.get("event") in ("block", "note") and "bar" in state:
                state["bar"].write(format_event(ev))
                if ev.get("undone"):
                    state["bar"].update(-int(ev["undone"]))
            elif ev.get("event") == "done" and "bar" in state:
                state["bar"].close()

        return _estimated(bar)

    def to_stderr(ev: Mapping[str, Any]) -> None:
        print(format_event(ev), file=sys.stderr, flush=True)

    return _estimated(to_stderr)
