"""Study 01 (DotnetGoRustBenchmark): the notebook's design (pure checks of
``benchlib.analysis.studies.rest_mongo``) and one real papermill run with tiny parameters, asserting on
the stored trials, the stored comparison and the HTML report.

The papermill run starts FerretDB and every runnable service for real (warm builds: about two
minutes on 2 cores). It asserts on counts and invariants only, never on timing: on a busy
machine some trials may be marked invalid by the load generator's guard, and the assertions
follow what was stored.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchlib import stats
from benchlib.analysis import answer_tables, run_family
from benchlib.analysis.reference import load_reference
from benchlib.analysis.studies import rest_mongo as study
from benchlib.core.errors import ParameterError
from benchlib.publish.execute import run_notebook
from benchlib.publish.notebooks import notebook_parameters
from benchlib.stats.simulate import simulate_summaries
from benchlib.stats.verdict import VerdictKind

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "01_rest_mongo_go_dotnet_rust.ipynb"
NO_DOTNET = {"dotnet-faithful": "no dotnet toolchain (install the .NET 8 SDK)",
             "dotnet-fair": "no dotnet toolchain (install the .NET 8 SDK)"}


# -- the design, pure ---------------------------------------------------------------------------

def test_parameters_and_their_defaults() -> None:
    params = notebook_parameters(NOTEBOOK)
    expected = {"full": "False", "sequential": '"auto"', "runtime": "local", "trials": "0", "scale": "1.0", "warmup_s": "0.0",
                "variants": '"faithful,fair"', "extras": '"auto"', "k6_check": "True", "cross_check_blocks": '"auto"',
                "seed": "1", "out_dir": '""', "run_id": '""', "progress": "True"}
    assert {k: params[k]["default"].strip('"') if k == "runtime" else params[k]["default"] for k in expected} == expected
    assert params["trials"]["inferred_type_name"] == "int" and params["scale"]["inferred_type_name"] == "float"


def test_the_full_scale_uses_the_fewest_blocks_holm_can_decide_with() -> None:
    """At scale 1 without .NET: 6 contrasts x (2 percentiles on /helloWorld + 1 on /users/1)."""
    family = study.planned_family(study.family(), NO_DOTNET, 1.0)
    assert family == 18
    assert stats.min_trials(alpha=0.05, n_comparisons=family, paired=True) == study.FULL_DESIGN["trials"] == 10
    # with .NET (12 contrasts) the family is 36 rows and needs 11 blocks: said in the notebook, not hidden
    assert stats.min_trials(alpha=0.05, n_comparisons=study.planned_family(study.family(), {}, 1.0),
                            paired=True) == 11


def test_the_default_design_is_one_block_above_the_holm_floor_with_3_s_trials() -> None:
    """Go and Rust only, 300 and 120 requests per trial (p50): 4 contrasts x 2 rows, 10 blocks
    (the floor, 9, decides a row only when every block agrees)."""
    fam = study.family(extras=False)
    assert {a for c in fam.contrasts for a in (c.baseline, c.arm)} == {
        "go-fair", "go-faithful", "rust-fair", "rust-faithful", "dotnet-fair", "dotnet-faithful"}
    rows = study.planned_family(fam, NO_DOTNET, 1.0, full=False)
    assert rows == 8
    assert stats.min_trials(alpha=0.05, n_comparisons=rows, paired=True) + 1 == study.DEFAULT_DESIGN["trials"] == 10
    hello, users = study.study_conditions(1.0, full=False, warmup_s=0.5)
    assert [(c.load.rate_rps, c.load.duration_s) for c in (hello, users)] == [(100, 3.0), (40, 3.0)]


def test_sequential_stopping_is_off_at_the_default_and_on_with_one_look_at_full_scale() -> None:
    """auto: the default's family can first be decided at its last block (10), so stopping could
    save nothing; at full scale (10 blocks) it is on, its one look the last block. The rows are
    counted before the run knows which arms cannot run (.NET's contrasts included)."""
    from benchlib.analysis import stopping_rule

    default = stopping_rule([study.family(extras=False)], study.DEFAULT_DESIGN["trials"], "auto",
                            requests=study.requests_per_trial(1.0, full=False))
    assert not default.on and "one look" in default.why and default.figures["rows"] == 14
    full = stopping_rule([study.family()], study.FULL_DESIGN["trials"], "auto", full=True,
                         requests=study.requests_per_trial(1.0))
    assert full.on and full.design.looks == (10,)


def test_the_load_is_the_seed_at_scale_one_and_scales_rate_and_duration() -> None:
    hello, users = study.study_conditions(1.0)
    assert (hello.name, hello.endpoint, users.name, users.endpoint) == ("helloWorld", "helloWorld", "users", "users")
    for cond, rate in ((hello, 100), (users, 10)):
        load = cond.load
        assert (load.model, load.arrival, load.rate_rps, load.duration_s, load.connections, load.keep_alive) == (
            "open", "constant", rate, 10.0, 100, True)
    big = study.scaled_load("users", 3.0)
    assert (big.rate_rps, big.duration_s) == (30, 30.0)
    assert study.scaled_load("users", 0.01).rate_rps == 1
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ParameterError, match="scale"):
            study.scaled_load("users", bad)
    with pytest.raises(ParameterError, match="valid: helloWorld, users"):
        study.scaled_load("nope", 1.0)
    assert study.LIMITS.cpus == 1 and study.LIMITS.memory_mb == 512


