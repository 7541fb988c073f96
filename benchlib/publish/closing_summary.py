"""The closing summary of ``benchlib run`` / ``report``: each notebook's outcome and report,
then the arms its runs did not run and why (read from the runs' stored ``run.json``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchlib.core.errors import StorageError
from benchlib.publish.execute import NotebookRun
from benchlib.store.runstore import RunStore

__all__ = ["NotRunArm", "not_run_arms", "summary_lines"]


@dataclass(frozen=True)
class NotRunArm:
    """An arm that a notebook's run did not run, and why (its run's ``run.json``)."""

    notebook: str
    #: the run's folder (``<data>/<study>/<run_id>``)
    run: Path
    arm: str
    reason: str


def not_run_arms(run: NotebookRun) -> list[NotRunArm]:
    """The arms the runs of ``run`` did not run (a missing toolchain, a runtime that is not
    available, a failed build), read from each run's stored ``run.json``."""
    out = []
    for folder in run.runs:
        try:
            record = RunStore(folder).read_run()
        except StorageError:
            continue  # the notebook reports an unreadable run itself
        if record is None:
            continue
        unavailable = record.unavailable
        order = list(record.arm_names())
        arms = sorted(unavailable, key=lambda a: order.index(a) if a in order else len(order))  # the study's order
        out += [NotRunArm(run.notebook.stem, folder, str(arm), str(unavailable[arm])) for arm in arms]
    return out


def summary_lines(runs: Sequence[NotebookRun]) -> list[str]:
    """The closing summary of ``benchlib run`` / ``report``: each notebook's outcome (a failed
    one's reason in one line) and report, then one line per arm not run with why (from the runs'
    stored data); "every arm ran" only when every notebook ran through."""
    lines = [f"summary: {sum(r.html is not None for r in runs)} of {len(runs)} report(s) written"]
    for r in runs:
        state = "ok" if r.ok else f"{'stopped on bad input' if r.user_error else 'FAILED'}: {r.reason}"
        lines.append(f"  {r.notebook.stem}: {state}" + (f" -> {r.html}" if r.html else " (no report)"))
    skipped = [a for r in runs for a in not_run_arms(r)]
    if skipped:
        lines.append(f"  {len(skipped)} arm(s) not run (the reports show them as \"not run\"):")
        lines += [f"    {a.notebook} (run {a.run.name}): {a.arm}: {a.reason}" for a in skipped]
    elif any(r.runs for r in runs) and all(r.ok for r in runs):
        lines.append("  every arm ran")
    return lines
