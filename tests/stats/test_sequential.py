"""Group-sequential stopping (benchlib.stats.sequential) and compare(..., sequential=) (pure)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchlib.core.errors import ParameterError
from benchlib.stats import compare
from benchlib.stats.exact import signed_rank
from benchlib.stats.planning.sample_size import plan_sequential
from benchlib.stats.sequential import SequentialDesign, analyse_row, status
from benchlib.stats.simulate import simulate_summaries
from benchlib.stats.verdict import VerdictKind, render


def _blocks(seed: int, ratio: float, n: int = 12, trial_sd: float = 0.03):
    return simulate_summaries(np.random.default_rng(seed), arms={"A": 1.0, "B": ratio}, trials=n, n_req=2000,
                              phi=0.9, trial_sd=trial_sd)


def test_design_looks_and_errors() -> None:
    d = SequentialDesign.every(12, first=6)
    assert d.looks == (6, 8, 10, 12) and d.max_blocks == 12
    assert d.next_look(6) == 8 and d.next_look(12) is None and d.is_look(10) and not d.is_look(7)
    assert d.counts(7) == (6, 7, 8, 10, 12)
    # the default first look: the first at which a row can reach the boundary at all
    auto = SequentialDesign.every(12)
    assert auto.looks[0] >= 6 and auto.looks[-1] == 12
    with pytest.raises(ParameterError, match="strictly increasing"):
        SequentialDesign((6, 6, 8))
    with pytest.raises(ParameterError, match="shape"):
        SequentialDesign((6, 8), shape=0.9)
    with pytest.raises(ParameterError, match="exceed"):
        d.counts(13)


def test_one_look_is_the_fixed_signed_rank_test() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(0, 0.05, 10), rng.normal(0.04, 0.05, 10)
    row = analyse_row(a, b, np.arange(10), SequentialDesign((10,)), blocks_run=10)
    assert row.estimate.pvalue == pytest.approx(signed_rank(b - a).pvalue)
    assert row.p_fixed == pytest.approx(row.estimate.pvalue)


def test_sequential_p_never_rises_and_pays_for_the_looks() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.normal(0, 0.05, 16), rng.normal(0.05, 0.05, 16)
    design = SequentialDesign.every(16, first=6, step=2)
    ps = []
    for look in design.looks:
        r = analyse_row(a[:look], b[:look], np.arange(look), design, blocks_run=look)
        ps.append(r.estimate.pvalue)
        # a repeated interval is at least as wide as the fixed one at the same blocks
        fixed = compare(_frame(a[:look], b[:look]), baseline="A", metrics=("p50_ms",), shift=False,
                        design="paired").table.iloc[0]
        assert r.estimate.lo <= math.log(fixed["ci_lo"]) + 1e-12
        assert r.estimate.hi >= math.log(fixed["ci_hi"]) - 1e-12
    assert all(q <= p + 1e-12 for p, q in zip(ps, ps[1:], strict=False)), ps
    last = analyse_row(a, b, np.arange(16), design, blocks_run=16)
    assert last.estimate.pvalue >= last.p_fixed  # five looks cost something


def _frame(a, b):
    import pandas as pd

    n = len(a)
    return pd.DataFrame({"arm": ["A"] * n + ["B"] * n, "block": list(range(n)) * 2, "trial": list(range(2 * n)),
                         "condition": "c", "p50_ms": np.exp(np.r_[a, b]) * 5.0})


def test_compare_stops_a_clear_difference_at_the_first_look() -> None:
    design = SequentialDesign.every(16, first=8, step=4)
    df = _blocks(11, 1.25, n=16)
    comp = compare(df[df["block"] < 8], baseline="A", metrics=("p50_ms",), sequential=design, shift=False)
    v = comp.verdicts[0]
    assert v.kind is VerdictKind.SLOWER and v.sequential and v.stopped_early
    assert (v.blocks_run, v.blocks_max) == (8, 16)
    assert render(v) == "slower (sequential, 8 of 16 blocks; stopped early at look 1 of 3; estimate bias-adjusted)"
    # stopped at the first look on a large effect (25%, many SDs of the differences): the
    # adjustment is small, and the estimate stays inside the repeated interval
    assert v.bias_adjusted and (v.look, v.looks) == (1, 3)
    assert abs(math.log(v.estimate / v.estimate_unadjusted)) < 0.01 and v.ci_lo <= v.estimate <= v.ci_hi
    st = status(comp)
    assert st.stop and st.settled and st.blocks == 8
    assert "settled at 8 of 16" in st.explain()
    assert "group-sequential: looks at 8, 12, 16" in comp.to_text()
    assert comp.params["sequential"]["blocks_run"] == 8
    assert comp.table.loc[0, "p_raw"] >= comp.table.loc[0, "p_fixed"]


def test_compare_keeps_going_while_undecided_and_stops_at_the_maximum() -> None:
    design = SequentialDesign.every(12, first=8, step=2)
    df = _blocks(12, 1.0, n=12)
    comp = compare(df[df["block"] < 8], baseline="A", metrics=("p50_ms",), sequential=design, shift=False)
    st = status(comp)
    assert not st.stop and st.next_look == 10 and len(st.open) == 1
    full = status(compare(df, baseline="A", metrics=("p50_ms",), sequential=design, shift=False))
    assert full.stop and full.blocks == 12


def test_compare_sequential_is_deterministic_and_json_carries_the_design() -> None:
    design = SequentialDesign.every(12, first=8)
    df = _blocks(13, 1.08, n=12)
    a = compare(df, baseline="A", metrics=("p50_ms", "p99_ms"), sequential=design, shift=False).to_json()
    b = compare(df, baseline="A", metrics=("p50_ms", "p99_ms"), sequential=design, shift=False).to_json()
    assert a == b and '"sequential"' in a


def test_an_unplanned_look_is_added_and_noted() -> None:
    design = SequentialDesign.every(12, first=8, step=2)
    df = _blocks(14, 1.0, n=12)
    comp = compare(df[df["block"] < 9], baseline="A", metrics=("p50_ms",), sequential=design, shift=False)
    assert any("not one of the planned" in f for f in comp.footnotes)
    assert not status(comp).at_look


def test_compare_sequential_rejects_what_it_cannot_do() -> None:
    df = _blocks(15, 1.0, n=8)
    design = SequentialDesign.every(8, first=6)
    with pytest.raises(ParameterError, match="rank method"):
        compare(df, baseline="A", sequential=design, method="parametric")
    with pytest.raises(ParameterError, match="randomized blocks"):
        compare(df, baseline="A", sequential=design, design="unpaired")
    with pytest.raises(ParameterError, match="SequentialDesign"):
        compare(df, baseline="A", sequential=(6, 8))
    with pytest.raises(ParameterError, match="exceed"):
        compare(_blocks(15, 1.0, n=10), baseline="A", metrics=("p50_ms",), sequential=design)
    with pytest.raises(ParameterError, match="sequential=design"):
        status(compare(df, baseline="A", metrics=("p50_ms",)))


def test_a_pair_short_of_two_complete_blocks_reads_insufficient_trials() -> None:
    # a short run whose B trial of block 1 was invalid: one complete block; the fixed
    # analysis would compare it unpaired, the sequential one by block: too few blocks
    df = _blocks(16, 1.3, n=2)
    df["valid"] = ~((df["arm"] == "B") & (df["block"] == 1))
    comp = compare(df, baseline="A", metrics=("p50_ms",), sequential=SequentialDesign((2,)), shift=False)
    v = comp.verdicts[0]
    assert v.kind is VerdictKind.INSUFFICIENT and not v.kind.directional
    with pytest.raises(ParameterError, match="more than one trial"):
        compare(df.assign(block=0), baseline="A", metrics=("p50_ms",), sequential=SequentialDesign((2,)))


def test_plan_sequential_reaches_its_power_with_few_more_blocks_than_fixed() -> None:
    p = plan_sequential(0.066, target_mde=0.05)
    assert p.power >= 0.8
    assert p.fixed_blocks <= p.design.max_blocks <= p.fixed_blocks + 6
    # stopping early saves blocks when the effect is larger than planned
    assert p.expected_blocks[0.10] < p.expected_blocks[0.05] < p.design.max_blocks
    assert "fixed design needs" in p.explain()
    # predicted power is monotone in the effect
    assert p.design.power(0.02, 0.066) < p.design.power(0.05, 0.066) < p.design.power(0.10, 0.066)


def test_looks_that_disagree_give_the_deciding_looks_interval_and_never_equivalent() -> None:
    # the first look's 8 blocks sit at +10%, the next 8 at -10%: no shift is consistent with
    # both looks, so the intersection of the repeated intervals is empty (drift, not precision)
    rng = np.random.default_rng(1)
    d = np.r_[0.10 + rng.uniform(-0.003, 0.003, 8), -0.10 + rng.uniform(-0.01, 0.01, 8)]
    design = SequentialDesign((8, 16))
    row = analyse_row(np.zeros(16), d, np.arange(16), design, blocks_run=16)
    # equivalence on the latest look's interval (here it holds 0 and reaches beyond the margin),
    # not a zero-width one
    assert row.estimate.tost_lo < 0.0 < row.estimate.tost_hi
    assert row.estimate.tost_hi - row.estimate.tost_lo > 0.04
    # the first look rejected "no difference" at the interval's level: the interval is that
    # look's, the estimate inside it, and the direction decided is the interval's
    assert 0.09 < row.estimate.lo <= row.estimate.effect <= row.estimate.hi < 0.11
    assert abs(row.plain) < 0.01 and row.drift
    # through compare: two identical rows (Holm makes neither significant); before, both read
    # "equivalent (±2%)" on a zero-width interval
    frame = _frame(np.zeros(16), d)
    frame["p99_ms"] = frame["p50_ms"] * 3.0
    comp = compare(frame, baseline="A", metrics=("p50_ms", "p99_ms"), sequential=design, shift=False)
    for v in comp.verdicts:
        assert v.kind is not VerdictKind.EQUIVALENT and not v.equivalent and v.drift
        assert "drift between looks" in render(v)
    assert any("do not overlap" in f for f in comp.footnotes)
    assert bool(comp.table["drift"].all())


def test_the_estimate_lies_in_its_interval_and_the_word_follows_the_interval() -> None:
    """Issue 39, item 2: looks 8-16, B 10% slower in blocks 0-7 and 10% faster in 8-15. The
    looks' intervals overlap in a sliver above 1, while the plain estimate of all 16 blocks is
    about 1.0: the row read "ratio 0.999 [1.085, 1.097] (-0.1%) -> faster". The estimate is kept
    inside the interval, the word is the interval's, and the looks' disagreement is "drift"."""
    import pandas as pd

    rng = np.random.default_rng(0)
    a = rng.normal(0, 0.02, 16)
    b = a + np.r_[np.full(8, math.log(1.10)), np.full(8, -math.log(1.10))] + rng.normal(0, 0.02, 16)
    frame = pd.DataFrame({"arm": ["A"] * 16 + ["B"] * 16, "block": list(range(16)) * 2, "trial": range(32),
                          "condition": "c", "p50_ms": np.exp(np.r_[a, b]) * 5.0})
    design = SequentialDesign.every(16, first=8, step=2)
    v = compare(frame, baseline="A", metrics=("p50_ms",), sequential=design, shift=False).verdicts[0]
    assert v.ci_lo > 1.0 and v.ci_lo <= v.estimate <= v.ci_hi, (v.estimate, v.ci_lo, v.ci_hi)
    assert v.kind is VerdictKind.SLOWER and v.drift
    assert render(v) == "slower (sequential, 16 of 16 blocks; drift between looks)"
    # the same data at every look: the word never turns, the estimate never leaves its interval
    for n in design.looks:
        w = compare(frame[frame["block"] < n], baseline="A", metrics=("p50_ms",), sequential=design,
                    shift=False).verdicts[0]
        assert w.ci_lo <= w.estimate <= w.ci_hi and w.kind is VerdictKind.SLOWER, n


def test_a_steady_effect_is_not_called_drift() -> None:
    """A steady +8% over 16 blocks (within-block SD 3%): decided at the first look, every later
    look's estimate on the same side: no drift."""
    rng = np.random.default_rng(4)
    d = math.log(1.08) + rng.normal(0, 0.03, 16)
    design = SequentialDesign.every(16, first=8, step=2)
    for n in design.looks:
        row = analyse_row(np.zeros(n), d[:n], np.arange(n), design, blocks_run=n)
        assert not row.drift and row.estimate.lo > 0 and row.estimate.effect == pytest.approx(row.plain), n