def test_k6_cross_check_uses_the_condition_rate_and_duration() -> None:
    hello, users = study.study_conditions(2.0, k6_arms=("go-faithful", "rust-faithful"))
    for cond in (hello, users):
        opts = dict(cond.cross_check.options)
        assert cond.cross_check.tool == "k6" and cond.cross_check.arms == ("go-faithful", "rust-faithful")
        assert (opts["rate_rps"], opts["duration_s"], opts["pre_allocated_vus"]) == (
            cond.load.rate_rps, cond.load.duration_s, 100)
    assert all(c.cross_check is None for c in study.study_conditions(1.0))


def test_percentile_support_follows_the_fifty_beyond_rule() -> None:
    t = study.percentile_support((1.0, 3.0), current=1.0).set_index(["scale", "endpoint"])
    assert t.loc[("1 (this run)", "/helloWorld"), "requests per trial"] == 1000
    assert t.loc[("1 (this run)", "/helloWorld"), "percentiles supported"] == "p50, p90, p95"
    assert t.loc[("1 (this run)", "/users/1"), "percentiles supported"] == "p50"
    assert t.loc[("3", "/helloWorld"), "percentiles supported"] == "p50, p90, p95, p99"
    assert t.loc[("3", "/users/1"), "percentiles supported"] == "p50, p90"


def test_arms_and_contrasts_follow_the_variants() -> None:
    assert [a.name for a in study.study_arms()] == ["go-faithful", "go-fair", "dotnet-faithful", "dotnet-fair",
                                                    "rust-faithful", "rust-fair", "python-fair", "node-fair"]
    assert [a.name for a in study.study_arms(study.parse_variants("faithful"))] == [
        "go-faithful", "dotnet-faithful", "rust-faithful"]
    assert study.parse_variants(" fair , faithful ") == ("faithful", "fair")
    for bad in ("", "debug", "fair,debug"):
        with pytest.raises(ParameterError, match="faithful, fair"):
            study.parse_variants(bad)
    pairs = {(c.question, c.baseline, c.arm) for c in study.family().contrasts}
    assert ("implementation", "rust-fair", "rust-faithful") in pairs
    assert ("language", "go-fair", "node-fair") in pairs and ("original", "go-faithful", "rust-faithful") in pairs
    assert len(pairs) == 9
    assert {c.question for c in study.family(("fair",)).contrasts} == {"language"}
    assert {(c.baseline, c.arm) for c in study.family(("faithful",)).contrasts} == {
        ("go-faithful", "dotnet-faithful"), ("go-faithful", "rust-faithful")}


def _simulated(trials: int = 10) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    effects = {"go-faithful": 3.0, "go-fair": 1.0, "rust-faithful": 6.0, "rust-fair": 1.0, "python-fair": 1.5,
               "node-fair": 1.2}
    # the percentiles scale 1 supports: p50 and p90 on /helloWorld, p50 on /users/1 (p99 omitted)
    parts = [simulate_summaries(rng, arms=effects, trials=trials, trial_sd=0.02, sigma=0.1, condition=c,
                                rate_rps=r, quantiles=qs)
             for c, r, qs in (("helloWorld", 100.0, (0.5, 0.9)), ("users", 10.0, (0.5,)))]
    return pd.concat(parts, ignore_index=True)


