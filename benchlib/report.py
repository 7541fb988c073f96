"""Notebooks to HTML reports: papermill executes, nbconvert exports (inputs hidden).

``benchlib run`` and ``benchlib report`` call these functions; so can a notebook or a
script. Parameters are checked against each notebook's ``parameters`` cell before anything
runs: an unknown name, or a value that does not fit the declared type, is refused with the
valid choices.
"""

from __future__ import annotations

import ast
import datetime as _dt
import html
import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from benchlib.errors import BenchlibError, ParameterError, UserError

__all__ = [
    "NotebookRun",
    "coerce_parameters",
    "export_html",
    "find_notebook",
    "list_notebooks",
    "notebook_parameters",
    "run_notebook",
    "write_index",
]


def project_root() -> Path:
    """The project folder (the one holding ``notebooks/`` and ``services/``)."""
    from benchlib.manifest import find_services_dir

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
    declared types (``int``, ``float``, ``bool``, ``str``, lists as Python literals).

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
    return out


@dataclass(frozen=True)
class NotebookRun:
    """The outcome of one notebook execution."""

    notebook: Path
    executed: Path
    html: Path | None
    seconds: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@contextmanager
def _progress_relay(show: Callable[[str], None] | None) -> Iterator[dict[str, str]]:
    """Set up ``$BENCHLIB_PROGRESS_FILE`` for the kernel and relay its lines to ``show``."""
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
                    show(line.rstrip("\n"))
                elif stop.is_set():
                    return
                else:
                    time.sleep(0.2)

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    try:
        yield {"BENCHLIB_PROGRESS_FILE": path}
    finally:
        stop.set()
        t.join(timeout=5)
        os.unlink(path)


@contextmanager
def _this_python_kernel() -> Iterator[str]:
    """A kernelspec that runs *this* interpreter, found first on ``JUPYTER_PATH`` while the
    context lasts; yields its name. So a notebook always executes in the environment that
    runs benchlib, whatever ``python3`` kernel another environment may have registered."""
    import hashlib
    import json
    import sys
    import tempfile

    name = "benchlib-" + hashlib.sha256(sys.executable.encode()).hexdigest()[:10]
    with tempfile.TemporaryDirectory(prefix="benchlib-kernel-") as tmp:
        spec_dir = Path(tmp) / "kernels" / name
        spec_dir.mkdir(parents=True)
        (spec_dir / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": f"Python {sys.version.split()[0]} (benchlib)", "language": "python",
        }))
        saved = os.environ.get("JUPYTER_PATH")
        os.environ["JUPYTER_PATH"] = tmp + (os.pathsep + saved if saved else "")
        try:
            yield name
        finally:
            if saved is None:
                os.environ.pop("JUPYTER_PATH", None)
            else:
                os.environ["JUPYTER_PATH"] = saved


def export_html(executed: str | Path, html_path: str | Path | None = None) -> Path:
    """Export an executed notebook to HTML with code cells' inputs hidden.

    Cells tagged ``remove-cell`` are dropped; ``remove-input`` / ``remove-output`` hide
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
    exporter = HTMLExporter(config=c, template_name="lab", exclude_input=True, exclude_input_prompt=True,
                            exclude_output_prompt=True)
    nb = nbformat.read(str(executed), as_version=4)
    body, _ = exporter.from_notebook_node(nb)
    html_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = html_path.with_name(f".{html_path.name}.tmp")
    tmp.write_text(body, encoding="utf-8")
    tmp.replace(html_path)
    return html_path


def run_notebook(
    notebook: str | Path,
    parameters: Mapping[str, Any] | None = None,
    *,
    reports_dir: str | Path | None = None,
    html: bool = True,
    show: Callable[[str], None] | None = None,
    timeout_s: float | None = None,
    kernel_name: str | None = None,
) -> NotebookRun:
    """Execute ``notebook`` with papermill (parameters checked first) and export HTML.

    The executed notebook is ``<reports_dir>/<stem>.ipynb`` and the report
    ``<reports_dir>/<stem>.html`` (default ``reports/`` of the project). Progress lines
    from the notebook's runs go to ``show`` (e.g. ``print``), not into the report. A
    failing notebook is still exported (the error is in the HTML) and reported in
    :attr:`NotebookRun.error`. The kernel is this interpreter (``kernel_name=None``) unless
    another kernelspec is named.
    """
    import papermill as pm

    nb_path = find_notebook(str(notebook))
    params = coerce_parameters(nb_path, parameters or {})
    if "progress" in notebook_parameters(nb_path) and "progress" not in params:
        params["progress"] = show is not None
    out_dir = Path(reports_dir) if reports_dir else project_root() / "reports"
    out_dir.mkdir(parents=True, exist_ok=True)
    executed = out_dir / f"{nb_path.stem}.ipynb"
    t0 = time.monotonic()
    error = None
    with _progress_relay(show) as env, _this_python_kernel() as own_kernel:
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            pm.execute_notebook(str(nb_path), str(executed), parameters=params, cwd=str(nb_path.parent),
                                kernel_name=kernel_name or own_kernel, progress_bar=False, log_output=False,
                                execution_timeout=timeout_s, request_save_on_cell_execute=False)
        except pm.PapermillExecutionError as exc:
            error = f"{exc.ename}: {exc.evalue}"
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    html_path = export_html(executed, out_dir / f"{nb_path.stem}.html") if html and executed.exists() else None
    return NotebookRun(nb_path, executed, html_path, time.monotonic() - t0, error)


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
    (marked with its date), so that running one notebook never drops the others from the index."""
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
</table></body></html>
"""
    path = reports_dir / "index.html"
    path.write_text(page, encoding="utf-8")
    return path


class NotebookFailed(BenchlibError):
    """One or more notebooks failed while building reports."""


def build_reports(
    notebooks: list[str] | None = None,
    parameters: Mapping[str, Any] | None = None,
    *,
    reports_dir: str | Path | None = None,
    show: Callable[[str], None] | None = None,
) -> list[NotebookRun]:
    """Execute and export ``notebooks`` (default: every study notebook), then write the index.

    ``parameters`` apply to every notebook that declares them (others are skipped for that
    notebook, so ``-p runtime docker`` works across all). Raises :class:`UserError` if a
    parameter is declared by none of the notebooks.
    """
    paths = [find_notebook(n) for n in notebooks] if notebooks else list_notebooks()
    params = dict(parameters or {})
    declared_any = set().union(*(notebook_parameters(p) for p in paths)) if paths else set()
    unknown = sorted(set(params) - declared_any)
    if unknown:
        raise UserError(f"parameter(s) {unknown} are declared by none of the notebooks; valid: {', '.join(sorted(declared_any))}")
    out = Path(reports_dir) if reports_dir else project_root() / "reports"
    runs = []
    for p in paths:
        own = {k: v for k, v in params.items() if k in notebook_parameters(p)}
        if show:
            show(f"== {p.stem}: executing" + (f" with {own}" if own else ""))
        run = run_notebook(p, own, reports_dir=out, show=show)
        if show:
            show(f"== {p.stem}: {'ok' if run.ok else 'FAILED: ' + str(run.error)} in {run.seconds / 60:.1f} min"
                 + (f" -> {run.html}" if run.html else ""))
        runs.append(run)
    write_index(runs, out)
    return runs
