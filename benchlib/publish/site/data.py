"""What the site shows, read from the kept runs under ``reports/`` (:mod:`benchlib.publish.history`):
one :class:`SiteRun` per kept run (its run.json's facts and the verdict rows of its
``derived/comparison*.json``), grouped by study.

Only the kept files are read (run.json, ``derived/*.json``), never the stored trials: a site
can be built from a ``reports/`` folder copied from another machine.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib.analysis.claims import ClaimAnswer, load_claims
from benchlib.analysis.display import metric_words
from benchlib.core.errors import StorageError
from benchlib.publish.history import KeptRun, kept_runs
from benchlib.store.records.run import RunRecord
from benchlib.store.runstore import RunStore

__all__ = ["SiteRun", "Study", "VerdictRow", "read_studies", "verdict_summary"]

#: How each verdict kind (:class:`benchlib.stats.verdict.VerdictKind`) is named in summaries;
#: "~" is "not decided at this design", never "no difference".
KIND_WORDS: Mapping[str, str] = {
    "faster": "faster", "slower": "slower", "equivalent": "equivalent", "no_difference": "~",
    "insufficient": "insufficient trials", "undecidable": "not decidable within the budget", "omitted": "omitted",
    "not_run": "not run", "no_valid_trial": "no valid trial", "client_bound": "client-bound",
}


def _finite(v: Any) -> float | None:
    """``v`` as a finite float; ``None`` for missing, ``"inf"``, NaN."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


@dataclass(frozen=True)
class VerdictRow:
    """One row of a run's verdict table (``derived/comparison*.json``).

    Attributes
    ----------
    table: the JSON file's stem (``comparison``, ``comparison_sweep``...).
    labels: the row's condition labels (``condition=closed``), as text.
    arm, baseline, metric: what was compared.
    ratio: arm / baseline (``None`` where the table holds a difference or nothing).
    ci_lo, ci_hi: its confidence interval; ``None`` where unbounded at this design.
    verdict: the verdict as the report words it; kind: :class:`~benchlib.stats.verdict.VerdictKind` value.
    """

    table: str
    labels: str
    arm: str
    baseline: str
    metric: str
    ratio: float | None
    ci_lo: float | None
    ci_hi: float | None
    verdict: str
    kind: str

    @property
    def question(self) -> str:
        """The question this row answers, the same across runs of a study (the plot's key)."""
        where = f" ({self.labels})" if self.labels else ""
        table = "" if self.table == "comparison" else f"{self.table}: "
        return f"{table}{self.arm} / {self.baseline}, {metric_words(self.metric)}{where}"

    @property
    def interval(self) -> str:
        """``[lo, hi]`` with 3 significant digits (``0`` / ``∞`` where unbounded)."""
        lo = "0" if self.ci_lo is None else f"{self.ci_lo:.3g}"
        hi = "∞" if self.ci_hi is None else f"{self.ci_hi:.3g}"
        return f"[{lo}, {hi}]"


@dataclass(frozen=True)
class SiteRun:
    """A kept run as the site lists it.

    Attributes
    ----------
    kept: where it is kept (:class:`benchlib.publish.history.KeptRun`).
    started: its first start, ``YYYY-MM-DD HH:MM UTC`` (``–`` if not recorded).
    commit: benchlib's git commit (12 hex digits, ``+`` if the checkout had changes; ``–``).
    machine: CPU model × CPUs, memory, host name.
    loadavg: the 1/5/15-minute load average when it started.
    parameters: the notebook's parameters, ``name=value``.
    verdicts: its verdict rows, every table.
    claims: its claim rows as its notebook answered them (``derived/claims.json``,
        :mod:`benchlib.analysis.claims`; empty for a run from before claims or a study without).
    """

    kept: KeptRun
    started: str
    commit: str
    machine: str
    loadavg: str
    parameters: str
    verdicts: tuple[VerdictRow, ...]
    claims: tuple[ClaimAnswer, ...] = ()

    @property
    def study(self) -> str:
        return self.kept.study

    @property
    def run_id(self) -> str:
        return self.kept.run_id

    @property
    def summary(self) -> str:
        """Its verdicts counted by kind (``2 faster, 1 ~``); ``no verdict table`` if none."""
        return verdict_summary(self.verdicts)


