"""Study 04 (Rust vs. Go: the benchmark): its notebook and its helper module.

* ``benchlib.analysis.studies.rust_vs_go`` (pure parts, fast): the arms follow the parameters, the
  comparison families relabel the right trials, and the conclusion computed from known effects
  (typed verdicts) names the factor that dominates. The generic parts (parameter lists, client
  CPU, log lines, wrk beside benchlib) are tested with the analysis layer (``tests/analysis``).
* The notebook, executed by papermill with tiny parameters against the real services
  (marked ``notebook`` and ``integration``; about 3 minutes with warm builds): every arm and
  sink ran and met its contract, wrk ran beside benchlib on the seed's arms in alternating
  order, the sweep ran at the fractions of the measured capacity, the stored comparison
  tables hold the expected rows, and the HTML report shows the tables computed from the
  stored trials of that run.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis import family_markdown, run_family
from benchlib.analysis.studies import rust_vs_go as rvg
from benchlib.core.errors import ParameterError
from benchlib.stats.verdict import VerdictKind

# -- pure parts ----------------------------------------------------------------------------------

def test_the_default_design_keeps_every_family_decidable_and_the_full_scale_is_the_seeds() -> None:
    from benchlib.analysis import params
    from benchlib.stats import min_trials

    d, f = rvg.DEFAULT_DESIGN, rvg.FULL_DESIGN
    arms = [a.name for a in rvg.study_arms(extras=False)]
    rows = {fam.key: len(fam.rows()) * len(fam.metrics) for fam in rvg.closed_families(arms, extras=False)}
    assert rows == {"seed": 6, "framework": 6, "logging": 6}
    sweep_rows = len(rvg.parse_fractions(d["sweep_rates"])) * 2  # p50 and p99 at each rate
    assert min_trials(alpha=0.05, n_comparisons=max(*rows.values(), sweep_rows), paired=True) == d["trials"] == 8
    assert (f["trials"], f["duration_s"], f["cross_check_blocks"], f["extras"], f["sweep"]) == (10, 30.0, "all", "yes",
                                                                                                "yes")
    assert d["sweep"] == "no"
    assert rvg.parse_fractions(f["sweep_rates"]) == rvg.SWEEP_FRACTIONS
    given = dict(trials=0, duration_s=0.0, warmup_s=2.0, extras="auto", cross_check_blocks="auto", sweep="auto",
                 sweep_rates="auto", sweep_duration_s=0.0)
    chosen = params.design_values(False, given, default=d, full_scale=f)
    assert chosen == {**{k: d[k] for k in given}, "warmup_s": 2.0}  # a value set by the user stays
    assert params.design_values(True, given, default=d, full_scale=f)["duration_s"] == 30.0
    assert params.design_values(True, {"extras": False}, default=d, full_scale=f) == {"extras": False}



def test_study_arms_follow_the_parameters() -> None:
    default = {a.name: a for a in rvg.study_arms()}
    assert list(default) == ["actix-debug-pipe", "actix-release-pipe", "actix-release-discard", "go-pipe",
                             "go-discard", "python-pipe", "node-pipe"]
    assert (default["actix-debug-pipe"].service, default["actix-debug-pipe"].variant) == ("rust-actix-logger",
                                                                                         "faithful")
    assert default["actix-release-discard"].variant == "fair" and default["actix-release-discard"].log_sink == "discard"
    assert default["go-pipe"].service == "go-nethttp-logger" and default["node-pipe"].log_sink == "pipe"
    lean = [a.name for a in rvg.study_arms(sinks="file", sink_servers="go", extras=False)]
    assert lean == ["actix-debug-pipe", "actix-release-pipe", "go-pipe", "go-file"]
    with pytest.raises(ParameterError, match="valid: actix-debug, actix-release, go, python, node"):
        rvg.study_arms(sink_servers="rust")


def _synthetic_summaries(effects: dict[str, float], blocks: int = 10, seed: int = 1) -> pd.DataFrame:
    """Closed-model summaries with known throughputs (requests/s) per arm, 1% trial noise,
    paired blocks; latency follows Little's law at 100 connections."""
    rng = np.random.default_rng(seed)
    rows = []
    for b in range(blocks):
        drift = rng.normal(0, 0.02)
        for pos, (arm, rps) in enumerate(effects.items()):
            tput = rps * math.exp(drift + rng.normal(0, 0.01))
            rows.append({"condition": "closed", "arm": arm, "block": b, "position": pos, "seq": b * 10 + pos,
                         "valid": True, "load_model": "closed", "offered_rps": None,
                         "throughput_rps": tput, "p50_ms": 1000 * 100 / tput, "p99_ms": 5000 * 100 / tput})
    return pd.DataFrame(rows)


