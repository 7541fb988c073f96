"""The times README, notebooks and study pages quote come from data/measurements.json alone."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchlib._project import measurements as m
from benchlib.publish.notebooks import project_root, report_notebooks

ROOT = project_root()
TIME = re.compile(r"\b\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)? ?(?:min|h)\b")


def test_every_generated_place_agrees_with_the_file():
    assert m.check(ROOT) == [], "run `python -m benchlib._project.measurements sync`"


def test_the_file_covers_every_notebook_at_its_default_scale():
    entries = m.load(ROOT / "data" / "measurements.json")
    have = {e.what for e in entries if e.scale == "default"}
    assert {p.stem for p in report_notebooks()} <= have


def _parameters_source(path: Path) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return "".join("".join(c["source"]) for c in nb["cells"]
                   if "parameters" in c.get("metadata", {}).get("tags", []))


@pytest.mark.parametrize("notebook", [p.stem for p in report_notebooks()])
def test_notebooks_quote_times_only_through_the_note(notebook):
    src = _parameters_source(ROOT / "notebooks" / f"{notebook}.ipynb")
    assert len(re.findall(r"\[time: [^\]]*\]", src)) == 1
    outside = re.sub(r"\[time: [^\]]*\]", "", src)
    assert TIME.findall(outside) == [], f"{notebook}: a time outside the [time: ...] note"


def test_readme_quotes_times_only_in_the_generated_table():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    i, j = text.index(m.README_BEGIN), text.index(m.README_END)
    assert TIME.findall(text[:i] + text[j:]) == []


def _executed(reports: Path, stem: str, start: str, end: str, duration: float, full: object = False) -> None:
    reports.mkdir(parents=True, exist_ok=True)
    (reports / f"{stem}.ipynb").write_text(json.dumps({"cells": [], "metadata": {"papermill": {
        "start_time": start, "end_time": end, "duration": duration, "exception": None,
        "parameters": {"full": full}}}}))


def _run(runs: Path, study: str, run_id: str, collected: str, load: float, waited_s: float | None = None) -> None:
    d = runs / study / run_id
    d.mkdir(parents=True)
    settle = {"settle": {"threshold": 0.3, "loadavg": load, "waited_s": waited_s, "quiet": True}} if waited_s else {}
    (d / "run.json").write_text(json.dumps({"provenance": {"collected_utc": collected, "loadavg_at_start": [load, 0.5, 0.4]},
                                            **settle}))


def test_record_reads_papermill_timing_and_the_runs_made_meanwhile(tmp_path):
    reports, runs = tmp_path / "reports", tmp_path / "runs"
    _executed(reports, "00_quickstart", "2026-12-03T10:00:00.000000Z", "2026-12-03T10:01:10.000000Z", 70.0)
    _executed(reports, "90_harness_overhead", "2026-12-03T10:01:12.000000Z", "2026-12-03T10:03:00.000000Z", 108.0)
    _run(runs, "quickstart", "20261203-100005-aaaa", "2026-12-03T10:00:05+00:00", 0.21)
    _run(runs, "harness_overhead", "20261203-100130-bbbb", "2026-12-03T10:01:30+00:00", 0.29, waited_s=12.5)
    _run(runs, "quickstart", "20261202-090000-cccc", "2026-12-02T09:00:00+00:00", 3.0)  # another day: not this one's
    got = {e.what: e for e in m.record_reports(reports, scale="default", builds="cold", runs_root=runs)}
    q = got["00_quickstart"]
    assert (q.seconds, q.run_ids, q.loadavg, q.builds, q.kind) == (70.0, ("20261203-100005-aaaa",), (0.21, 0.21), "cold",
                                                                 "measured")
    h = got["90_harness_overhead"]  # its run waited 12.5 s for a quiet machine (--settle): not its cost
    assert (h.run_ids, h.seconds) == (("20261203-100130-bbbb",), 95.5)
    # a newer record replaces the entry of the same key and keeps the others
    old = [m.Measurement("00_quickstart", "default", "cold", "measured", 99.0, "2026-12-01", "x"),
           m.Measurement("00_quickstart", "full", "cached", "estimated", 300.0, "2026-12-01", "projected")]
    merged = {e.key: e for e in m.merge(old, got.values())}
    assert merged[("00_quickstart", "default", "cold")].seconds == 70.0
    assert merged[("00_quickstart", "full", "cached")].kind == "estimated"


def test_record_takes_only_the_notebooks_that_ran_at_the_scale_asked_for(tmp_path):
    reports, runs = tmp_path / "reports", tmp_path / "runs"
    _executed(reports, "04_rust_vs_go_logging", "2026-12-03T10:00:00.000000Z", "2026-12-03T10:02:00.000000Z", 120.0)
    _executed(reports, "05_grpc_vs_json", "2026-12-03T11:00:00.000000Z", "2026-12-03T12:10:00.000000Z", 4200.0,
              full="true")  # as `-p full true` passes it
    _run(runs, "05_grpc_vs_json", "20261203-110005-aaaa", "2026-12-03T11:00:05+00:00", 0.2)
    full = m.record_reports(reports, scale="full", builds="cached", runs_root=runs)
    assert [(e.what, e.scale, e.seconds, e.run_ids) for e in full] == [
        ("05_grpc_vs_json", "full", 4200.0, ("20261203-110005-aaaa",))]
    assert [e.what for e in m.record_reports(reports, scale="default", builds="cached", runs_root=runs)] == [
        "04_rust_vs_go_logging"]
    (reports / "04_rust_vs_go_logging.ipynb").unlink()
    with pytest.raises(ValueError, match="no executed notebook at default scale .*05_grpc_vs_json ran at the other"):
        m.record_reports(reports, scale="default", builds="cached", runs_root=runs)


def test_sync_writes_every_place_and_check_then_agrees(tmp_path):
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "docs" / "studies").mkdir(parents=True)
    (tmp_path / "data").mkdir()
    (tmp_path / "README.md").write_text(f"intro\n{m.README_BEGIN}\nold\n{m.README_END}\nrest\n")
    nb = {"cells": [{"cell_type": "code", "metadata": {"tags": ["parameters"]}, "outputs": [], "execution_count": None,
                     "source": ["full: bool = False  # the short default [time: stale]\n"]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "notebooks" / "00_quickstart.ipynb").write_text(json.dumps(nb))
    (tmp_path / "docs" / "studies" / "00.md").write_text(
        "# page\n<!-- time:begin notebook=00_quickstart -->\nold\n<!-- time:end -->\n")
    m.save([m.Measurement("00_quickstart", "default", "cached", "measured", 66.0, "2026-12-03", "make report",
                          ("20261203-100005-aaaa",), (0.2, 0.4)),
            m.record_total("first-run", 1800.0, builds="cold", source="make report in a fresh clone", date="2026-12-03")],
           tmp_path / "data" / "measurements.json")
    assert len(m.check(tmp_path)) == 3
    assert len(m.sync(tmp_path)) == 3 and m.check(tmp_path) == []
    readme = (tmp_path / "README.md").read_text()
    assert ("| `00_quickstart` | 1.1 min (measured 2026-12-03, load average 0.20-0.40, run 20261203-100005-aaaa) "
            "| not measured |") in readme
    assert "**30.0 min**" in readme and readme.startswith("intro\n") and readme.endswith("rest\n")
    src = _parameters_source(tmp_path / "notebooks" / "00_quickstart.ipynb")
    assert "[time: default 1.1 min, full scale not measured, builds cached; README, \"What it costs\"]" in src
    assert "default scale 1.1 min" in (tmp_path / "docs" / "studies" / "00.md").read_text()


def test_bad_entries_name_the_field_and_the_valid_choices(tmp_path):
    with pytest.raises(ValueError, match="scale 'huge' is not one of default, full"):
        m.Measurement("00_quickstart", "huge", "cached", "measured", 60.0, "2026-12-03", "x")
    with pytest.raises(ValueError, match="unknown total 'lunch'; valid: first-run, report, test"):
        m.record_total("lunch", 60.0, source="x")
    (tmp_path / "m.json").write_text(json.dumps({"measurements": [{"what": "x", "scale": "default"}]}))
    with pytest.raises(ValueError, match="entry 0 \\('x'\\)"):
        m.load(tmp_path / "m.json")
