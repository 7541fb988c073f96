"""Notebooks to HTML reports: papermill executes, nbconvert exports (inputs hidden).

``benchlib run`` and ``benchlib report`` call these functions; so can a notebook or a
script. Parameters are checked against each notebook's ``parameters`` cell before anything
runs: an unknown name, or a value that does not fit the declared type, is refused with the
valid choices.

Stopping: while a notebook executes, SIGINT (Ctrl-C), SIGTERM and SIGHUP sent to the calling
process all take one path. The kernel gets SIGTERM, which its run turns into the Ctrl-C path
(:mod:`benchlib.core.signals`: load stopped, services stopped, stored trials kept); the kernel is
then shut down and :class:`~benchlib.core.signals.Interrupted` is raised. A kernel that has not
finished within ``stop_grace_s`` seconds is killed with its process group, and what it
started is swept (its cgroups' processes killed, its containers removed). The kernel itself
gets SIGTERM if the calling process dies without that (:mod:`benchlib.publish.kernel`).
"""

from __future__ import annotations

import ast
import datetime as _dt
import functools
import html
import math
import os
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence

from benchlib.core import settings
from benchlib.core.errors import BenchlibError, ParameterError, UserError
from benchlib.core.signals import Interrupted, recorded_signals, signal_name

if TYPE_CHECKING:
    from benchlib.publish.history import KeptReport

__all__ = [
    "NotRunArm",
    "NotebookRun",
    "default_stop_grace_s",
    "coerce_parameters",
    "export_html",
    "find_notebook",
    "last_duration_s",
    "list_notebooks",
    "notebook_parameters",
    "not_run_arms",
    "run_notebook",
    "summary_lines",
    "write_index",
]


#: nbconvert templates shipped with benchlib (package data).
TEMPLATES_DIR = Path(__file__).resolve().parent / "templates" / "nbconvert"
#: The report's nbconvert template: ``lab`` without its CDN scripts.
REPORT_TEMPLATE = "benchlib_report"


def project_root() -> Path:
    """The project folder (the one holding ``notebooks/`` and ``services/``)."""
    from benchlib.runtime.manifest import find_services_dir

    return find_services_dir().parent


def list_notebooks(directory: str | Path | None = None) -> list[Path]:
    """The study notebooks, in name order (``00_quickstart`` first)."""
    d = Path(directory) if directory else project_root() / "notebooks"
    return sorted(p for p in d.glob("[0-9][0-9]_*.ipynb"))


def find_notebook(name: str, directory: str | Path | None = None) -> Path:
    """A notebook by path, file name or stem (``00_quickstart``); unknown names list the valid ones."""
    p = Path(name)
    if p.suffix == ".ipynb" and p.exists():
        return p
    for nb in list_notebooks(directory):
        if name in (nb.name, nb.stem) or nb.stem.startswith(name + "_"):
            return nb
    valid = ", ".join(nb.stem for nb in list_notebooks(directory))
    raise ParameterError(f"unknown notebook {name!r}; valid: {valid}")


def notebook_parameters(notebook: str | Path) -> dict[str, dict[str, Any]]:
    """The notebook's parameters (name -> default, type name, help) from its ``parameters`` cell."""
    import papermill as pm

    params: dict[str, dict[str, Any]] = dict(pm.inspect_notebook(str(notebook)))
    return params


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def coerce_parameters(notebook: str | Path, raw: Mapping[str, Any]) -> dict[str, Any]:
    """Check names against the notebook's parameters and convert string values to the
    declared types (``int``, ``float``, ``bool``, ``str``, lists as Python literals). A
    non-empty ``run_id`` must be a plain folder name (:func:`benchlib.core.model.check_name`, the
    store's own rule), checked here so that a bad one is refused before a kernel starts.

    Raises
    ------
    ParameterError
        naming the unknown parameter (and the valid ones) or the value that does not fit.
    """
    declared = notebook_parameters(notebook)
    out: dict[str, Any] = {}
    for name, value in raw.items():
        if name not in declared:
            raise ParameterError(f"{Path(notebook).stem}: unknown parameter {name!r}; valid: {', '.join(declared)}")
        if not isinstance(value, str):
            out[name] = value
            continue
        type_name = str(declared[name].get("inferred_type_name") or "None").lower()
        try:
            if type_name == "int":
                out[name] = int(value)
            elif type_name == "float":
                out[name] = float(value)
                if not math.isfinite(out[name]):
                    raise ValueError("expected a finite number")
            elif type_name == "bool":
                low = value.lower()
                if low not in _TRUE | _FALSE:
                    raise ValueError("expected true/false")
                out[name] = low in _TRUE
            elif type_name == "str":
                out[name] = value
            else:
                try:
                    out[name] = ast.literal_eval(value)
                except (ValueError, SyntaxError):
                    out[name] = value
        except ValueError as exc:
            raise ParameterError(f"{Path(notebook).stem}: parameter {name!r} is declared {type_name}; "
                                 f"cannot use {value!r} ({exc})") from None
    if out.get("run_id"):
        from benchlib.core.model import check_name

        try:
            check_name("run id", out["run_id"])
        except ParameterError as exc:
            raise ParameterError(f"{Path(notebook).stem}: {exc}") from None
    return out


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