def test_families_relabel_trials_and_the_conclusion_names_the_dominant_factor() -> None:
    # build mode x4 (debug 5k, release 20k); frameworks without logging: Go 0.9x actix;
    # the pipe costs actix 50% and Go 10%.
    effects = {"actix-debug-pipe": 5_000.0, "actix-release-pipe": 10_000.0, "actix-release-discard": 20_000.0,
               "go-pipe": 16_200.0, "go-discard": 18_000.0, "python-pipe": 6_000.0, "node-pipe": 5_000.0}
    s = _synthetic_summaries(effects)
    fams = rvg.closed_families(list(effects), extras=True)
    assert [f.key for f in fams] == ["seed", "framework", "logging", "extras"]
    framework = next(f for f in fams if f.key == "framework")
    assert {(c.group, c.baseline, c.arm, *c.labels) for c in framework.rows()} == {
        ("log to pipe", "actix-release-pipe", "go-pipe", "actix-release", "go"),
        ("log to discard", "actix-release-discard", "go-discard", "actix-release", "go")}
    results = {f.key: run_family(s, f, seed=0) for f in fams}
    for answer in results.values():
        t = answer.comparison.table
        assert set(t["metric"]) == set(rvg.METRICS) and (t["correction"] == "holm").all()
        assert (t["family_size"] == len(t)).all() and (t["n_blocks"] == 10).all()
    assert set(results["framework"].comparison.table["condition"]) == {"log to pipe", "log to discard"}
    g = results["seed"].verdict("go-pipe", "throughput_rps", group="log to pipe")
    assert g.estimate == pytest.approx(16_200 / 5_000, rel=0.03) and g.kind is VerdictKind.FASTER
    fp = results["framework"].verdict("go", "throughput_rps", group="log to pipe")
    assert fp.estimate == pytest.approx(1.62, rel=0.03) and fp.kind is VerdictKind.FASTER
    lg = results["logging"].verdict("discard", "throughput_rps", group="actix-release")
    assert lg.estimate == pytest.approx(2.0, rel=0.03)
    assert "Holm-adjusted over these 6 rows" in family_markdown(results["framework"])
    text = rvg.conclusion_markdown(results, _reference())
    assert "Yes, at a fair build and the same log sink (pipe)" in text
    assert "the largest factor is **the build mode (actix-web release / debug)** (" in text, text
    assert "has no test of its own" in text


def test_the_answer_says_no_when_release_actix_wins_and_missing_arms_are_named() -> None:
    effects = {"actix-debug-pipe": 5_000.0, "actix-release-pipe": 30_000.0, "go-pipe": 15_000.0}
    s = _synthetic_summaries(effects)
    fams = rvg.closed_families(list(effects) + ["actix-release-discard", "go-discard"], extras=False)
    results = {f.key: run_family(s, f, unavailable={"go-discard": "no go toolchain"}) for f in fams}
    assert set(results) == {"seed", "framework", "logging"}
    notes = results["framework"].notes
    assert "go-discard (log to discard): not run: no go toolchain" in notes
    assert "actix-release-discard (log to discard): no valid trial" in notes
    assert set(results["framework"].comparison.table["condition"]) == {"log to pipe"}
    assert results["logging"].comparison is None
    assert family_markdown(results["logging"]).count("not compared") == 2
    missing = results["framework"].verdict("go", "throughput_rps", group="log to discard")
    assert missing.kind is VerdictKind.NOT_RUN and missing.reason == "no go toolchain"
    text = rvg.conclusion_markdown(results, _reference())
    assert "Not when the comparison is fair" in text and "actix-web release's (Holm-adjusted" in text, text
    assert "the largest factor is" in text


def _reference() -> pd.DataFrame:
    from benchlib.analysis.reference import load_reference

    return load_reference("04")


def test_gap_table_holds_the_seeds_ratios() -> None:
    table = rvg.gap_table(_reference(), _synthetic_summaries({"actix-debug-pipe": 5e3, "go-pipe": 1e4}), None)
    seed = table.set_index("source")["Go / actix"]
    assert seed["seed (output 3 / output 1)"] == pytest.approx(36021.81 / 15004.41)
    assert seed["seed (output 3 / output 2)"] == pytest.approx(36021.81 / 18838.67)
    assert seed["ours, benchlib: go-pipe / actix-debug-pipe"] == pytest.approx(2.0, rel=0.03)


