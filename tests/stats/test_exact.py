"""Golden tests of the exact rank statistics against SciPy and brute-force test inversion."""

from __future__ import annotations

import doctest
import itertools
import math

import numpy as np
import pytest
from scipy import special, stats

from benchlib.core.errors import ParameterError
from benchlib.stats import exact


@pytest.mark.parametrize(("m", "k", "hi", "achieved"),
                         [(5, 3, 23, 0.968), (8, 14, 51, 0.950), (10, 24, 77, 0.957), (20, 128, 273, 0.951)])
def test_moses_ranks_match_the_reference_table(m, k, hi, achieved):
    r = exact.moses_interval(np.arange(m, dtype=float), np.arange(m) + 0.37)
    assert (r.k, m * m - r.k + 1) == (k, hi)
    assert round(r.achieved, 3) == achieved


def test_moses_interval_equals_brute_force_inversion_of_the_exact_u_test():
    rng = np.random.default_rng(11)
    for m, n in [(10, 10), (6, 9), (4, 5)]:
        a = rng.lognormal(0, 0.2, m)
        b = rng.lognormal(0.1, 0.2, n)
        r = exact.moses_interval(a, b, 0.95)
        d = np.sort(np.subtract.outer(b, a).ravel())
        mids = (d[:-1] + d[1:]) / 2
        accepted = [
            j for j, delta in enumerate(mids)
            if stats.mannwhitneyu(b - delta, a, method="exact").pvalue > 1 - r.achieved + 1e-12
        ]
        # accepted midpoints lie in (D(k), D(mn-k+1)); their hull's ends are those order statistics
        assert d[accepted[0]] == r.lo
        assert d[accepted[-1] + 1] == r.hi
        # and every shift outside the interval is rejected at the achieved level
        for delta in (r.lo - 1e-9, r.hi + 1e-9):
            assert stats.mannwhitneyu(b - delta, a, method="exact").pvalue <= 1 - r.achieved + 1e-12


def test_walsh_interval_equals_brute_force_inversion_of_the_signed_rank_test():
    rng = np.random.default_rng(12)
    for n in (6, 10, 13):
        dd = rng.normal(0.05, 0.1, n)
        r = exact.walsh_interval(dd, 0.95)
        w = exact.walsh_averages(dd)
        mids = (w[:-1] + w[1:]) / 2
        accepted = [j for j, delta in enumerate(mids)
                    if stats.wilcoxon(dd - delta, method="exact").pvalue > 1 - r.achieved + 1e-12]
        assert w[accepted[0]] == r.lo
        assert w[accepted[-1] + 1] == r.hi


@pytest.mark.parametrize("seed", range(8))
def test_p_values_equal_scipy_exact(seed):
    rng = np.random.default_rng(seed)
    m, n = rng.integers(2, 15, 2)
    a, b = rng.normal(size=m), rng.normal(0.5, 1, size=n)
    t = exact.mann_whitney(a, b)
    ref = stats.mannwhitneyu(b, a, method="exact")
    assert t.exact and not t.ties
    assert t.statistic == ref.statistic
    assert math.isclose(t.pvalue, ref.pvalue, rel_tol=1e-9)
    d = rng.normal(0.2, 1, size=int(rng.integers(3, 25)))
    s = exact.signed_rank(d)
    assert math.isclose(s.pvalue, stats.wilcoxon(d, method="exact").pvalue, rel_tol=1e-9)


def test_ci_and_test_agree_without_ties():
    rng = np.random.default_rng(5)
    agree = 0
    for _ in range(300):
        a = rng.normal(size=8)
        b = rng.normal(0.8, 1, size=8)
        r = exact.moses_interval(a, b)
        p = exact.mann_whitney(a, b).pvalue
        excludes = r.lo > 0 or r.hi < 0
        assert excludes == (p <= 1 - r.achieved + 1e-12)
        agree += 1
        d = rng.normal(0.4, 1, size=9)
        rw = exact.walsh_interval(d)
        assert (rw.lo > 0 or rw.hi < 0) == (exact.signed_rank(d).pvalue <= 1 - rw.achieved + 1e-12)
    assert agree == 300


def test_tied_p_value_is_the_exact_permutation_distribution():
    a = np.array([1.0, 2.0, 2.0, 3.0, 5.0])
    b = np.array([2.0, 3.0, 3.0, 4.0, 6.0, 7.0])
    pooled = np.concatenate([a, b])
    ranks = stats.rankdata(pooled)
    obs = ranks[5:].sum()
    sums = [ranks[list(c)].sum() for c in itertools.combinations(range(11), 6)]
    sums = np.array(sums)
    p_ref = min(1.0, 2 * min(np.mean(sums <= obs + 1e-9), np.mean(sums >= obs - 1e-9)))
    t = exact.mann_whitney(a, b)
    assert t.ties and t.exact
    assert math.isclose(t.pvalue, p_ref, rel_tol=1e-12)


def test_tied_signed_rank_is_the_exact_sign_flip_distribution():
    d = np.array([0.5, -0.5, 1.0, 1.0, 2.0, -0.3, 0.0])
    nz = d[d != 0]
    ranks = stats.rankdata(np.abs(nz))
    obs = ranks[nz > 0].sum()
    tot = [sum(r for r, s in zip(ranks, signs) if s) for signs in itertools.product([0, 1], repeat=nz.size)]
    tot = np.array(tot)
    p_ref = min(1.0, 2 * min(np.mean(tot <= obs + 1e-9), np.mean(tot >= obs - 1e-9)))
    assert math.isclose(exact.signed_rank(d).pvalue, p_ref, rel_tol=1e-12)


def test_min_p():
    assert exact.min_p_unpaired(3, 3) == pytest.approx(0.1)
    assert exact.min_p_unpaired(5, 5) == pytest.approx(2 / 252)
    assert exact.min_p_unpaired(6, 6) == pytest.approx(2 / special.comb(12, 6))
    assert exact.min_p_paired(5) == 0.0625
    assert exact.min_p_paired(6) == 0.03125
    # the exact test really reaches it: complete separation
    assert exact.mann_whitney(np.arange(5.0), np.arange(5.0) + 10).pvalue == pytest.approx(exact.min_p_unpaired(5, 5))


def test_hodges_lehmann_definitions():
    a = np.array([1.0, 2.0, 4.0])
    b = np.array([3.0, 5.0])
    assert exact.hodges_lehmann_shift(a, b) == np.median([3 - 1, 3 - 2, 3 - 4, 5 - 1, 5 - 2, 5 - 4])
    d = np.array([1.0, 3.0, -1.0])
    walsh = [1, 3, -1, 2, 0, 1]
    assert exact.hodges_lehmann_center(d) == np.median(walsh)


def test_normal_approximation_for_large_samples_is_close_to_scipy():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=60), rng.normal(0.3, 1, size=60)
    t = exact.mann_whitney(a, b)
    assert not t.exact
    ref = stats.mannwhitneyu(b, a, method="asymptotic").pvalue
    assert math.isclose(t.pvalue, ref, rel_tol=1e-6)
    r = exact.moses_interval(a, b)
    assert not r.exact and r.lo < r.estimate < r.hi
    assert 0.94 < r.achieved < 0.96


def test_too_small_samples_give_unbounded_intervals():
    r = exact.moses_interval(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    assert r.k == 0 and r.lo == -math.inf and r.hi == math.inf


def test_nan_is_refused():
    with pytest.raises(ParameterError, match="NaN"):
        exact.moses_interval(np.array([1.0, np.nan, 2.0]), np.array([1.0, 2.0]))


def test_doctests():
    assert doctest.testmod(exact).failed == 0
