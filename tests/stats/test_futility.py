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
    """A noisy row (per-trial SD 20%) against a 3% target is futile at the first look and
    settles the question; the same data against a 60% target stay "~" and open; a quiet row
    with a real difference is decided, target or not."""
    far = SequentialDesign.every(16, first=8, step=4, target_mde=0.03)
    near = dataclasses.replace(far, target_mde=0.6)
    df = _noisy(16, 1.0, 3, 0.2)
    first = df[df["block"] < 8]
    v = compare(first, baseline="A", metrics=("p50_ms",), sequential=far, shift=False).verdicts[0]
    assert v.kind is VerdictKind.UNDECIDABLE and v.mde_budget > 0.03 and v.target_mde == 0.03
    assert "not decidable within the budget: MDE" in v.text and "> target 3.0%" in v.text
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
    (0.75 quick)."""
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


def test_the_conclusion_phrase_says_the_budget_not_no_difference():
    from benchlib.analysis.conclusion import says

    text = says(_row(target_mde=0.05, mde_budget=0.12), "b", "a", latency=True)
    assert text.startswith("verdict **not decidable within the budget: MDE 12% > target 5.0%")
    assert "cannot resolve a difference of 5%" in text and "says nothing about whether they differ" in text and "no difference" not in text
