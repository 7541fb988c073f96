"""A stored run as a pilot (benchlib.analysis.pilot): windows, costs, the planner and the
report's design section, on simulated trials written to a real run folder (no service runs)."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis.pilot import design_section, design_table, main, pilot_windows, plan_from_run, trial_costs
from benchlib.analysis.questions import Family, run_family
from benchlib.core.model import Arm, Condition, Experiment, LoadSpec
from benchlib.run.resume import experiment_parameters
from benchlib.stats import summarize_trial
from benchlib.stats.simulate import trial_latencies_ms, trial_rows
from benchlib.store.records.run import RunRecord
from benchlib.store.results import open_run
from benchlib.store.runstore import RunStore

RATE, SECONDS, WARMUP, FIXED = 1000.0, 2.0, 0.5, 3.5  # a slot: 3.5 s start-up etc. + 0.5 + 2 (whole seconds)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """10 blocks of arms a and b (b 6% slower), a 4% run effect per trial, 2 s measured at 1,000/s."""
    return _write_run(tmp_path_factory.mktemp("runs") / "s" / "r",
                      {"duration_s": SECONDS, "warmup_s": WARMUP, "rate_rps": RATE, "model": "open"})


@pytest.fixture(scope="module")
def count_run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same trials under a load of a request count (no duration_s: ab's -n), 2 s measured each."""
    return _write_run(tmp_path_factory.mktemp("runs") / "s" / "r",
                      {"duration_s": None, "requests": int(RATE * SECONDS), "warmup_s": WARMUP, "model": "closed"})


