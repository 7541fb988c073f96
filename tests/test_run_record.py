"""run.json through one typed, versioned record (:mod:`benchlib.store.records.run`): every
earlier format opens (a stored run of each, from ``tests/data/run_formats``: run.json as the
writers of the git history left it, with a few trials), reads as typed fields, is brought to
the current format without losing a key, and resumes; a newer format is one clear line; the
format and the experiment's fields agree."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchlib.core import model
from benchlib.core.design import PlannedTrial
from benchlib.core.errors import StorageError, ToolchainMissing
from benchlib.core.placement import CpuPlan
from benchlib.core.schema import ROW_DTYPE
from benchlib.run.resume import check_same_design, experiment_parameters
from benchlib.store.records.plan import PlanRecord
from benchlib.store.records.run import (
    RUN_RECORD_VERSION,
    Build,
    DesignChange,
    HostLoss,
    Provenance,
    RunRecord,
    RuntimeFacts,
    Settled,
    update,
)
from benchlib.store.results import Run, open_run
from benchlib.store.runstore import RunStore

FORMATS = Path(__file__).resolve().parent / "data" / "run_formats"
NAMES = sorted(p.stem for p in FORMATS.glob("*.json"))


def _fixture(name: str) -> dict[str, Any]:
    return json.loads((FORMATS / f"{name}.json").read_text())


def _rows() -> np.ndarray:
    rows = np.zeros(220, dtype=ROW_DTYPE)
    rows["t_intended_ns"] = np.arange(220) * 2_500_000
    rows["t_sent_ns"] = rows["t_intended_ns"] + 10_000
    rows["t_done_ns"] = rows["t_intended_ns"] + 1_000_000
    rows["status"], rows["phase"] = 200, [0] * 20 + [1] * 200
    return rows


def _stored(root: Path, name: str) -> tuple[Path, dict[str, Any]]:
    """The fixture's run folder under ``root``: its run.json byte for byte, its trials with a few rows each."""
    f = _fixture(name)
    doc = f["run"]
    folder = root / doc["study"] / doc["run_id"]
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps(doc, indent=1, sort_keys=True))
    store = RunStore(folder)
    for meta in f["trials"]:
        store.write_trial(_rows(), meta)
    return folder, f


@pytest.mark.parametrize("name", NAMES)
def test_every_earlier_run_folder_opens_typed_and_nothing_stored_is_lost(name: str, tmp_path: Path) -> None:
    folder, f = _stored(tmp_path, name)
    doc = f["run"]
    run = open_run(folder)
    record = run.record
    assert record.version == RUN_RECORD_VERSION and "record_version" not in doc  # older: brought up to date
    assert run.experiment is not None and run.experiment.study == doc["study"] == record.study
    # the parameters read complete: what this benchlib stores for the experiment they describe
    assert experiment_parameters(run.experiment) == record.parameters
    assert {k: record.parameters[k] for k in doc["parameters"] if k not in ("arms", "conditions")} == {
        k: v for k, v in doc["parameters"].items() if k not in ("arms", "conditions")}
    assert len(run.trials) == len(f["trials"]) and len(run.summaries()) == len(f["trials"])
    assert record.plan == tuple(PlannedTrial(**p) for p in doc["plan"])
    assert record.cpus == CpuPlan((1,), (0,), (1,)) and run.cpus.server == (1,)
    # nothing lost: written again, every stored key is there with its value (the parameters completed)
    again = record.to_json()
    assert {k: again[k] for k in doc if k != "parameters"} == {k: v for k, v in doc.items() if k != "parameters"}
    assert RunRecord.from_json(again) == record and again["record_version"] == RUN_RECORD_VERSION
    assert update(update(doc)) == update(doc)  # the migrations are idempotent
    # a resume of it is the same design (nothing refused)
    check_same_design(RunStore(folder), record, record.plan, experiment_parameters(run.experiment))
    # the typed provenance
    prov = record.provenance
    assert prov.cpu_count == 2 and prov.commit.startswith(doc["provenance"]["git"]["sha"][:12])
    assert prov.loadavg_1min == doc["provenance"]["loadavg_at_start"][0] and prov.started is not None
    assert prov.raw == doc["provenance"] and record.runtime == RuntimeFacts.from_json(doc["runtime"])


