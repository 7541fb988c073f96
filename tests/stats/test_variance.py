"""Variance components and the blocks x duration planner (pure, seeded simulations)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from benchlib.core.errors import ParameterError
from benchlib.stats.planning.cost import ArmCost, CostModel, cost_model
from benchlib.stats.planning.design_plan import plan_design
from benchlib.stats.power import mde_shift, min_trials, planning_alpha
from benchlib.stats.simulate import trial_latencies_ms, trial_rows
from benchlib.stats.variance import (
    VARIANCE_CONFIDENCE,
    PairComponents,
    arm_components,
    components_table,
    pair_components,
    window_metrics,
)

RATE = 1000.0
SIGMA_BODY = 0.35
#: Var of the log median of n iid normal(0, s) values: (pi / 2) s^2 / n.
C_IID = math.pi / 2.0 * SIGMA_BODY**2 / RATE  # log-variance x seconds, per arm


def _windows(n_blocks: int, seconds: float, trial_sd: float, seed: int, *, ratio: float = 1.0,
             phi: float = 0.0) -> pd.DataFrame:
    """Window metrics of ``n_blocks`` blocks of two arms (A, B) with a known trial effect."""
    rng = np.random.default_rng(seed)
    n_req = int(RATE * seconds)
    recs = []
    for block in range(n_blocks):
        for arm, shift in (("A", 1.0), ("B", ratio)):
            lat = trial_latencies_ms(n_req, rng, sigma=SIGMA_BODY, phi=phi, trial_sd=trial_sd, shift=shift,
                                     spike_rate=0.0)
            for w in window_metrics(trial_rows(lat, rate_rps=RATE), quantiles=(0.5,)):
                recs.append({"condition": "c", "arm": arm, "block": block, "valid": True, **w})
    return pd.DataFrame.from_records(recs)


@pytest.fixture(scope="module")
def balanced() -> pd.DataFrame:
    """60 blocks of 2 s trials: between-trial SD 1% per arm, within about the same."""
    return _windows(60, 2.0, 0.01, seed=7)


def test_window_metrics_split_and_prefix() -> None:
    lat = np.full(4000, 5.0)
    lat[2000:] = 10.0
    wins = window_metrics(trial_rows(lat, rate_rps=1000.0), splits=(1, 2), prefixes=(0.5,), quantiles=(0.5,))
    assert [(w["kind"], w["k"], w["j"]) for w in wins] == [("split", 1, 0), ("split", 2, 0), ("split", 2, 1),
                                                           ("prefix", 0, 0)]
    assert [w["n"] for w in wins] == [4000, 2000, 2000, 2000]
    assert wins[1]["p50_ms"] == pytest.approx(5.0) and wins[2]["p50_ms"] == pytest.approx(10.0)
    assert wins[3]["p50_ms"] == pytest.approx(5.0)  # the first half is what a 2 s trial would have measured
    assert wins[0]["window_s"] == pytest.approx(4.0) and wins[0]["throughput_rps"] == pytest.approx(1000.0)


def test_window_metrics_leaves_out_a_quantile_without_its_tail() -> None:
    wins = window_metrics(trial_rows(np.full(1000, 5.0)), splits=(1, 8), prefixes=(), quantiles=(0.5, 0.99))
    assert math.isnan(wins[0]["p99_ms"])  # 1000 requests: 10 beyond p99 < 50
    assert wins[0]["p50_ms"] == pytest.approx(5.0)
    with pytest.raises(ParameterError, match="splits"):
        window_metrics(trial_rows(np.full(100, 5.0)), splits=(0,))


def test_arm_components_recover_known_between_and_within(balanced: pd.DataFrame) -> None:
    comps = arm_components(balanced, "p50_ms")
    assert {c.arm for c in comps} == {"A", "B"}
    for c in comps:
        assert c.n_trials == 60 and c.duration_s == pytest.approx(2.0)
        # within: c / d with c = (pi/2) s^2 / rate; at 2 s, windows of 1 s: 60 df per arm
        assert c.within_coef == pytest.approx(C_IID, rel=0.45)
        # the c / d law holds at every split (iid requests)
        for k, coef in c.within_check.items():
            assert coef == pytest.approx(C_IID, rel=0.5), k
        assert c.total_var == pytest.approx(0.01**2 + C_IID / 2.0, rel=0.45)


def test_pair_components_recover_the_ratio_components(balanced: pd.DataFrame) -> None:
    (p,) = pair_components(balanced, "p50_ms", baseline="A")
    assert (p.baseline, p.arm, p.n_blocks) == ("A", "B", 60)
    within_true = 2 * C_IID / 2.0  # both arms at 2 s
    between_true = 2 * 0.01**2
    assert p.within_var == pytest.approx(within_true, rel=0.35)
    assert p.total_var == pytest.approx(between_true + within_true, rel=0.4)
    assert p.total_ci[0] < between_true + within_true < p.total_ci[1]
    assert p.between_ci[0] <= between_true <= p.between_ci[1]
    # the prefix check: the first half of each trial (1 s) is what a 1 s trial would have seen
    d, obs, pred = p.prefix_check[0.5]
    assert d == pytest.approx(1.0)
    assert obs == pytest.approx(between_true + 2 * C_IID / 1.0, rel=0.4)
    assert pred == pytest.approx(p.between_var + p.within_coef / 1.0)
    assert p.var(4.0) == pytest.approx(p.between_var + p.within_coef / 4.0)
    table = components_table([p])
    assert table.loc[0, "between_share_pct"] == pytest.approx(100 * p.between_share)


def test_between_dominated_and_within_dominated_are_told_apart() -> None:
    between = pair_components(_windows(40, 2.0, 0.04, seed=3), "p50_ms", baseline="A")[0]
    within = pair_components(_windows(40, 2.0, 0.0, seed=4), "p50_ms", baseline="A")[0]
    assert between.between_share > 0.8
    assert within.between_share < 0.35
    assert within.within_coef == pytest.approx(2 * C_IID, rel=0.35)


def test_components_need_labels_and_a_baseline(balanced: pd.DataFrame) -> None:
    with pytest.raises(ParameterError, match="baseline= or contrasts="):
        pair_components(balanced, "p50_ms")
    with pytest.raises(ParameterError, match="no column"):
        arm_components(balanced, "p77_ms")
    with pytest.raises(ParameterError, match="lack column"):
        arm_components(balanced.drop(columns=["block"]), "p50_ms")


# --------------------------------------------------------------------------------------
# cost model


def test_cost_model_from_timestamps() -> None:
    t0 = pd.Timestamp("2026-01-01T00:00:00Z")
    rows = []
    clock = t0
    for block in range(3):
        for arm, fixed in (("A", 4.0), ("B", 10.0)):  # B's service takes 6 s longer to start
            cycle = fixed + 1.0 + 2.0 + 0.5
            rows.append({"arm": arm, "block": block, "started": clock, "warmup_s": 1.0, "duration_s": 2.0,
                         "peer_s": 0.5, "between_s": 0.5})
            clock = clock + pd.Timedelta(seconds=cycle)
    df = pd.DataFrame(rows)
    df["next_started"] = df["started"].shift(-1)
    df["finished"] = df["started"] + pd.Timedelta(seconds=1.0)
    df.loc[df.index[-1], "finished"] = df["started"].iloc[-1] + pd.Timedelta(seconds=10.0 + 3.5 - 0.5)
    cm = cost_model(df)
    a, b = cm.arms
    assert (a.arm, b.arm) == ("A", "B")
    assert a.fixed_s == pytest.approx(4.0) and b.fixed_s == pytest.approx(10.0)
    assert a.peer_factor == pytest.approx(0.25) and a.warmup_s == pytest.approx(1.0)
    # a trial: fixed + warm-up + d (1 + peer factor)
    assert cm.block_seconds(4.0) == pytest.approx((4 + 1 + 5) + (10 + 1 + 5))
    assert cm.block_seconds(4.0, ["A"]) == pytest.approx(10.0)
    with pytest.raises(ParameterError, match="lack column"):
        cost_model(df.drop(columns=["peer_s"]))


# --------------------------------------------------------------------------------------
# the planner


def _pc(metric: str, between: float, coef: float, rate: float = 1000.0) -> PairComponents:
    """Components with known between variance and within coefficient (log scale)."""
    return PairComponents({"condition": "c"}, "A", "B", metric, 10, 5.0, rate, between + coef / 5.0,
                          (math.nan, math.nan), coef / 5.0, coef, between, (math.nan, math.nan), 0.0,
                          {0.5: (2.5, between + coef / 2.5, between + coef / 2.5)})


def _brute(comps, cost, target, durations, alpha=0.05, power=0.8, cap=200, confidence=VARIANCE_CONFIDENCE):
    """The cheapest (minutes, duration, blocks) over the whole grid (no shortcut), on the
    between-trial variances' upper bound as the planner plans (``confidence=None``: points)."""
    comps = [c.upper(confidence) for c in comps] if confidence is not None else comps
    m = len(comps)
    ra = planning_alpha(alpha, m, "holm")
    floor = min_trials(alpha=alpha, n_comparisons=m, paired=True)
    best = None
    for d in durations:
        for n in range(floor, cap + 1):
            if all(mde_shift(n, c.sd(d), alpha=ra, power=power, paired=True, method="rank") <= math.log1p(target)
                   for c in comps):
                cand = (n * cost.block_seconds(d) / 60.0, d, n)
                best = cand if best is None or cand[0] < best[0] else best
                break
    return best


