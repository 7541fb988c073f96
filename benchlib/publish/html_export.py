"""Executed notebooks to HTML reports: nbconvert with benchlib's template (code inputs hidden,
nothing loaded from outside the page, so a report opens offline)."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbconvert import HTMLExporter
from nbformat.v4 import new_markdown_cell
from traitlets.config import Config

__all__ = ["LEAD_TAG", "REPORT_TEMPLATE", "TEMPLATES_DIR", "export_html", "lead_first"]


#: nbconvert templates shipped with benchlib (package data).
TEMPLATES_DIR = Path(__file__).resolve().parent / "templates" / "nbconvert"
#: The report's nbconvert template: ``lab`` without its CDN scripts.
REPORT_TEMPLATE = "benchlib_report"
#: The tag of the cells a report shows right after its first cell (the title): the answer a reader
#: came for (a study's claim block, the A/B gate) ahead of the run that produced it, which a
#: notebook must execute first.
LEAD_TAG = "lead"


def lead_first(cells: list[nbformat.NotebookNode]) -> list[nbformat.NotebookNode]:
    """``cells`` with those tagged :data:`LEAD_TAG` moved, in their order, right after the title:
    the first cell, or its first line when that cell is markdown opening with a ``# `` heading
    and more text (the rest of it follows the lead cells); the others keep their order."""
    def lead(c: nbformat.NotebookNode) -> bool:
        return LEAD_TAG in c.get("metadata", {}).get("tags", [])

    if not cells:
        return []
    first, rest = cells[0], cells[1:]
    leads = [c for c in rest if lead(c)]
    if not leads:
        return list(cells)
    head = [first]
    if first.cell_type == "markdown":
        title, _, more = first.source.partition("\n")
        if title.startswith("# ") and more.strip():
            head = [new_markdown_cell(title), new_markdown_cell(more.strip("\n"))]
    return [head[0], *leads, *head[1:], *(c for c in rest if not lead(c))]


def export_html(executed: str | Path, html_path: str | Path | None = None) -> Path:
    """Export an executed notebook to HTML with code cells' inputs hidden.

    The template (:data:`REPORT_TEMPLATE`) is nbconvert's ``lab`` without the scripts it
    would load from a CDN (require.js, widgets, MathJax, mermaid): a report loads nothing from
    outside itself and opens offline. Cells tagged ``remove-cell`` are dropped;
    ``remove-input`` / ``remove-output`` hide those parts (Jupyter Book tag names). Cells tagged
    :data:`LEAD_TAG` come right after the title (:func:`lead_first`); the executed notebook keeps
    the order they ran in.
    """
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
    nb.cells = lead_first(nb.cells)
    body, _ = exporter.from_notebook_node(nb)
    html_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = html_path.with_name(f".{html_path.name}.tmp")
    tmp.write_text(body, encoding="utf-8")
    tmp.replace(html_path)
    return html_path
