"""One notebook executed into a report (``benchlib run``): its parameters checked against its
``parameters`` cell before anything runs, papermill in this interpreter's kernel (stoppable:
:mod:`benchlib.publish.kernel_stop`), its progress relayed, HTML exported, and the report kept
with the data of the runs it made (:mod:`benchlib.publish.history`)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import papermill as pm

from benchlib.core import errors, settings
from benchlib.publish.history import KeptReport, keep_report, scrub_paths
from benchlib.publish.html_export import export_html
from benchlib.publish.kernel import this_python_kernel
from benchlib.publish.kernel_stop import execute_stoppably
from benchlib.publish.notebooks import coerce_parameters, find_notebook, notebook_parameters, project_root
from benchlib.publish.relay import progress_relay, run_folders

__all__ = ["NotebookRun", "default_stop_grace_s", "run_notebook"]


@dataclass(frozen=True)
class NotebookRun:
    """The outcome of one notebook execution."""

    notebook: Path
    executed: Path
    html: Path | None
    seconds: float
    error: str | None = None
    #: the notebook stopped on bad input (a :class:`~benchlib.core.errors.UserError` raised in it)
    user_error: bool = False
    #: the folders of the runs the notebook executed (``$BENCHLIB_RUNS_FILE``), in order
    runs: tuple[Path, ...] = ()
    #: the report kept under its run with the run's data (:mod:`benchlib.publish.history`); ``None``
    #: when the notebook made no run
    kept: KeptReport | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def reason(self) -> str | None:
        """The error in one line (its first; a longer error says how many lines more are in
        the report), ``None`` when the notebook ran through."""
        if self.error is None:
            return None
        lines = [ln.strip() for ln in self.error.strip().splitlines() if ln.strip()]
        if len(lines) <= 1:
            return lines[0] if lines else self.error
        return f"{lines[0]} (+{len(lines) - 1} more line(s) in the report)"


def default_stop_grace_s() -> float:
    """Seconds a stopped notebook's kernel gets to stop its load and services before it is
    killed: ``$BENCHLIB_STOP_GRACE_S`` (:data:`benchlib.core.settings.STOP_GRACE_S`, default 60)."""
    return settings.STOP_GRACE_S.value()


def _is_user_error(ename: str) -> bool:
    """Is ``ename`` (an exception's class name from a kernel) one of benchlib's user errors?"""
    cls = getattr(errors, ename, None)
    return isinstance(cls, type) and issubclass(cls, errors.UserError)


def run_notebook(
    notebook: str | Path,
    parameters: Mapping[str, Any] | None = None,
    *,
    reports_dir: str | Path | None = None,
    html: bool = True,
    show: Callable[[str], None] | None = None,
    timeout_s: float | None = None,
    kernel_name: str | None = None,
    stop_grace_s: float | None = None,
    left: Callable[[float | None], str] | None = None,
    with_raw: bool = False,
) -> NotebookRun:
    """Execute ``notebook`` with papermill (parameters checked first) and export HTML.

    The executed notebook is ``<reports_dir>/<stem>.ipynb`` and the report
    ``<reports_dir>/<stem>.html`` (default ``reports/`` of the project): the newest report,
    at a stable address. Both are also kept as ``<reports_dir>/<stem>/<run_id>.html`` and
    ``.ipynb`` with the data of the runs the notebook made (``<reports_dir>/<stem>/<run_id>/``:
    run.json, the verdict tables' JSON, the per-trial summaries as CSV and, with ``with_raw``,
    the per-request rows; :func:`benchlib.publish.history.keep_report`). Progress lines
    from the notebook's runs go to ``show`` (e.g. ``print``), not into the report. A
    failing notebook is still exported (the error is in the HTML) and reported in
    :attr:`NotebookRun.error`. The kernel is this interpreter (``kernel_name=None``) unless
    another kernelspec is named. ``left``, given the seconds left in the notebook's current
    run, returns text appended to its progress lines (the time left over several notebooks).

    Raises
    ------
    benchlib.core.signals.Interrupted
        a stop signal (SIGINT, SIGTERM, SIGHUP) arrived; the kernel stopped its run first
        (at most ``stop_grace_s`` seconds, default :func:`default_stop_grace_s`); no HTML is exported.
    """
    nb_path = find_notebook(str(notebook))
    params = coerce_parameters(nb_path, parameters or {})
    grace = default_stop_grace_s() if stop_grace_s is None else float(stop_grace_s)
    if "progress" in notebook_parameters(nb_path) and "progress" not in params:
        params["progress"] = show is not None
    out_dir = Path(reports_dir) if reports_dir else project_root() / "reports"
    out_dir.mkdir(parents=True, exist_ok=True)
    executed = out_dir / f"{nb_path.stem}.ipynb"
    t0 = time.monotonic()
    error = None
    user_error = False
    with progress_relay(show, left) as progress_env, run_folders() as (runs_env, folders), \
            this_python_kernel() as own_kernel:
        env = {**progress_env, **runs_env}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)

        def execute(kernel_manager_class: type) -> None:
            pm.execute_notebook(str(nb_path), str(executed), parameters=params, cwd=str(nb_path.parent),
                                kernel_name=kernel_name or own_kernel, progress_bar=False, log_output=False,
                                execution_timeout=timeout_s, request_save_on_cell_execute=False,
                                kernel_manager_class=kernel_manager_class)

        try:
            execute_stoppably(execute, grace, show)
        except pm.PapermillExecutionError as exc:
            error = f"{exc.ename}: {exc.evalue}"
            user_error = _is_user_error(exc.ename)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    html_path = export_html(executed, out_dir / f"{nb_path.stem}.html") if html and executed.exists() else None
    if html_path is not None:  # the newest report names no absolute path either (the kept copies: history)
        html_path.write_text(scrub_paths(html_path.read_text(encoding="utf-8")), encoding="utf-8")
    kept = _keep(executed, html_path, out_dir, with_raw=with_raw, runs=tuple(folders))
    return NotebookRun(nb_path, executed, html_path, time.monotonic() - t0, error, user_error, tuple(folders), kept)


def _keep(executed: Path, html_path: Path | None, reports_dir: Path, *, with_raw: bool,
          runs: Sequence[Path]) -> KeptReport | None:
    """:func:`benchlib.publish.history.keep_report` of an execution (``None`` if nothing was executed);
    ``runs``: the run folders the runner recorded for it (``$BENCHLIB_RUNS_FILE``)."""
    return keep_report(executed, html_path, reports_dir, with_raw=with_raw, runs=runs) if executed.exists() else None