FIXED = CostModel((ArmCost("A", 6.0, 2.0, 0.0, 5), ArmCost("B", 6.0, 2.0, 0.0, 5)))
DURS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0)


def test_between_dominated_prefers_more_shorter_trials() -> None:
    comps = [_pc("p50_ms", between=0.03**2, coef=0.0005)]  # SD 3% between; within 2.2% at 1 s
    plan = plan_design(comps, FIXED, target_mde=0.05, durations=DURS)
    brute = _brute(comps, FIXED, 0.05, DURS)
    assert (plan.chosen.duration_s, plan.chosen.blocks) == (brute[1], brute[2])
    assert plan.chosen.minutes == pytest.approx(brute[0])
    assert plan.chosen.duration_s <= 2.0 and plan.chosen.reaches
    assert plan.chosen.mde["p50_ms"] <= 0.05
    # a longer trial cannot buy what the between variance costs: 60 s needs nearly as many blocks
    long = next(o for o in plan.options if o.duration_s == 60.0)
    assert long.blocks >= 0.7 * plan.chosen.blocks and long.minutes > 5 * plan.chosen.minutes


def test_within_dominated_with_costly_starts_prefers_longer_trials() -> None:
    costly = CostModel((ArmCost("A", 60.0, 10.0, 0.0, 5), ArmCost("B", 60.0, 10.0, 0.0, 5)))
    comps = [_pc("p50_ms", between=0.0, coef=0.05)]  # SD 22% at 1 s, 2.9% at 60 s
    plan = plan_design(comps, costly, target_mde=0.05, durations=DURS)
    brute = _brute(comps, costly, 0.05, DURS)
    assert (plan.chosen.duration_s, plan.chosen.blocks) == (brute[1], brute[2])
    assert plan.chosen.duration_s >= 10.0
    # the same components with free starts: more, shorter trials again
    cheap = CostModel((ArmCost("A", 0.0, 0.0, 0.0, 5), ArmCost("B", 0.0, 0.0, 0.0, 5)))
    assert plan_design(comps, cheap, target_mde=0.05, durations=DURS).chosen.duration_s < plan.chosen.duration_s


