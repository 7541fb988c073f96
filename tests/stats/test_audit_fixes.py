"""The statistics fixes of issue 11, item 4 (an independent audit): each test here failed on
the code before the fix (see the commit that added it)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from benchlib.stats import compare, summarize_trial
from benchlib.stats.exact import walsh_interval
from benchlib.stats.simulate import trial_latencies_ms, trial_rows


def _blocks(a, b, metric="p50_ms"):
    """Two arms A (baseline) and B in blocks 0..n-1 (alternating order)."""
    recs = []
    for arm, vals in (("A", a), ("B", b)):
        for i, v in enumerate(vals):
            first = (i % 2 == 0) == (arm == "A")
            recs.append({"condition": "c", "arm": arm, "block": i, "position": 0 if first else 1,
                         "seq": 2 * i + (0 if first else 1), "valid": True, metric: float(v)})
    return pd.DataFrame(recs)


def _single_trial_pair(rng, n_req, seed, shift=1.0):
    recs = []
    for arm, f in (("A", 1.0), ("B", shift)):
        s = summarize_trial(trial_rows(trial_latencies_ms(n_req, rng, shift=f, phi=0.9, trial_sd=0.03), rate_rps=2000),
                            block_bootstrap=200, seed=seed)
        recs.append({"condition": "c", "arm": arm, "block": 0, "position": len(recs), "seq": len(recs), "valid": True,
                     **s})
    return pd.DataFrame(recs)


def test_single_trial_mode_never_gives_a_direction():
    """One trial per arm (block bootstrap of requests): identical services were called
    "faster"/"slower" about 43% of the time (pseudo-replication). The verdict must never be
    directional, must say that the between-run variance was not estimated, and still carry
    the (within-run) interval and a lower bound on the MDE."""
    rng = np.random.default_rng(20)
    verdicts = []
    for r in range(12):
        t = compare(_single_trial_pair(rng, 4000, r), baseline="A", metrics=("p50_ms", "p90_ms")).table
        verdicts += t["verdict"].tolist()
        assert np.isfinite(t["ci_lo"]).all() and np.isfinite(t["ci_hi"]).all()
        assert (t["ci_lo"] < t["ci_hi"]).all()
    directional = [v for v in verdicts if v.startswith(("faster", "slower"))]
    assert directional == []
    for v in verdicts:
        assert v.startswith("insufficient trials (need ≥ 5 per arm"), v  # Holm over 2 rows: 5 per arm
        assert "between-run variance not estimated" in v and "MDE ≥ " in v, v
    # even a large true difference is not given a direction from one trial per arm
    t = compare(_single_trial_pair(rng, 4000, 99, shift=1.5), baseline="A", metrics=("p50_ms",)).table
    assert t["verdict"].iloc[0].startswith("insufficient trials")
    assert t["ratio"].iloc[0] > 1.1 and np.isnan(t["p_raw"].iloc[0])  # no test across runs


def test_exact_zero_difference_counts_nowhere():
    """6 blocks, one exact-zero within-block difference, five in one direction: the
    signed-rank test drops the zero (its floor is 2/2^5 = 0.0625), and so must the guard and
    the interval: the verdict is "insufficient", not "~"."""
    a = np.array([10.0, 11.0, 12.0, 13.0, 14.0, 15.0])
    b = a * np.array([1.0, 1.05, 1.06, 1.07, 1.08, 1.09])  # block 0 tied exactly
    r = compare(_blocks(a, b), baseline="A", metrics=("p50_ms",)).table.iloc[0]
    assert r["design"] == "paired"
    assert r["p_raw"] == pytest.approx(0.0625)
    assert r["min_p"] == pytest.approx(0.0625)
    assert r["verdict"].startswith("insufficient trials (need ≥ 6 blocks"), r["verdict"]
    d = np.log(b) - np.log(a)
    ref = walsh_interval(d[d != 0])  # the interval counts the blocks the test counts
    assert (r["ci_lo"], r["ci_hi"]) == (0.0, math.inf) == (math.exp(ref.lo), math.exp(ref.hi))  # 5 blocks: unbounded
    assert math.log(r["ratio"]) == pytest.approx(ref.estimate)
    assert r["n_tied"] == 1 and r["n_blocks"] == 6
    # a seventh block that differs gives the test its sixth block: p = 2/2^6, decided
    a7, b7 = np.append(a, 16.0), np.append(b, 16.0 * 1.1)
    r7 = compare(_blocks(a7, b7), baseline="A", metrics=("p50_ms",)).table.iloc[0]
    assert r7["p_raw"] == pytest.approx(2 / 2**6) and r7["verdict"] == "slower"


def test_every_inconclusive_row_carries_its_mde():
    """Error-rate rows and zero-spread rows said "~" without an MDE."""
    rng = np.random.default_rng(21)
    n = 10
    a = rng.lognormal(np.log(10), 0.05, n)
    b = rng.lognormal(np.log(10), 0.05, n)
    df = _blocks(a, b)
    df["error_rate"] = rng.uniform(0.001, 0.003, 2 * n)  # varies, no real difference
    t = compare(df, baseline="A", metrics=("p50_ms", "error_rate")).table
    err = t[t["metric"] == "error_rate"].iloc[0]
    assert err["verdict"].startswith("~"), err["verdict"]
    assert "MDE" in err["verdict"] and " pp" in err["verdict"], err["verdict"]
    z = compare(df.assign(error_rate=0.0), baseline="A", metrics=("error_rate",)).table.iloc[0]  # zero spread
    assert z["verdict"].startswith("~") and "MDE" in z["verdict"], z["verdict"]
    for _, r in t.iterrows():
        if r["verdict"].startswith("~"):
            assert "MDE" in r["verdict"], r["verdict"]


def test_equivalence_is_decided_even_when_significance_is_impossible():
    """5 blocks can never be significant (signed-rank floor 0.0625), but their 90% interval
    exists ([min d, max d]); when it lies inside the margin the arms are equivalent."""
    a = np.array([10.0, 11.0, 12.0, 13.0, 14.0])
    b = a * np.array([1.002, 0.997, 1.004, 0.999, 1.001])
    r = compare(_blocks(a, b), baseline="A", metrics=("p50_ms",)).table.iloc[0]
    assert r["verdict"] == "equivalent (±2%)", r["verdict"]
    assert bool(r["equivalent"]) and not bool(r["significant"])
    # and outside the margin it is still "insufficient"
    wide = a * np.array([1.05, 0.95, 1.04, 0.99, 1.01])
    r = compare(_blocks(a, wide), baseline="A", metrics=("p50_ms",)).table.iloc[0]
    assert r["verdict"] == "insufficient trials (need ≥ 6 blocks)", r["verdict"]


def test_the_plus_minus_beside_medians_says_its_achieved_level():
    """The ± of a median of 10 trials is the order-statistic interval [x(2), x(9)], whose
    coverage is 97.9%, not 95%: the table records it and the text prints it."""
    rng = np.random.default_rng(22)
    a = rng.lognormal(np.log(10), 0.05, 10)
    b = rng.lognormal(np.log(10), 0.05, 10)
    c = compare(_blocks(a, b), baseline="A", metrics=("p50_ms",))
    r = c.table.iloc[0]
    assert r["pm_confidence_baseline"] == pytest.approx(1 - 2 * 11 / 1024)  # 1 - 2 P(Bin(10, 1/2) <= 1)
    assert r["pm_confidence_arm"] == pytest.approx(0.979, abs=5e-4)
    text = c.to_text()
    assert "± 97.9% CI" in text, text
    # 6 trials: [x(1), x(6)], 96.9%
    c6 = compare(_blocks(a[:6], b[:6]), baseline="A", metrics=("p50_ms",))
    assert c6.table.iloc[0]["pm_confidence_baseline"] == pytest.approx(1 - 2 / 64)
    assert "± 96.9% CI" in c6.to_text()


def _blocks_metrics(values_a, values_b):
    """Two arms A and B in blocks 0..n-1 with several metrics (``{metric: values}``)."""
    frames = [_blocks(values_a[m], values_b[m], m) for m in values_a]
    out = frames[0]
    for f in frames[1:]:
        out = out.merge(f, on=["condition", "arm", "block", "position", "seq", "valid"])
    return out


def test_significance_is_decided_before_the_minimum_p_guard():
    """Issue 19, item 4: a row whose Holm-adjusted p is below alpha was printed "insufficient
    trials" because the guard (every row of the family at the design's floor: 2 x 0.031)
    ran first. p50: 10 blocks all slower (p = 0.002); p90: 4 of 10 blocks tied, the 6 that
    differ all slower (p = 2/2^6 = 0.031, its floor). Holm: p90's adjusted p is
    max(2 x 0.002, 0.031) = 0.031 < 0.05, so it is "slower". Before the fix: "insufficient
    trials (need ≥ 7 blocks that differ; 4 of 10 tied)"."""
    a = np.arange(10.0, 20.0)
    up = np.array([1.05, 1.06, 1.07, 1.08, 1.09, 1.10, 1.11, 1.12, 1.13, 1.14])
    b90 = a * np.where(np.arange(10) < 4, 1.0, up)  # blocks 0-3 tied exactly
    c = compare(_blocks_metrics({"p50_ms": a, "p90_ms": a}, {"p50_ms": a * up, "p90_ms": b90}),
                baseline="A", metrics=("p50_ms", "p90_ms"))
    t = c.table.set_index("metric")
    assert t.loc["p90_ms", "p_raw"] == pytest.approx(2 / 2**6)
    assert t.loc["p90_ms", "p_adj"] == pytest.approx(2 / 2**6)
    assert t.loc["p90_ms", "min_p"] == pytest.approx(2 / 2**6)
    assert t.loc["p90_ms", "verdict"] == "slower"
    assert t.loc["p50_ms", "verdict"] == "slower"