@contextmanager
def _progress_relay(show: Callable[[str], None] | None,
                    left: Callable[[float | None], str] | None = None) -> Iterator[dict[str, str]]:
    """Set up ``$BENCHLIB_PROGRESS_FILE`` for the kernel and relay its lines' text to ``show``
    (followed by ``left(seconds left in this run)`` for the lines that carry it)."""
    from benchlib.run.progress import parse_line

    if show is None:
        yield {}
        return
    import tempfile

    fd, path = tempfile.mkstemp(prefix="benchlib-progress-", suffix=".log")
    os.close(fd)
    stop = threading.Event()

    def follow() -> None:
        with open(path) as fh:
            while True:
                line = fh.readline()
                if line:
                    got = parse_line(line.rstrip("\n"))
                    show(got.text + (left(got.left_s) if left is not None and got.left_s is not None else ""))
                elif stop.is_set():
                    return
                else:
                    time.sleep(0.2)

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    try:
        yield {settings.PROGRESS_FILE.name: path}
    finally:
        stop.set()
        t.join(timeout=5)
        os.unlink(path)


@contextmanager
def _run_folders() -> Iterator[tuple[dict[str, str], list[Path]]]:
    """Set up ``$BENCHLIB_RUNS_FILE`` for the kernel; yields (its environment, a list that holds
    the run folders the runner recorded there once the context is left)."""
    import tempfile

    fd, path = tempfile.mkstemp(prefix="benchlib-runs-", suffix=".txt")
    os.close(fd)
    folders: list[Path] = []
    try:
        yield {settings.RUNS_FILE.name: path}, folders
    finally:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        folders.extend(dict.fromkeys(Path(line) for line in lines if line.strip()))
        os.unlink(path)


@contextmanager
def _this_python_kernel() -> Iterator[str]:
    """The kernel ``benchlib`` (:mod:`benchlib.publish.kernel`) for *this* interpreter, found first on
    ``JUPYTER_PATH`` while the context lasts; yields its name. The same name and command as the
    kernel ``scripts/setup.sh`` registers in the project's environment, so a notebook executes
    in the environment that runs benchlib, whatever kernel another environment registered."""
    import tempfile

    from benchlib.publish import kernel

    with tempfile.TemporaryDirectory(prefix="benchlib-kernel-") as tmp:
        kernel.install(tmp)
        saved = os.environ.get("JUPYTER_PATH")
        os.environ["JUPYTER_PATH"] = tmp + (os.pathsep + saved if saved else "")
        try:
            yield kernel.NAME
        finally:
            if saved is None:
                os.environ.pop("JUPYTER_PATH", None)
            else:
                os.environ["JUPYTER_PATH"] = saved