def test_planner_uses_every_row_and_the_family_size() -> None:
    comps = [_pc("p50_ms", 0.02**2, 0.001), _pc("p99_ms", 0.05**2, 0.02)]
    plan = plan_design(comps, FIXED, target_mde={"p50_ms": 0.05, "p99_ms": 0.10}, durations=DURS, current=(10, 5.0))
    # every row reaches its own target at the chosen design
    ra = 0.05 / 2
    for c in comps:
        shift = mde_shift(plan.chosen.blocks, c.sd(plan.chosen.duration_s), alpha=ra, paired=True, method="rank")
        assert math.expm1(shift) <= plan.targets[c.metric] + 1e-12
    assert plan.current is not None and plan.current.blocks == 10
    wider = plan_design(comps, FIXED, target_mde={"p50_ms": 0.05, "p99_ms": 0.10}, durations=DURS, n_comparisons=20)
    assert wider.chosen.minutes > plan.chosen.minutes  # alpha / 20 per row costs blocks
    md = plan.to_markdown()
    assert "**Design**" in md and f"{plan.chosen.blocks} blocks" in md and "| p99_ms |" in md
    assert set(plan.table()["design"]) == {"chosen", "option", "current"}


def test_planner_leaves_out_durations_too_short_for_a_quantile() -> None:
    comps = [_pc("p99_ms", 0.02**2, 0.01, rate=1000.0)]  # p99 needs 5,000 requests: 5 s at 1,000/s
    plan = plan_design(comps, FIXED, target_mde=0.10, durations=DURS)
    assert min(o.duration_s for o in plan.options) == 5.0
    assert any("left out" in n for n in plan.notes)


