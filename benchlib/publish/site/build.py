"""``benchlib publish``: a static site of every kept run (:mod:`benchlib.publish.history`).

Layout of the site (``--out``, default ``reports/site/``)::

    index.html                  first one line per study (its published claim and the latest run's
                                outcome, linked), then the studies, each with its latest run's verdicts
                                (rows the design left out, "omitted (no values)", are not listed)
    runs.html                   every run: id, date, commit, machine, load average, parameters, verdicts
    <study>/index.html          the study: each question's ratio and interval across runs (an inline
                                SVG, one ``data-run-id`` element per run) and the runs' table
    <study>/<run_id>.html       the run's report (re-exported from its executed notebook with the
                                offline template, :func:`benchlib.publish.html_export.export_html`; once:
                                a later build keeps a report whose notebook has not changed)
    <study>/<run_id>/           the run's kept data: run.json, derived/*.json, summaries.csv

Every link is relative and every page is self-contained (styles and plots inline, no script
and no data fetched), so the folder works from ``file://`` and from any static host.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from benchlib.core.errors import UserError
from benchlib.publish.site.data import SiteRun, Study, VerdictRow, read_studies
from benchlib.publish.site.svg import HistoryPlot, RatioPoint, history_plot

if TYPE_CHECKING:
    import jinja2

    from benchlib.store.results import Run

__all__ = ["SiteBuild", "build_site"]

#: The run's kept files copied beside its report (``--with-raw`` folders are not published).
DATA_FILES = ("run.json", "summaries.csv")


@dataclass(frozen=True)
class SiteBuild:
    """A built site: its folder, pages written, total size (bytes) and build time (s)."""

    out: Path
    pages: tuple[Path, ...]
    size_bytes: int
    seconds: float


@dataclass(frozen=True)
class QuestionHistory:
    """A study page's section: one question across runs (the plot) and its rows per run."""

    question: str
    plot: HistoryPlot
    rows: tuple[tuple[SiteRun, VerdictRow | None], ...]