def test_unpaired_minimum_p_counts_the_ties():
    """Issue 19, item 10: 19 of 20 error rates are 0, so every arrangement of the trials
    gives the exact Mann-Whitney p = 1; the guard used the untied floor 2/C(20, 10) and the
    row read "~ (MDE ... pp)", as if a difference could have been seen. The floor now comes
    from the tied null: the row is "insufficient" with the ties as the reason. A row whose
    ties still allow significance keeps its "~" (and the untied floor when there are no ties)."""
    from benchlib.stats.exact import min_p_unpaired, min_p_unpaired_tied

    a = np.arange(10.0)
    assert min_p_unpaired_tied(a, a + 0.5) == pytest.approx(min_p_unpaired(10, 10))
    assert min_p_unpaired_tied(np.zeros(10), np.r_[np.zeros(9), 0.001]) == 1.0
    err_b = np.r_[np.zeros(9), 0.001]
    recs = [{"condition": "c", "arm": arm, "trial": i, "valid": True, "p50_ms": 1.0 + 0.01 * i,
             "error_rate": float(v)}
            for arm, vals in (("A", np.zeros(10)), ("B", err_b)) for i, v in enumerate(vals)]
    t = compare(pd.DataFrame(recs), baseline="A", metrics=("error_rate",), design="unpaired").table.iloc[0]
    assert t["p_raw"] == 1.0 and t["min_p"] == 1.0
    assert t["verdict"] == "insufficient trials (19 of 20 trials tied: smallest possible p 1.00)", t["verdict"]
    # 4 of 10 arm trials with errors: 16 of 20 tied, floor 0.087: still "insufficient"
    err_b4 = np.r_[np.zeros(6), 0.001, 0.002, 0.003, 0.004]
    recs4 = [{**r, "error_rate": float(err_b4[r["trial"]])} if r["arm"] == "B" else r for r in recs]
    t4 = compare(pd.DataFrame(recs4), baseline="A", metrics=("error_rate",), design="unpaired").table.iloc[0]
    assert t4["verdict"] == "insufficient trials (16 of 20 trials tied: smallest possible p 0.087)", t4["verdict"]
    # 6 of 10: 14 tied, floor 0.011 < alpha: the test can decide, and does (p at its floor)
    err_b6 = np.r_[np.zeros(4), 0.001, 0.002, 0.003, 0.004, 0.005, 0.006]
    err_a6 = np.r_[np.zeros(10)]
    recs6 = [{**r, "error_rate": float((err_b6 if r["arm"] == "B" else err_a6)[r["trial"]])} for r in recs]
    t6 = compare(pd.DataFrame(recs6), baseline="A", metrics=("error_rate",), design="unpaired").table.iloc[0]
    assert t6["min_p"] == pytest.approx(0.0108, abs=1e-4)
    assert t6["p_raw"] == pytest.approx(t6["min_p"]) and t6["verdict"] == "more errors", t6["verdict"]