def test_each_format_s_own_facts_read_as_typed_fields(tmp_path: Path) -> None:
    runs = {name: open_run(_stored(tmp_path / name, name)[0]) for name in NAMES}

    first = runs["2026-12-02-first-runs"]
    assert (first.status, first.record.finished_utc, first.record.schema_version) == ("complete", "2026-12-02T15:13:01Z", 1)
    assert first.record.builds["go-nethttp-hello/default"] == Build({"go": "go version go1.23.4 linux/amd64"},
                                                                      "9c1f3b7a0e2d4c55")
    assert first.record.runtime.name == "local" and first.record.runtimes == {}
    assert first.record.settle is None and first.plan is None and first.record.host_losses == ()
    assert first.require_experiment().conditions[0].load.protocol == "http1"  # before HTTP/2: HTTP/1.1

    arms = runs["2026-12-02-per-arm-runtime"]
    exp = arms.require_experiment()
    assert arms.status == "running" and arms.record.finished_utc is None
    assert arms.unavailable == {"dotnet": "no .NET SDK (install the .NET 8 SDK: https://dot.net)"}
    assert set(arms.record.runtimes) == {"local", "docker"} and arms.record.runtimes["docker"].name == "docker"
    assert exp.arm("python").runtime == "docker" and exp.arm("python").limits == model.Limits(1.0, 512)
    assert exp.repeat_invalid == 2 and exp.repeat_disturbed == 2 and exp.dependencies == "trial"
    assert exp.cross_check_blocks == "all"  # before cross_check_blocks: the peer tool ran in every block
    assert exp.conditions[0].cross_check == model.CrossCheck("wrk", (("threads", 1), ("connections", 8)), ("go",))
    assert arms.provenance.commit == "6224eff0c2b9+"

    assert all(r.require_experiment().interleave is None for r in runs.values())  # before format 3: one arm a trial
    ruled = runs["2026-12-03-stopped-by-rule"]
    exp = ruled.require_experiment()
    assert ruled.record.stopped_after_blocks == 2 and exp.trials == 4 and exp.cross_check_blocks == 2
    assert (exp.arm("a").front, exp.arm("a").front_variant, exp.arm("b").front_variant) == ("nginx-fastcgi", None,
                                                                                            "keepalive")
    assert exp.dependencies == "block" and exp.conditions[0].load.arrival == "poisson"
    assert ruled.record.planned_per_arm() == {("main", "a"): 4, ("main", "b"): 4}

    budget = runs["2026-12-04-budget-run"]
    exp = budget.require_experiment()
    assert budget.record.schema_version == 2 and budget.record.settle == Settled(0.3, 0.27, 84.2, True)
    assert isinstance(budget.plan, PlanRecord) and budget.plan.trials == 2 and budget.plan.pilot_blocks == 3
    assert "a pilot of 3 blocks" in budget.plan.describe()
    assert (exp.budget_min, exp.target_mde, exp.repeat_disturbed) == (20.0, 5.0, 3)

    lost = runs["2026-12-07-cluster-stopped"]
    assert lost.status == "stopped" and lost.require_experiment().cluster == "local:3?min_hosts=2"
    assert [(h.block, h.stopped) for h in lost.record.host_losses] == [(0, False), (1, True)]
    assert lost.record.host_losses[1].line.endswith("on a repaired cluster")


