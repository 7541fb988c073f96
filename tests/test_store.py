"""Run storage: atomic trial files, round trips, never rewritten, failures set aside, versions checked."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchlib.core.errors import ParameterError, StorageError
from benchlib.core.schema import ROW_DTYPE
from benchlib.store.records.run import RunRecord
from benchlib.store.runstore import RunStore, new_run_id


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
    written = store.write_trial(rows, {"condition": "main", "arm": "a", "block": 2, "seq": 5, "status": "ok"})
    assert written.path == tmp_path / "study" / "r1" / "trials" / "main" / "a" / "b002.parquet"
    (t,) = store.trials()
    assert t.meta["seq"] == 5 and t.arm == "a" and t.block == 2 and t == written  # returned as a reader reads it
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
    store.write_run(RunRecord(study="study", parameters={"a": 1}))
    assert store.update_run(status="complete").status == "complete" == store.read_run().status
    with pytest.raises(StorageError, match="no such field"):
        store.update_run(colour="red")
    data = json.loads((store.path / "run.json").read_text())
    data["schema_version"] = 99
    (store.path / "run.json").write_text(json.dumps(data))
    with pytest.raises(StorageError, match="schema_version 99"):
        store.read_run()


def test_bad_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="must match"):
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


@pytest.mark.parametrize("run_id", [".", "..", "../x", "a/b", ".hidden", "-rf", "a b", "x" * 129, "ä"])
def test_run_ids_that_are_not_plain_folder_names_are_refused(tmp_path: Path, run_id: str) -> None:
    with pytest.raises(ParameterError, match="must match") as err:
        RunStore.open("study", run_id, root=tmp_path / "runs")
    assert "\n" not in str(err.value) and repr(run_id) in str(err.value)
    assert not (tmp_path / "runs").exists()  # nothing written, above the run or anywhere


def _damage(path: Path) -> None:
    """Flip 64 bytes in the middle of the column data (the footer with the metadata stays
    intact, so the file still lists; its rows do not read)."""
    import struct

    data = bytearray(path.read_bytes())
    footer = struct.unpack("<I", data[-8:-4])[0]
    end = len(data) - 8 - footer
    for i in range((4 + end) // 2, min((4 + end) // 2 + 64, end)):
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("n", [300, 5000, 50_000])
def test_damaged_bytes_are_an_error_never_silently_other_numbers(tmp_path: Path, n: int) -> None:
    """zstd alone does not notice every flipped byte (no frame checksum): the pages' CRC does."""
    store = RunStore.open("study", "r1", root=tmp_path)
    rows = _rows(n)
    rows["t_done_ns"] += np.random.default_rng(0).integers(0, 10**9, n)
    _damage(store.write_trial(rows, {"condition": "main", "arm": "a", "block": 0, "seq": 0}).path)
    with pytest.raises(StorageError, match="unreadable trial file"):
        store.trials()[0].rows()


def test_a_damaged_trial_file_is_named(tmp_path: Path) -> None:
    store = RunStore.open("study", "r1", root=tmp_path)
    path = store.write_trial(_rows(5000), {"condition": "main", "arm": "a", "block": 0, "seq": 0}).path
    _damage(path)
    (t,) = store.trials()  # the footer still reads
    for read in (t.rows, t.frame, lambda: store.trials(verify=True)):
        with pytest.raises(StorageError, match="unreadable trial file") as err:
            read()
        assert str(path) in str(err.value) and "\n" not in str(err.value) and "damaged.parquet" in str(err.value)
    path.write_bytes(b"PAR1 not parquet")
    with pytest.raises(StorageError, match=f"{path}: unreadable trial file"):
        store.trials()


def test_an_unreadable_run_json_is_named(tmp_path: Path) -> None:
    store = RunStore.open("study", "r1", root=tmp_path)
    (store.path / "run.json").write_text("[1, 2]")
    with pytest.raises(StorageError, match=r"run.json: expected a JSON object"):
        store.read_run()
    (store.path / "run.json").write_text("{not json")
    with pytest.raises(StorageError, match=r"run.json: unreadable run.json"):
        store.read_run()


def test_an_interrupted_write_leaves_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    store = RunStore.open("study", "r1", root=tmp_path)

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        store.write_trial(_rows(10), {"condition": "main", "arm": "a", "block": 0})
    assert [p.name for p in store.path.rglob("*") if p.is_file()] == []


def test_the_host_column_round_trips_and_a_version_1_trial_reads_as_host_0(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from benchlib.core.schema import HOST_COLUMN, SCHEMA_VERSION, SLICE_COLUMN

    store = RunStore.open("study", "r1", root=tmp_path)
    rows = _rows(100)
    hosts = (np.arange(100) % 3).astype(np.uint16)
    store.write_trial(rows, {"condition": "main", "arm": "a", "block": 0}, hosts=hosts)
    store.write_trial(rows, {"condition": "main", "arm": "a", "block": 1})
    t0, t1 = store.trials()
    assert np.array_equal(t0.rows(), rows) and np.array_equal(t0.hosts(), hosts)
    assert not t1.hosts().any() and len(t1.hosts()) == 100
    assert SCHEMA_VERSION == 3
    # a trial as schema version 1 wrote it: no host (nor slice) column, version "1"; a run.json of version 1
    path = t1.path
    table = pq.read_table(path)
    md = dict(table.schema.metadata)
    md[b"benchlib.schema_version"] = b"1"
    old = table.drop_columns([HOST_COLUMN, SLICE_COLUMN]).replace_schema_metadata(md)
    path.unlink()
    pq.write_table(old, path, write_page_checksum=True)
    run_json = tmp_path / "study" / "r1" / "run.json"
    run_json.write_text(json.dumps({"schema_version": 1, "study": "study"}))
    assert store.read_run().study == "study"
    (_, old_trial) = store.trials(verify=True)
    assert np.array_equal(old_trial.rows(), rows) and old_trial.hosts().dtype == np.uint16
    assert not old_trial.hosts().any()
    assert (old_trial.slices() == 65535).all() and len(old_trial.slices()) == 100  # before version 3: alone
    with pytest.raises(StorageError, match=r"bad.*hosts must have one entry per row|hosts must have one entry"):
        store.write_trial(rows, {"condition": "main", "arm": "a", "block": 2}, hosts=hosts[:5])


def test_the_slice_column_round_trips_and_a_trial_without_it_ran_alone(tmp_path: Path) -> None:
    from benchlib.core.schema import NO_SLICE

    store = RunStore.open("study", "r1", root=tmp_path)
    rows = _rows(50)
    slices = (np.arange(50) // 10).astype(np.uint16)
    store.write_trial(rows, {"condition": "main", "arm": "a", "block": 0}, slices=slices)
    store.write_trial(rows, {"condition": "main", "arm": "b", "block": 0})
    by_arm = {t.arm: t for t in store.trials()}
    assert np.array_equal(by_arm["a"].slices(), slices) and np.array_equal(by_arm["a"].rows(), rows)
    assert (by_arm["b"].slices() == NO_SLICE).all()
    with pytest.raises(StorageError, match="slices must have one entry per row"):
        store.write_trial(rows, {"condition": "main", "arm": "a", "block": 1}, slices=slices[:3])
