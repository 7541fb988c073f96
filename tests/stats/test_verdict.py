"""Verdicts as data (issue 11, item 3): one decision, one rendering, typed lookups and JSON."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from benchlib.core.errors import ParameterError
from benchlib.stats import compare
from benchlib.stats.metrics import metric_info
from benchlib.stats.simulate import simulate_summaries
from benchlib.stats.verdict import Verdict, VerdictKind, decide, render

LAT = metric_info("p50_ms")
RPS = metric_info("throughput_rps")
ERR = metric_info("error_rate")
COMMON = dict(alpha=0.05, margin=0.02, correction="holm", family_size=1, power=0.8)


def _ok(info, effect, lo, hi, p, *, tost=None, min_p=0.002, mde=0.05, **kw):
    tlo, thi = tost if tost is not None else (lo, hi)
    return decide(info, status="ok", effect=effect, lo=lo, hi=hi, tost_lo=tlo, tost_hi=thi, achieved=0.957,
                  p_raw=p, p_adj=p, min_p=min_p, best_adjusted=min_p, mde=mde, need=6, **{**COMMON, **kw})


def test_decide_and_render_every_kind():
    log = math.log
    v = _ok(LAT, log(0.9), log(0.85), log(0.95), 0.001)
    assert (v.kind, v.word, v.qualifier, render(v)) == (VerdictKind.FASTER, "faster", "", "faster")
    assert v.significant and v.practical and v.directional and v.improved
    assert v.estimate == pytest.approx(0.9) and v.pct_change == pytest.approx(-10.0)
    v = _ok(LAT, log(1.01), log(1.005), log(1.015), 0.001)
    assert (v.kind, render(v)) == (VerdictKind.SLOWER, "slower, within ±2%") and not v.practical
    v = _ok(LAT, log(1.02), log(1.005), log(1.04), 0.001)
    assert render(v) == "slower, possibly within ±2%" and v.qualifier == "possibly within"
    v = _ok(LAT, 0.0, log(0.99), log(1.01), 0.5, tost=(log(0.995), log(1.005)))
    assert (v.kind, render(v)) == (VerdictKind.EQUIVALENT, "equivalent (±2%)") and v.equivalent
    v = _ok(LAT, 0.0, log(0.9), log(1.1), 0.5, mde=log(1.09))
    assert (v.kind, render(v)) == (VerdictKind.NO_DIFFERENCE, "~ (MDE 9.0%)")
    assert v.mde == pytest.approx(0.09) and v.mde_in_text and not v.directional
    v = _ok(ERR, 0.0, -0.001, 0.001, 0.5, mde=0.0012)
    assert render(v) == "~ (MDE 0.12 pp)" and v.effect == "difference"
    v = _ok(ERR, -0.01, -0.02, -0.005, 0.001)
    assert (v.kind, render(v)) == (VerdictKind.FASTER, "fewer errors")  # FASTER = better in the metric's direction
    v = _ok(RPS, log(1.1), log(1.05), log(1.15), 0.001)
    assert (v.kind, render(v), v.better) == (VerdictKind.FASTER, "faster", "higher")  # higher throughput
    # the guard: significance impossible, equivalence not shown
    v = _ok(LAT, log(1.3), log(1.1), log(1.5), 0.0625, min_p=0.0625)
    assert (v.kind, render(v), v.need) == (VerdictKind.INSUFFICIENT, "insufficient trials (need ≥ 6 per arm)", 6)
    assert v.mde == math.inf and not v.significant
    v = _ok(LAT, log(1.3), log(1.1), log(1.5), 0.0625, min_p=0.0625, paired=True)
    assert render(v) == "insufficient trials (need ≥ 6 blocks)"
    v = _ok(LAT, log(1.3), log(1.1), log(1.5), 0.0625, min_p=0.0625, paired=True, n_baseline=5, n_arm=5, n_tied=1)
    assert render(v) == "insufficient trials (need ≥ 6 blocks that differ; 1 of 6 tied)"
    v = decide(LAT, status="single", effect=log(1.1), lo=log(1.05), hi=log(1.15), achieved=0.95, mde=log(1.012),
               need=4, **COMMON)
    assert v.kind is VerdictKind.INSUFFICIENT and not v.between_run_variance_estimated and v.mde_is_lower_bound
    assert render(v) == "insufficient trials (need ≥ 4 per arm; between-run variance not estimated, MDE ≥ 1.2%)"
    assert v.estimate == pytest.approx(1.1) and math.isnan(v.p_raw)
    assert render(decide(LAT, status="omitted", **COMMON)) == "omitted (no values)"
    nr = Verdict.not_run("no .NET SDK", arm="dotnet-fair", baseline="go-fair", labels={"condition": "c"})
    assert (nr.kind, str(nr), nr.metric) == (VerdictKind.NOT_RUN, "not run: no .NET SDK", "all")
    assert nr.to_dict()["kind"] == "not_run" and nr.to_dict()["text"] == "not run: no .NET SDK"
    assert len({nr, Verdict.not_run("no .NET SDK", arm="dotnet-fair", baseline="go-fair", labels={"condition": "c"})}) == 1


def test_comparison_carries_typed_verdicts_that_render_to_its_text():
    rng = np.random.default_rng(31)
    df = simulate_summaries(rng, arms={"A": 1.0, "B": 1.2, "C": 1.0}, trials=8, trial_sd=0.02, sigma=0.1)
    df["error_rate"] = 0.0
    df["p999_ms"] = np.nan
    c = compare(df, baseline="A", metrics=("p50_ms", "throughput_rps", "error_rate", "p999_ms"))
    t = c.table
    assert len(c.verdicts) == len(t)
    for i, v in enumerate(c.verdicts):
        assert isinstance(v, Verdict)
        assert render(v) == t.loc[i, "verdict"] == str(v)
        assert VerdictKind(t.loc[i, "verdict_kind"]) is v.kind
        assert (v.arm, v.baseline, v.metric, dict(v.labels)) == (t.loc[i, "arm"], "A", t.loc[i, "metric"],
                                                                 {"condition": "sim"})
    b = c.verdict("B", "p50_ms")
    assert b.kind is VerdictKind.SLOWER and b.estimate == pytest.approx(t.loc[0, "ratio"])
    assert (b.ci_lo, b.ci_hi, b.p_raw, b.p_adj) == tuple(t.loc[0, ["ci_lo", "ci_hi", "p_raw", "p_adj"]])
    assert c.verdict("C", "p999_ms").kind is VerdictKind.OMITTED
    assert c.verdict("B", "p50_ms", condition="sim") == b
    assert c.verdict("B", "p50_ms", condition="other") is None
    assert c.verdict("Z", "p50_ms") is None
    with pytest.raises(ParameterError, match="group columns"):
        c.verdict("B", "p50_ms", endpoint="/x")
    # the JSON holds the typed verdicts (and stays byte-identical)
    doc = json.loads(c.to_json())
    assert doc["format"] == 2
    assert [v["kind"] for v in doc["verdicts"]] == list(t["verdict_kind"])
    assert [v["text"] for v in doc["verdicts"]] == list(t["verdict"])
    assert c.to_json() == compare(df.copy(), baseline="A",
                                  metrics=("p50_ms", "throughput_rps", "error_rate", "p999_ms")).to_json()


def test_lookup_with_several_matching_rows_names_the_choices():
    rng = np.random.default_rng(32)
    df = simulate_summaries(rng, arms={"go": 1.0, "rust": 1.1, "py": 1.3}, trials=8, trial_sd=0.02, sigma=0.1)
    c = compare(df, contrasts=[("go", "rust"), ("py", "rust")], metrics=("p50_ms",))
    with pytest.raises(ParameterError, match="name baseline="):
        c.verdict("rust", "p50_ms")
    assert c.verdict("rust", "p50_ms", baseline="py").kind is VerdictKind.FASTER


def test_single_trial_rows_are_typed_as_such():
    from benchlib.stats import summarize_trial
    from benchlib.stats.simulate import trial_latencies_ms, trial_rows

    rng = np.random.default_rng(33)
    recs = []
    for arm in ("A", "B"):
        s = summarize_trial(trial_rows(trial_latencies_ms(3000, rng), rate_rps=2000), block_bootstrap=200, seed=1)
        recs.append({"arm": arm, "valid": True, **s})
    c = compare(pd.DataFrame(recs), baseline="A", metrics=("p50_ms",), by=())
    v = c.verdicts[0]
    assert v.kind is VerdictKind.INSUFFICIENT and not v.between_run_variance_estimated
    assert v.need == 4 and math.isfinite(v.mde) and v.mde_is_lower_bound
    assert not c.table.loc[0, "between_run_variance_estimated"]
    assert "MDE(80%)" not in c.one_line(0)  # the verdict text already says it


def test_a_significant_row_takes_its_word_from_its_interval():
    """Issue 39, item 2: an estimate on the other side of no change than its interval (a
    sequential row whose looks disagree) no longer decides the word."""
    log = math.log
    v = _ok(LAT, log(0.995), log(1.085), log(1.097), 0.04)
    assert v.kind is VerdictKind.SLOWER and v.word == "slower"
    v = _ok(RPS, log(1.01), log(0.90), log(0.95), 0.04)
    assert v.kind is VerdictKind.SLOWER  # throughput: lower is worse