@pytest.mark.parametrize("name, ran, skipped", [("2026-12-02-first-runs", 0, 4), ("2026-12-02-per-arm-runtime", 2, 2)])
def test_an_earlier_run_resumes_and_is_written_back_in_the_current_format(
        name: str, ran: int, skipped: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from benchlib.run.runner import run_experiment
    from benchlib.run.testing import FakeCrossCheck, FakeLoad, FakeRuntime, fake_manifests

    folder, f = _stored(tmp_path / "runs", name)
    before = open_run(folder)
    services = {a.service for a in before.require_experiment().arms}
    monkeypatch.setenv("BENCHLIB_SERVICES", str(fake_manifests(tmp_path / "services", sorted(services))))
    monkeypatch.delenv("BENCHLIB_MAX_BETWEEN_TRIALS_S", raising=False)  # the pause stored (0.5 s) is the one resumed
    rt = FakeRuntime(build_errors={"dotnet-kestrel-hello": ToolchainMissing(
        "dotnet", "dotnet-kestrel-hello", "install the .NET 8 SDK: https://dot.net")})
    res = run_experiment(before.require_experiment(), run_id=before.run_id, out_dir=tmp_path / "runs", progress=False,
                         runtime=rt, load=FakeLoad(rt), cross_check=FakeCrossCheck())
    assert (res.ran, res.skipped) == (ran, skipped) and len(res.trials) == 4 and res.status == "complete"
    stored = json.loads((folder / "run.json").read_text())
    assert stored["record_version"] == RUN_RECORD_VERSION and stored["provenance"] == f["run"]["provenance"]
    assert stored["builds"] == f["run"]["builds"] and stored["notebook_parameters"] == f["run"]["notebook_parameters"]
    assert open_run(folder).record == res.record


def test_a_newer_format_or_schema_is_one_clear_line(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "s" / "r")
    store.write_run(RunRecord(study="s", run_id="r"))
    doc = json.loads((store.path / "run.json").read_text())
    for key, value, words in (("record_version", 4, r"record_version 4; this benchlib reads formats 1 to 3 \(a newer "
                                                      r"benchlib wrote it: update benchlib to read it\)"),
                              ("schema_version", 9, r"schema_version 9; this benchlib reads 1, 2")):
        (store.path / "run.json").write_text(json.dumps({**doc, key: value}))
        with pytest.raises(StorageError, match=words) as err:
            store.read_run()
        assert str(store.path / "run.json") in str(err.value) and "\n" not in str(err.value)


def test_a_record_written_reads_back_the_same_and_keeps_what_it_does_not_know(tmp_path: Path) -> None:
    record = RunRecord(
        study="s", run_id="r", status="complete", parameters={"trials": 2}, notebook_parameters={"full": True},
        plan=(PlannedTrial(0, "c", 0, 0, "a"),), cpus=CpuPlan((1,), (0,), (1,)), unavailable={"b": "why"},
        builds={"a/default": Build.from_json({"toolchains": {"go": "1.23"}, "source_hash": "ab", "image": "x"})},
        runtime=RuntimeFacts.from_json({"runtime": "docker", "engine_version": "26.1", "images": {}}),
        runtimes={"local": RuntimeFacts.from_json({"runtime": "local"})},
        provenance=Provenance.from_json({"collected_utc": "2026-12-07T01:00:00+00:00", "git": {"sha": "f" * 40}}),
        settle=Settled(0.3, 0.2, 5.0, True), host_losses=(HostLoss("2026-12-07T01:02:03Z", 1, "lost", stopped=True),),
        design_changes=(DesignChange("closed", 0, "arm b: carry-over 4.1% above 2%"),),
        stopped_after_blocks=3, finished_utc="2026-12-07T01:05:00Z", extra={"from_a_later_version": [1, 2]})
    store = RunStore(tmp_path / "s" / "r")
    assert store.write_run(record) == record == store.read_run()
    assert RunRecord.from_json(record.to_json()) == record and record.provenance.commit == "f" * 12
    assert json.loads((store.path / "run.json").read_text())["from_a_later_version"] == [1, 2]
    assert store.update_run(status="stopped").status == "stopped" and store.read_run().extra == record.extra
    assert store.read_run() is not None and RunStore(tmp_path / "none").read_run() is None


#: The fields format 3 stores of each part of the experiment. A field added to the model is a
#: new format: bump RUN_RECORD_VERSION, add update_to_<N> (filling the key in older runs with
#: what they did) and list the field here.
FORMAT_3_FIELDS = {
    "Experiment": ("study", "arms", "conditions", "trials", "seed", "runtime", "limits", "baseline", "between_trials_s",
                   "retry_failed", "repeat_invalid", "repeat_disturbed", "cross_check_blocks", "dependencies",
                   "budget_min", "target_mde", "cluster", "service_starts", "interleave"),
    "Interleave": ("slice_ms", "gap_ms", "carry_over_pct"),
    "Arm": ("name", "service", "variant", "endpoint", "log_sink", "env", "runtime", "limits", "front", "front_variant"),
    "Condition": ("name", "load", "endpoint", "cross_check"),
    "LoadSpec": ("model", "connections", "duration_s", "requests", "rate_rps", "arrival", "stages", "warmup_s",
                 "warmup_requests", "workers", "keep_alive", "http_version", "method", "path", "headers", "body",
                 "connect_timeout_s", "timeout_s", "protocol", "streams"),
    "Stage": ("rate_rps", "duration_s"), "Limits": ("cpus", "memory_mb"), "CrossCheck": ("tool", "options", "arms"),
}


def test_the_stored_format_and_the_experiment_s_fields_agree() -> None:
    assert RUN_RECORD_VERSION == 3, "a new run.json format: list its fields in FORMAT_3_FIELDS' successor"
    got = {name: tuple(f.name for f in fields(getattr(model, name))) for name in FORMAT_3_FIELDS}
    assert got == FORMAT_3_FIELDS, (
        "the experiment's fields changed: runs stored before would no longer resume. Bump RUN_RECORD_VERSION in "
        "benchlib/store/records/run.py and add update_to_<N> filling the new key in older runs with what they did")


def test_a_run_the_runner_returns_is_the_run_as_read(tmp_path: Path) -> None:
    folder, _ = _stored(tmp_path, "2026-12-03-stopped-by-rule")
    run = open_run(folder)
    assert isinstance(run, Run) and run.record == RunStore(folder).read_run()