def _write_run(path: Path, load: dict, seed: int = 9, run_id: str = "r") -> Path:
    store = RunStore(path)
    exp = Experiment("s", (Arm("a", "a"), Arm("b", "b")), (Condition("main", LoadSpec(**load)),), trials=10,
                     baseline="a", between_trials_s=0.0)
    store.write_run(RunRecord(study="s", run_id=run_id, parameters=experiment_parameters(exp)))
    rng = np.random.default_rng(seed)
    t0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    seq = 0
    for block in range(10):
        for arm in (("a", "b") if block % 2 else ("b", "a")):
            lat = trial_latencies_ms(int(RATE * SECONDS), rng, sigma=0.35, trial_sd=0.04, spike_rate=0.0,
                                     shift=1.06 if arm == "b" else 1.0)
            start = t0 + dt.timedelta(seconds=seq * (FIXED + WARMUP + SECONDS))
            meta = {"condition": "main", "arm": arm, "block": block, "seq": seq, "status": "ok", "runtime": "local",
                    "started_utc": start.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "finished_utc": (start + dt.timedelta(seconds=WARMUP + SECONDS + 1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "load": {"measured_duration_s": SECONDS, "loadspec": load, "requests": {"measure": 2000}}}
            store.write_trial(trial_rows(lat, rate_rps=RATE), meta)
            seq += 1
    return path


def _summaries(path: Path) -> pd.DataFrame:
    rec = open_run(path)
    rows = [{"condition": t.condition, "arm": t.arm, "block": t.block, "valid": True, **summarize_trial(t.rows())}
            for t in rec.trials]
    return pd.DataFrame.from_records(rows)


def test_windows_and_costs_come_from_the_stored_trials(run_dir: Path) -> None:
    w = pilot_windows(open_run(run_dir), quantiles=(0.5,))
    assert set(w["arm"]) == {"a", "b"} and w["block"].nunique() == 10
    whole = w[(w["kind"] == "split") & (w["k"] == 1)]
    assert len(whole) == 20 and np.allclose(whole["window_s"], SECONDS)
    costs = trial_costs(open_run(run_dir))
    assert len(costs) == 20 and (costs["duration_s"] == SECONDS).all() and (costs["warmup_s"] == WARMUP).all()
    cycle = (costs["next_started"] - costs["started"]).dt.total_seconds().dropna()
    assert np.allclose(cycle, FIXED + WARMUP + SECONDS)


def test_plan_from_run_finds_between_trial_variance_and_prefers_short_trials(run_dir: Path) -> None:
    plan = plan_from_run(open_run(run_dir), condition="main", metrics=("p50_ms",), target_mde=0.05, current=(10, SECONDS),
                         sequential=False)
    (c,) = plan.components
    assert c.between_share > 0.7  # 4% per trial against about 1% within at 2 s
    # the block costs what the timestamps say: two slots of 3 + 0.5 + d seconds
    assert plan.cost.block_seconds(SECONDS) == pytest.approx(2 * (FIXED + WARMUP + SECONDS), rel=0.05)
    assert plan.chosen.reaches and plan.chosen.duration_s <= SECONDS
    assert plan.current is not None and plan.current.blocks == 10


def test_design_section_states_design_predicted_and_achieved_mde(run_dir: Path) -> None:
    fam = Family.against("q", "a", ["b"], conditions=["main"], metrics=("p50_ms", "throughput_rps"))
    ans = run_family(_summaries(run_dir), fam)
    table = design_table(open_run(run_dir), [ans], target_mde=0.05).set_index("metric")
    row = table.loc["p50_ms"]
    assert (row["blocks_run"], row["blocks_planned"], row["duration_s"], row["family_size"]) == (10, 10, SECONDS, 2)
    v = ans.comparison.verdict("b", "p50_ms")
    assert row["achieved_mde_pct"] == pytest.approx(100 * v.mde)
    # the run's own components give about what the run achieved (same data, the c/d model): no prediction
    assert math.isnan(row["predicted_mde_pct"]) and row["mde_source"] == "this run's own trials"
    assert 0.6 < row["own_mde_pct"] / row["achieved_mde_pct"] < 1.6
    assert row["chosen_blocks"] >= 6 and row["chosen_mde_pct"] <= 5.0
    text = design_section(open_run(run_dir), [ans], target_mde=0.05)
    assert text.startswith("**Design.**") and "| main | p50_ms | 1 (2) | 10 / 10 × 2 s |" in text
    assert f"{row['own_mde_pct']:.1f}%" in text and f"{row['achieved_mde_pct']:.1f}%" in text


def test_a_metric_in_other_units_is_predicted_from_its_windows(run_dir: Path) -> None:
    # study 05 compares p50_us (µs): the same log ratios as the windows' p50_ms
    summaries = _summaries(run_dir)
    summaries["p50_us"] = summaries["p50_ms"] * 1000.0
    ms = design_table(open_run(run_dir), [run_family(summaries, Family.against("q", "a", ["b"], conditions=["main"],
                                                                     metrics=("p50_ms",)))]).iloc[0]
    us = design_table(open_run(run_dir), [run_family(summaries, Family.against("q", "a", ["b"], conditions=["main"],
                                                                     metrics=("p50_us",)))]).iloc[0]
    assert us["metric"] == "p50_us" and math.isfinite(us["own_mde_pct"])
    assert us["own_mde_pct"] == pytest.approx(ms["own_mde_pct"])
    assert us["chosen_mde_pct"] == pytest.approx(ms["chosen_mde_pct"])


def test_design_of_a_request_count_load_states_its_measured_seconds(count_run_dir: Path) -> None:
    fam = Family.against("q", "a", ["b"], conditions=["main"], metrics=("p50_ms",))
    ans = run_family(_summaries(count_run_dir), fam)
    row = design_table(open_run(count_run_dir), [ans], target_mde=0.05).set_index("metric").loc["p50_ms"]
    # no duration was asked: the trials' median measured seconds stand for it, so the MDE is predicted
    assert row["duration_s"] == SECONDS and math.isfinite(row["own_mde_pct"])
    assert "| main | p50_ms | 1 (1) | 10 / 10 × 2 s |" in design_section(open_run(count_run_dir), [ans], target_mde=0.05)


def test_cli_prints_components_and_plans(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(run_dir), "--metric", "p50_ms", "--target", "0.05", "--current", "10", "2"]) == 0
    out = capsys.readouterr().out
    assert "## s / r / main" in out and "### target MDE 5%" in out and "**Design**" in out
    assert not math.isnan(float(out.count("|")))


def test_a_prediction_comes_from_data_the_run_did_not_produce(run_dir: Path, tmp_path: Path) -> None:
    """Issue 19, item 7: "predicted MDE" was computed from the run's own trials, so it equalled
    the achieved MDE by construction. Without a pilot the column is now headed "MDE from this
    run's own components (not a prediction)"; a pilot (an earlier stored run, or components
    given) predicts; the run given as its own pilot is not a pilot; a sequential run's MDEs
    are the sequential test's over its looks. Parent commit: the heading read "predicted
    MDE" and ``predicted_mde_pct`` held the run's own figure."""
    from benchlib.analysis.pilot import OWN_MDE_LABEL, components_from_run
    from benchlib.stats.sequential import SequentialDesign

    fam = Family.against("q", "a", ["b"], conditions=["main"], metrics=("p50_ms",))
    ans = run_family(_summaries(run_dir), fam)
    run = open_run(run_dir)
    text = design_section(run, [ans], target_mde=0.05)
    assert OWN_MDE_LABEL == "MDE from this run's own components (not a prediction)"
    assert f"| {OWN_MDE_LABEL} |" in text and "| predicted MDE |" not in text and "no prediction" in text
    same = design_table(run, [ans], pilot=run).iloc[0]  # the run itself is no pilot
    assert math.isnan(same["predicted_mde_pct"]) and math.isfinite(same["own_mde_pct"])
    # an earlier run of the same services (other seed) predicts this one's MDE
    earlier = open_run(_write_run(tmp_path / "s" / "r0", {"duration_s": SECONDS, "warmup_s": WARMUP, "rate_rps": RATE,
                                                 "model": "open"}, seed=4, run_id="r0"))
    row = design_table(run, [ans], pilot=earlier).iloc[0]
    assert row["mde_source"] == "the stored run `r0`" and math.isnan(row["own_mde_pct"])
    assert math.isfinite(row["predicted_mde_pct"]) and row["predicted_mde_pct"] != pytest.approx(same["own_mde_pct"])
    text = design_section(run, [ans], pilot=earlier)
    assert "from the stored run `r0`" in text and "| predicted MDE |" in text and OWN_MDE_LABEL not in text
    # components handed over (what a pilot phase will give) predict the same
    comps = components_from_run(earlier, metrics=("p50_ms",))
    given = design_table(run, [ans], components=comps).iloc[0]
    assert given["predicted_mde_pct"] == pytest.approx(row["predicted_mde_pct"])
    # a sequential run: the MDE over its looks, larger than the fixed test's at the same blocks
    seq = design_table(run, [ans], pilot=earlier, sequential=SequentialDesign((6, 8, 10))).iloc[0]
    assert seq["predicted_mde_pct"] > row["predicted_mde_pct"]


def test_benchlib_plan_is_the_same_planner(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from benchlib.cli import main as benchlib

    args = ["--metric", "p50_ms", "--target", "0.05", str(run_dir)]  # options before the run, as argparse allows
    assert main(args) == 0
    direct = capsys.readouterr().out
    assert benchlib(["plan", *args]) == 0
    assert capsys.readouterr().out == direct and "### target MDE 5%" in direct
    assert benchlib(["plan", "no-such-run"]) == 2
    assert "benchlib: error: StorageError: no run 'no-such-run'" in capsys.readouterr().err
