"""Planning within a budget from a pilot (issue 23, item 3): the planner's choices, the
seed's pooling, the warm-up check."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from benchlib.core.errors import ParameterError
from benchlib.stats.planning.budget import plan_within_budget, warmup_check
from benchlib.stats.planning.cost import ArmCost, CostModel
from benchlib.stats.variance import PairComponents, pool_components


def _comp(between_sd: float, within_coef: float, *, n: int = 3, metric: str = "p50_ms", arm: str = "b",
          d: float = 1.0) -> PairComponents:
    b = between_sd ** 2
    w = within_coef / d
    return PairComponents({"condition": "c"}, "a", arm, metric, n, d, 5000.0, b + w, (0.0, 1.0), w, within_coef,
                          b, (0.0, 1.0), 0.0)


COST = CostModel((ArmCost("a", 2.0, 0.5, 0.0, 3), ArmCost("b", 2.0, 0.5, 0.0, 3)))


def test_a_quiet_pilot_reaches_the_target_within_the_budget_in_the_least_time():
    comps = [_comp(0.01, 0.0004)]
    p = plan_within_budget(comps, COST, budget_min=10, target_mde=0.05, pilot_minutes=0.5, pilot_blocks=3,
                           source="the pilot's 3 blocks")
    assert p.reaches and p.worst_mde <= 0.05 and p.minutes <= 9.5
    assert p.trials >= 6 and p.duration_s in (0.5, 1.0, 2.0, 3.0)
    # the least time: a larger budget chooses the same design
    q = plan_within_budget(comps, COST, budget_min=100, target_mde=0.05, pilot_minutes=0.5, pilot_blocks=3,
                           source="x")
    assert (q.trials, q.duration_s) == (p.trials, p.duration_s)
    assert "target is reached" in p.markdown({"p50_ms": 0.04}) and "≤ target 5.0%" in p.markdown({"p50_ms": 0.04})


def test_a_noisy_pilot_gets_the_smallest_mde_the_budget_allows_and_says_so():
    comps = [_comp(0.3, 0.0004)]
    p = plan_within_budget(comps, COST, budget_min=3, target_mde=0.05, pilot_minutes=0.5, pilot_blocks=3,
                           source="x")
    assert not p.reaches and p.worst_mde > 0.05 and p.minutes <= 2.5 + 1e-9
    assert any("smallest MDE" in n for n in p.notes)
    assert "not reached within the budget" in p.markdown()
    assert p.to_dict()["reaches"] is False and p.to_dict()["trials"] == p.trials


def test_bad_budget_target_or_pilot_is_one_clear_error():
    comps = [_comp(0.01, 0.0004)]
    kw = dict(pilot_minutes=0.5, pilot_blocks=3, source="x")
    with pytest.raises(ParameterError, match="budget_min must be a positive number"):
        plan_within_budget(comps, COST, budget_min=0, target_mde=0.05, **kw)
    with pytest.raises(ParameterError, match="target_mde"):
        plan_within_budget(comps, COST, budget_min=5, target_mde=-1, **kw)
    with pytest.raises(ParameterError, match="at least 3 blocks"):
        plan_within_budget(comps, COST, budget_min=5, target_mde=0.05, pilot_minutes=0.5, pilot_blocks=2, source="x")
    with pytest.raises(ParameterError, match="nothing left"):
        plan_within_budget(comps, COST, budget_min=0.4, target_mde=0.05, pilot_minutes=0.5, pilot_blocks=3,
                           source="x")


def test_a_seed_adds_degrees_of_freedom_and_narrows_the_plan():
    pilot = [_comp(0.05, 0.0004, n=3)]
    seed = [_comp(0.02, 0.0004, n=10), _comp(0.02, 0.0004, n=10, arm="other")]
    pooled = pool_components(pilot, seed)
    assert len(pooled) == 1 and pooled[0].n_blocks == 12
    assert pooled[0].between_var == pytest.approx((2 * 0.05 ** 2 + 9 * 0.02 ** 2) / 11)
    alone = plan_within_budget(pilot, COST, budget_min=60, target_mde=0.05, pilot_minutes=0.5, pilot_blocks=3,
                               source="x")
    seeded = plan_within_budget(pooled, COST, budget_min=60, target_mde=0.05, pilot_minutes=0.5, pilot_blocks=3,
                                source="x")
    assert seeded.minutes < alone.minutes


def _windows(first_factor: float) -> pd.DataFrame:
    rows = []
    for blk in range(3):
        for arm in ("a", "b"):
            for j in range(4):
                f = first_factor if (j == 0 and arm == "b") else 1.0
                rows.append({"condition": "c", "arm": arm, "block": blk, "valid": True, "kind": "split", "k": 4,
                             "j": j, "p50_ms": 2.0 * f, "throughput_rps": 1000.0 / f})
    return pd.DataFrame(rows)


def test_warmup_is_lengthened_only_when_the_measured_phase_starts_before_steady_state():
    ok = warmup_check(_windows(1.01), pilot_warmup_s=0.5, pilot_duration_s=2.0, target_mde=0.05)
    assert ok.warmup_s == 0.5 and "kept" in ok.why
    late = warmup_check(_windows(1.2), pilot_warmup_s=0.5, pilot_duration_s=2.0, target_mde=0.05)
    assert late.warmup_s == pytest.approx(1.0) and "lengthened" in late.why and late.shifts["b"] == pytest.approx(
        math.log(1.2))
    p = plan_within_budget([_comp(0.01, 0.0004)], COST, budget_min=10, target_mde=0.05, pilot_minutes=0.5,
                           pilot_blocks=3, source="x", warmup=late)
    assert p.warmup_s == pytest.approx(1.0) and "lengthened" in p.markdown()


def test_p99_at_2000_rps_never_gets_trials_under_3_s_and_the_text_names_it():
    # a quiet pilot that would otherwise choose 0.5 s trials; p99 needs 5,000 requests x 1.2
    comps = [_comp(0.01, 0.0001, metric="p50_ms")]
    kw = dict(pilot_minutes=0.5, pilot_blocks=3, source="x", rates={"a": 2500.0, "b": 2000.0})
    short = plan_within_budget(comps, COST, budget_min=10, target_mde=0.05, metrics=("p50_ms",), **kw)
    assert short.duration_s < 3.0 and short.floor is not None and short.floor.metric == "p50_ms"
    assert not any("left out" in n or "set by" in n for n in short.notes)
    p = plan_within_budget(comps, COST, budget_min=10, target_mde=0.05, metrics=("p50_ms", "p99_ms"), **kw)
    assert p.duration_s >= 3.0 and p.floor is not None
    assert p.floor.metric == "p99_ms" and p.floor.arm == "b" and p.floor.duration_s == pytest.approx(3.0)
    assert p.duration_s * 2000.0 >= 1.2 * 5000
    assert any("p99_ms needs 5,000" in n and "(b)" in n for n in p.notes)
    assert "p99_ms" in p.markdown() and p.to_dict()["min_duration_metric"] == "p99_ms"


def test_a_budget_that_cannot_afford_the_floor_says_which_metric_forced_the_length():
    comps = [_comp(0.3, 0.0004, metric="p99_ms")]
    p = plan_within_budget(comps, COST, budget_min=3, target_mde=0.05, pilot_minutes=0.5, pilot_blocks=3,
                           source="x", rates={"a": 2000.0, "b": 2000.0})
    assert not p.reaches and p.duration_s >= 3.0
    assert any("trial length is set by p99_ms" in n for n in p.notes)


def test_a_floor_beyond_every_duration_becomes_the_length_and_rates_default_to_the_components():
    comps = [_comp(0.01, 0.0004, metric="p999_ms")]  # rate_rps 5000: p99.9 needs 50,000 x 1.2 -> 12 s
    p = plan_within_budget(comps, COST, budget_min=60, target_mde=0.05, pilot_minutes=0.5, pilot_blocks=3,
                           source="x", durations=(0.5, 1.0, 2.0))
    assert p.duration_s == pytest.approx(12.0) and p.floor is not None and p.floor.metric == "p999_ms"
    with pytest.raises(ParameterError, match="safety must be a number of at least 1"):
        plan_within_budget(comps, COST, budget_min=60, target_mde=0.05, pilot_minutes=0.5, pilot_blocks=3,
                           source="x", request_safety=0.5)


def test_the_plan_and_the_design_section_predict_one_mde_that_of_the_test_the_run_gets():
    """Planning gaps, item 1: for the same components, trial length and blocks the planner
    (``BudgetPlan.mde``) and the design section (``design_table``'s ``predicted_mde_pct``)
    disagreed: the planner took the fixed test's MDE on the 80% upper bound of the between-trial
    variance with one family size for every row, the table the sequential test's (the run's
    analysis) on the point estimates at each row's own family. Both now call
    ``stats.planning.design_plan.predicted_mde``: the sequential test over the run's looks (the verdicts'
    MDE), on the planner's bound, each row at alpha / its Holm family. Parent commit: the plan
    said a target of 5% was reached with the fixed test's blocks, where the sequential run's
    MDE at those blocks is larger (rows then read "not decidable within the budget")."""
    from benchlib.stats.planning.design_plan import predicted_mde
    from benchlib.stats.sequential import SequentialDesign

    comps = [_comp(0.02, 0.0004, n=10), _comp(0.03, 0.0004, n=10, arm="c")]

    def looks(n: int) -> SequentialDesign:
        return SequentialDesign.every(n, step=2, n_comparisons=2, alpha=0.05, target_mde=0.05)

    kw = dict(budget_min=60, target_mde=0.05, pilot_minutes=0.5, pilot_blocks=3, source="x", n_comparisons=2)
    fixed = plan_within_budget(comps, COST, **kw)
    seq = plan_within_budget(comps, COST, looks=looks, families={c.row: 2 for c in comps}, **kw)
    assert fixed.looks == () and seq.looks == looks(seq.trials).looks and seq.reaches
    # one home: the plan's MDE is predicted_mde's at the chosen design for the run's sequential test
    mine = [predicted_mde(c, seq.duration_s, seq.trials, row_alpha=0.025, sequential=looks(seq.trials)) for c in comps]
    assert seq.mde["p50_ms"] == pytest.approx(max(mine)) and max(mine) <= 0.05
    # the fixed plan's MDE is the fixed test's; the sequential run would get more at those blocks
    assert fixed.mde["p50_ms"] == pytest.approx(max(predicted_mde(c, fixed.duration_s, fixed.trials, row_alpha=0.025)
                                                     for c in comps))
    seq_at_fixed = max(predicted_mde(c, fixed.duration_s, fixed.trials, row_alpha=0.025,
                                     sequential=looks(fixed.trials)) for c in comps)
    assert seq_at_fixed > fixed.mde["p50_ms"] and seq.minutes >= fixed.minutes
    # the point estimates (what the table predicted before) give a smaller MDE than the plan's bound
    point = max(predicted_mde(c, seq.duration_s, seq.trials, row_alpha=0.025, sequential=looks(seq.trials),
                              variance_confidence=None) for c in comps)
    assert point < seq.mde["p50_ms"]
    # each row at its own family: c alone in a family of 6 is planned at alpha / 6
    fam = plan_within_budget(comps, COST, looks=looks, families={comps[0].row: 2, comps[1].row: 6}, **kw)
    rows = [predicted_mde(c, fam.duration_s, fam.trials, row_alpha=0.05 / m, sequential=looks(fam.trials))
            for c, m in zip(comps, (2, 6))]
    assert fam.mde["p50_ms"] == pytest.approx(max(rows)) and fam.trials >= seq.trials
    assert "the sequential test over its looks at" in seq.markdown() and "the fixed test" in fixed.markdown()
    assert seq.to_dict()["looks"] == list(seq.looks)


def test_the_plan_counts_what_its_cost_model_misses_and_says_what_it_will_take():
    """Issue 39, item 8 (the code's part): budget_min ran over because the cost model sees only
    the trials' cycles. What the main run spends outside them is counted against the budget, and
    the plan says before the run what it will take in all."""
    comps = [_comp(0.3, 0.0004)]  # noisy: the plan takes what the budget allows
    kw = dict(budget_min=6, target_mde=0.05, pilot_minutes=1.0, pilot_blocks=3, source="x")
    blind = plan_within_budget(comps, COST, **kw)
    counted = plan_within_budget(comps, COST, outside_minutes=2.0, **kw)
    assert blind.minutes <= 5.0 + 1e-9 and counted.minutes <= 3.0 + 1e-9 and counted.trials < blind.trials
    assert counted.total_minutes == pytest.approx(1.0 + counted.minutes + 2.0) and counted.total_minutes <= 6.0 + 1e-9
    assert counted.forecast().startswith(f"The plan will take about {counted.total_minutes:.1f} min: the pilot 1.0 min")
    assert "+ 2.0 min outside the trials" in counted.forecast() and "within the 6 min budget" in counted.forecast()
    assert "not counted" in blind.forecast() and counted.forecast() in counted.markdown()
    assert counted.to_dict()["outside_minutes"] == 2.0
    with pytest.raises(ParameterError, match="nothing left to plan"):
        plan_within_budget(comps, COST, outside_minutes=5.0, **kw)
    with pytest.raises(ParameterError, match="outside_minutes must be"):
        plan_within_budget(comps, COST, outside_minutes=-1.0, **kw)
