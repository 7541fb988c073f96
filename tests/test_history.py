"""Kept reports (``benchlib.publish.history``): every run's report under ``reports/<study>/<run_id>.html``
with its verdict JSON and per-trial summaries, the raw rows only when asked, and the index
listing the kept runs; on tiny stored runs and a fake executed notebook (no kernel runs)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchlib.core.schema import ROW_DTYPE
from benchlib.publish.history import keep_report, kept_runs, runs_made
from benchlib.publish.index import write_index
from benchlib.store.records.run import RunRecord
from benchlib.store.results import open_run
from benchlib.store.runstore import RunStore

STUDY = "00_quickstart"
START, END = "2026-12-03T10:00:00.000000Z", "2026-12-03T10:05:00.000000Z"


def _stored(root: Path, study: str, run_id: str, collected: str, *, verdicts: bool = True) -> Path:
    store = RunStore.open(study, run_id, root=root)
    store.write_run(RunRecord.from_json({"study": study, "run_id": run_id, "status": "complete",
                     "parameters": {"arms": [{"name": "a"}], "conditions": [{"name": "main"}]},
                     "provenance": {"collected_utc": collected, "loadavg_at_start": [0.5, 0.4, 0.3]}}))
    for block in range(2):
        store.write_trial(np.zeros(3, dtype=ROW_DTYPE), {"record_version": 2, "condition": "main", "arm": "a",
                                                          "block": block, "seq": block, "status": "ok"})
    if verdicts:
        (store.path / "derived").mkdir(exist_ok=True)
        (store.path / "derived" / "comparison.json").write_text(json.dumps({"rows": [{"verdict": "faster"}]}))
    return store.path


def _executed(tmp: Path, parameters: dict[str, object] | None = None) -> tuple[Path, Path]:
    """A papermill-executed notebook (its metadata only) and its HTML in ``tmp/reports``."""
    reports = tmp / "reports"
    reports.mkdir(exist_ok=True)
    (tmp / "notebooks").mkdir(exist_ok=True)
    nb = reports / f"{STUDY}.ipynb"
    nb.write_text(json.dumps({"cells": [], "nbformat": 4, "nbformat_minor": 5, "metadata": {"papermill": {
        "input_path": str(tmp / "notebooks" / f"{STUDY}.ipynb"), "start_time": START, "end_time": END,
        "duration": 300.0, "parameters": parameters or {}}}}))
    page = reports / f"{STUDY}.html"
    page.write_text("<html>the newest report</html>")
    return nb, page


def test_a_report_is_kept_under_its_run_with_verdicts_and_summaries(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    made = _stored(root, STUDY, "r1", "2026-12-03T10:00:05+00:00")
    _stored(root, STUDY, "before", "2026-12-03T09:00:00+00:00")  # another execution's run
    _stored(root, "01_other", "same-time", "2026-12-03T10:01:00+00:00")  # another study's run
    nb, page = _executed(tmp_path)
    assert runs_made(nb, runs_root=root) == [made]

    kept = keep_report(nb, page, tmp_path / "reports", runs_root=root)
    assert kept is not None and kept.run_id == "r1" and kept.study == STUDY
    folder = tmp_path / "reports" / STUDY
    assert kept.html == folder / "r1.html" and kept.html.read_text() == page.read_text()
    assert kept.executed == folder / "r1.ipynb" and kept.runs == (folder / "r1",)
    data = folder / "r1"
    assert json.loads((data / "derived" / "comparison.json").read_text()) == {"rows": [{"verdict": "faster"}]}
    assert json.loads((data / "run.json").read_text())["run_id"] == "r1"
    summaries = pd.read_csv(data / "summaries.csv")
    assert list(summaries["block"]) == [0, 1] and set(summaries["arm"]) == {"a"}
    assert not (data / "trials").exists()  # the raw rows only when asked
    assert sorted(p.name for p in folder.iterdir()) == ["r1", "r1.html", "r1.ipynb"]


def test_with_raw_the_kept_folder_is_a_run_open_run_reads(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    _stored(root, STUDY, "r1", "2026-12-03T10:00:05+00:00")
    nb, page = _executed(tmp_path)
    kept = keep_report(nb, page, tmp_path / "reports", runs_root=root, with_raw=True)
    assert kept is not None and kept.with_raw
    again = open_run(kept.runs[0])
    assert [t.block for t in again.trials] == [0, 1] and again.run_id == "r1"


def test_a_resumed_run_and_the_runs_named_after_it_are_kept_with_it(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    _stored(root, STUDY, "first", "2026-12-02T08:00:00+00:00")  # started yesterday, resumed now
    _stored(root, STUDY, "first-sweep", "2026-12-02T08:30:00+00:00", verdicts=False)
    _stored(root, STUDY, "unrelated", "2026-12-02T08:10:00+00:00")
    nb, page = _executed(tmp_path, {"run_id": "first", "out_dir": "../runs"})  # relative to the notebook folder
    assert [p.name for p in runs_made(nb)] == ["first", "first-sweep"]
    kept = keep_report(nb, page, tmp_path / "reports")
    assert kept is not None and kept.run_id == "first"
    assert [p.name for p in kept.runs] == ["first", "first-sweep"]
    assert (kept.runs[1] / "summaries.csv").is_file() and not (kept.runs[1] / "derived").exists()
    report_of = {k.run_id: k.report for k in kept_runs(tmp_path / "reports")}
    assert report_of == {"first": kept.html, "first-sweep": kept.html}


def test_a_notebook_that_made_no_run_keeps_nothing(tmp_path: Path) -> None:
    nb, page = _executed(tmp_path)
    assert keep_report(nb, page, tmp_path / "reports", runs_root=tmp_path / "empty") is None
    assert not (tmp_path / "reports" / STUDY).exists()


def test_the_index_lists_every_kept_run_with_its_id_date_report_and_data(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    reports = tmp_path / "reports"
    for run_id, when in (("r1", "2026-12-03T10:00:05+00:00"), ("r2", "2026-12-03T11:00:05+00:00")):
        _stored(root, STUDY, run_id, when)
    nb, page = _executed(tmp_path)
    keep_report(nb, page, reports, runs_root=root)
    meta = json.loads(nb.read_text())
    meta["metadata"]["papermill"].update(start_time="2026-12-03T11:00:00Z", end_time="2026-12-03T11:05:00Z")
    nb.write_text(json.dumps(meta))
    keep_report(nb, page, reports, runs_root=root)
    assert [k.run_id for k in kept_runs(reports)] == ["r2", "r1"]  # newest first
    text = write_index([], reports).read_text()
    assert text.count(f'href="{STUDY}/r1.html"') == 1 and text.count(f'href="{STUDY}/r2.html"') == 1
    assert "2026-12-03 11:00 UTC" in text and "2026-12-03 10:00 UTC" in text
    assert f'href="{STUDY}/r2/derived/comparison.json"' in text and f'href="{STUDY}/r2/summaries.csv"' in text
    assert f'href="{STUDY}.html"' in text  # the newest report at its stable address stays listed
    assert str(tmp_path) not in text  # links relative to the reports folder


@pytest.mark.parametrize("bad", ["{not json", json.dumps({"metadata": {}})])
def test_an_executed_notebook_without_papermills_record_made_no_run(tmp_path: Path, bad: str) -> None:
    nb = tmp_path / f"{STUDY}.ipynb"
    nb.write_text(bad)
    assert runs_made(nb, runs_root=tmp_path) == []
