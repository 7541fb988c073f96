"""Numbers as the reports print them: one place for every formatter (pure).

The statistics' own formats (p-values, percentages, a median with its ``±``, values with
units) live in :mod:`benchlib.stats.fmt` and are re-exported here, so a study imports
every formatter from one module:

* :func:`num`: a table cell, 3 significant digits, thousands separated from 100 up;
* :func:`median_ci`: ``1.23 [1.1, 1.4] (97.9% CI)``, a median of trials with its interval
  and that interval's achieved level (:data:`MEDIAN_CI`: the column heading for it);
* :func:`fixed`: ``1.23`` (``∞``, ``–``); :func:`ratio_ci`: ``1.23× [1.10, 1.40]``;
* :func:`inverse_ci`: the same ratio the other way round; :func:`signed_pct`: ``+23.0%``.

NaN prints as ``–`` and infinity as ``∞`` everywhere.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from benchlib.stats.fmt import WITHIN_RUN, fmt_centre, fmt_level, fmt_p, fmt_pct, fmt_value, within_run

__all__ = ["DASH", "MEDIAN_CI", "WITHIN_RUN", "fixed", "fmt_centre", "fmt_level", "fmt_p", "fmt_pct", "fmt_value",
           "inverse_ci", "median_ci", "num", "ratio_ci", "signed_pct", "within_run"]

#: What a missing value prints as.
DASH = "–"

#: The heading of a column of :func:`median_ci` cells: each cell says its interval's
#: achieved level (96.9% at 6 trials, 99.2% at 8, 97.9% at 10), so the heading names none.
MEDIAN_CI = "median [CI]"


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, (float, np.floating)) and v != v)


def num(v: Any) -> str:
    """A table cell: floats to 3 significant digits, without decimals and with thousands
    separators from 100 up (``0.374``, ``46.2``, ``1,234``); NaN/None as ``–``; other values
    as ``str``."""
    if _missing(v):
        return DASH
    if isinstance(v, (float, np.floating)):
        x = float(v)
        if math.isinf(x):
            return "∞" if x > 0 else "−∞"
        return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"
    return str(v)


def median_ci(med: float, lo: float = math.nan, hi: float = math.nan, level: float = math.nan) -> str:
    """A median of trials with its interval and the interval's achieved level: ``0.509
    [0.475, 2.23] (97.9% CI)`` (an order-statistic interval never has exactly 95%; without
    ``level``: ``0.509 [0.475, 2.23]``); the interval is left out when NaN (too few
    trials), the whole as ``–`` when the median is."""
    if _missing(med):
        return DASH
    if _missing(lo):
        return num(float(med))
    at = f" ({fmt_level(float(level))} CI)" if not _missing(level) else ""
    return num(float(med)) + f" [{num(float(lo))}, {num(float(hi))}]" + at


def fixed(x: float, digits: int = 2) -> str:
    """``x`` with ``digits`` decimals; ``∞`` and ``–`` for infinity and NaN."""
    if _missing(x):
        return DASH
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    return f"{x:.{digits}f}"


def _recip(x: float) -> float:
    return math.inf if x == 0 else (0.0 if math.isinf(x) else 1.0 / x)


def ratio_ci(estimate: float, lo: float, hi: float, digits: int = 2) -> str:
    """A ratio with its interval: ``1.23× [1.10, 1.40]``."""
    return f"{fixed(estimate, digits)}× [{fixed(lo, digits)}, {fixed(hi, digits)}]"


def inverse_ci(estimate: float, lo: float, hi: float, digits: int = 2) -> str:
    """The reciprocal of a ratio with its interval (the bounds swap): ``0.81× [0.71, 0.91]``."""
    return ratio_ci(_recip(estimate), _recip(hi), _recip(lo), digits)


def signed_pct(ratio: float, digits: int = 1) -> str:
    """A ratio as a signed percent change: 1.23 -> ``+23.0%``; ``–`` for NaN."""
    return DASH if _missing(ratio) else f"{100 * (ratio - 1):+.{digits}f}%"
