"""Progress display for long runs, kept out of exported reports.

The runner emits events (dicts with ``event`` = ``start``, ``trial``, ``skip``, ``settled``, ``done``);
a renderer shows them:

* in JupyterLab: a tqdm bar (``tqdm.auto``);
* on the CLI (``benchlib run`` / ``report``): one line per trial. The CLI sets
  ``$BENCHLIB_PROGRESS_FILE`` for the notebook's kernel; the runner appends one line per
  trial there and the CLI prints them as they come, so the exported HTML stays clean;
* otherwise (plain scripts): one line per trial on stderr.

``progress=False`` shows nothing.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Mapping

from benchlib import settings

__all__ = ["ProgressCallback", "format_event", "make_progress"]

ProgressCallback = Callable[[Mapping[str, Any]], None]


def format_event(ev: Mapping[str, Any]) -> str:
    """One human line for an event."""
    kind = ev.get("event")
    if kind == "start":
        return f"[{ev.get('study')}] run {ev.get('run_id')}: {ev.get('total')} trials planned"
    if kind == "done":
        return f"[{ev.get('study')}] run {ev.get('run_id')}: done ({ev.get('ran')} run, {ev.get('skipped')} stored before)"
    head = f"[{ev.get('study')}] trial {int(ev.get('seq', 0)) + 1}/{ev.get('total')} {ev.get('condition')}/{ev.get('arm')} b{ev.get('block')}"
    if kind == "skip":
        return head + ": already stored, skipped"
    if kind == "settled":
        return head + ": not run, its questions are settled (sequential stopping)"
    if ev.get("status") != "ok":
        return head + f": {ev.get('status')} ({ev.get('reason')})"
    rps = ev.get("achieved_rps")
    p50 = ev.get("p50_ms")
    bits = [f"{rps:,.0f} req/s" if isinstance(rps, (int, float)) else None,
            f"p50 {p50:.3f} ms" if isinstance(p50, (int, float)) else None]
    return head + ": " + ", ".join(b for b in bits if b)


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython  # type: ignore[attr-defined]
    except ImportError:
        return False
    ip = get_ipython()
    return ip is not None and ip.__class__.__name__ == "ZMQInteractiveShell"


def make_progress(progress: bool | ProgressCallback = True) -> ProgressCallback:
    """The renderer for ``progress`` (``True`` = pick automatically, ``False`` = none, or a callback)."""
    if callable(progress):
        return progress
    if not progress:
        return lambda ev: None
    path = settings.PROGRESS_FILE.get()
    if path:
        def to_file(ev: Mapping[str, Any]) -> None:
            with open(path, "a") as fh:
                fh.write(format_event(ev) + "\n")

        return to_file
    if _in_notebook():
        from tqdm.auto import tqdm

        state: dict[str, Any] = {}

        def bar(ev: Mapping[str, Any]) -> None:
            if ev.get("event") == "start":
                state["bar"] = tqdm(total=int(ev.get("total", 0)), desc=str(ev.get("study")), unit="trial")
            elif ev.get("event") in ("trial", "skip") and "bar" in state:
                state["bar"].set_postfix_str(format_event(ev).split(": ", 1)[-1][:60])
                state["bar"].update(1)
            elif ev.get("event") == "done" and "bar" in state:
                state["bar"].close()

        return bar

    def to_stderr(ev: Mapping[str, Any]) -> None:
        print(format_event(ev), file=sys.stderr, flush=True)

    return to_stderr
