"""Adjusting p-values over a family of comparisons (pure).

* ``"holm"`` (default): Holm (1979) step-down, controls the family-wise error rate under any
  dependence; uniformly more powerful than Bonferroni.
* ``"bh"``: Benjamini-Hochberg (1995), controls the false discovery rate for independent or
  positively dependent tests (``scipy.stats.false_discovery_control(method="bh")``).
* ``"by"``: Benjamini-Yekutieli (2001), false discovery rate under any dependence.
* ``"none"``: no adjustment (the report then says so).
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from benchlib.stats._checks import choose

__all__ = ["CORRECTIONS", "CORRECTION_LABELS", "adjust", "best_case_adjusted"]

#: Valid values of ``correction``.
CORRECTIONS: tuple[str, ...] = ("holm", "bh", "by", "none")

#: How each correction is named in reports.
CORRECTION_LABELS: dict[str, str] = {
    "holm": "Holm",
    "bh": "Benjamini-Hochberg",
    "by": "Benjamini-Yekutieli",
    "none": "no correction",
}


def _holm(p: np.ndarray) -> np.ndarray:
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = (m - np.arange(m)) * p[order]
    adj_sorted = np.minimum(1.0, np.maximum.accumulate(scaled))
    out = np.empty(m)
    out[order] = adj_sorted
    return out


def adjust(pvalues: np.ndarray, correction: str = "holm") -> np.ndarray:
    """Adjusted p-values for a family (NaN entries are left out of the family and stay NaN).

    Parameters
    ----------
    pvalues:
        Raw two-sided p-values, one per row of the family.
    correction:
        One of :data:`CORRECTIONS`.

    Returns
    -------
    numpy.ndarray
        Adjusted p-values in the input order; a row is significant at level ``alpha`` when
        its adjusted p-value is below ``alpha``.

    Examples
    --------
    >>> adjust(np.array([0.01, 0.04, 0.03]), "holm").round(3).tolist()
    [0.03, 0.06, 0.06]
    """
    choose("correction", correction, CORRECTIONS)
    p = np.asarray(pvalues, dtype=float).ravel()
    out = np.full(p.shape, np.nan)
    keep = np.isfinite(p)
    if not keep.any():
        return out
    q = np.clip(p[keep], 0.0, 1.0)
    if correction == "holm":
        out[keep] = _holm(q)
    elif correction in ("bh", "by"):
        out[keep] = stats.false_discovery_control(q, method=correction)
    else:
        out[keep] = q
    return out


def best_case_adjusted(min_p: float, m: int, correction: str) -> float:
    """The adjusted p-value of a row when every row of an ``m``-row family reaches ``min_p``.

    This is the smallest adjusted p-value the design allows: if it is not below ``alpha``
    no row can ever be significant (``holm``: ``m * min_p``; ``bh``/``none``: ``min_p``;
    ``by``: ``min_p * sum(1/i, i=1..m)``).
    """
    choose("correction", correction, CORRECTIONS)
    if m < 1:
        return float(min_p)
    return float(adjust(np.full(m, min_p), correction)[0])
