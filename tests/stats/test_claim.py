"""The claim test: a claimed ratio placed against the re-run's exact interval (benchlib.stats.claim)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchlib.core.errors import ParameterError
from benchlib.stats.claim import ClaimData, ClaimOutcome, answer_claims, claim_boundary


def _blocks(true_ratio: float, n: int = 10, sd: float = 0.03, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    den = rng.normal(0.0, 0.2, n)  # the blocks' own level: paired out
    return den + math.log(true_ratio) + rng.normal(0.0, sd, n), den


@pytest.mark.parametrize(("true", "claimed", "outcome"), [
    (2.3, 2.0, ClaimOutcome.HOLDS),
    (1.4, 2.0, ClaimOutcome.SMALLER),
    (0.7, 2.0, ClaimOutcome.REVERSED),
    (1.0, 2.0, ClaimOutcome.NO_DIFFERENCE),
    (0.85, 0.88, ClaimOutcome.HOLDS),
    (1.3, 0.88, ClaimOutcome.REVERSED),
])
def test_each_outcome_is_decided_where_the_interval_lies_wholly_in_its_region(true: float, claimed: float,
                                                                              outcome: ClaimOutcome) -> None:
    num, den = _blocks(true, sd=0.002 if outcome is ClaimOutcome.NO_DIFFERENCE else 0.03)
    (r,) = answer_claims([ClaimData("row", claimed, num, den)])
    assert r.outcome is outcome, r
    assert r.lo <= r.ratio <= r.hi


def test_a_wide_interval_is_not_decided_and_prints_its_mde_against_the_claim() -> None:
    num, den = _blocks(1.8, sd=0.5)
    (r,) = answer_claims([ClaimData("row", 2.0, num, den)])
    assert r.outcome is ClaimOutcome.NOT_DECIDED
    assert 0 < r.mde_vs_claim < math.inf
    assert r.boundary == pytest.approx(2.0 / 1.1)


def test_answer_claims_are_one_holm_family() -> None:
    num, den = _blocks(1.5, n=8, sd=0.03)
    alone = answer_claims([ClaimData("a", 2.0, num, den)])[0]
    assert alone.outcome is ClaimOutcome.SMALLER  # 8 blocks: smallest exact p 0.0078
    family = answer_claims([ClaimData(k, 2.0, num, den) for k in "abcdefg"])
    # seven rows at p = 0.0078 each: Holm's first step needs 0.05 / 7 = 0.0071
    assert all(r.outcome is ClaimOutcome.NOT_DECIDED for r in family)
    assert family[0].p_adj == pytest.approx(min(1.0, 7 * alone.p))


def test_too_few_trials_stay_out_of_the_family() -> None:
    num, den = _blocks(2.5, n=10)
    rows = answer_claims([ClaimData("ok", 2.0, num, den), ClaimData("one", 2.0, num[:1], den[:1])])
    assert [r.outcome for r in rows] == [ClaimOutcome.HOLDS, ClaimOutcome.TOO_FEW]


@pytest.mark.parametrize("claimed", [1.0, 0.0, -2.0, math.nan, 1.05])
def test_a_claim_that_cannot_be_tested_at_its_size_is_refused(claimed: float) -> None:
    num, den = _blocks(1.0)
    with pytest.raises(ParameterError, match="claim 'bad'"):
        answer_claims([ClaimData("bad", claimed, num, den)])


def test_the_boundary_lies_in_the_claims_direction() -> None:
    assert claim_boundary(2.0, 0.1) == pytest.approx(1.818, abs=1e-3)
    assert claim_boundary(0.5, 0.1) == pytest.approx(0.55)


@pytest.mark.parametrize(("true", "outcome"), [(0.97, ClaimOutcome.HOLDS), (1.2, ClaimOutcome.HOLDS),
                                               (0.7, ClaimOutcome.SMALLER)])
def test_a_claim_of_parity_holds_or_falls_short_and_nothing_else(true: float, outcome: ClaimOutcome) -> None:
    num, den = _blocks(true)
    (r,) = answer_claims([ClaimData("parity", 1.0, num, den, parity=True)])
    assert r.outcome is outcome, r
    assert r.boundary == pytest.approx(1 / 1.1)
    assert r.p_outcomes["reversed"] == r.p_outcomes["no difference"] == 1.0
    with pytest.raises(ParameterError, match="claim of parity"):
        answer_claims([ClaimData("bad", 2.0, num, den, parity=True)])
