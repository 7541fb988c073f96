"""Bootstrap pieces: BCa against SciPy, block length, block-bootstrap standard errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from benchlib.stats.bootstrap import block_bootstrap_log_se, bootstrap_shift, politis_white_block_length
from benchlib.stats.exact import hodges_lehmann_shift
from benchlib.stats.simulate import ar1


def _hl(b, a, axis=-1):
    d = b[..., :, None] - a[..., None, :]
    return np.median(d.reshape(*d.shape[:-2], -1), axis=-1)


@pytest.mark.parametrize("seed", [0, 1])
def test_bca_matches_scipy_without_expansion(seed):
    rng = np.random.default_rng(seed)
    a = rng.lognormal(0.0, 0.1, 12)
    b = rng.lognormal(0.05, 0.1, 12)
    mine = bootstrap_shift(np.log(a), np.log(b), paired=False, n_resamples=20000, rng=rng, expand=False)
    ref = stats.bootstrap((np.log(b), np.log(a)), _hl, n_resamples=20000, method="BCa", vectorized=True,
                          rng=np.random.default_rng(seed + 10))
    lo, hi = mine.interval(0.95)
    width = ref.confidence_interval.high - ref.confidence_interval.low
    assert mine.estimate == pytest.approx(hodges_lehmann_shift(np.log(a), np.log(b)))
    assert lo == pytest.approx(ref.confidence_interval.low, abs=0.05 * width)
    assert hi == pytest.approx(ref.confidence_interval.high, abs=0.05 * width)


def test_bca_p_value_agrees_with_the_interval():
    rng = np.random.default_rng(3)
    for _ in range(30):
        a = rng.normal(0.0, 0.05, 10)
        b = rng.normal(0.04, 0.05, 10)
        bs = bootstrap_shift(a, b, paired=False, n_resamples=2999, rng=rng)
        for conf in (0.9, 0.95, 0.99):
            lo, hi = bs.interval(conf)
            if bs.pvalue < 1 - conf - 0.002:
                assert lo > 0 or hi < 0
            if bs.pvalue > 1 - conf + 0.002:
                assert lo <= 0 <= hi


def test_expansion_widens_small_samples_only_a_little_for_large_ones():
    rng = np.random.default_rng(4)
    d_small = rng.normal(0.02, 0.05, 6)
    d_big = rng.normal(0.02, 0.05, 60)
    for d, ratio_min, ratio_max in ((d_small, 1.1, 2.0), (d_big, 1.0, 1.05)):
        plain = bootstrap_shift(d, None, paired=True, n_resamples=4999, rng=np.random.default_rng(1), expand=False)
        wide = bootstrap_shift(d, None, paired=True, n_resamples=4999, rng=np.random.default_rng(1))
        w0 = np.subtract(*plain.interval(0.95)[::-1])
        w1 = np.subtract(*wide.interval(0.95)[::-1])
        assert ratio_min <= w1 / w0 <= ratio_max


def test_politis_white_block_length_grows_with_autocorrelation():
    rng = np.random.default_rng(5)
    iid = politis_white_block_length(rng.normal(size=20000))
    ar = politis_white_block_length(ar1(20000, 0.9, 1.0, rng))
    assert iid <= 3
    assert 20 <= ar <= 3 * math.sqrt(20000)


def test_block_bootstrap_se_of_the_log_median():
    rng = np.random.default_rng(6)
    n = 20000
    iid = np.exp(rng.normal(0, 0.35, n))
    se, block = block_bootstrap_log_se(iid, [0.5], n_resamples=300, seed=1)
    # iid: SE of the log median ~ 1.2533 * sigma / sqrt(n)
    assert se["quantiles"][0] == pytest.approx(1.2533 * 0.35 / math.sqrt(n), rel=0.2)
    corr = np.exp(ar1(n, 0.9, 0.35, rng))
    se2, block2 = block_bootstrap_log_se(corr, [0.5], n_resamples=300, seed=1)
    assert block2 > block and se2["quantiles"][0] > 2.5 * se["quantiles"][0]
