"""plan(), power and the minimum detectable effect against the reference tables."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pandas as pd
import pytest

from benchlib.core.errors import ParameterError
from benchlib.stats import plan, power
from benchlib.stats.planning import sample_size
from benchlib.stats.power import mde, min_trials, power_rank, power_t, trials_needed
from benchlib.stats.simulate import simulate_summaries

# statistics reference, section 3.8 (reference/simulations/power_table.out)
TABLE = {0.02: [6, 18, 38, 102, 402], 0.05: [3, 4, 8, 18, 67], 0.10: [3, 3, 3, 6, 19], 0.20: [3, 3, 3, 3, 6]}
CVS = [0.01, 0.02, 0.03, 0.05, 0.10]
MDE_TABLE = {5: [2.0, 4.1, 6.3, 10.7], 10: [1.3, 2.7, 4.1, 6.8], 20: [0.9, 1.8, 2.8, 4.7], 30: [0.7, 1.5, 2.2, 3.7]}


@pytest.mark.parametrize("effect", sorted(TABLE))
def test_t_plan_reproduces_the_reference_table(effect):
    got = [trials_needed(effect, s, method="parametric", floor=3) for s in CVS]
    assert got == TABLE[effect]


@pytest.mark.parametrize("n", sorted(MDE_TABLE))
def test_t_mde_reproduces_the_reference_table(n):
    got = [round(100 * mde(n, s, method="parametric"), 1) for s in CVS[:4]]
    assert got == MDE_TABLE[n]


def test_holm_examples_of_the_reference():
    assert trials_needed(0.05, 0.02, alpha=0.005, method="parametric") == 7
    assert trials_needed(0.05, 0.05, alpha=0.005, method="parametric") == 30


def test_minimum_trials():
    assert min_trials(alpha=0.05) == 4
    assert min_trials(alpha=0.05, n_comparisons=10) == 6
    assert min_trials(alpha=0.05, n_comparisons=100) == 8
    assert min_trials(alpha=0.05, paired=True) == 6
    assert min_trials(alpha=0.05, paired=True, n_comparisons=10) == 9


def test_rank_power_simulation_against_monte_carlo_of_the_real_test():
    from benchlib.stats.exact import mann_whitney

    rng = np.random.default_rng(9)
    hits = sum(mann_whitney(rng.normal(0, 0.05, 8), rng.normal(0.05, 0.05, 8)).pvalue < 0.05 for _ in range(2000))
    assert power_rank(0.05, 0.05, 8, alpha=0.05) == pytest.approx(hits / 2000, abs=0.04)
    # large n falls back to t at 3/pi of the trials
    assert power_rank(0.02, 0.05, 40, alpha=0.05) == pytest.approx(power_t(0.02, 0.05, 40 * 3 / math.pi, alpha=0.05))
    assert power_rank(0.5, 0.05, 3, alpha=0.05) == 0.0  # 3 vs 3 can never reach p < 0.05


def test_plan_from_a_pilot():
    rng = np.random.default_rng(1)
    pilot = simulate_summaries(rng, arms={"A": 1.0, "B": 1.0}, trials=12, phi=0.9, trial_sd=0.03)
    p = plan(pilot, metric="p50_ms", target_mde=0.05, design="unpaired")
    assert 0.03 < p.sigma < 0.08 and not p.paired
    assert isinstance(int(p), int) and int(p) >= 4
    assert p.power(int(p)) >= 0.8 > p.power(int(p) - 1)
    assert list(range(int(p)))[-1] == int(p) - 1  # behaves as an int
    assert "trials per arm" in p.explain()
    pp = plan(pilot, metric="p50_ms", target_mde=0.05)  # blocks -> paired
    assert pp.paired and "blocks" in pp.explain()
    many = plan(pilot, metric="p50_ms", target_mde=0.05, n_comparisons=10, design="unpaired")
    assert int(many) > int(p) and many.row_alpha == pytest.approx(0.005)
    assert p.mde(int(p)) <= 0.05 + 1e-3


def test_plan_bad_input():
    with pytest.raises(ParameterError, match="'rank', 'parametric', 'bootstrap'"):
        plan(sigma=0.05, method="exact")
    with pytest.raises(ParameterError, match="pilot DataFrame or sigma"):
        plan()
    with pytest.raises(ParameterError, match="no column"):
        plan(pd.DataFrame({"arm": ["A"], "x": [1.0]}), metric="p50_ms")
    with pytest.raises(ParameterError, match="at least 3"):
        plan(pd.DataFrame({"arm": ["A", "B"], "p50_ms": [1.0, 2.0]}), design="unpaired")
    with pytest.raises(ParameterError, match="positive"):
        plan(sigma=0.05, target_mde=0)


def test_doctests():
    assert doctest.testmod(power).failed == 0
    assert doctest.testmod(sample_size).failed == 0  # plan()'s example
