"""The one home of the times that README, notebooks and study pages quote.

``data/measurements.json`` holds every wall-clock figure a user reads before running
something: the first run on a new machine (set-up and cold builds included), each study
notebook at its default scale and at full scale, and the whole ``make report``. Each entry
says whether it was measured (with its date, run ids and the load average) or estimated
(and from what). Nobody edits times in README, notebooks or pages by hand:

* ``python -m benchlib._project.measurements record --reports reports/ --scale default --builds cached``
  reads the executed notebooks a ``make report`` left in ``reports/`` (papermill's start,
  end and duration) and the runs they made under ``data/runs/`` (their run ids and load
  average at start) and writes one entry per notebook;
  ``record-total --seconds S --what first-run`` records a whole command timed from outside.
* ``python -m benchlib._project.measurements sync`` rewrites the generated places: the cost table in
  README.md (between ``<!-- costs:begin -->`` and ``<!-- costs:end -->``), the ``[time: ...]``
  note in each notebook's ``full`` parameter comment, and a study page's
  ``<!-- time:begin -->`` block. ``check`` lists the places that disagree with the file
  (``tests/test_measurements.py`` runs it).

Times are minutes (float) in every record; durations in the file are seconds.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchlib.store.derived import scale_of

__all__ = ["Measurement", "load", "save", "record_reports", "record_total", "sync", "check",
           "readme_table", "notebook_note", "page_block", "replace_block", "write_generated", "main"]

SCALES = ("default", "full")
BUILDS = ("cached", "cold")
KINDS = ("measured", "estimated")
#: Keys of whole-command entries (``notebook`` is ``None`` for them).
TOTALS = {
    "first-run": "first `make report` on a new machine (set-up, cold builds, every study)",
    "report": "`make report` at the default scale, builds cached",
    "test": "`make test` on a new machine (`.ci/run` in a fresh clone, nothing cached)",
}

README_BEGIN, README_END = "<!-- costs:begin -->", "<!-- costs:end -->"
PAGE_BEGIN, PAGE_END = "<!-- time:begin -->", "<!-- time:end -->"
_NOTE = re.compile(r"\[time: [^\]]*\]")


@dataclass(frozen=True)
class Measurement:
    """One wall-clock figure.

    Attributes
    ----------
    what: a notebook stem (``00_quickstart``) or a key of :data:`TOTALS`.
    scale: ``default`` or ``full`` (the notebook's ``full`` parameter).
    builds: ``cached`` (service builds and peer tools already there) or ``cold``.
    kind: ``measured`` or ``estimated``.
    seconds: the wall-clock time, s.
    date: the day it was measured or estimated (ISO).
    run_ids: the runs it made (measured notebooks).
    loadavg: the 1-min load average: lowest and highest seen (at each run's start, or
        given by whoever timed it); ``None`` when not recorded.
    source: how it was obtained (a command, or what an estimate rests on).
    """

    what: str
    scale: str
    builds: str
    kind: str
    seconds: float
    date: str
    source: str
    run_ids: tuple[str, ...] = field(default=())
    loadavg: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        for name, value, valid in (("scale", self.scale, SCALES), ("builds", self.builds, BUILDS),
                                   ("kind", self.kind, KINDS)):
            if value not in valid:
                raise ValueError(f"measurement {self.what!r}: {name} {value!r} is not one of {', '.join(valid)}")
        if not (self.seconds > 0):
            raise ValueError(f"measurement {self.what!r}: seconds must be positive, got {self.seconds!r}")

    @property
    def key(self) -> tuple[str, str, str]:
        """(what, scale, builds): one entry per key; a newer record replaces an older one."""
        return (self.what, self.scale, self.builds)

    @property
    def minutes(self) -> float:
        return self.seconds / 60.0

    def words(self) -> str:
        """``4.1 min`` (measured) or ``about 65 min`` (estimated); whole minutes from 60 min on,
        hours from 120 min on."""
        m = self.minutes
        text = f"{m / 60:.1f} h" if m >= 120 else (f"{m:.0f} min" if m >= 60 else f"{m:.1f} min")
        return text if self.kind == "measured" else f"about {text}"


def default_path() -> Path:
    """``data/measurements.json`` of this project."""
    from benchlib.publish.notebooks import project_root

    return project_root() / "data" / "measurements.json"


def load(path: str | Path | None = None) -> list[Measurement]:
    """Every entry of the measurements file (a clear error naming the entry that is wrong)."""
    p = Path(path) if path else default_path()
    raw = json.loads(p.read_text(encoding="utf-8"))
    out = []
    for i, e in enumerate(raw.get("measurements", [])):
        try:
            out.append(Measurement(**{**e, "run_ids": tuple(e.get("run_ids", ())),
                                      "loadavg": tuple(e["loadavg"]) if e.get("loadavg") else None}))
        except TypeError as exc:
            raise ValueError(f"{p}: entry {i} ({e.get('what')!r}): {exc}") from None
    return out


def save(entries: Iterable[Measurement], path: str | Path | None = None) -> Path:
    """Write the file, sorted by key; one entry per key (the last given wins)."""
    p = Path(path) if path else default_path()
    by_key = {e.key: e for e in entries}
    rows = [asdict(by_key[k]) for k in sorted(by_key)]
    for r in rows:
        r["run_ids"] = list(r["run_ids"])
        r["loadavg"] = list(r["loadavg"]) if r["loadavg"] else None
    doc = {"about": "Wall-clock times quoted in README, notebooks and study pages; "
                    "written by `python -m benchlib._project.measurements` (see its docstring). Seconds.",
           "measurements": rows}
    p.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return p


def merge(old: Iterable[Measurement], new: Iterable[Measurement]) -> list[Measurement]:
    """``old`` with each key that ``new`` has replaced."""
    by_key = {e.key: e for e in old}
    by_key.update({e.key: e for e in new})
    return [by_key[k] for k in sorted(by_key)]


# -- recording -------------------------------------------------------------------------------

def record_reports(reports_dir: str | Path, *, scale: str, builds: str,
                   runs_root: str | Path | None = None, source: str = "make report") -> list[Measurement]:
    """One measured entry per executed notebook in ``reports_dir`` that ran at ``scale`` (the
    notebook's ``full`` parameter; notebooks at the other scale are left out): papermill's
    duration, less the seconds its runs waited for a quiet machine (``--settle`` is not the notebook's cost),
    with the runs it made (found by time under ``runs_root``) and their load averages."""
    from benchlib.store.results import parse_utc, runs_started_between
    from benchlib.store.runstore import default_runs_root

    root = Path(runs_root) if runs_root else default_runs_root()
    out: list[Measurement] = []
    skipped: list[str] = []
    for executed in sorted(Path(reports_dir).glob("*.ipynb")):
        meta = json.loads(executed.read_text(encoding="utf-8")).get("metadata", {}).get("papermill", {})
        if not meta.get("duration") or not meta.get("start_time") or meta.get("exception"):
            continue
        if scale_of(meta.get("parameters") or {}) != scale:
            skipped.append(executed.stem)
            continue
        start, end = parse_utc(meta["start_time"]), parse_utc(meta["end_time"])
        runs = runs_started_between(root, start, end)
        loads = [r.loadavg_1min for r in runs if r.loadavg_1min is not None]
        out.append(Measurement(
            what=executed.stem, scale=scale, builds=builds, kind="measured",
            seconds=round(float(meta["duration"]) - sum(r.settle_wait_s for r in runs), 1),
            date=start.date().isoformat(), source=source, run_ids=tuple(r.store.run_id for r in runs),
            loadavg=(min(loads), max(loads)) if loads else None))
    if not out:
        other = f" ({', '.join(skipped)} ran at the other scale)" if skipped else ""
        raise ValueError(f"{reports_dir}: no executed notebook at {scale} scale with papermill's timing{other} "
                         f"(run `make report` first{'' if scale == 'default' else ' with -p full true'})")
    return out


def record_total(what: str, seconds: float, *, scale: str = "default", builds: str = "cached",
                 loadavg: tuple[float, float] | None = None, source: str, date: str | None = None) -> Measurement:
    """A whole command timed from outside (``what`` is a key of :data:`TOTALS`)."""
    if what not in TOTALS:
        raise ValueError(f"unknown total {what!r}; valid: {', '.join(TOTALS)}")
    return Measurement(what=what, scale=scale, builds=builds, kind="measured", seconds=seconds,
                       date=date or dt.date.today().isoformat(), source=source, loadavg=loadavg)


# -- rendering -------------------------------------------------------------------------------

def _find(entries: Sequence[Measurement], what: str, scale: str, builds: str = "cached") -> Measurement | None:
    return next((e for e in entries if e.key == (what, scale, builds)), None)


def _load_words(e: Measurement) -> str:
    """How ``e`` was obtained, in words: ``measured 2026-12-03, load average 0.70-1.80, run <id>``
    or ``estimated: <source>``."""
    if e.kind != "measured":
        return f"estimated: {e.source}"
    la = "" if not e.loadavg else (f", load average {e.loadavg[0]:.2f}" if e.loadavg[0] == e.loadavg[1] else
                                    f", load average {e.loadavg[0]:.2f}-{e.loadavg[1]:.2f}")
    runs = f", run {', '.join(e.run_ids)}" if len(e.run_ids) == 1 else (f", {len(e.run_ids)} runs" if e.run_ids else "")
    return f"measured {e.date}{la}{runs}"


def _cell(e: Measurement | None) -> str:
    return f"{e.words()} ({_load_words(e)})" if e else "not measured"


def notebooks_in(entries: Sequence[Measurement]) -> list[str]:
    return sorted({e.what for e in entries if e.what not in TOTALS})


def readme_table(entries: Sequence[Measurement]) -> str:
    """The README's cost table (markdown), from the file alone."""
    lines = ["| what | time | how it was obtained |", "|---|---|---|"]
    for what, label in TOTALS.items():
        for e in (x for x in entries if x.what == what):
            lines.append(f"| {label} | **{e.words()}** | {_load_words(e)} |")
    lines += ["", "| notebook | default scale (builds cached) | full scale (`-p full true`) |", "|---|---|---|"]
    for nb in notebooks_in(entries):
        lines.append(f"| `{nb}` | {_cell(_find(entries, nb, 'default'))} | {_cell(_find(entries, nb, 'full'))} |")
    return "\n".join(lines)


def notebook_note(entries: Sequence[Measurement], notebook: str) -> str:
    """``[time: default 4.1 min, full scale about 65 min (estimated); README, "What it costs"]``."""
    d, f = _find(entries, notebook, "default"), _find(entries, notebook, "full")
    parts = [f"default {d.words()}" if d else "default not measured",
             (f"full scale {f.words()}" + ("" if f.kind == "measured" else " (estimated)")) if f else "full scale not measured"]
    return f"[time: {', '.join(parts)}, builds cached; README, \"What it costs\"]"


def page_block(entries: Sequence[Measurement], notebook: str) -> str:
    """A study page's time lines (between the page markers)."""
    d, f = _find(entries, notebook, "default"), _find(entries, notebook, "full")
    return (f"Time on a 2-core machine with builds cached: default scale {_cell(d)}; "
            f"full scale (`-p full true`) {_cell(f)}. The first run on a new machine also builds "
            "every service: README, \"What it costs\".")


def replace_block(text: str, begin: str, end: str, body: str) -> str:
    """``text`` with what lies between the marker ``begin`` and the first ``end`` after it
    replaced by ``body``."""
    i = text.find(begin)
    j = text.find(end, i + len(begin)) if i >= 0 else -1
    if i < 0 or j < 0:
        raise ValueError(f"markers {begin} ... {end} not found")
    return text[: i + len(begin)] + "\n" + body + "\n" + text[j:]


def _notebook_with_note(text: str, note: str) -> str:
    """The notebook's JSON text with its ``[time: ...]`` note replaced (exactly one expected)."""
    nb = json.loads(text)
    hits = 0
    for cell in nb["cells"]:
        if "parameters" not in cell.get("metadata", {}).get("tags", []):
            continue
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        hits += len(_NOTE.findall(src))
        new = _NOTE.sub(note.replace("\\", "\\\\"), src)
        cell["source"] = new.splitlines(keepends=True)
    if hits != 1:
        raise ValueError(f"expected one [time: ...] note in the parameters cell, found {hits}")
    return json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def _targets(root: Path, entries: Sequence[Measurement]) -> list[tuple[Path, str]]:
    """(file, its text as generated) for every generated place."""
    out = []
    readme = root / "README.md"
    out.append((readme, replace_block(readme.read_text(encoding="utf-8"), README_BEGIN, README_END,
                                       readme_table(entries))))
    for nb in notebooks_in(entries):
        path = root / "notebooks" / f"{nb}.ipynb"
        if path.exists():
            out.append((path, _notebook_with_note(path.read_text(encoding="utf-8"), notebook_note(entries, nb))))
    for page in sorted((root / "docs" / "studies").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        m = re.search(r"<!-- time:begin notebook=(\S+) -->", text)
        if m:
            begin = m.group(0)
            out.append((page, replace_block(text, begin, PAGE_END, page_block(entries, m.group(1)))))
    return out


def sync(root: str | Path | None = None, path: str | Path | None = None) -> list[Path]:
    """Rewrite every generated place from the file; the files changed."""
    from benchlib.publish.notebooks import project_root

    r = Path(root) if root else project_root()
    return write_generated(_targets(r, load(path or r / "data" / "measurements.json")))


def write_generated(targets: Iterable[tuple[Path, str]]) -> list[Path]:
    """Write each (file, its text as generated) that differs; the files changed."""
    changed = []
    for p, text in targets:
        if p.read_text(encoding="utf-8") != text:
            p.write_text(text, encoding="utf-8")
            changed.append(p)
    return changed


def check(root: str | Path | None = None, path: str | Path | None = None) -> list[Path]:
    """The generated places that disagree with the file (empty: all agree)."""
    from benchlib.publish.notebooks import project_root

    r = Path(root) if root else project_root()
    return [p for p, text in _targets(r, load(path or r / "data" / "measurements.json"))
            if p.read_text(encoding="utf-8") != text]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchlib._project.measurements", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="entries from the executed notebooks of a make report")
    rec.add_argument("--reports", default="reports")
    rec.add_argument("--runs", default=None, help="runs folder (default: data/runs)")
    rec.add_argument("--scale", choices=SCALES, required=True)
    rec.add_argument("--builds", choices=BUILDS, required=True)
    rec.add_argument("--source", default="make report")
    tot = sub.add_parser("record-total", help="a whole command timed from outside")
    tot.add_argument("--what", choices=sorted(TOTALS), required=True)
    tot.add_argument("--seconds", type=float, required=True)
    tot.add_argument("--builds", choices=BUILDS, required=True)
    tot.add_argument("--loadavg", type=float, nargs=2, metavar=("LOW", "HIGH"))
    tot.add_argument("--source", required=True)
    sub.add_parser("sync", help="rewrite README, notebooks and pages from the file")
    sub.add_parser("check", help="list the places that disagree with the file (exit 1 if any)")
    args = ap.parse_args(argv)
    if args.cmd == "record":
        new = record_reports(args.reports, scale=args.scale, builds=args.builds, runs_root=args.runs, source=args.source)
        save(merge(load(), new))
        print(f"recorded {len(new)} notebook(s): " + ", ".join(f"{e.what} {e.minutes:.1f} min" for e in new))
    elif args.cmd == "record-total":
        e = record_total(args.what, args.seconds, builds=args.builds,
                         loadavg=tuple(args.loadavg) if args.loadavg else None, source=args.source)
        save(merge(load(), [e]))
        print(f"recorded {e.what}: {e.minutes:.1f} min")
    elif args.cmd == "sync":
        for p in sync():
            print(f"updated {p}")
    else:
        bad = check()
        for p in bad:
            print(f"disagrees with data/measurements.json: {p} (run `python -m benchlib._project.measurements sync`)")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
