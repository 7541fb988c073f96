"""A report's self-description (``benchlib.analysis.run_info``): the parameters a run was made
with, the two commands (rebuild from the stored trials, measure again), and every trial's rate
and p99 over its time; on a tiny stored run with rows written here."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchlib.analysis.run_info import parameters_markdown, timeline_markdown, trial_windows
from benchlib.core.schema import ERROR_CODES, PHASE_CODES, ROW_DTYPE
from benchlib.store.records.run import RunRecord
from benchlib.store.results import open_run
from benchlib.store.runstore import RunStore


def _rows(n: int, seconds: float, warm_s: float, latency_ms: float) -> np.ndarray:
    rows = np.zeros(n, dtype=ROW_DTYPE)
    t = np.linspace(0.0, seconds, n, endpoint=False) * 1e9
    rows["t_intended_ns"] = t
    rows["t_sent_ns"] = t
    rows["t_done_ns"] = t + latency_ms * 1e6
    rows["status"] = 200
    rows["error"] = ERROR_CODES["none"]
    rows["phase"] = np.where(t < warm_s * 1e9, PHASE_CODES["warmup"], PHASE_CODES["measure"])
    return rows


def _run(root: Path, out_dir: str) -> Path:
    store = RunStore.open("00_quickstart", "r1", root=root)
    store.write_run(RunRecord.from_json({"study": "00_quickstart", "run_id": "r1", "status": "complete",
                     "parameters": {"arms": [{"name": "a"}], "conditions": [{"name": "main"}]},
                     "notebook_parameters": {"trials": 2, "runtime": "local", "out_dir": out_dir, "progress": False},
                     "provenance": {"cpu_count": 2}}))
    for block, latency in ((0, 1.0), (1, 4.0)):
        store.write_trial(_rows(3000, 3.0, 1.0, latency), {"record_version": 2, "condition": "main", "arm": "a",
                                                           "block": block, "seq": block, "status": "ok"})
    return store.path


def test_the_report_names_its_parameters_and_the_commands_to_rebuild_and_to_measure_again(tmp_path: Path) -> None:
    run = open_run(_run(tmp_path / "runs", str(tmp_path / "runs")))
    text = parameters_markdown(run)
    assert "`trials=2`" in text and "`out_dir='<runs folder>'`" in text and "progress" not in text
    assert "`benchlib run 00_quickstart -p out_dir '<runs folder>' -p runtime local -p trials 2 -p run_id r1`" in text
    assert "measure it again (a new run id, the same parameters): `benchlib run 00_quickstart " \
           "-p out_dir '<runs folder>' -p runtime local -p trials 2`" in text
    assert str(tmp_path) not in text


def test_each_trial_over_time_has_its_rate_and_p99_per_window_and_the_warmup_marked(tmp_path: Path) -> None:
    run = open_run(_run(tmp_path / "runs", ""))
    w = trial_windows(run, windows=10)
    assert list(w["trial"].unique()) == ["main/a/b000", "main/a/b001"] and len(w) == 20
    first = w[w["block"] == 0]
    # 3,000 requests over ~3 s: ~1,000/s in every window; the latency is what was written
    assert np.allclose(first["rate_rps"].iloc[1:], 1000, rtol=0.05)
    assert np.allclose(first["p99_ms"], 1.0) and np.allclose(w[w["block"] == 1]["p99_ms"], 4.0)
    assert first["warmup"].iloc[0] and not first["warmup"].iloc[-1] and first["warmup"].sum() == 3
    page = timeline_markdown(run)
    assert page.count('src="data:image/png;base64,') == 1 and "Each trial over time" in page