def test_verdict_tables_keep_every_contrast_and_report_dotnet_as_not_run() -> None:
    answer = run_family(_simulated(), study.family(), unavailable=study.short_reasons(NO_DOTNET), seed=1)
    assert answer.comparison is not None
    t = answer.comparison.table
    decided = t[t["verdict_kind"] != VerdictKind.OMITTED]
    assert len(decided) == 18 and (decided["family_size"] == 18).all()  # one Holm family, both endpoints
    tables = answer_tables(answer, drop_omitted=True)
    for cond in ("helloWorld", "users"):
        v = tables[cond]
        dotnet = v[v["verdict"].str.startswith("not run: no .NET SDK")]
        assert len(dotnet) == 3  # language, implementation, original
        measured = v[~v["verdict"].str.startswith("not run")]
        assert len(measured) == 6 * (2 if cond == "helloWorld" else 1)  # omitted percentiles left out
        assert set(measured["question"]) == set(study.QUESTIONS.values())
        assert list(dict.fromkeys(v["question"])) == list(study.QUESTIONS.values())  # rows in question order
    r = answer.verdict("rust-faithful", "p50_ms", group="users", baseline="rust-fair")
    assert r.kind is VerdictKind.SLOWER and r.estimate > 3  # 6x: decided by 10 concordant blocks
    gone = answer.verdict("dotnet-fair", "p50_ms", group="users", baseline="go-fair")
    assert gone.kind is VerdictKind.NOT_RUN and gone.reason.startswith("no .NET SDK")
    text = study.conclusion_markdown(answer, load_reference("01"))
    assert text.count("the original (one run each): Rust / Go medians") == 2 and "not run: no .NET SDK" in text
    assert text.count("the faithful Rust/Go ratio") == 2 and "decided factors: " in text


def test_conclusion_never_reads_an_undecided_original_difference_as_refuted() -> None:
    # faithful Rust and Go equally slow (both 5x their fair versions): no language story to tell;
    # a "~" row neither confirms nor refutes the original (issue 24: it read "does not hold up")
    rng = np.random.default_rng(11)
    effects = {"go-faithful": 5.0, "go-fair": 1.0, "rust-faithful": 5.0, "rust-fair": 1.0}
    df = pd.concat([simulate_summaries(rng, arms=effects, trials=10, trial_sd=0.02, sigma=0.1, condition=c,
                                       rate_rps=r, quantiles=(0.5,))
                    for c, r in (("helloWorld", 100.0), ("users", 10.0))], ignore_index=True)
    answer = run_family(df, study.family(), unavailable=NO_DOTNET, seed=1)
    text = study.conclusion_markdown(answer, load_reference("01"))
    assert "does not hold up" not in text and "largest factor" not in text, text
    assert text.count("neither confirmed nor refuted") + text.count("is not reproduced here") == 2, text
    assert text.count("is not split into factors") == 2, text


def test_without_both_arms_of_any_contrast_every_row_says_why() -> None:
    df = _simulated(3)
    only = df[df["arm"].isin(["python-fair", "node-fair"])]
    answer = run_family(only, study.family(), unavailable=NO_DOTNET)
    assert answer.comparison is None
    kinds = {(v.arm, v.labels["condition"]): v.kind for v in answer.missing}
    assert kinds[("python-fair", "users")] is VerdictKind.NO_VALID_TRIAL  # its baseline go-fair has no trial
    assert kinds[("dotnet-fair", "helloWorld")] is VerdictKind.NOT_RUN
    assert len(answer.missing) == 2 * len(study.family().contrasts)
    assert study.conclusion_markdown(answer, load_reference("01")).startswith("_No comparison could be computed")


# -- the notebook, for real --------------------------------------------------------------------

