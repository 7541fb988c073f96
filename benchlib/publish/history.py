"""Kept reports: every run's report stays, with the data its verdicts came from.

``benchlib run`` and ``benchlib report`` write a notebook's newest report at a stable address,
``reports/<notebook>.html`` (beside it the executed notebook); :func:`keep_report` then keeps a
copy under the run it reports on, and that run's data::

    reports/
      index.html                      every notebook's newest report, and every kept run
      <study>.html, <study>.ipynb     the newest report (the stable address)
      <study>/<run_id>.html, .ipynb   the report of run <run_id> (kept: never overwritten by
                                      another run's report)
      <study>/<run_id>/               what the report's verdicts came from, per run:
          run.json                    parameters, plan, provenance (as stored)
          derived/*.json              the verdict tables' rows as the notebook computed them
                                      (``comparison*.json``: ``Comparison.to_json``)
          summaries.csv               one row per trial (:meth:`benchlib.store.results.Run.summaries`)
          trials/, logs/              the per-request rows and service logs: only when asked
                                      (``--with-raw``; they can weigh hundreds of MB)

``<study>/<run_id>/`` mirrors the stored run folder ``data/runs/<study>/<run_id>/``; with the
raw rows it is a complete copy that :func:`benchlib.store.results.open_run` reads.

Which runs a notebook made is read from the executed notebook alone (papermill's record): the
runs of its study whose provenance was collected while it executed
(:func:`benchlib.store.results.runs_started_between`), and the run its ``run_id`` parameter named
(a resumed run keeps its first start time) with the runs named after it (``<run_id>-sweep``).
The report is named after the first of them.

No kept file holds an absolute path of the machine that made it (:func:`scrub_paths`): a path
inside the project is written relative to it, one outside it as ``<outside the project>``.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib.core.errors import StorageError
from benchlib.store.results import Run, open_run, parse_utc, runs_started_between
from benchlib.store.runstore import RunStore

__all__ = ["KeptReport", "KeptRun", "keep_report", "keep_run", "kept_runs", "runs_made", "runs_section",
           "scrub_paths"]

#: The stored run's folders copied only when the raw rows are asked for.
RAW_FOLDERS = ("trials", "logs")


@dataclass(frozen=True)
class KeptReport:
    """A report kept under its run.

    Attributes
    ----------
    study: the notebook's stem (the study's name).
    run_id: the first run the notebook made or resumed; names the report.
    html: ``<reports>/<study>/<run_id>.html`` (``None`` when no HTML was exported).
    executed: ``<reports>/<study>/<run_id>.ipynb``.
    runs: the kept run folders (``<reports>/<study>/<run id>/``), the report's run first.
    with_raw: whether the per-request rows were copied.
    """

    study: str
    run_id: str
    html: Path | None
    executed: Path
    runs: tuple[Path, ...]
    with_raw: bool


@dataclass(frozen=True)
class KeptRun:
    """A run kept under ``reports/`` (a row of the index).

    Attributes
    ----------
    study, run_id: which run.
    folder: its kept data (``<reports>/<study>/<run_id>/``).
    started_utc: when it first started (run.json's provenance; ``None`` if not recorded).
    status: run.json's ``running`` or ``complete``.
    report: the kept report that covers it (``None`` if there is none).
    files: the data files kept (run.json, derived/*.json, summaries.csv), relative to ``folder``.
    with_raw: whether its per-request rows are there.
    """

    study: str
    run_id: str
    folder: Path
    started_utc: _dt.datetime | None
    status: str
    report: Path | None
    files: tuple[str, ...]
    with_raw: bool


#: An absolute POSIX path in text (not the path part of a URL, nor inside base64 data: no
#: ``/``, ``:``, ``+``, ``=`` or word character just before it).
_ABS_PATH = re.compile(r"(?<![\w.~:/\\+=-])/(?:[\w.@+-]+/)*[\w.@+-]+/?")

#: What a path outside the project becomes in a kept file.
OUTSIDE = "<outside the project>"


def scrub_paths(text: str, project: Path | None = None) -> str:
    """``text`` with every absolute path of this machine made relative to ``project`` (default:
    the project folder), and those outside it replaced by :data:`OUTSIDE`. A path counts when
    its first component exists here (``/tmp/...``, ``/home/...``), so URL paths such as an
    endpoint's ``/json`` are left alone."""
    if project is None:
        from benchlib.runtime.manifest import find_services_dir

        project = find_services_dir().parent
    root = project.resolve()

    def fix(m: re.Match[str]) -> str:
        path = m.group(0)
        first = path.strip("/").split("/", 1)[0]
        if not first or not Path("/" + first).exists():
            return path
        try:
            rel = Path(path).relative_to(root).as_posix()
        except ValueError:
            try:
                rel = Path(path).resolve().relative_to(root).as_posix()
            except (ValueError, OSError):
                return OUTSIDE
        return rel or "."

    return _ABS_PATH.sub(fix, text)


def _copy_scrubbed(src: Path, dest: Path) -> None:
    """Copy the text file ``src`` to ``dest`` with :func:`scrub_paths` applied (atomically)."""
    tmp = dest.with_name(f".{dest.name}.tmp")
    tmp.write_text(scrub_paths(src.read_text(encoding="utf-8")), encoding="utf-8")
    tmp.replace(dest)


def _papermill(executed: Path) -> dict[str, Any]:
    try:
        meta = json.loads(executed.read_text(encoding="utf-8")).get("metadata", {}).get("papermill", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return meta if isinstance(meta, dict) else {}


def runs_made(executed: str | Path, *, runs_root: str | Path | None = None) -> list[Path]:
    """The run folders the executed notebook ``executed`` made or resumed (see the module
    docstring), the one its ``run_id`` parameter named first, then by start time.

    ``runs_root`` defaults to the notebook's ``out_dir`` parameter (relative to the notebook's
    folder, where it executed) or else :func:`benchlib.store.runstore.default_runs_root`. An executed
    notebook without papermill's start time (not executed by papermill) made none.
    """
    from benchlib.store.runstore import default_runs_root

    executed = Path(executed)
    meta = _papermill(executed)
    if not meta.get("start_time"):
        return []
    params = meta.get("parameters") or {}
    notebook = Path(str(meta.get("input_path") or executed))
    study = notebook.stem
    if runs_root is not None:
        root = Path(runs_root)
    elif params.get("out_dir"):
        root = notebook.parent / str(params["out_dir"])
    else:
        root = default_runs_root()
    start = parse_utc(str(meta["start_time"]))
    end = (parse_utc(str(meta["end_time"])) if meta.get("end_time")
           else _dt.datetime.fromtimestamp(executed.stat().st_mtime, _dt.UTC))
    found = [r.store.path for r in sorted(runs_started_between(root, start, end),
                                          key=lambda r: (r.collected_utc, r.store.run_id)) if r.store.study == study]
    named = str(params.get("run_id") or "")
    if named and (root / study).is_dir():
        resumed = [p for p in [root / study / named, *sorted((root / study).glob(f"{named}-*"))]
                   if (p / "run.json").is_file() and p not in found]
        found = resumed + found
    return found


def keep_run(run: Run, dest: str | Path, *, with_raw: bool = False) -> Path:
    """Copy ``run``'s data into ``dest`` (made if needed): run.json (its paths relative to the
    project, :func:`scrub_paths`), ``derived/*.json`` (the verdict tables), ``summaries.csv``
    and, with ``with_raw``, its ``trials/`` and ``logs/``. Files already in ``dest`` are
    replaced; returns ``dest``."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    if (run.path / "run.json").is_file():
        _copy_scrubbed(run.path / "run.json", dest / "run.json")
    for f in sorted((run.path / "derived").glob("*.json")):
        (dest / "derived").mkdir(exist_ok=True)
        shutil.copy2(f, dest / "derived" / f.name)
    tmp = dest / ".summaries.csv.tmp"
    run.summaries().to_csv(tmp, index=False)
    tmp.replace(dest / "summaries.csv")
    if with_raw:
        for name in RAW_FOLDERS:
            if (run.path / name).is_dir():
                shutil.copytree(run.path / name, dest / name, dirs_exist_ok=True)
    return dest


def keep_report(executed: str | Path, html_path: str | Path | None, reports_dir: str | Path, *,
                with_raw: bool = False, runs_root: str | Path | None = None,
                runs: Sequence[Path] | None = None) -> KeptReport | None:
    """Keep the report of the executed notebook ``executed`` (and its HTML ``html_path``) as
    ``<reports_dir>/<study>/<run_id>.html`` and ``.ipynb``, with the data of every run it made
    (:func:`keep_run`): ``runs`` when the runner recorded them (``benchlib run`` / ``report``
    do, through ``$BENCHLIB_RUNS_FILE``), else found by :func:`runs_made`. ``None`` when it
    made no run (it stopped before)."""
    executed = Path(executed)
    runs = list(dict.fromkeys(Path(r) for r in runs)) if runs else runs_made(executed, runs_root=runs_root)
    if not runs:
        return None
    study = runs[0].parent.name
    folder = Path(reports_dir) / study
    folder.mkdir(parents=True, exist_ok=True)
    run_id = runs[0].name
    kept_nb = folder / f"{run_id}.ipynb"
    _copy_scrubbed(executed, kept_nb)
    kept_html = None
    if html_path is not None and Path(html_path).is_file():
        kept_html = folder / f"{run_id}.html"
        _copy_scrubbed(Path(html_path), kept_html)
    kept = tuple(keep_run(open_run(p), folder / p.name, with_raw=with_raw) for p in runs)
    return KeptReport(study, run_id, kept_html, kept_nb, kept, with_raw)


def _report_of(folder: Path) -> Path | None:
    """The kept report covering the kept run ``folder``: its own, else that of the run it is
    named after (``<run_id>-sweep`` is in ``<run_id>.html``)."""
    own = folder.parent / f"{folder.name}.html"
    if own.is_file():
        return own
    owners = [p for p in folder.parent.glob("*.html") if folder.name.startswith(p.stem + "-")]
    return max(owners, key=lambda p: len(p.stem)) if owners else None


def kept_runs(reports_dir: str | Path) -> list[KeptRun]:
    """Every run kept under ``reports_dir`` (``<study>/<run_id>/run.json``), by study, newest first."""
    out = []
    for run_json in Path(reports_dir).glob("*/*/run.json"):
        folder = run_json.parent
        try:
            record = RunStore(folder).read_run()
        except StorageError:
            record = None
        files = tuple(str(p.relative_to(folder)) for p in
                      [folder / "run.json", *sorted((folder / "derived").glob("*.json")), folder / "summaries.csv"]
                      if p.is_file())
        out.append(KeptRun(folder.parent.name, folder.name, folder,
                           record.provenance.started if record is not None else None,
                           record.status if record is not None else "", _report_of(folder), files,
                           (folder / "trials").is_dir()))
    oldest = _dt.datetime.min.replace(tzinfo=_dt.UTC)
    out.sort(key=lambda k: (k.started_utc or oldest, k.run_id), reverse=True)
    out.sort(key=lambda k: k.study)
    return out


def runs_section(reports_dir: str | Path) -> str:
    """The index's table of kept runs (HTML, links relative to ``reports_dir``); "" if none."""
    reports_dir = Path(reports_dir)
    kept = kept_runs(reports_dir)
    if not kept:
        return ""

    def link(p: Path, text: str) -> str:
        return f'<a href="{html.escape(p.relative_to(reports_dir).as_posix())}">{html.escape(text)}</a>'

    rows = []
    for k in kept:
        when = k.started_utc.strftime("%Y-%m-%d %H:%M UTC") if k.started_utc else "–"
        report = link(k.report, k.report.stem) if k.report else "–"
        data = ", ".join(link(k.folder / f, f) for f in k.files) + (" (with the raw rows)" if k.with_raw else "")
        rows.append(f"<tr><td>{html.escape(k.study)}</td><td>{html.escape(k.run_id)}</td><td>{when}</td>"
                    f"<td>{html.escape(k.status or '–')}</td><td>{report}</td><td>{data}</td></tr>")
    return ("<h2>Runs</h2><p>Every run's report is kept, with the data its verdicts came from.</p>\n"
            "<table><tr><th>study</th><th>run id</th><th>started</th><th>status</th><th>report</th><th>data</th></tr>\n"
            + "\n".join(rows) + "\n</table>")
