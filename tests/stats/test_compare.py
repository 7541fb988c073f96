"""compare(): effects, intervals, p-values, verdicts, guards, invariances, determinism."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from benchlib.core.errors import ParameterError
from benchlib.stats import compare
from benchlib.stats.exact import moses_interval, walsh_interval
from benchlib.stats.simulate import simulate_summaries


def _two_arms(a, b, *, blocks=True, metric="p50_ms", condition="c"):
    recs = []
    for i, v in enumerate(a):
        recs.append({"condition": condition, "arm": "A", "block": i, "position": i % 2, "seq": 2 * i + i % 2,
                     "valid": True, metric: v})
    for i, v in enumerate(b):
        recs.append({"condition": condition, "arm": "B", "block": i, "position": 1 - i % 2,
                     "seq": 2 * i + 1 - i % 2, "valid": True, metric: v})
    df = pd.DataFrame(recs)
    if not blocks:
        df = df.drop(columns=["block", "position"])
    return df


def test_unpaired_row_is_exp_hodges_lehmann_with_moses_ci_and_exact_mwu():
    rng = np.random.default_rng(1)
    a = rng.lognormal(np.log(10), 0.05, 10)
    b = rng.lognormal(np.log(9), 0.05, 10)
    c = compare(_two_arms(a, b, blocks=False), baseline="A", metrics=("p50_ms",))
    r = c.table.iloc[0]
    ref = moses_interval(np.log(a), np.log(b), 0.95)
    assert r["design"] == "unpaired" and r["test"] == "exact Mann-Whitney"
    assert r["ratio"] == pytest.approx(math.exp(ref.estimate))
    assert (r["ci_lo"], r["ci_hi"]) == pytest.approx((math.exp(ref.lo), math.exp(ref.hi)))
    assert r["achieved_confidence"] == pytest.approx(0.957, abs=5e-4)
    assert r["p_raw"] == pytest.approx(stats.mannwhitneyu(b, a, method="exact").pvalue)
    assert r["p_adj"] == r["p_raw"]  # one row
    assert r["verdict"] == "faster"
    assert r["pct_change"] == pytest.approx(100 * (r["ratio"] - 1))
    assert r["significant"] and r["practical"] and not r["equivalent"]


def test_paired_row_uses_walsh_and_signed_rank():
    rng = np.random.default_rng(2)
    block = rng.normal(0, 0.2, 10)  # large block effects, small arm effect
    a = np.exp(np.log(10) + block + rng.normal(0, 0.01, 10))
    b = np.exp(np.log(10.5) + block + rng.normal(0, 0.01, 10))
    c = compare(_two_arms(a, b), baseline="A", metrics=("p50_ms",))
    r = c.table.iloc[0]
    d = np.log(b) - np.log(a)
    ref = walsh_interval(d)
    assert r["design"] == "paired" and r["n_blocks"] == 10
    assert r["ratio"] == pytest.approx(math.exp(ref.estimate))
    assert r["ci_lo"] == pytest.approx(math.exp(ref.lo))
    assert r["p_raw"] == pytest.approx(stats.wilcoxon(d, method="exact").pvalue)
    assert r["verdict"] == "slower"
    # unpaired analysis of the same data cannot see through the block effects
    u = compare(_two_arms(a, b), baseline="A", metrics=("p50_ms",), design="unpaired").table.iloc[0]
    assert u["p_raw"] > r["p_raw"]


def test_throughput_higher_is_better():
    a = np.linspace(1000, 1010, 10)
    b = a * 1.10
    c = compare(_two_arms(a, b, metric="throughput_rps"), baseline="A", metrics=("throughput_rps",))
    r = c.table.iloc[0]
    assert r["better"] == "higher" and r["ratio"] == pytest.approx(1.10)
    assert r["verdict"] == "faster" and r["prob_better"] == 1.0
    c = compare(_two_arms(a, a / 1.1, metric="throughput_rps"), baseline="A", metrics=("throughput_rps",))
    assert c.table.iloc[0]["verdict"] == "slower"


def test_equivalence_and_within_margin():
    rng = np.random.default_rng(3)
    base = rng.lognormal(np.log(10), 0.002, 20)
    c = compare(_two_arms(base, base * np.exp(rng.normal(0, 0.002, 20))), baseline="A", metrics=("p50_ms",))
    assert c.table.iloc[0]["verdict"] == "equivalent (±2%)"
    c = compare(_two_arms(base, base * 1.005 * np.exp(rng.normal(0, 0.0005, 20))), baseline="A", metrics=("p50_ms",))
    assert c.table.iloc[0]["verdict"] == "slower, within ±2%"
    assert c.table.iloc[0]["significant"] and not c.table.iloc[0]["practical"]


def test_inconclusive_row_reports_the_mde():
    rng = np.random.default_rng(4)
    a = rng.lognormal(np.log(10), 0.1, 10)
    b = rng.lognormal(np.log(10), 0.1, 10)
    r = compare(_two_arms(a, b), baseline="A", metrics=("p50_ms",)).table.iloc[0]
    assert r["verdict"].startswith("~ (MDE ")
    assert 5 < r["mde_pct"] < 40


def test_minimum_p_guard_unpaired_and_paired():
    a, b = [10.0, 10.1, 10.2], [20.0, 20.1, 20.2]
    r = compare(_two_arms(a, b, blocks=False), baseline="A", metrics=("p50_ms",), correction="none").table.iloc[0]
    assert r["verdict"] == "insufficient trials (need ≥ 4 per arm)"
    a5, b5 = list(np.linspace(10, 11, 5)), list(np.linspace(20, 21, 5))
    r = compare(_two_arms(a5, b5), baseline="A", metrics=("p50_ms",)).table.iloc[0]
    assert r["design"] == "paired" and r["verdict"] == "insufficient trials (need ≥ 6 blocks)"


def test_minimum_p_guard_with_ten_holm_rows():
    rng = np.random.default_rng(5)
    n = 5
    recs = []
    for arm, f in (("A", 1.0), ("B", 2.0)):
        for i in range(n):
            rec = {"condition": "c", "arm": arm, "seq": i if arm == "A" else n + i, "valid": True}
            for k in range(10):
                rec[f"m{k}_ms"] = f * (10 + rng.random())
            recs.append(rec)
    df = pd.DataFrame(recs)
    metrics = tuple(f"m{k}_ms" for k in range(10))
    t = compare(df, baseline="A", metrics=metrics).table
    assert (t["verdict"] == "insufficient trials (need ≥ 6 per arm)").all()
    assert (t["family_size"] == 10).all()


def test_more_than_two_arms_share_one_holm_family():
    rng = np.random.default_rng(6)
    df = simulate_summaries(rng, arms={"A": 1.0, "B": 1.2, "C": 1.0, "D": 0.8}, trials=10, trial_sd=0.02, sigma=0.1)
    c = compare(df, baseline="A", metrics=("p50_ms", "p90_ms"))
    t = c.table
    assert list(t["arm"]) == ["B", "B", "C", "C", "D", "D"]
    assert (t["family_size"] == 6).all()
    expect = np.minimum(1, np.maximum.accumulate(np.sort(t["p_raw"].to_numpy()) * np.arange(6, 0, -1)))
    assert np.sort(t["p_adj"].to_numpy()) == pytest.approx(expect)
    assert t[t["arm"] == "B"]["verdict"].str.startswith("slower").all()
    assert t[t["arm"] == "D"]["verdict"].str.startswith("faster").all()
    text = c.to_text()
    assert "B vs A (baseline)" in text and "D vs A (baseline)" in text


def test_scale_invariance_and_swap():
    rng = np.random.default_rng(7)
    a = rng.lognormal(np.log(10), 0.1, 10)
    b = rng.lognormal(np.log(11), 0.1, 10)
    for design in ("paired", "unpaired"):
        r1 = compare(_two_arms(a, b), baseline="A", metrics=("p50_ms",), design=design).table.iloc[0]
        r2 = compare(_two_arms(3.7 * a, 3.7 * b), baseline="A", metrics=("p50_ms",), design=design).table.iloc[0]
        for k in ("ratio", "ci_lo", "ci_hi", "p_raw"):
            assert r1[k] == pytest.approx(r2[k], rel=1e-9)
        sw = compare(_two_arms(a, b).replace({"arm": {"A": "B", "B": "A"}}), baseline="A", metrics=("p50_ms",),
                     design=design).table.iloc[0]
        assert sw["ratio"] == pytest.approx(1 / r1["ratio"])
        assert sw["ci_lo"] == pytest.approx(1 / r1["ci_hi"]) and sw["ci_hi"] == pytest.approx(1 / r1["ci_lo"])
        assert sw["p_raw"] == pytest.approx(r1["p_raw"])
    # adding a constant changes the ratio but not the unpaired Mann-Whitney p
    u1 = compare(_two_arms(a, b), baseline="A", metrics=("p50_ms",), design="unpaired").table.iloc[0]
    u2 = compare(_two_arms(a + 5, b + 5), baseline="A", metrics=("p50_ms",), design="unpaired").table.iloc[0]
    assert u2["p_raw"] == u1["p_raw"] and u2["ratio"] != u1["ratio"]


def test_determinism_byte_identical_json():
    rng = np.random.default_rng(8)
    df = simulate_summaries(rng, arms={"A": 1.0, "B": 1.05}, trials=8, phi=0.5, trial_sd=0.03)
    for method in ("rank", "bootstrap"):
        j1 = compare(df, baseline="A", method=method, seed=3, n_resamples=999).to_json()
        j2 = compare(df.copy(), baseline="A", method=method, seed=3, n_resamples=999).to_json()
        assert j1 == j2
        doc = json.loads(j1)
        assert doc["params"]["seed"] == 3 and len(doc["rows"]) == 3
        assert {"scipy", "numpy", "benchlib"} <= set(doc["versions"])


def test_bad_input_gives_clear_errors():
    df = _two_arms([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    with pytest.raises(ParameterError, match="'rank', 'parametric', 'bootstrap'"):
        compare(df, baseline="A", metrics=("p50_ms",), method="magic")
    with pytest.raises(ParameterError, match="'holm', 'bh', 'by', 'none'"):
        compare(df, baseline="A", metrics=("p50_ms",), correction="bonf")
    with pytest.raises(ParameterError, match="'auto', 'paired', 'unpaired'"):
        compare(df, baseline="A", metrics=("p50_ms",), design="crossover")
    with pytest.raises(ParameterError, match="baseline 'Z'"):
        compare(df, baseline="Z", metrics=("p50_ms",))
    with pytest.raises(ParameterError, match="not columns"):
        compare(df, baseline="A", metrics=("p77_ms",))
    mixed = df.assign(endpoint=["/a", "/b", "/a"] * 2)
    with pytest.raises(ParameterError, match="endpoint"):
        compare(mixed, baseline="A", metrics=("p50_ms",))
    ok = compare(mixed, baseline="A", metrics=("p50_ms",), by=("condition", "endpoint"), correction="none")
    assert len(ok.table) == 2 and ok.table["verdict"].str.startswith("insufficient trials").all()
    nan_arm = df.copy()
    nan_arm.loc[0, "arm"] = None
    with pytest.raises(ParameterError, match="NaN"):
        compare(nan_arm, baseline="A", metrics=("p50_ms",))
    neg = df.copy()
    neg.loc[0, "p50_ms"] = 0.0
    with pytest.raises(ParameterError, match="positive"):
        compare(neg, baseline="A", metrics=("p50_ms",))
    with pytest.raises(ParameterError, match="direction"):
        compare(df.assign(cpu=1.0), baseline="A", metrics=("cpu",))


def test_nan_metric_values_are_left_out_and_said():
    rng = np.random.default_rng(9)
    a = rng.lognormal(np.log(10), 0.05, 10)
    b = rng.lognormal(np.log(12), 0.05, 10)
    df = _two_arms(a, b, blocks=False)
    df.loc[[0, 1], "p50_ms"] = np.nan
    c = compare(df, baseline="A", metrics=("p50_ms",))
    r = c.table.iloc[0]
    assert r["n_baseline"] == 8 and r["n_arm"] == 10
    assert any("omitted in 2 of 20 trials" in f for f in c.footnotes)
    df.loc[df["arm"] == "B", "p50_ms"] = np.nan
    r = compare(df, baseline="A", metrics=("p50_ms",)).table.iloc[0]
    assert r["verdict"].startswith("insufficient trials")


def test_one_trial_per_arm_is_insufficient_without_block_bootstrap():
    df = _two_arms([10.0], [11.0], blocks=False)
    r = compare(df, baseline="A", metrics=("p50_ms",)).table.iloc[0]
    assert r["verdict"].startswith("insufficient trials (need ≥ 4")


def test_json_is_byte_identical_across_processes(tmp_path):
    """12. Determinism across runs: two interpreters with different hash seeds write the same bytes."""
    import hashlib
    import os
    import subprocess
    import sys

    code = (
        "import numpy as np, sys\n"
        "from benchlib.stats import compare\n"
        "from benchlib.stats.simulate import simulate_summaries\n"
        "df = simulate_summaries(np.random.default_rng(5), arms={'A': 1.0, 'B': 1.04, 'C': 0.97}, trials=6,"
        " phi=0.5, trial_sd=0.02)\n"
        "df['error_rate'] = 0.0\n"
        "c = compare(df, baseline='A', metrics=('p50_ms', 'p99_ms', 'error_rate'), method='bootstrap',"
        " n_resamples=999, seed=9)\n"
        "sys.stdout.write(c.to_json())\n"
    )
    digests = set()
    for hashseed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hashseed}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
        digests.add(hashlib.sha256(out.stdout.encode()).hexdigest())
    assert len(digests) == 1


def test_quantile_omitted_in_every_trial():
    df = simulate_summaries(np.random.default_rng(10), trials=6)
    df["p999_ms"] = np.nan
    df["omitted"] = "p999_ms"
    c = compare(df, baseline="A", metrics=("p50_ms", "p999_ms"))
    r = c.table[c.table["metric"] == "p999_ms"].iloc[0]
    assert r["verdict"] == "omitted (no values)"
    assert any("50,000 successful requests per trial" in f for f in c.footnotes)
    assert c.table["family_size"].tolist() == [1, 1]  # the omitted row is not a test


def test_contrasts_put_pairs_with_different_baselines_in_one_holm_family():
    rng = np.random.default_rng(11)
    df = simulate_summaries(rng, arms={"go": 1.0, "go-slow": 2.0, "rust": 1.0, "rust-slow": 3.0}, trials=10,
                            trial_sd=0.02, sigma=0.1)
    pairs = [("go", "rust"), ("go", "go-slow"), ("rust", "rust-slow")]
    c = compare(df, contrasts=pairs, metrics=("p50_ms", "p90_ms"))
    t = c.table
    assert list(zip(t["baseline"], t["arm"])) == [p for p in pairs for _ in range(2)]
    assert (t["family_size"] == 6).all()
    expect = np.minimum(1, np.maximum.accumulate(np.sort(t["p_raw"].to_numpy()) * np.arange(6, 0, -1)))
    assert np.sort(t["p_adj"].to_numpy()) == pytest.approx(expect)
    # each row equals the same pair compared alone (before the adjustment)
    alone = compare(df[df["arm"].isin(["rust", "rust-slow"])], baseline="rust", metrics=("p50_ms", "p90_ms")).table
    mine = t[t["baseline"] == "rust"].reset_index(drop=True)
    for col in ("ratio", "ci_lo", "ci_hi", "p_raw", "centre_baseline", "centre_arm"):
        assert mine[col].to_numpy() == pytest.approx(alone[col].to_numpy())
    assert mine["verdict"].str.startswith("slower").all()
    assert "rust-slow vs rust (baseline)" in c.to_text()
    assert c.params["contrasts"] == [list(p) for p in pairs] and c.params["baseline"] is None


def test_contrasts_skip_a_pair_whose_arm_did_not_run_and_say_so():
    rng = np.random.default_rng(12)
    df = simulate_summaries(rng, arms={"go": 1.0, "rust": 1.1}, trials=8, trial_sd=0.02, sigma=0.1)
    c = compare(df, contrasts=[("go", "rust"), ("go", "dotnet")], metrics=("p50_ms",))
    assert list(c.table["arm"]) == ["rust"] and (c.table["family_size"] == 1).all()
    assert any("dotnet vs go" in n and "dotnet has no valid trial" in n for n in c.footnotes)
    with pytest.raises(ParameterError, match="none of the contrasts"):
        compare(df, contrasts=[("go", "dotnet")], metrics=("p50_ms",))
    with pytest.raises(ParameterError, match="not both"):
        compare(df, baseline="go", contrasts=[("go", "rust")])
    with pytest.raises(ParameterError, match="baseline= .* or contrasts="):
        compare(df, metrics=("p50_ms",))
    for bad in ([("go", "go")], [("go",)], ["go"], [("go", "rust"), ("go", "rust")], []):
        with pytest.raises(ParameterError):
            compare(df, contrasts=bad, metrics=("p50_ms",))
