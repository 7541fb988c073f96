"""Run storage: atomic trial files, round trips, never rewritten, failures set aside, versions checked."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchlib.errors import StorageError
from benchlib.schema import ROW_DTYPE
from benchlib.store import RunStore, new_run_id


def _rows(n: int) -> np.ndarray:
    rows = np.zeros(n, dtype=ROW_DTYPE)
    rows["t_intended_ns"] = np.arange(n) * 1000
    rows["t_sent_ns"] = rows["t_intended_ns"] + 5
    rows["t_done_ns"] = rows["t_sent_ns"] + 12345
    rows["status"] = 200
    rows["error"][::7] = 3
    rows["phase"][n // 2:] = 1
    rows["conn"] = np.arange(n) % 4
    rows["bytes"] = 120
    return rows


def test_trial_round_trip_keeps_every_column_and_the_metadata(tmp_path: Path) -> None:
    store = RunStore.open("study", "r1", root=tmp_path)
    rows = _rows(1000)
    path = store.write_trial(rows, {"condition": "main", "arm": "a", "block": 2, "seq": 5, "status": "ok"})
    assert path == tmp_path / "study" / "r1" / "trials" / "main" / "a" / "b002.parquet"
    (t,) = store.trials()
    assert t.meta["seq"] == 5 and t.arm == "a" and t.block == 2
    back = t.rows()
    assert back.dtype == ROW_DTYPE and np.array_equal(back, rows)
    frame = t.frame()
    assert set(frame["error"].astype(str)) == {"none", "timeout"} and set(frame["phase"].astype(str)) == {"warmup", "measure"}


def test_no_temporary_files_are_left_and_trials_are_never_rewritten(tmp_path: Path) -> None:
    store = RunStore.open("study", "r1", root=tmp_path)
    meta = {"condition": "main", "arm": "a", "block": 0}
    store.write_trial(_rows(10), meta)
    assert [p.name for p in (store.path / "trials" / "main" / "a").iterdir()] == ["b000.parquet"]
    with pytest.raises(StorageError, match="never rewritten"):
        store.write_trial(_rows(10), meta)


def test_set_aside_keeps_the_failed_trial(tmp_path: Path) -> None:
    store = RunStore.open("study", "r1", root=tmp_path)
    meta = {"condition": "main", "arm": "a", "block": 0, "status": "failed"}
    store.write_trial(_rows(10), meta)
    moved = store.set_aside("main", "a", 0)
    assert moved is not None and moved.name == "b000.failed-1.parquet" and moved.exists()
    assert store.trials() == [] and not store.has_trial("main", "a", 0)
    store.write_trial(_rows(10), {**meta, "status": "ok"})
    assert store.set_aside("main", "a", 0).name == "b000.failed-2.parquet"


def test_run_json_round_trip_and_unknown_schema_version(tmp_path: Path) -> None:
    store = RunStore.open("study", None, root=tmp_path)
    assert store.run_id.count("-") == 2
    store.write_run({"study": "study", "parameters": {"a": 1}})
    assert store.update_run(status="complete")["status"] == "complete"
    data = json.loads((store.path / "run.json").read_text())
    data["schema_version"] = 99
    (store.path / "run.json").write_text(json.dumps(data))
    with pytest.raises(StorageError, match="schema_version 99"):
        store.read_run()


def test_bad_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="must match"):
        RunStore.open("../evil", "x", root=tmp_path)
    assert new_run_id() != new_run_id()


def test_summaries_are_cached_and_recomputed_when_trials_change(tmp_path: Path) -> None:
    store = RunStore.open("study", "r1", root=tmp_path)
    store.write_trial(_rows(10), {"condition": "main", "arm": "a", "block": 0, "seq": 0})
    calls = []

    def summarize(t):
        calls.append(t.path)
        return {"arm": t.arm, "n": len(t.rows())}

    assert list(store.summaries(summarize)["n"]) == [10]
    assert list(store.summaries(summarize)["n"]) == [10] and len(calls) == 1
    store.write_trial(_rows(20), {"condition": "main", "arm": "b", "block": 0, "seq": 1})
    assert list(store.summaries(summarize)["n"]) == [10, 20] and len(calls) == 3
