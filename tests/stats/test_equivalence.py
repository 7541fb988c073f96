"""Equivalence (TOST) verdicts are adjusted over the family like "faster"/"slower" (pure)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchlib.stats import compare
from benchlib.stats.verdict import VerdictKind


def _frame(diffs: list[np.ndarray]) -> pd.DataFrame:
    """Ten blocks: baseline A at 5 ms, arm Bk at 5 ms x exp(diffs[k-1][block])."""
    rows = []
    for blk in range(10):
        rows.append({"arm": "A", "block": blk, "condition": "c", "p50_ms": 5.0})
        rows += [{"arm": f"B{k + 1}", "block": blk, "condition": "c", "p50_ms": 5.0 * float(np.exp(d[blk]))}
                 for k, d in enumerate(diffs)]
    return pd.DataFrame(rows)


def test_equivalence_is_holm_adjusted_over_the_family() -> None:
    rng = np.random.default_rng(0)
    near = 0.028 * rng.standard_normal(10)  # B1: within about ±1.5%, TOST p = 0.019 alone
    far = [0.3 + 0.05 * rng.standard_normal(10) for _ in range(3)]  # B2-B4: clearly slower
    alone = compare(_frame([near]), baseline="A", metrics=("p50_ms",), shift=False)
    v1 = alone.verdicts[0]
    assert v1.kind is VerdictKind.EQUIVALENT
    family = compare(_frame([near, *far]), baseline="A", metrics=("p50_ms",), shift=False)
    v = family.verdict("B1", "p50_ms", condition="c")
    # the same row in a family of four: its 90% interval still lies inside ±2% (the
    # unadjusted TOST), but Holm over the four rows' TOST p-values does not reach 0.05
    assert 1 / 1.02 <= v.ci_lo and v.ci_hi <= 1.02
    assert v.kind is not VerdictKind.EQUIVALENT and not v.equivalent
    assert v1.p_tost == pytest.approx(v1.p_tost_adj) and v1.p_tost < 0.05
    assert v.p_tost == pytest.approx(v1.p_tost) and v.p_tost_adj == pytest.approx(4 * v.p_tost)
    assert v.p_tost_adj >= 0.05
    assert family.table.loc[0, "p_tost_adj"] == pytest.approx(v.p_tost_adj)
    assert [w.kind for w in family.verdicts[1:]] == [VerdictKind.SLOWER] * 3


@pytest.mark.parametrize("method", ["rank", "parametric", "bootstrap"])
@pytest.mark.parametrize("paired", [True, False])
def test_one_rows_tost_p_value_agrees_with_its_90_percent_interval(method, paired) -> None:
    from benchlib.stats.estimate import estimate

    eq = np.log1p(0.02)
    agree = 0
    for seed in range(12):
        rng = np.random.default_rng(seed)
        a, b = rng.normal(0, 0.012, 10), rng.normal(0.004 * (seed % 4), 0.012, 10)
        e = estimate(a, b, paired=paired, method=method, confidence=0.95, alpha=0.05,
                     rng=np.random.default_rng(seed), n_resamples=1999, margin=eq)
        inside = -eq <= e.tost_lo and e.tost_hi <= eq
        agree += (e.tost_p < 0.05) == inside
    assert agree >= 11  # the discrete rank and bootstrap ends may differ at the very edge