def export_html(executed: str | Path, html_path: str | Path | None = None) -> Path:
    """Export an executed notebook to HTML with code cells' inputs hidden.

    The template (:data:`REPORT_TEMPLATE`) is nbconvert's ``lab`` without the scripts it
    would load from a CDN (require.js, widgets, MathJax, mermaid): a report loads nothing from
    outside itself and opens offline. Cells tagged ``remove-cell`` are dropped; ``remove-input`` / ``remove-output`` hide
    those parts (Jupyter Book tag names).
    """
    import nbformat
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    executed = Path(executed)
    html_path = Path(html_path) if html_path else executed.with_suffix(".html")
    c = Config()
    c.TagRemovePreprocessor.enabled = True
    c.TagRemovePreprocessor.remove_cell_tags = {"remove-cell", "parameters", "injected-parameters"}
    c.TagRemovePreprocessor.remove_input_tags = {"remove-input"}
    c.TagRemovePreprocessor.remove_all_outputs_tags = {"remove-output"}
    exporter = HTMLExporter(config=c, template_name=REPORT_TEMPLATE, extra_template_basedirs=[str(TEMPLATES_DIR)],
                            exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    nb = nbformat.read(str(executed), as_version=4)
    body, _ = exporter.from_notebook_node(nb)
    html_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = html_path.with_name(f".{html_path.name}.tmp")
    tmp.write_text(body, encoding="utf-8")
    tmp.replace(html_path)
    return html_path


def default_stop_grace_s() -> float:
    """Seconds a stopped notebook's kernel gets to stop its load and services before it is
    killed: ``$BENCHLIB_STOP_GRACE_S`` (:data:`benchlib.core.settings.STOP_GRACE_S`, default 60)."""
    return settings.STOP_GRACE_S.value()


def _is_user_error(ename: str) -> bool:
    """Is ``ename`` (an exception's class name from a kernel) one of benchlib's user errors?"""
    from benchlib.core import errors

    cls = getattr(errors, ename, None)
    return isinstance(cls, type) and issubclass(cls, UserError)


def _recording_kernel_manager(started: list[Any]) -> type:
    """nbclient's kernel manager class, recording every manager whose kernel has started."""
    from jupyter_client.manager import AsyncKernelManager

    class RecordingKernelManager(AsyncKernelManager):  # type: ignore[misc]
        async def start_kernel(self, **kw: Any) -> None:
            await super().start_kernel(**kw)
            started.append(self)

    return RecordingKernelManager


def _kernel_pid(km: Any) -> int | None:
    pid = getattr(getattr(km, "provisioner", None), "pid", None)
    return int(pid) if pid else None


def _execute_stoppably(execute: Callable[[type], None], grace_s: float,
                       show: Callable[[str], None] | None) -> None:
    """Run ``execute(kernel_manager_class)`` (papermill) in a thread; on a stop signal, stop
    the kernel it started (see the module docstring) and raise :class:`Interrupted`."""
    started: list[Any] = []
    outcome: dict[str, BaseException] = {}

    def target() -> None:
        try:
            execute(_recording_kernel_manager(started))
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            outcome["error"] = exc
        finally:
            _close_thread_loop()

    worker = threading.Thread(target=target, name="benchlib-notebook", daemon=True)
    with recorded_signals() as caught:
        worker.start()
        while worker.is_alive() and not caught:
            worker.join(0.2)
        if caught:
            if show is not None:
                show(f"benchlib: {signal_name(caught[0])}: stopping the notebook's load and services "
                     f"(at most {grace_s:g} s)")
            _stop_kernels(started, worker, grace_s)
            raise Interrupted(caught[0])
    if "error" in outcome:
        raise outcome["error"]


def _close_thread_loop() -> None:
    """Close the event loop papermill's client made for this thread (it would be left open)."""
    import asyncio

    try:
        loop = asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        return
    if not loop.is_closed() and not loop.is_running():
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
    asyncio.set_event_loop(None)


def _stop_kernels(started: list[Any], worker: threading.Thread, grace_s: float) -> None:
    """SIGTERM to each kernel (its run stops cleanly); after ``grace_s`` seconds, SIGKILL to
    the kernels' process groups and a sweep of what they started."""
    deadline = time.monotonic() + grace_s
    signalled: set[int] = set()
    while worker.is_alive():
        for km in list(started):
            pid = _kernel_pid(km)
            if pid is not None and pid not in signalled:
                signalled.add(pid)
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        if time.monotonic() >= deadline:
            break
        worker.join(0.1)
    if not worker.is_alive():
        return
    for km in list(started):  # the clean stop took too long: the kernel and its load workers
        pid = _kernel_pid(km)
        if pid is not None:
            signalled.add(pid)
            try:
                os.killpg(pid, signal.SIGKILL)  # the kernel leads its own session
            except (ProcessLookupError, PermissionError):
                pass
    worker.join(15)
    _sweep_after_kill(signalled)


def _sweep_after_kill(kernel_pids: set[int]) -> None:
    """What killed kernels left: processes in their cgroups, load scratch folders, containers of
    dead owners."""
    from benchlib.runtime import cgroups

    for pid in kernel_pids:
        try:
            cgroups.kill_owned_by(pid)
        except OSError:
            pass
    from benchlib.loadgen.launch import sweep_scratch

    sweep_scratch()  # the killed kernels' load scratch folders in /dev/shm
    try:
        from benchlib.runtime.cleanup import sweep
        from benchlib.runtime.docker.connection import connect

        client = connect(timeout_s=5.0)
    except Exception:  # noqa: BLE001 - no Docker here: nothing to sweep
        return
    try:
        sweep(client=client, include_cgroups=False)
    except Exception:  # noqa: BLE001 - best effort on the way out
        pass
    finally:
        client.close()


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
    import papermill as pm

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
    with _progress_relay(show, left) as progress_env, _run_folders() as (runs_env, folders), \
            _this_python_kernel() as own_kernel:
        env = {**progress_env, **runs_env}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)

        def execute(kernel_manager_class: type) -> None:
            pm.execute_notebook(str(nb_path), str(executed), parameters=params, cwd=str(nb_path.parent),
                                kernel_name=kernel_name or own_kernel, progress_bar=False, log_output=False,
                                execution_timeout=timeout_s, request_save_on_cell_execute=False,
                                kernel_manager_class=kernel_manager_class)

        try:
            _execute_stoppably(execute, grace, show)
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
        from benchlib.publish.history import scrub_paths

        html_path.write_text(scrub_paths(html_path.read_text(encoding="utf-8")), encoding="utf-8")
    kept = _keep(executed, html_path, out_dir, with_raw=with_raw, runs=tuple(folders))
    return NotebookRun(nb_path, executed, html_path, time.monotonic() - t0, error, user_error, tuple(folders), kept)


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
    from benchlib.core.errors import StorageError
    from benchlib.store.runstore import RunStore

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


