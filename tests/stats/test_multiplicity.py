"""Holm against its step-down definition; BH/BY against SciPy."""

from __future__ import annotations

import doctest

import numpy as np
import pytest
from scipy import stats

from benchlib.core.errors import ParameterError
from benchlib.stats import multiplicity
from benchlib.stats.multiplicity import adjust, best_case_adjusted


def _holm_rejections(p: np.ndarray, alpha: float) -> set[int]:
    """Holm's procedure as Holm wrote it: step down, stop at the first non-rejection."""
    order = np.argsort(p, kind="stable")
    m = p.size
    out = set()
    for k, i in enumerate(order):
        if p[i] <= alpha / (m - k):
            out.add(int(i))
        else:
            break
    return out


@pytest.mark.parametrize("seed", range(20))
def test_holm_adjusted_p_reproduces_the_step_down_procedure(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 25))
    p = rng.random(m) ** 3
    adj = adjust(p, "holm")
    assert np.all(adj >= p - 1e-15) and np.all(adj <= 1)
    for alpha in (0.001, 0.01, 0.05, 0.1, 0.2):
        assert {int(i) for i in np.flatnonzero(adj <= alpha)} == _holm_rejections(p, alpha)


def test_holm_known_values():
    # Holm (1979)-style worked example
    p = np.array([0.01, 0.04, 0.03, 0.005])
    assert adjust(p, "holm").tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])


@pytest.mark.parametrize("method", ["bh", "by"])
def test_fdr_equals_scipy(method):
    rng = np.random.default_rng(1)
    p = rng.random(30) ** 2
    assert adjust(p, method) == pytest.approx(stats.false_discovery_control(p, method=method))


def test_none_and_nan():
    p = np.array([0.2, np.nan, 0.01])
    out = adjust(p, "none")
    assert out[0] == 0.2 and np.isnan(out[1]) and out[2] == 0.01
    assert adjust(p, "holm")[2] == pytest.approx(0.02)  # NaN rows are not in the family


def test_unknown_correction_names_the_choices():
    with pytest.raises(ParameterError, match="'holm', 'bh', 'by', 'none'"):
        adjust(np.array([0.1]), "bonferroni")


def test_best_case():
    assert best_case_adjusted(0.0022, 10, "holm") == pytest.approx(0.022)
    assert best_case_adjusted(0.0022, 10, "bh") == pytest.approx(0.0022)
    assert best_case_adjusted(0.0022, 10, "by") == pytest.approx(0.0022 * sum(1 / i for i in range(1, 11)))


def test_doctests():
    assert doctest.testmod(multiplicity).failed == 0
