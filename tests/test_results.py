"""The read model of a stored run (``benchlib.store.results``): ``open_run`` by folder, by
``study/run_id`` and by run id (clear errors for a run not stored, an id stored in several
studies, a folder that is not a run), and the experiment run.json describes read back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchlib.analysis.studies import grpc_json
from benchlib.core.errors import ParameterError, StorageError
from benchlib.core.model import Arm, Condition, CrossCheck, Experiment, Limits, LoadSpec, Stage
from benchlib.core.schema import ROW_DTYPE
from benchlib.run.runner import ExperimentResult, experiment_parameters
from benchlib.store.records.run import Provenance, RunRecord
from benchlib.store.results import Run, experiment_from_parameters, open_run
from benchlib.store.runstore import RunStore

EXPERIMENTS = [
    Experiment("plain", (Arm("a", "svc-a"), Arm("b", "svc-b")), (Condition("main", LoadSpec()),)),
    Experiment(
        "rich",
        (Arm("a", "svc", variant="fair", endpoint="hello", log_sink="discard", env=(("K", "v"),), runtime="docker",
             limits=Limits(cpus=1.5, memory_mb=256)),
         Arm("f", "svc", front="proxy", front_variant="keep-conn-off")),
        (Condition("open", LoadSpec(model="open", rate_rps=500, arrival="poisson", connections=8,
                                    headers=(("x-a", "1"),), body=b"\x00\x01{}", method="POST")),
         Condition("sweep", LoadSpec(model="open", stages=(Stage(100, 1), Stage(200, 2)), connections=4),
                   endpoint="hello", cross_check=CrossCheck("wrk", (("threads", 2), ("connections", 100)), arms=("a",))),
         Condition("count", LoadSpec(duration_s=None, requests=1000, warmup_s=0, warmup_requests=50, keep_alive=False,
                                     http_version="1.0"))),
        trials=4, seed=7, limits=Limits(cpus=2), baseline="f", between_trials_s=0, retry_failed=True, repeat_invalid=2,
        cross_check_blocks=2, dependencies="block"),
    Experiment(grpc_json.STUDY, grpc_json.study_arms("go", "grpc,json", "small"),
               grpc_json.study_conditions("1", 1.0, 0.5), trials=3),
]


@pytest.mark.parametrize("exp", EXPERIMENTS, ids=lambda e: e.study)
def test_the_experiment_reads_back_from_its_stored_parameters(exp: Experiment) -> None:
    params = experiment_parameters(exp)
    again = experiment_from_parameters(params)
    assert experiment_parameters(again) == params and again == exp


def test_parameters_that_describe_no_experiment_are_one_clear_error() -> None:
    with pytest.raises(ParameterError, match="do not describe an experiment .*KeyError"):
        experiment_from_parameters({"arms": [{"name": "a"}]})


def _stored(root: Path, study: str, run_id: str, exp: Experiment | None = None) -> Path:
    store = RunStore.open(study, run_id, root=root)
    params = experiment_parameters(exp) if exp is not None else {"arms": [{"name": "a"}], "conditions": [{"name": "main"}]}
    store.write_run(RunRecord(study=study, run_id=run_id, status="complete", parameters=params,
                              unavailable={"b": "no dotnet toolchain"}, provenance=Provenance.from_json({"cpu_count": 2})))
    store.write_trial(np.zeros(0, dtype=ROW_DTYPE), {"record_version": 2, "condition": "main", "arm": "a", "block": 0,
                                                      "seq": 0, "status": "failed", "reason": "ServiceStartError: x"})
    return store.path


def test_open_run_by_folder_by_study_and_id_and_by_id(tmp_path: Path) -> None:
    exp = EXPERIMENTS[0]
    path = _stored(tmp_path, "plain", "r1", exp)
    _stored(tmp_path, "other", "r2")
    for how in (path, str(path), RunStore(path)):
        run = open_run(how)
        assert isinstance(run, Run) and (run.study, run.run_id, run.path) == ("plain", "r1", path)
    run = open_run("r1", root=tmp_path)
    assert run == open_run("plain/r1", root=tmp_path)
    assert run.experiment == exp and run.arms == ("a", "b") and run.conditions == ("main",) and run.baseline == "a"
    assert run.unavailable == {"b": "no dotnet toolchain"} and run.status == "complete"
    assert run.provenance.cpu_count == 2 and (run.ran, run.skipped) == (0, 0)
    (t,) = run.trials
    assert (t.arm, t.status, t.valid, t.log_path) == ("a", "failed", False, path / "logs" / "main" / "a" / "b000.log")
    assert run.not_run_table().to_dict("records") == [{"arm": "b", "status": "not run: no dotnet toolchain"}]
    assert run.latencies().empty and run.arm_order(["x", "b", "a"]) == ["a", "b", "x"]
    # hand-written parameters: no experiment, the names still read
    other = open_run("r2", root=tmp_path)
    assert other.experiment is None and other.arms == ("a",) and other.baseline == "a"
    with pytest.raises(StorageError, match="do not describe an experiment"):
        other.require_experiment()
    assert ExperimentResult is Run  # the name older code imports


def test_open_run_says_what_is_stored_when_it_cannot_find_the_run(tmp_path: Path) -> None:
    _stored(tmp_path, "quickstart", "r1")
    _stored(tmp_path, "study-b", "r1")
    _stored(tmp_path, "study-b", "r3")
    with pytest.raises(StorageError, match=r"run id 'r1' is stored in several studies \(quickstart, study-b\); "
                                           r"name one: quickstart/r1, study-b/r1"):
        open_run("r1", root=tmp_path)
    with pytest.raises(StorageError, match=r"no run 'nope'; runs stored under .*: quickstart/r1, study-b/r1, study-b/r3"):
        open_run("nope", root=tmp_path)
    with pytest.raises(StorageError, match="no runs are stored under"):
        open_run("r1", root=tmp_path / "empty")
    (tmp_path / "plain-folder").mkdir()
    with pytest.raises(StorageError, match="plain-folder is not a run folder .no run.json, no trials/."):
        open_run(tmp_path / "plain-folder", root=tmp_path)
    with pytest.raises(StorageError, match="no run folder at /no/such/run"):
        open_run("/no/such/run", root=tmp_path)


def test_a_report_names_where_a_run_is_stored_without_an_absolute_path(tmp_path: Path) -> None:
    from benchlib.analysis.run_info import stored_where
    from benchlib.publish.notebooks import project_root

    inside = Run("quickstart", "r1", project_root() / "data" / "runs" / "quickstart" / "r1")
    assert stored_where(inside) == "data/runs/quickstart/r1"
    elsewhere = open_run(_stored(tmp_path, "quickstart", "r2"))
    assert stored_where(elsewhere) == "<runs folder>/quickstart/r2" and str(tmp_path) not in stored_where(elsewhere)