# -- the notebook, for real ------------------------------------------------------------------------

# the full-scale design (extras, four sweep rates, wrk in every block) with tiny numbers: 0.5 s
# measured per trial (wrk still runs its whole second: the notebook rounds it up to 1 s)
SMALL = {"full": True, "trials": 2, "duration_s": 0.5, "warmup_s": 0.1, "connections": 8, "sweep_duration_s": 0.5,
         "sinks": "pipe,file,discard", "seed": 5, "run_id": "nbtest"}


@pytest.mark.notebook
@pytest.mark.integration
def test_notebook_runs_end_to_end_and_its_tables_hold_every_arm_sink_sweep_step_and_wrk(tmp_path: Path) -> None:
    import nbformat

    from benchlib.analysis import client_cpu_table, log_lines_table, stopping_rule, verdict_table
    from benchlib.analysis.peers import peer_beside
    from benchlib.core.sweep import capacity
    from benchlib.publish.execute import run_notebook
    from benchlib.store.results import open_run
    from benchlib.store.runstore import RunStore

    runs = tmp_path / "runs"
    run = run_notebook("04_rust_vs_go_logging", {**SMALL, "out_dir": str(runs)}, reports_dir=tmp_path / "reports")
    assert run.ok, run.error
    nb = nbformat.read(str(run.executed), as_version=4)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, errors[0].get("evalue")
    stderr = [o.text for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.output_type == "stream" and o.name == "stderr"]
    assert not stderr, stderr  # no warnings in the report

    # every arm, with every sink for actix-release and Go, ran in both blocks and met its contract
    store = RunStore(runs / rvg.STUDY / "nbtest")
    trials = store.trials()
    arms = {a.name: a for a in rvg.study_arms(sinks=SMALL["sinks"])}
    assert {t.arm for t in trials} == set(arms) and len(trials) == 2 * len(arms)
    for t in trials:
        assert t.meta["status"] in ("ok", "invalid"), (t.arm, t.meta.get("reason"))
        assert t.meta["contract"]["ok"], (t.arm, t.meta["contract"])
        assert t.meta["log_sink"] == arms[t.arm].log_sink and t.meta["variant"] == arms[t.arm].variant
        assert t.meta["cpus"]["server"] != t.meta["cpus"]["client"]
        assert (t.rows()["phase"] == 1).sum() > 100
    for sink in rvg.SINKS:
        assert {f"actix-release-{sink}", f"go-{sink}"} <= {t.arm for t in trials}

    # logging really happened: about one line per request (fastify two) in every pipe and file log
    stored = open_run(store)
    lines = log_lines_table(stored, expected=rvg.expected_log_lines(list(arms)), condition="closed").set_index("arm")
    for arm, a in arms.items():
        if a.log_sink == "discard":
            assert math.isnan(lines.loc[arm, "log lines per request (median over trials)"])
        else:
            per = lines.loc[arm, "log lines per request (median over trials)"]
            assert per == pytest.approx(lines.loc[arm, "expected"], rel=0.05), (arm, per)

    # the client's CPU use is reported for every arm
    client = client_cpu_table(stored, condition="closed")
    assert set(client["arm"]) == set(arms) and (client["client CPU, median"] > 0).all()

    # wrk ran on the seed's arms only, on the same instance, first in odd blocks and second in even ones
    for t in trials:
        x = t.meta.get("cross_check")
        if t.arm in rvg.SEED_ARMS:
            assert x and not x.get("error"), (t.arm, x)
            assert x["order"] == ("before" if t.block % 2 else "after")
            assert x["requests_per_s"] > 0 and x["threads"] == 2 and x["connections"] == SMALL["connections"]
            assert x["latency_percentiles_ms"]["99"] > 0
        else:
            assert not x, t.arm
    summaries = stored.summaries()
    beside = peer_beside(stored, summaries=summaries, tool="wrk")
    assert sorted(beside["arm"].unique()) == sorted(rvg.SEED_ARMS) and len(beside) == 2 * len(rvg.SEED_ARMS)
    assert (beside["peer_rps"] > 0).all() and (beside["bl_rps"] > 0).all()
    bytes_per = beside.groupby("arm")["peer_bytes"].median()
    assert bytes_per["go-pipe"] == pytest.approx(155, abs=3) and bytes_per["actix-debug-pipe"] == pytest.approx(114, abs=3)

    # the comparison tables stored with the run hold the expected rows
    derived = store.path / "derived"
    seed_rows = json.loads((derived / "comparison-seed.json").read_text())["rows"]
    assert {(r["arm"], r["metric"]) for r in seed_rows} == {
        (a, m) for a in ("actix-release-pipe", "go-pipe") for m in rvg.METRICS}
    # a group is compared when its arms have valid trials; at 2 trials a discard arm is often
    # client-bound (the guard marks it invalid), and the report says so instead of a row
    def valid(arm: str) -> bool:
        return any(t.arm == arm and t.meta["status"] == "ok" for t in trials)

    fw_rows = json.loads((derived / "comparison-framework.json").read_text())["rows"]
    assert {r["condition"] for r in fw_rows} == {
        f"log to {s}" for s in rvg.SINKS if valid(f"actix-release-{s}") and valid(f"go-{s}")}
    assert "log to pipe" in {r["condition"] for r in fw_rows}
    assert {r["arm"] for r in fw_rows} == {"go"} and {r["baseline"] for r in fw_rows} == {"actix-release"}
    log_rows = json.loads((derived / "comparison-logging.json").read_text())["rows"]
    assert {(r["condition"], r["arm"]) for r in log_rows} == {
        (srv, s) for srv in ("actix-release", "go") for s in ("file", "discard")
        if valid(f"{srv}-pipe") and valid(f"{srv}-{s}")}
    assert ("go", "file") in {(r["condition"], r["arm"]) for r in log_rows}
    if not valid("actix-release-discard"):
        assert run.html is not None
        page = run.html.read_text()
        assert ("actix-release-discard (log to discard): no valid trial" in page
                or "no valid trial in group(s) log to discard" in page)
    extra_rows = json.loads((derived / "comparison-extras.json").read_text())["rows"]
    assert {r["arm"] for r in extra_rows} == {"python-pipe", "node-pipe"}

    # the sweep: a second run at 25/50/75/90% of the slower sweep arm's measured capacity
    sweep_store = RunStore(runs / rvg.STUDY / "nbtest-sweep")
    sweep_trials = sweep_store.trials()
    caps = capacity(summaries, arms=("actix-release-pipe", "go-pipe"), condition="closed")
    expected = {f"open-{round(100 * f)}": round(min(caps.values()) * f, 1) for f in rvg.SWEEP_FRACTIONS}
    assert {(t.condition, t.arm) for t in sweep_trials} == {
        (c, a) for c in expected for a in ("actix-release-pipe", "go-pipe")}
    assert len(sweep_trials) == 2 * 2 * len(expected)
    for t in sweep_trials:
        assert t.meta["load"]["loadspec"]["model"] == "open"
        assert t.meta["load"]["offered_rps"] == pytest.approx(expected[t.condition])

    # the report shows the tables computed from this run's stored trials
    page = run.html.read_text()
    for heading in ("The original numbers", "Contract check", "1. The seed", "2. The frameworks at equal logging",
                    "3. What the log sink costs", "4. The extra rows", "wrk beside benchlib",
                    "The seed's numbers beside ours", "open-model sweep", "Does Go beat actix-web here?",
                    "Provenance"):
        assert heading in page, heading
    # full scale: sequential stopping on (auto); with 2 blocks its one look is the last, and the
    # verdicts are the sequential analysis with that design
    stopping = stopping_rule(rvg.closed_families(list(arms)), SMALL["trials"], "auto", full=True)
    assert stopping.on and stopping.design.looks == (2,)
    assert "Sequential stopping" in page and "sequential=auto" in page and "): on: " in page
    assert "stopping saved nothing" in page
    for key in ("seed", "framework", "logging", "extras"):
        fam = next(f for f in rvg.closed_families(list(arms)) if f.key == key)
        comp = run_family(summaries, fam, seed=SMALL["seed"], sequential=stopping.design).comparison
        assert json.loads((store.path / "derived" / f"comparison-{key}.json").read_text())["params"][
            "sequential"]["looks"] == [2]
        cells = verdict_table(comp)["arm / baseline [95% CI]"]
        assert all(cell in page for cell in cells), (key, list(cells))
    for arm in rvg.SEED_ARMS:
        assert arm in page
    assert "wrk / benchlib req/s" in page and "15004.41" in page


def test_a_budget_with_the_sweep_is_refused_in_one_line() -> None:
    rvg.check_budget(None, True)  # no budget: the fixed design with its sweep
    rvg.check_budget(3.0, False)  # a budget without the sweep
    with pytest.raises(ParameterError, match='budget_min with the sweep is not supported.*set sweep="no"'):
        rvg.check_budget(3.0, True)