def test_planner_with_a_budget_minimises_the_mde() -> None:
    comps = [_pc("p50_ms", 0.03**2, 0.0005)]
    plan = plan_design(comps, FIXED, target_mde=0.02, budget_minutes=10.0, durations=DURS)
    assert plan.chosen.minutes <= 10.0
    for o in plan.options:
        if o.reaches:
            assert plan.chosen.mde["p50_ms"] <= o.mde["p50_ms"] + 1e-12


def test_planner_says_when_the_target_is_out_of_reach() -> None:
    plan = plan_design([_pc("p50_ms", 0.5**2, 0.0)], FIXED, target_mde=0.01, durations=(1.0, 2.0), max_blocks=30)
    assert not plan.chosen.reaches and plan.chosen.blocks == 30
    assert any("no duration reaches" in n for n in plan.notes)
    assert "not reached" in plan.to_markdown()


def test_planner_rejects_bad_input() -> None:
    with pytest.raises(ParameterError, match="at least one"):
        plan_design([], FIXED)
    with pytest.raises(ParameterError, match="positive relative change"):
        plan_design([_pc("p50_ms", 0.01, 0.01)], FIXED, target_mde=-0.1)
    with pytest.raises(ParameterError, match="no target for"):
        plan_design([_pc("p50_ms", 0.01, 0.01)], FIXED, target_mde={"p99_ms": 0.1})
    with pytest.raises(ParameterError, match="budget_minutes"):
        plan_design([_pc("p50_ms", 0.01, 0.01)], FIXED, budget_minutes=0)


def test_planner_plans_on_an_upper_bound_of_the_between_variance() -> None:
    """Issue 19, item 8: the planner planned on the point estimate of the between-trial
    variance, which 10-block pilots put anywhere between 0.024 and 0.058 in SD (at 8 s): a
    plan on it reaches its power in about half of the runs. It now plans on the 80%
    one-sided chi-square upper bound (df = blocks - 1 = 9: the variance x 9 / 5.38) and
    says what the point estimate would need (the range of blocks). Parent commit: the
    chosen design was the point-estimate one (7 blocks at 2 s; no ``point`` nor basis)."""
    comps = [_pc("p50_ms", between=0.03**2, coef=0.0005)]  # 10 blocks: 9 df
    up = comps[0].upper(0.8)
    assert up.between_var + up.within_var == pytest.approx(comps[0].total_var * 9 / stats.chi2.ppf(0.2, 9))
    assert up.within_coef == comps[0].within_coef and up.n_blocks == 10
    plan = plan_design(comps, FIXED, target_mde=0.05, durations=DURS)
    point = plan_design(comps, FIXED, target_mde=0.05, durations=DURS, variance_confidence=None)
    assert plan.variance_confidence == 0.8 and point.point is None
    assert (point.chosen.duration_s, point.chosen.blocks) == (2.0, 7)
    assert (plan.chosen.duration_s, plan.chosen.blocks) == (1.0, 10)  # more variance between: shorter trials
    assert plan.point is not None and (plan.point.duration_s, plan.point.blocks) == (1.0, 8)
    assert plan.blocks_range() == "8-10 blocks"
    md = plan.to_markdown()
    assert "Planned on the 80% upper confidence bound of each row's between-trial variance (chi-square, 9 df)" in md
    assert "On the point estimates the same duration would need 8 blocks" in md and "spans 8-10 blocks" in md
    with pytest.raises(ParameterError, match="variance_confidence"):
        plan_design(comps, FIXED, variance_confidence=1.5)
