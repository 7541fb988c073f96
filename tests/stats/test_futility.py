"""Futility (issue 23, item 4): a sequential row that cannot reach the target MDE within the
design's blocks is "not decidable within the budget", its own verdict kind, settled for the
runner, distinct from "~" and from equivalence; the procedure's size and power through
``compare()`` (``validation.sequential_rates``)."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from benchlib.core.errors import ParameterError
from benchlib.stats import compare
from benchlib.stats import validation as V
from benchlib.stats.metrics import metric_info
from benchlib.stats.sequential import SequentialDesign, settled, status
from benchlib.stats.simulate import simulate_summaries
from benchlib.stats.verdict import VerdictKind, decide, render

LAT = metric_info("p50_ms")
COMMON = dict(alpha=0.05, margin=0.02, correction="holm", family_size=1, power=0.8, paired=True)


def _row(**kw):
    log = math.log
    args = dict(status="ok", effect=0.0, lo=log(0.8), hi=log(1.25), tost_lo=log(0.85), tost_hi=log(1.18),
                achieved=0.95, p_raw=0.5, p_adj=0.5, min_p=0.001, best_adjusted=0.001, mde=log(1.14), need=6,
                blocks_run=8, blocks_max=16, **COMMON)
    return decide(LAT, **{**args, **kw})


def test_the_new_kind_text_and_to_dict():
    v = _row(target_mde=0.05, mde_budget=0.12)
    assert v.kind is VerdictKind.UNDECIDABLE and not v.directional and not v.equivalent
    assert render(v) == "not decidable within the budget: MDE 12% > target 5.0% (sequential, 8 of 16 blocks)"
    d = v.to_dict()
    assert d["kind"] == "undecidable" and d["target_mde"] == 0.05 and d["mde_budget"] == 0.12
    assert d["text"].startswith("not decidable within the budget")
    json.dumps(d)
    assert settled(v) and not settled(_row())
    # within reach: "~" as before; no target: "~"; an infinite reach is futile too
    assert _row(target_mde=0.05, mde_budget=0.04).kind is VerdictKind.NO_DIFFERENCE
    assert _row().kind is VerdictKind.NO_DIFFERENCE and math.isnan(_row().target_mde)
    assert _row(target_mde=0.05, mde_budget=math.inf).kind is VerdictKind.UNDECIDABLE
    # significance and equivalence come first: futility never overrides a decision
    assert _row(p_raw=0.001, p_adj=0.001, effect=math.log(1.2), lo=math.log(1.1), hi=math.log(1.3),
                target_mde=0.05, mde_budget=0.3).kind is VerdictKind.SLOWER
    log = math.log
    assert _row(lo=log(0.99), hi=log(1.01), tost_lo=log(0.995), tost_hi=log(1.005), target_mde=0.05,
                mde_budget=0.3).kind is VerdictKind.EQUIVALENT
    # a row that cannot be significant yet ("insufficient") but is out of reach: futile
    assert _row(best_adjusted=0.2, target_mde=0.05, mde_budget=0.3).kind is VerdictKind.UNDECIDABLE
    # before the last look, out of reach but with a fair chance of a decision at the effect
    # seen so far: not futile (issue 39, item 4)
    assert _row(target_mde=0.05, mde_budget=0.3, conditional_power=0.5).kind is VerdictKind.NO_DIFFERENCE
    low = _row(target_mde=0.05, mde_budget=0.3, conditional_power=0.02)
    assert low.kind is VerdictKind.UNDECIDABLE and render(low).endswith(
        "MDE 30% > target 5.0%, chance of a decision at the effect so far 2% (sequential, 8 of 16 blocks)")


def test_rounding_never_prints_an_mde_equal_to_its_target():
    """Issue 39, item 4: "MDE 5.0% > target 5.0%" read as a contradiction."""
    for mde, want in ((0.0504, "MDE 5.04% > target 5.00%"), (0.05004, "MDE 5.004% > target 5.000%"),
                      (0.052, "MDE 5.2% > target 5.0%")):
        text = render(_row(target_mde=0.05, mde_budget=mde))
        assert want in text, text


def test_design_carries_the_target_and_checks_it():
    d = SequentialDesign.every(16, first=8, step=4, target_mde=0.05)
    assert d.target_mde == 0.05 and d.to_dict()["target_mde"] == 0.05
    assert "non-binding futility" in d.describe()
    assert "target_mde" not in SequentialDesign.every(16, first=8).to_dict()
    for bad in (0, -0.1, math.nan, "5%", True):
        with pytest.raises(ParameterError, match="target_mde"):
            SequentialDesign((8, 16), target_mde=bad)


def _noisy(n: int, ratio: float, seed: int, sd: float):
    return simulate_summaries(np.random.default_rng(seed), arms={"A": 1.0, "B": ratio}, trials=n, n_req=2000,
                              phi=0.9, trial_sd=sd)


def test_futility_boundary_through_compare():
    """A noisy row (per-trial SD 20%) against a 3% target, showing no effect, is futile at the
    first look and settles the question; the same data against a 60% target stay "~" and open;
    the same noisy row with B 30% slower stays "~" and open (its chance of a decision at the
    effect seen is high, although the MDE is out of reach); a quiet row with a real difference
    is decided, target or not."""
    far = SequentialDesign.every(16, first=8, step=4, target_mde=0.03)
    near = dataclasses.replace(far, target_mde=0.6)
    df = _noisy(16, 1.0, 8, 0.2)
    first = df[df["block"] < 8]
    v = compare(first, baseline="A", metrics=("p50_ms",), sequential=far, shift=False).verdicts[0]
    assert v.kind is VerdictKind.UNDECIDABLE and v.mde_budget > 0.03 and v.target_mde == 0.03
    assert v.conditional_power < 0.1
    assert "not decidable within the budget: MDE" in v.text and "> target 3.0%, chance of a decision" in v.text
    big = first.copy()
    big.loc[big["arm"] == "B", "p50_ms"] *= 1.3
    w = compare(big, baseline="A", metrics=("p50_ms",), sequential=far, shift=False).verdicts[0]
    assert w.kind is VerdictKind.NO_DIFFERENCE and w.mde_budget > 0.03 and w.conditional_power > 0.5
    comp = compare(first, baseline="A", metrics=("p50_ms",), sequential=far, shift=False)
    assert status(comp).stop and comp.params["sequential"]["target_mde"] == 0.03
    assert comp.table.loc[0, "verdict_kind"] == "undecidable" and comp.table.loc[0, "target_mde_pct"] == 3.0
    cn = compare(first, baseline="A", metrics=("p50_ms",), sequential=near, shift=False)
    assert cn.verdicts[0].kind is VerdictKind.NO_DIFFERENCE and not status(cn).stop
    clear = compare(_noisy(8, 1.5, 4, 0.02), baseline="A", metrics=("p50_ms",), sequential=far, shift=False)
    assert clear.verdicts[0].kind is VerdictKind.SLOWER


FUT = [pytest.param(100, id="quick"), pytest.param(1000, id="full", marks=[pytest.mark.slow, pytest.mark.timeout(3600)])]


@pytest.mark.parametrize("reps", FUT)
def test_futility_keeps_the_size_and_most_of_the_power(reps, figures):
    """The one-row design planned for a 5% change (looks 10-20 blocks), with futility at a 5%
    target, through compare() at each look: in an A/A the share ending "faster"/"slower" stays
    within the band (futility is non-binding: the boundary is unchanged), most A/A rows end
    "not decidable" or stop early, and a planted 5% slowdown is found in at least 0.7 of
    replicates (0.6 at the quick size; 0.85 predicted without futility), 8% in at least 0.85
    (0.75 quick). At full size, against the same replicates without futility: power at 5% within
    2 points, and at 10% with 1.5x the planned spread at most 5% of rows "not decidable" and
    power within 2 points."""
    plan = V.sequential_designs()["one_row"]
    design = dataclasses.replace(plan.design, target_mde=0.05)
    aa = V.sequential_rates(reps, design=design, seed=70)
    p5 = V.sequential_rates(reps, design=design, ratio=1.05, seed=71)
    p8 = V.sequential_rates(reps, design=design, ratio=1.08, seed=72)
    figures.update({"aa": aa, "power_5": p5, "power_8": p8})
    assert aa["directional"] <= V.band(0.05, reps)[1], aa
    assert aa["undecidable"] > 0.2 and aa["blocks_mean"] < design.max_blocks, aa
    quick = reps < 1000
    assert p5["power"] >= (0.6 if quick else 0.7), p5
    assert p8["power"] >= (0.75 if quick else 0.85), p8
    assert p5["type_s"] <= 0.01 and p8["type_s"] <= 0.01
    if not quick:  # issue 39, item 4: what futility costs, against the same replicates without it
        wide = 0.0602  # per-trial SD giving 1.5x the planned within-block SD (0.099 against 0.066)
        p5_free = V.sequential_rates(reps, design=plan.design, ratio=1.05, seed=71)
        p10w = V.sequential_rates(reps, design=design, ratio=1.10, trial_sd=wide, seed=73)
        p10w_free = V.sequential_rates(reps, design=plan.design, ratio=1.10, trial_sd=wide, seed=73)
        figures.update({"power_5_without": p5_free, "power_10_wide": p10w, "power_10_wide_without": p10w_free})
        assert p5["power"] >= p5_free["power"] - 0.02, (p5, p5_free)
        assert p10w["undecidable"] <= 0.05 and p10w["power"] >= p10w_free["power"] - 0.02, (p10w, p10w_free)


def test_the_conclusion_phrase_says_the_budget_not_no_difference():
    from benchlib.analysis.conclusion import says

    text = says(_row(target_mde=0.05, mde_budget=0.12), "b", "a", latency=True)
    assert text.startswith("verdict **not decidable within the budget: MDE 12% > target 5.0%")
    assert "cannot resolve a difference of 5%" in text and "says nothing about whether they differ" in text
    assert "no difference" not in text