def _keep(executed: Path, html_path: Path | None, reports_dir: Path, *, with_raw: bool,
          runs: Sequence[Path]) -> KeptReport | None:
    """:func:`benchlib.publish.history.keep_report` of an execution (``None`` if nothing was executed);
    ``runs``: the run folders the runner recorded for it (``$BENCHLIB_RUNS_FILE``)."""
    from benchlib.publish.history import keep_report

    return keep_report(executed, html_path, reports_dir, with_raw=with_raw, runs=runs) if executed.exists() else None


def _read_executed(executed: Path) -> tuple[str, bool]:
    """The title (first markdown heading, else the file's stem) of an executed notebook, and
    whether it holds an error output (a failed run). An unreadable file: (stem, False)."""
    import nbformat

    try:
        nb = nbformat.read(str(executed), as_version=4)
    except (OSError, ValueError):
        return executed.stem, False
    title = next((line.lstrip("#").strip() for cell in nb.cells if cell.cell_type == "markdown"
                  for line in cell.source.splitlines() if line.startswith("#")), executed.stem)
    failed = any(o.get("output_type") == "error" for c in nb.cells if c.cell_type == "code"
                 for o in c.get("outputs", []))
    return title, failed


def write_index(runs: list[NotebookRun], reports_dir: str | Path) -> Path:
    """``index.html`` linking every report in ``reports_dir``: those of ``runs`` with their status
    and execution time (minutes), and every report already there from an earlier invocation
    (marked with its date), so that running one notebook never drops the others from the index;
    then every run kept under ``reports_dir`` with its id, date, report and data
    (:func:`benchlib.publish.history.runs_section`)."""
    from benchlib.publish.history import runs_section

    reports_dir = Path(reports_dir)
    rows = []
    fresh = {r.notebook.stem for r in runs}
    for r in runs:
        title = html.escape(_read_executed(r.executed)[0] if r.executed.exists() else r.notebook.stem)
        link = f'<a href="{html.escape(r.html.name)}">{title}</a>' if r.html else title
        status = "ok" if r.ok else f"failed: {html.escape(r.error or '')}"
        rows.append((r.notebook.stem, f"<tr><td>{link}</td><td>{html.escape(r.notebook.stem)}</td><td>{status}</td>"
                                      f"<td>{r.seconds / 60:.1f} min</td></tr>"))
    for page_path in sorted(reports_dir.glob("*.html")):
        stem = page_path.stem
        if stem == "index" or stem in fresh:
            continue
        executed = page_path.with_suffix(".ipynb")
        name, failed = _read_executed(executed) if executed.exists() else (stem, False)
        title = html.escape(name)
        when = _dt.datetime.fromtimestamp(page_path.stat().st_mtime, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        state = "failed" if failed else "ok"
        rows.append((stem, f'<tr><td><a href="{html.escape(page_path.name)}">{title}</a></td>'
                           f"<td>{html.escape(stem)}</td><td>{state} (an earlier invocation, {when})</td><td>–</td></tr>"))
    rows.sort(key=lambda r: r[0])
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>benchlib reports</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}td,th{{padding:.3em 1em;text-align:left}}</style>
</head><body><h1>benchlib reports</h1><p>Generated {stamp}.</p>
<table><tr><th>report</th><th>notebook</th><th>status</th><th>time</th></tr>
{''.join(row for _, row in rows)}
</table>
{runs_section(reports_dir)}
</body></html>
"""
    path = reports_dir / "index.html"
    path.write_text(page, encoding="utf-8")
    return path


def last_duration_s(executed: str | Path) -> float | None:
    """Seconds the executed notebook ``executed`` took when it was made (papermill's record),
    ``None`` if there is none or it cannot be read."""
    import json

    try:
        duration = json.loads(Path(executed).read_text(encoding="utf-8"))["metadata"]["papermill"]["duration"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return float(duration) if isinstance(duration, (int, float)) and math.isfinite(duration) else None


def _later_words(later: Sequence[float | None]) -> str:
    known = [s for s in later if s is not None]
    from benchlib.run.progress import format_duration

    unknown = len(later) - len(known)
    return (format_duration(sum(known)) if known else "?") + (f" (+ {unknown} never run here)" if unknown else "")


def _overall_left(k: int, n: int, run_left: float | None, later: Sequence[float | None]) -> str:
    """`` | study k/n, ~T left in all`` (this run's time left plus the later notebooks' last times)."""
    from benchlib.run.progress import format_duration

    if run_left is None:
        return f" | study {k}/{n}"
    known = [s for s in later if s is not None]
    unknown = len(later) - len(known)
    return (f" | study {k}/{n}, ~{format_duration(run_left + sum(known))} left in all"
            + (f" + {unknown} stud{'y' if unknown == 1 else 'ies'} never run here" if unknown else ""))


class NotebookFailed(BenchlibError):
    """One or more notebooks failed while building reports."""


def build_reports(
    notebooks: list[str] | None = None,
    parameters: Mapping[str, Any] | None = None,
    *,
    reports_dir: str | Path | None = None,
    show: Callable[[str], None] | None = None,
    with_raw: bool = False,
) -> list[NotebookRun]:
    """Execute and export ``notebooks`` (default: every study notebook), then write the index.
    Each report is also kept under its run (:func:`run_notebook`; ``with_raw`` copies the
    per-request rows too).

    ``parameters`` apply to every notebook that declares them (others are skipped for that
    notebook, so ``-p runtime docker`` works across all). Raises :class:`UserError` if a
    parameter is declared by none of the notebooks, and :class:`~benchlib.core.signals.Interrupted`
    when a stop signal ends the series (the index then lists the reports done so far).
    """
    paths = [find_notebook(n) for n in notebooks] if notebooks else list_notebooks()
    params = dict(parameters or {})
    declared_any = set().union(*(notebook_parameters(p) for p in paths)) if paths else set()
    unknown = sorted(set(params) - declared_any)
    if unknown:
        raise UserError(f"parameter(s) {unknown} are declared by none of the notebooks; valid: {', '.join(sorted(declared_any))}")
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
