#!/usr/bin/env python3
"""Extract the tables and Markdown of an executed notebook's outputs, and diff two of them.

Used to check that a refactoring leaves a study report unchanged in substance: execute the
notebook before and after on copies of the same stored runs (nothing re-measured), then::

    python scripts/report_tables.py BEFORE.ipynb AFTER.ipynb [--ignore REGEX ...]

prints a unified diff of every table (one line per row, cells joined by `` | ``) and every
Markdown output, in output order; plots are left out. ``--dump NB`` prints one notebook's
extraction. Exit status 1 when they differ.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path


class _Tables(HTMLParser):
    """Rows of every ``<table>`` in an HTML fragment, each row a list of cell texts."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "style":
            self._skip += 1
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._skip -= 1
        elif tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if any(self._row):
                self.rows.append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None and not self._skip:
            self._cell.append(data)


def extract(path: str | Path) -> list[str]:
    """The lines of every table and Markdown output of an executed notebook, in order."""
    nb = json.loads(Path(path).read_text())
    lines: list[str] = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "text/html" in data and "<table" in "".join(data["text/html"]):
                p = _Tables()
                p.feed("".join(data["text/html"]))
                lines.append("[table]")
                lines += [" | ".join(r) for r in p.rows]
            elif "text/markdown" in data:
                lines.append("[markdown]")
                lines += "".join(data["text/markdown"]).splitlines()
            elif out.get("output_type") == "stream":
                lines.append(f"[{out.get('name')}]")
                lines += "".join(out.get("text", "")).splitlines()
            elif out.get("output_type") == "error":
                lines.append(f"[error] {out.get('ename')}: {out.get('evalue')}")
    return lines


def _normalise(lines: list[str], ignore: list[str]) -> list[str]:
    pats = [re.compile(p) for p in ignore]
    out = []
    for line in lines:
        for p in pats:
            line = p.sub("<…>", line)
        out.append(line)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", nargs="?")
    ap.add_argument("after", nargs="?")
    ap.add_argument("--dump", help="print one notebook's extraction and exit")
    ap.add_argument("--ignore", action="append", default=[],
                    help="regular expression replaced by <…> in both before the diff (repeatable)")
    a = ap.parse_args(argv)
    if a.dump:
        print("\n".join(_normalise(extract(a.dump), a.ignore)))
        return 0
    if not (a.before and a.after):
        ap.error("give BEFORE and AFTER, or --dump NB")
    before = _normalise(extract(a.before), a.ignore)
    after = _normalise(extract(a.after), a.ignore)
    diff = list(difflib.unified_diff(before, after, a.before, a.after, lineterm="", n=1))
    print("\n".join(diff) if diff else f"identical: {len(before)} lines of tables and Markdown")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
