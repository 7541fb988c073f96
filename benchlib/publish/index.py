"""``index.html`` of a reports folder: every report in it (this invocation's with status and
time, earlier ones with their date), then every run kept there with its report and data."""

from __future__ import annotations

import datetime as _dt
import html
from pathlib import Path

import nbformat

from benchlib.publish.execute import NotebookRun
from benchlib.publish.history import runs_section

__all__ = ["write_index"]


def _read_executed(executed: Path) -> tuple[str, bool]:
    """The title (first markdown heading, else the file's stem) of an executed notebook, and
    whether it holds an error output (a failed run). An unreadable file: (stem, False)."""
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
        when = _dt.datetime.fromtimestamp(page_path.stat().st_mtime, _dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
        state = "failed" if failed else "ok"
        rows.append((stem, f'<tr><td><a href="{html.escape(page_path.name)}">{title}</a></td>'
                           f"<td>{html.escape(stem)}</td><td>{state} (an earlier invocation, {when})</td>"
                           "<td>–</td></tr>"))
    rows.sort(key=lambda r: r[0])
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
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