@pytest.mark.notebook
@pytest.mark.integration
@pytest.mark.timeout(900)
def test_notebook_runs_and_its_tables_hold_every_arm(tmp_path: Path) -> None:
    from benchlib.analysis import formats as fmt
    from benchlib.store.records.rows import figures
    from benchlib.store.runstore import RunStore

    runs = tmp_path / "runs"
    # the full-scale design (every implementation, the seed's load shape, k6 in every block), tiny
    run = run_notebook("01_rest_mongo_go_dotnet_rust", {"full": True, "trials": 1, "scale": 0.35, "out_dir": str(runs),
                                                        "run_id": "nbtest", "seed": 2},
                       reports_dir=tmp_path / "reports")
    assert run.ok, run.error
    assert run.html is not None and run.html.exists()
    page = run.html.read_text()
    store = RunStore(runs / "01_rest_mongo_go_dotnet_rust" / "nbtest")
    run_json = json.loads((store.path / "run.json").read_text())
    unavailable = run_json["unavailable"]
    assert run_json["parameters"]["repeat_invalid"] == study.REPEAT_INVALID == 2
    assert run_json["parameters"]["dependencies"] == study.DEPENDENCIES == "block"
    all_arms = [a.name for a in study.study_arms()]
    runnable = [a for a in all_arms if a not in unavailable]
    assert set(runnable) >= {"go-faithful", "go-fair", "rust-faithful", "rust-fair", "python-fair", "node-fair"}

    # every runnable arm has one stored trial per endpoint: contract checked, limits enforced and recorded
    trials = store.trials()
    assert sorted((t.condition, t.arm) for t in trials) == sorted((c, a) for c in ("helloWorld", "users")
                                                                   for a in runnable)
    for t in trials:
        m = t.meta
        assert m["contract"]["ok"], (t.arm, m["contract"])
        assert m["endpoint"]["path"] == study.CONDITIONS[t.condition]
        assert m["limits"] == {"cpus": 1, "memory_mb": 512}
        assert m["enforced"]["cpu_quota"] == 1.0 and m["enforced"]["memory_mb"] == 512
        assert m["cpus"]["dependencies"] == m["cpus"]["server"] != m["cpus"]["client"]
        assert m["load"]["loadspec"]["rate_rps"] == (35 if t.condition == "helloWorld" else 4)
        assert m["status"] in ("ok", "invalid"), m.get("reason")
        for attempt in m.get("previous_attempts", []):  # repeated in place: the guard had invalidated it
            assert attempt["status"] == "invalid" and attempt["reason"]
        assert len(m.get("previous_attempts", [])) <= study.REPEAT_INVALID and (
            m["status"] == "ok" or len(m.get("previous_attempts", [])) == study.REPEAT_INVALID)
        assert (t.rows()["phase"] == 1).sum() > 0
        x = m.get("cross_check")
        if t.arm.endswith("-faithful"):
            assert x is not None and x["tool"] == "k6" and x["order"] == "after"  # block 0: k6 after benchlib
            assert x.get("error") or x["http_reqs"] > 0
        else:
            assert x is None

    # one FerretDB for the block (one block here), reset (dropped and seeded) before every later trial
    by_seq = sorted(trials, key=lambda t: t.meta["seq"])
    dbs = [t.meta["dependencies"]["ferretdb"] for t in by_seq]
    assert len({d["port"] for d in dbs}) == 1 and all(d["shared"] == "block" for d in dbs)
    # the trial that first used it in the block started it (no reset; side by side, the first arm
    # started, whichever its seq), every other was given fresh data; unless that trial was repeated in
    # place: its stored record is then the repeat's, which found it started by the set-aside attempt
    started = [d for d in dbs if d["reset_s"] is None]
    repeated = any(t.meta.get("previous_attempts") for t in trials)
    assert len(started) == 1 or (repeated and not started), (dbs, repeated)
    assert all(d["reset_s"] > 0 for d in dbs if d["reset_s"] is not None)
    assert (store.path / "logs" / "b000.ferretdb.log").exists()

    # .NET is never dropped: in the status, limits and original-vs-ours tables and both verdict tables
    assert page.count("not run: no .NET SDK") >= 2 * 3 + 2 + 4
    assert page.count("GET /helloWorld</code>") >= 1 and "GET /users/1" in page
    for cell in ("46.2", "724", "188"):  # the original's Go max, .NET and Rust users/1 max and p99
        assert cell in page

    # the comparison stored with the run holds a row per metric for every contrast whose two arms
    # have a valid trial in that condition (one Holm family); the report shows the figures computed here
    valid = {(t.condition, t.arm) for t in trials if t.meta["status"] == "ok"}
    expected = {(c, k.baseline, k.arm) for c in study.CONDITIONS for k in study.family().contrasts
                if (c, k.baseline) in valid and (c, k.arm) in valid}
    path = store.path / "derived" / "comparison.json"
    if expected:
        doc = json.loads(path.read_text())
        got = {(r["condition"], r["baseline"], r["arm"]) for r in doc["rows"]}
        assert got == expected
        assert {r["metric"] for r in doc["rows"]} == set(study.METRICS)
        assert len({r["family_size"] for r in doc["rows"]}) == 1  # one family over both endpoints
    else:
        assert not path.exists() and "No contrast could be computed" in page
    for t in trials:
        if t.meta["status"] == "ok":
            med = figures(t.rows(), since="sent")["p50"]
            if not math.isnan(med):
                assert fmt.num(med) in page
    db = json.loads((store.path / "derived" / "database.json").read_text())
    assert db["trial_logs"] == {"v1.24.2": 1}  # one FerretDB log per block
    assert db.get("ferretdb_version") == "v1.24.2" and str(db.get("backend", "")).startswith("SQLite")
    assert "FerretDB version line" in page and "k6 v0.50.0" in page
    repeated = sum(bool(t.meta.get("previous_attempts")) for t in trials)
    assert ("No trial had to be repeated." in page) == (repeated == 0 and all(
        t.meta["status"] == "ok" for t in trials))
    # sequential stopping: auto, but one block leaves no look, said with why
    assert "Sequential stopping" in page and "sequential=auto" in page and "): off: " in page
    import nbformat

    nb = nbformat.read(str(run.executed), as_version=4)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
