"""Diagnostics become numbered notes attached to the rows they concern."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from benchlib.stats import compare
from benchlib.stats.simulate import simulate_summaries


@pytest.fixture
def df() -> pd.DataFrame:
    return simulate_summaries(np.random.default_rng(11), arms={"A": 1.0, "B": 1.0}, trials=8, trial_sd=0.02,
                              sigma=0.2, spike_rate=0.0)


def kinds(c):
    return {n.kind for n in c.notes}


def test_clean_run_has_no_notes(df):
    c = compare(df, baseline="A", metrics=("p50_ms",))
    assert kinds(c) <= {"outlier"}


def test_not_steady(df):
    df["change_point"] = False
    df.loc[3, ["change_point", "change_pct", "change_at_s"]] = [True, 34.0, 12.5]
    c = compare(df, baseline="A", metrics=("p50_ms", "p99_ms"))
    note = next(n for n in c.notes if n.kind == "not_steady")
    assert "+34% at 12.5 s" in note.text and note.rows == [0, 1]
    assert c.table.loc[0, "notes"] == str(note.id)


def test_saturated_and_closed_loop(df):
    df.loc[0, "throughput_rps"] = 0.9 * df.loc[0, "offered_rps"]
    df["load_model"] = "closed"
    c = compare(df, baseline="A", metrics=("p50_ms",))
    assert {"saturated", "closed_loop"} <= kinds(c)
    assert "900 of 1,000 req/s" in c.to_text()


def test_outlier_trial(df):
    df.loc[df.index[df["arm"] == "B"][2], "p50_ms"] *= 3
    c = compare(df, baseline="A", metrics=("p90_ms",))
    note = next(n for n in c.notes if n.kind == "outlier")
    assert "B/block" in note.text and "kept" in note.text


def test_autocorrelation_and_multimodality(df):
    df["n"] = 10000
    df["n_eff"] = 500.0
    df["lag1_autocorr"] = 0.9
    df["mvalue"] = 2.0
    df.loc[1, "mvalue"] = 3.9
    c = compare(df, baseline="A", metrics=("p50_ms",))
    assert {"autocorrelation", "multimodal"} <= kinds(c)
    assert "bimodal" in c.to_text()


def test_order_not_counterbalanced(df):
    df["position"] = np.where(df["arm"] == "A", 0, 1)
    df["seq"] = 2 * df["block"] + df["position"]
    c = compare(df, baseline="A", metrics=("p50_ms",))
    assert "order" in kinds(c)


def test_error_rates_differ(df):
    df["error_rate"] = np.where(df["arm"] == "B", 0.02, 0.0)
    c = compare(df, baseline="A", metrics=("p50_ms", "throughput_rps", "error_rate"))
    note = next(n for n in c.notes if n.kind == "error_rates")
    assert note.rows == [0]  # latency rows only
    err = c.table[c.table["metric"] == "error_rate"].iloc[0]
    assert err["effect"] == "difference" and err["diff"] == pytest.approx(0.02)
    assert err["verdict"] == "more errors"


def test_invalid_trials_are_left_out_with_the_reason(df):
    df["valid"] = True
    df["reason"] = None
    df.loc[0, ["valid", "reason"]] = [False, "achieved rate 40% of offered"]
    c = compare(df, baseline="A", metrics=("p50_ms",))
    note = next(n for n in c.notes if n.kind == "invalid")
    assert "1 invalid trial" in note.text and "40% of offered" in note.text
    row = c.table.iloc[0]
    assert row["n_baseline"] + row["n_arm"] == len(df) - 1 - 1  # its block partner leaves the paired analysis
    assert "unpaired_trials" in kinds(c)


def test_no_correction_warns(df):
    c = compare(df, baseline="A", metrics=("p50_ms", "p90_ms"), correction="none")
    assert "no_correction" in kinds(c)


def test_text_carries_superscripts_and_notes(df):
    df["load_model"] = "closed"
    text = compare(df, baseline="A", metrics=("p50_ms",)).to_text()
    assert "Notes:" in text and "¹" in text


def test_parametric_rows_equal_scipy(df):
    c = compare(df, baseline="A", metrics=("p50_ms",), method="parametric")
    r = c.table.iloc[0]
    a = np.log(df[df["arm"] == "A"].sort_values("block")["p50_ms"].to_numpy())
    b = np.log(df[df["arm"] == "B"].sort_values("block")["p50_ms"].to_numpy())
    ref = stats.ttest_rel(b, a)
    ci = ref.confidence_interval(0.95)
    assert r["p_raw"] == pytest.approx(ref.pvalue)
    assert (r["ci_lo"], r["ci_hi"]) == pytest.approx((np.exp(ci.low), np.exp(ci.high)))
    u = compare(df, baseline="A", metrics=("p50_ms",), method="parametric", design="unpaired").table.iloc[0]
    ref = stats.ttest_ind(b, a, equal_var=False)
    assert u["p_raw"] == pytest.approx(ref.pvalue)
    assert u["ratio"] == pytest.approx(np.exp(b.mean() - a.mean()))


@pytest.mark.parametrize("correction", ["bh", "by", "none"])
def test_other_corrections(correction):
    rng = np.random.default_rng(12)
    df = simulate_summaries(rng, arms={"A": 1.0, "B": 1.05, "C": 1.0}, trials=10, trial_sd=0.02)
    t = compare(df, baseline="A", metrics=("p50_ms", "p90_ms"), correction=correction).table
    if correction == "none":
        assert (t["p_adj"] == t["p_raw"]).all()
    else:
        assert t["p_adj"].to_numpy() == pytest.approx(stats.false_discovery_control(t["p_raw"].to_numpy(), method=correction))


def test_family_by_condition():
    rng = np.random.default_rng(13)
    df = pd.concat([simulate_summaries(rng, trials=8, condition=c) for c in ("r1", "r2")], ignore_index=True)
    all_ = compare(df, baseline="A", metrics=("p50_ms",)).table
    by = compare(df, baseline="A", metrics=("p50_ms",), family="by").table
    assert (all_["family_size"] == 2).all() and (by["family_size"] == 1).all()
    assert (by["p_adj"] == by["p_raw"]).all()
