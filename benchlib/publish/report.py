"""A series of study notebooks into reports (``benchlib report``, ``make report``): each
executed and exported in turn (:mod:`benchlib.publish.execute`), progress lines carrying the
time left over the whole series, then the index (:mod:`benchlib.publish.index`).

Parameters are checked against each notebook's ``parameters`` cell before anything runs
(:mod:`benchlib.publish.notebooks`); a stop signal ends the series the way it ends one
notebook (:mod:`benchlib.publish.kernel_stop`), and the index then lists the reports done so far.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchlib.core.errors import UserError
from benchlib.publish.execute import NotebookRun, run_notebook
from benchlib.publish.index import write_index
from benchlib.publish.notebooks import find_notebook, notebook_parameters, project_root, report_notebooks
from benchlib.run.progress import format_duration

__all__ = ["build_reports", "last_duration_s"]


def last_duration_s(executed: str | Path) -> float | None:
    """Seconds the executed notebook ``executed`` took when it was made (papermill's record),
    ``None`` if there is none or it cannot be read."""
    try:
        duration = json.loads(Path(executed).read_text(encoding="utf-8"))["metadata"]["papermill"]["duration"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return float(duration) if isinstance(duration, (int, float)) and math.isfinite(duration) else None


def _later_words(later: Sequence[float | None]) -> str:
    known = [s for s in later if s is not None]
    unknown = len(later) - len(known)
    return (format_duration(sum(known)) if known else "?") + (f" (+ {unknown} never run here)" if unknown else "")


def _overall_left(k: int, n: int, run_left: float | None, later: Sequence[float | None]) -> str:
    """`` | study k/n, ~T left in all`` (this run's time left plus the later notebooks' last times)."""
    if run_left is None:
        return f" | study {k}/{n}"
    known = [s for s in later if s is not None]
    unknown = len(later) - len(known)
    return (f" | study {k}/{n}, ~{format_duration(run_left + sum(known))} left in all"
            + (f" + {unknown} stud{'y' if unknown == 1 else 'ies'} never run here" if unknown else ""))


def build_reports(
    notebooks: list[str] | None = None,
    parameters: Mapping[str, Any] | None = None,
    *,
    reports_dir: str | Path | None = None,
    show: Callable[[str], None] | None = None,
    with_raw: bool = False,
) -> list[NotebookRun]:
    """Execute and export ``notebooks`` (default: the study notebooks of the report set,
    :func:`~benchlib.publish.notebooks.report_notebooks`), then write the index.
    Each report is also kept under its run (:func:`run_notebook`; ``with_raw`` copies the
    per-request rows too).

    ``parameters`` apply to every notebook that declares them (others are skipped for that
    notebook, so ``-p runtime docker`` works across all). Raises :class:`UserError` if a
    parameter is declared by none of the notebooks, and :class:`~benchlib.core.signals.Interrupted`
    when a stop signal ends the series (the index then lists the reports done so far).
    """
    paths = [find_notebook(n) for n in notebooks] if notebooks else report_notebooks()
    params = dict(parameters or {})
    declared_any = set().union(*(notebook_parameters(p) for p in paths)) if paths else set()
    unknown = sorted(set(params) - declared_any)
    if unknown:
        raise UserError(f"parameter(s) {unknown} are declared by none of the notebooks; "
                        f"valid: {', '.join(sorted(declared_any))}")
    out = Path(reports_dir) if reports_dir else project_root() / "reports"
    runs: list[NotebookRun] = []
    before = {p.stem: last_duration_s(out / f"{p.stem}.ipynb") for p in paths}  # read before they are replaced
    try:
        for k, p in enumerate(paths, 1):
            own = {n: v for n, v in params.items() if n in notebook_parameters(p)}
            later = [before[q.stem] for q in paths[k:]]
            if show:
                show(f"== {p.stem} (study {k} of {len(paths)}): executing" + (f" with {own}" if own else "")
                     + (f"; the ones after it took {_later_words(later)} last time" if later else ""))
            left = functools.partial(_overall_left, k, len(paths), later=later)
            run = run_notebook(p, own, reports_dir=out, show=show, left=left, with_raw=with_raw)
            if show:
                show(f"== {p.stem} (study {k} of {len(paths)}): {'ok' if run.ok else 'FAILED: ' + str(run.error)} "
                     f"in {run.seconds / 60:.1f} min" + (f" -> {run.html}" if run.html else ""))
            runs.append(run)
    finally:  # also when a stop signal ends the series: the reports done so far are listed
        if runs or paths:
            out.mkdir(parents=True, exist_ok=True)
            write_index(runs, out)
    return runs