def _environment() -> jinja2.Environment:
    """The templates (``benchlib/site/templates``, package data): HTML autoescaped, an undefined
    name an error."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("benchlib.publish.site", "templates"),
                             autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    return env


def _hover(run: SiteRun, row: VerdictRow | None) -> str:
    what = f"ratio {row.ratio:.3g} {row.interval}, {row.verdict}" if row and row.ratio is not None else \
        (row.verdict if row else "not in this run")
    return f"run {run.run_id}, {run.started}, benchlib {run.commit}, {run.machine}: {what}"


def _histories(study: Study) -> list[QuestionHistory]:
    out = []
    for q in study.questions:
        rows = tuple((r, next((v for v in r.verdicts if v.question == q), None)) for r in study.runs)
        plot = history_plot([RatioPoint(r.run_id, v.ratio if v else None, v.ci_lo if v else None,
                                        v.ci_hi if v else None, _hover(r, v), v.kind if v else "none")
                             for r, v in rows])
        out.append(QuestionHistory(q, plot, rows))
    return out


def _open_kept(run: SiteRun, runs_root: Path | None) -> Run | None:
    """The stored run behind a kept run: its kept folder when it holds the per-request rows
    (``--with-raw``), else its run id under ``runs_root`` (default ``data/runs`` or
    ``$BENCHLIB_DATA``); ``None`` when neither is there."""
    from benchlib.core.errors import StorageError
    from benchlib.store.results import open_run

    raw: tuple[Path | str, ...] = (run.kept.folder,) if run.kept.with_raw else ()
    for where in raw + (f"{run.kept.study}/{run.kept.run_id}", run.kept.run_id):
        try:
            return open_run(where, root=runs_root)
        except (UserError, StorageError):
            continue
    return None


def latest_vs_previous(study: Study, runs_root: Path | None = None) -> str | None:
    """The study page's section "Latest run against the previous one" as HTML (the template's
    ``latest_vs_previous`` block shows it as given): ``benchlib compare PREVIOUS LATEST``
    (:func:`benchlib.analysis.runcompare.compare_runs` at its default margin) as text, or the one line
    saying why the two runs are not comparable; ``None`` when either run's trials are not on
    this machine (the page then names the command)."""
    import html

    from benchlib.analysis.runcompare import NotComparable, compare_runs

    if len(study.runs) < 2:
        return None
    previous, latest = (_open_kept(r, runs_root) for r in study.runs[-2:])
    if previous is None or latest is None:
        return None
    try:
        text = compare_runs(previous, latest).to_text()
    except NotComparable as e:
        return f'<p class="refused">Not comparable: {html.escape(str(e))}</p>'
    return f'<pre class="comparison">{html.escape(text)}</pre>'


def _up_to_date(dest: Path, *sources: Path) -> bool:
    """Whether ``dest`` exists and is newer than every file of ``sources``."""
    return dest.is_file() and all(dest.stat().st_mtime >= s.stat().st_mtime for s in sources)


def _publish_report(src: Path, dest: Path) -> None:
    """The report ``src`` into the site: re-exported from its executed notebook (beside it)
    with the offline template (:func:`benchlib.publish.html_export.export_html`), or copied when there is
    none; left as it is when already published from the same files (an incremental build)."""
    from benchlib.publish.html_export import REPORT_TEMPLATE, TEMPLATES_DIR, export_html

    executed = src.with_suffix(".ipynb")
    if executed.is_file():
        if not _up_to_date(dest, executed, *(TEMPLATES_DIR / REPORT_TEMPLATE).iterdir()):
            export_html(executed, dest)
    elif not _up_to_date(dest, src):
        shutil.copy2(src, dest)


def build_site(reports_dir: str | Path, out: str | Path | None = None, *,
               runs_root: str | Path | None = None) -> SiteBuild:
    """Build the site of every run kept under ``reports_dir`` into ``out`` (default
    ``<reports_dir>/site``); pages already there are replaced, nothing else is removed.
    ``runs_root``: where the runs' trials are (default ``data/runs`` or ``$BENCHLIB_DATA``),
    for each study page's latest run against the previous one.

    Raises
    ------
    UserError
        no run is kept under ``reports_dir`` (run a study first: ``benchlib run 00_quickstart``).
    """
    t0 = time.monotonic()
    reports_dir = Path(reports_dir)
    out = Path(out) if out is not None else reports_dir / "site"
    studies = read_studies(reports_dir)
    if not studies:
        raise UserError(f"no kept runs under {reports_dir} (<study>/<run_id>/run.json); run a study first, "
                        "e.g. `benchlib run 00_quickstart`, then `benchlib publish`")
    env = _environment()
    pages: list[Path] = []

    def write(rel: str, template: str, **ctx: object) -> None:
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        root = "../" * rel.count("/")
        path.write_text(env.get_template(template).render(root=root, studies=studies, **ctx), encoding="utf-8")
        pages.append(path)

    for study in studies:
        folder = out / study.name
        folder.mkdir(parents=True, exist_ok=True)
        done: set[Path] = set()
        for run in study.runs:
            report = run.kept.report
            if report is not None and report not in done:
                _publish_report(report, folder / report.name)
                pages.append(folder / report.name)
                done.add(report)
            data = folder / run.run_id
            for f in run.kept.files:
                (data / f).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(run.kept.folder / f, data / f)
        previous = study.runs[-2] if len(study.runs) > 1 else None
        write(f"{study.name}/index.html", "study.html.j2", study=study, histories=_histories(study),
              latest=study.latest, previous=previous,
              comparison=(latest_vs_previous(study, None if runs_root is None else Path(runs_root))
                          if previous is not None else None))
    write("index.html", "index.html.j2")
    write("runs.html", "runs.html.j2")
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    return SiteBuild(out, tuple(pages), size, time.monotonic() - t0)
