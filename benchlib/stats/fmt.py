"""How the statistics print numbers: percentages, p-values, values with units, medians with
their ``±``, confidence levels and ratios with their intervals (pure).

One home for the formats :mod:`benchlib.stats.comparison` and :mod:`benchlib.stats.verdict` both
print (and :mod:`benchlib.analysis.formats` re-exports). NaN prints as ``–``, infinity as ``∞``.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["WITHIN_RUN", "fmt_centre", "fmt_level", "fmt_p", "fmt_pct", "fmt_ratio", "fmt_value", "within_run"]

_MINUS = "\u2212"

#: The mark printed after an interval that holds within one run only: one trial per arm,
#: so the interval (a block bootstrap of the requests) leaves out the variation between
#: runs and is not a confidence interval of the comparison (it excluded 1 in 59% of A/A
#: pairs). Printed wherever such an interval is shown, under any "[95% CI]" heading.
WITHIN_RUN = "(within-run)"


def within_run(between_run_variance_estimated: bool) -> str:
    """What follows an effect's interval: ``" (within-run)"`` when the between-run variance
    was not estimated (one trial per arm), else ``""``."""
    return "" if between_run_variance_estimated else f" {WITHIN_RUN}"


def fmt_pct(x: float, signed: bool = False) -> str:
    """A percentage for reports: ``3.1%``, ``17%``, ``+4.0%``, ``−17%``."""
    if x is None or not np.isfinite(x):
        return "∞" if x is not None and x == math.inf else "–"
    body = f"{abs(x):.1f}" if abs(x) < 10 else f"{abs(x):.0f}"
    if not body.strip("0."):
        return f"{body}%"
    sign = (_MINUS if x < 0 else "+") if signed else ("" if x >= 0 else _MINUS)
    return f"{sign}{body}%"


def fmt_p(p: float) -> str:
    """A p-value: two significant digits, ``1.00`` near one."""
    if p is None or not np.isfinite(p):
        return "–"
    if p >= 0.995:
        return "1.00"
    if p >= 0.1:
        return f"{p:.2f}"
    if p >= 1e-4:
        return f"{p:.2g}" if p >= 0.001 else f"{p:.1e}"
    return f"{p:.1e}"


def fmt_value(x: float, unit: str) -> str:
    """A metric value with its unit: ``12.4 ms``, ``1,998 req/s``, ``0.10%``."""
    if x is None or not np.isfinite(x):
        return "–"
    if unit == "%":
        return f"{100 * x:.2g}%"
    a = abs(x)
    if a >= 100:
        body = f"{x:,.0f}"
    elif a >= 10:
        body = f"{x:.1f}"
    elif a >= 1:
        body = f"{x:.2f}"
    else:
        body = f"{x:.3g}"
    return f"{body} {unit}".strip()


def fmt_level(level: float) -> str:
    """An achieved confidence level: ``97.9%``, ``96.9%``, ``99.2%``."""
    if level is None or not np.isfinite(level):
        return "–"
    return f"{100 * level:.1f}%"


def fmt_centre(value: float, pm: float, unit: str, level: float | None = None) -> str:
    """A median of trials with the half-width of its order-statistic interval: ``4.99 ms ±
    11%`` (relative for ratio metrics, absolute for ``%`` metrics), ``± ∞`` when too few
    trials for the interval; with ``level``, its achieved confidence: ``± 11% (97.9%)``."""
    v = fmt_value(value, unit)
    if v == "–":
        return v
    if not np.isfinite(pm):
        return v + " ± ∞"
    body = f" ± {100 * pm:.2g}%" if unit == "%" else f" ± {fmt_pct(pm)}"
    return v + body + (f" ({fmt_level(level)})" if level is not None and np.isfinite(level) else "")


def fmt_ratio(r: float, lo: float, hi: float) -> str:
    if not np.isfinite(r):
        return "–"
    digits = 3 if np.isfinite(hi - lo) and (hi - lo) < 0.1 else 2
    def one(v: float) -> str:
        if not np.isfinite(v):
            return "∞" if v > 0 else "0"
        return "0" if v == 0 else f"{v:.{digits}f}"
    return f"{one(r)} [{one(lo)}, {one(hi)}]"