@dataclass(frozen=True)
class Study:
    """A study's kept runs, oldest first, and its title (its newest report's first heading)."""

    name: str
    title: str
    runs: tuple[SiteRun, ...]

    @property
    def latest(self) -> SiteRun:
        return self.runs[-1]

    @property
    def questions(self) -> list[str]:
        """Every question any run answered, in the order the runs' tables list them; rows the
        design left out ("omitted (no values)": a quantile its trials' requests cannot support)
        are no question."""
        return list(dict.fromkeys(v.question for r in self.runs for v in r.verdicts if v.kind != "omitted"))

    @property
    def claim_line(self) -> str:
        """The latest run's claims in one line: each faithful or nearest claim row with its
        outcome (``Go / actix-web throughput ...: 2.31x [2.1, 2.5] holds``); the fair rows are
        on the study's page; ``""`` when the latest run stored none."""
        rows = [a for a in self.latest.claims if a.claim.variant != "fair"]
        return "; ".join(f"{a.claim.label}: " + (f"{a.ratio_text()} " if a.ran else "") + a.outcome_text()
                         for a in rows)


def verdict_summary(rows: Sequence[VerdictRow]) -> str:
    """Verdict kinds counted, in :data:`KIND_WORDS` order (``2 faster, 1 ~``)."""
    counts = {k: sum(r.kind == k for r in rows) for k in KIND_WORDS}
    other = len(rows) - sum(counts.values())
    parts = [f"{n} {KIND_WORDS[k]}" for k, n in counts.items() if n] + ([f"{other} other"] if other else [])
    return ", ".join(parts) or "no verdict table"


def _verdict_rows(folder: Path) -> tuple[VerdictRow, ...]:
    out: list[VerdictRow] = []
    for path in sorted((folder / "derived").glob("comparison*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        by = list((data.get("params") or {}).get("by") or [])
        for r in data.get("rows") or []:
            if not isinstance(r, dict):
                continue
            labels = ", ".join(f"{k}={r[k]}" for k in by if r.get(k) is not None)
            ratio, lo = _finite(r.get("ratio")), _finite(r.get("ci_lo"))
            out.append(VerdictRow(path.stem, labels, str(r.get("arm")), str(r.get("baseline")), str(r.get("metric")),
                                  ratio, lo if ratio is not None and lo else None,  # a ratio's 0: unbounded below
                                  _finite(r.get("ci_hi")), str(r.get("verdict") or ""),
                                  str(r.get("verdict_kind") or "")))
    return tuple(out)


def _site_run(k: KeptRun) -> SiteRun:
    try:
        run = RunStore(k.folder).read_run() or RunRecord()
    except StorageError:
        run = RunRecord()
    p = run.provenance
    machine = ", ".join(x for x in [
        f"{p.cpu_model} × {p.cpu_count} CPUs" if p.cpu_model else "",
        f"{p.memory_gb} GB" if p.memory_gb else "", p.hostname] if x) or "–"
    loadavg = " / ".join(f"{x:.2f}" for x in p.loadavg_at_start) if p.loadavg_at_start else "–"
    parameters = ", ".join(f"{n}={v}" for n, v in run.notebook_parameters.items() if n not in ("out_dir", "progress"))
    started = k.started_utc.strftime("%Y-%m-%d %H:%M UTC") if k.started_utc else "–"
    return SiteRun(k, started, p.commit or "–", machine, loadavg, parameters or "–", _verdict_rows(k.folder),
                   tuple(load_claims(k.folder)))


def _title(report: Path | None, study: str) -> str:
    """The study's title: the first ``<h1>`` of ``report`` (``study`` if none)."""
    import html
    import re

    if report is None:
        return study
    try:
        text = report.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return study
    m = re.search(r"<h1[^>]*>(.*?)</h1>", text, re.S)
    if not m:
        return study
    return html.unescape(re.sub(r"<[^>]+>", "", m.group(1))).replace("¶", "").strip() or study


def read_studies(reports_dir: str | Path) -> list[Study]:
    """Every study with kept runs under ``reports_dir``, by name; each study's runs oldest first."""
    by_study: dict[str, list[SiteRun]] = {}
    for k in kept_runs(reports_dir):
        by_study.setdefault(k.study, []).append(_site_run(k))
    oldest = _dt.datetime.min.replace(tzinfo=_dt.UTC)
    out = []
    for name in sorted(by_study):
        runs = sorted(by_study[name], key=lambda r: (r.kept.started_utc or oldest, r.run_id))
        newest_report = next((r.kept.report for r in reversed(runs) if r.kept.report is not None), None)
        out.append(Study(name, _title(newest_report, name), tuple(runs)))
    return out
