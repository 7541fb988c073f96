"""The published site's logic (``benchlib.publish.site``) on kept runs written by hand (no kernel, no
browser; the browser test is tests/test_site_browser.py), the path scrubbing of kept files,
and a report's parameters and commands."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchlib.core.errors import UserError
from benchlib.publish.history import OUTSIDE, scrub_paths
from benchlib.publish.site import build_site, read_studies
from benchlib.publish.site.svg import RatioPoint, history_plot

STUDY = "00_quickstart"


def _row(metric: str, ratio: float | str, lo: float | str, hi: float | str, kind: str, verdict: str) -> dict[str, object]:
    return {"arm": "go", "baseline": "py", "condition": "closed", "metric": metric, "ratio": ratio, "ci_lo": lo,
            "ci_hi": hi, "verdict_kind": kind, "verdict": verdict}


def _kept(reports: Path, run_id: str, collected: str, rows: list[dict[str, object]], *, report: bool = True) -> None:
    folder = reports / STUDY / run_id
    (folder / "derived").mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({
        "study": STUDY, "run_id": run_id, "status": "complete", "notebook_parameters": {"trials": 10, "progress": False},
        "provenance": {"collected_utc": collected, "loadavg_at_start": [0.5, 0.25, 0.125], "cpu_model": "Test CPU",
                       "cpu_count": 2, "git": {"sha": "0123456789abcdef", "dirty": False}}}))
    (folder / "derived" / "comparison.json").write_text(json.dumps({"params": {"by": ["condition"]}, "rows": rows}))
    (folder / "summaries.csv").write_text("arm,block\ngo,0\n")
    if report:
        (reports / STUDY / f"{run_id}.html").write_text(f"<html><body><h1>Quickstart title</h1>{run_id}</body></html>")


def _three_runs(reports: Path) -> None:
    _kept(reports, "r1", "2026-12-01T10:00:00+00:00", [_row("p50_ms", 0.5, 0.4, 0.6, "faster", "faster"),
                                                      _row("p99_ms", 1.01, 0.9, 1.1, "no_difference", "~ (MDE 12%)")])
    _kept(reports, "r2", "2026-12-02T10:00:00+00:00", [_row("p50_ms", 0.55, 0.0, "inf", "insufficient", "insufficient")])
    _kept(reports, "r3", "2026-12-03T10:00:00+00:00", [_row("p50_ms", 0.45, 0.42, 0.48, "faster", "faster")],
          report=False)


def test_studies_are_read_oldest_first_with_their_verdicts_and_provenance(tmp_path: Path) -> None:
    _three_runs(tmp_path)
    (study,) = read_studies(tmp_path)
    assert [r.run_id for r in study.runs] == ["r1", "r2", "r3"] and study.latest.run_id == "r3"
    assert study.title == "Quickstart title"  # the newest report's heading
    r1 = study.runs[0]
    assert r1.commit == "0123456789ab" and r1.loadavg == "0.50 / 0.25 / 0.12" and r1.parameters == "trials=10"
    assert r1.summary == "1 faster, 1 ~" and "Test CPU × 2 CPUs" in r1.machine
    assert study.questions == ["go / py, median latency (p50) (condition=closed)",
                               "go / py, p99 latency (condition=closed)"]
    unbounded = study.runs[1].verdicts[0]
    assert unbounded.ci_lo is None and unbounded.ci_hi is None and unbounded.interval == "[0, ∞]"


def test_the_site_has_relative_links_only_one_point_per_run_and_the_compare_place(tmp_path: Path) -> None:
    _three_runs(tmp_path / "reports")
    built = build_site(tmp_path / "reports", tmp_path / "site")
    site = built.out
    assert {p.relative_to(site).as_posix() for p in built.pages} == {
        "index.html", "runs.html", f"{STUDY}/index.html", f"{STUDY}/r1.html", f"{STUDY}/r2.html"}
    assert built.size_bytes > 0 and (site / STUDY / "r3" / "derived" / "comparison.json").is_file()
    for page in site.rglob("*.html"):
        text = page.read_text()
        for url in re.findall(r'(?:href|src)="([^"]*)"', text):
            assert not re.match(r"^(https?:|/|file:)", url), f"{page}: {url}"
            if not url.startswith("data:"):
                assert (page.parent / url.split("#")[0]).exists(), f"{page}: broken link {url}"
    study = (site / STUDY / "index.html").read_text()
    svgs = re.findall(r"<svg class=\"history\".*?</svg>", study, re.S)
    assert len(svgs) == 2 and all(s.count("data-run-id=") == 3 for s in svgs)
    assert 'id="latest-vs-previous"' in study and "benchlib compare 00_quickstart/r2 00_quickstart/r3" in study
    runs = (site / "runs.html").read_text()
    assert all(f'data-run-id="{r}"' in runs for r in ("r1", "r2", "r3")) and "1 faster, 1 ~" in runs


def test_a_folder_with_no_kept_run_is_refused_with_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no kept runs under .*benchlib run 00_quickstart"):
        build_site(tmp_path, tmp_path / "site")


def test_the_history_plot_puts_unbounded_intervals_at_the_axes_edge_and_marks_runs_without_a_ratio() -> None:
    plot = history_plot([RatioPoint("a", 0.5, 0.4, 0.6, "", "faster"), RatioPoint("b", 2.0, None, None, "", "x"),
                         RatioPoint("c", None, None, None, "", "not_run")])
    a, b, c = plot.points
    assert a.x < b.x < c.x and a.y > plot.y_one > b.y  # lower ratios lower on the plot
    assert not a.lo_open and not a.hi_open and a.y_lo > a.y > a.y_hi
    assert b.lo_open and b.hi_open and b.y_hi == plot.top and b.y_lo == plot.height - plot.bottom
    assert c.missing and not a.missing and c.y == plot.y_one
    assert [label for _, label in plot.ticks] == ["0.5", "1", "2"]


def test_scrub_paths_makes_paths_relative_to_the_project_and_hides_others(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "notebooks").mkdir(parents=True)
    text = (f'"input_path": "{project}/notebooks/00_quickstart.ipynb", "out_dir": "{tmp_path}/runs", '
            '"path": "/json", "url": "https://example.org/a/b", "png": "data:image/png;base64,ab+/tmp/x"')
    out = scrub_paths(text, project)
    assert '"input_path": "notebooks/00_quickstart.ipynb"' in out and f'"out_dir": "{OUTSIDE}"' in out
    assert '"path": "/json"' in out and "https://example.org/a/b" in out and "ab+/tmp/x" in out
    assert str(tmp_path) not in out


def test_a_second_build_keeps_reports_already_published_and_takes_changed_ones(tmp_path: Path) -> None:
    import os

    _three_runs(tmp_path / "reports")
    build_site(tmp_path / "reports", tmp_path / "site")
    published, src = tmp_path / "site" / STUDY / "r1.html", tmp_path / "reports" / STUDY / "r1.html"
    os.utime(published, (1, 1))  # older than its source: taken again
    src.write_text("<html><h1>changed</h1></html>")
    build_site(tmp_path / "reports", tmp_path / "site")
    assert "changed" in published.read_text()
    mtime = published.stat().st_mtime_ns
    build_site(tmp_path / "reports", tmp_path / "site")
    assert published.stat().st_mtime_ns == mtime  # unchanged: not written again


def test_the_index_opens_with_each_studys_claims_and_omitted_rows_are_no_question(tmp_path: Path) -> None:
    from benchlib.analysis.claims import ClaimAnswer, save_claims
    from benchlib.analysis.studies.registry import study as find_study

    _kept(tmp_path, "r1", "2026-12-01T10:00:00+00:00", [_row("p50_ms", 0.5, 0.4, 0.6, "faster", "faster"),
                                                      _row("p99_ms", "nan", "nan", "nan", "omitted",
                                                           "omitted (no values)")])
    faithful, fair = find_study("04").claims
    save_claims([ClaimAnswer(faithful, "holds", ratio=2.5, lo=2.3, hi=2.7, family=2),
                 ClaimAnswer(fair, "not decided", ratio=1.7, lo=1.2, hi=2.4, mde_vs_claim=0.2, family=2)],
                tmp_path / STUDY / "r1")
    (study,) = read_studies(tmp_path)
    assert study.questions == ["go / py, median latency (p50) (condition=closed)"]
    assert study.claim_line == "Go / actix-web throughput, every request logged: 2.50x [2.30, 2.70] holds"
    site = build_site(tmp_path).out
    index = (site / "index.html").read_text()
    assert index.index("The claims, re-run") < index.index("run(s) kept")
    assert "2.50x [2.30, 2.70] holds</li>" in index and "omitted (no values)" not in index
    page = (site / STUDY / "index.html").read_text()
    assert page.index("The claim, re-run") < page.index("Latest run's verdicts") and "MDE 20% against" in page
