"""Conclusions from verdict data: the phrases a study's conclusion is assembled from (pure).

A conclusion looks its rows up as typed :class:`~benchlib.stats.verdict.Verdict` objects
(:meth:`benchlib.analysis.questions.Answer.verdict`) and writes them with these helpers, so
no conclusion parses verdict text or reads table columns: every number comes from the
verdict (estimate, interval, adjusted p-value, family size), every decision from its kind.
``None`` (no such row) and ``not run`` / ``no valid trial`` verdicts are handled by each
helper.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TypeGuard

from benchlib.analysis.fmt import fixed, inverse_ci, ratio_ci, within_run
from benchlib.stats.multiplicity import CORRECTION_LABELS
from benchlib.stats.verdict import Verdict, VerdictKind

__all__ = ["decided", "difference", "direction", "effect", "estimated", "inverse", "largest_factor", "p_text",
           "product_text", "ratio", "says"]


def estimated(v: Verdict | None) -> TypeGuard[Verdict]:
    """The row has an effect estimate (it was compared and had values)."""
    return v is not None and v.estimate == v.estimate


def decided(v: Verdict | None) -> TypeGuard[Verdict]:
    """A significant difference beyond the practical margin."""
    return v is not None and v.directional and v.practical


def direction(v: Verdict | None) -> str | None:
    """``"up"`` for a significant improvement (``faster``), ``"down"`` for ``slower``, else ``None``."""
    if v is None or not v.directional:
        return None
    return "up" if v.kind is VerdictKind.FASTER else "down"


def ratio(v: Verdict, digits: int = 2) -> str:
    """The effect with its interval: ``1.23× [1.10, 1.40]``; ``... (within-run)`` when the
    interval leaves out the variation between runs (one trial per arm)."""
    return ratio_ci(v.estimate, v.ci_lo, v.ci_hi, digits) + within_run(v.between_run_variance_estimated)


def difference(v: Verdict) -> str:
    """A difference effect with its interval, in percentage points for a fraction (``error_rate``:
    ``+98.0 pp [+97.1, +99.0]``), else in the metric's unit (``+1.2 ms [+0.8, +1.6]``)."""
    k, unit = (100.0, " pp") if v.unit == "%" else (1.0, f" {v.unit}" if v.unit else "")

    def one(x: float) -> str:
        return fixed(k * x, 1) if not math.isfinite(x) else f"{k * x:+.1f}" if v.unit == "%" else f"{k * x:+.3g}"

    return f"{one(v.estimate)}{unit} [{one(v.ci_lo)}, {one(v.ci_hi)}]" + within_run(v.between_run_variance_estimated)


def inverse(v: Verdict, digits: int = 2) -> str:
    """The effect the other way round (baseline / arm): ``0.81× [0.71, 0.91]`` (with
    ``(within-run)`` as :func:`ratio`)."""
    return inverse_ci(v.estimate, v.ci_lo, v.ci_hi, digits) + within_run(v.between_run_variance_estimated)


def _correction(v: Verdict) -> str:
    return CORRECTION_LABELS.get(v.correction, v.correction)


def p_text(v: Verdict) -> str:
    """``Holm-adjusted p = 0.031 over 6 rows``."""
    return f"{_correction(v)}-adjusted p = {v.p_adj:.2g} over {v.family_size} rows"


def effect(v: Verdict | None) -> str:
    """A row in one phrase: ``1.23× [1.10, 1.40], Holm p = 0.031 → **faster**`` (a difference
    effect, such as the error rate's, as :func:`difference`); the verdict alone when there is
    no estimate (``**insufficient trials ...**``; ``not run: why`` and ``no valid trial: ...``
    unmarked); ``not compared`` for no row."""
    if v is None:
        return "not compared"
    if v.kind in (VerdictKind.NOT_RUN, VerdictKind.NO_VALID_TRIAL):
        return v.text
    if not estimated(v):
        return f"**{v.text}**"
    size = difference(v) if v.effect == "difference" else ratio(v)
    test = f"{_correction(v)} p = {v.p_adj:.2g}" if v.p_adj == v.p_adj else "no test across runs"
    return f"{size}, {test} → **{v.text}**"


def says(v: Verdict, arm: str, baseline: str, *, latency: bool = False) -> str:
    """What a throughput row's verdict says, in words: ``verdict **faster**: Go served more
    requests per second than actix-web``; with ``latency``, a latency row's: ``verdict
    **faster**: Go answered sooner than actix-web``."""
    k = v.kind
    if k is VerdictKind.FASTER:
        core = f"{arm} answered sooner than {baseline}" if latency else \
            f"{arm} served more requests per second than {baseline}"
    elif k is VerdictKind.SLOWER:
        core = f"{arm} answered later than {baseline}" if latency else \
            f"{arm} served fewer requests per second than {baseline}"
    elif k is VerdictKind.EQUIVALENT:
        core = f"{arm} and {baseline} " + ("answered" if latency else "served the same rate") + \
            f" within ±{100 * v.margin:g}%" + (" of each other" if latency else "")
    elif k is VerdictKind.INSUFFICIENT:
        core = "too few trials to tell"
    elif k in (VerdictKind.NOT_RUN, VerdictKind.NO_VALID_TRIAL):
        core = "nothing to compare"
    else:
        core = "no difference could be shown"
    return f"verdict **{v.text}**: {core}"


def largest_factor(factors: Mapping[str, float]) -> tuple[str, float]:
    """The factor farthest from 1 on the log scale (a ratio and its reciprocal weigh alike)."""
    name = max(factors, key=lambda k: abs(math.log(factors[k])) if factors[k] > 0 else math.inf)
    return name, factors[name]


def product_text(factors: Mapping[str, float], digits: int = 2) -> str:
    """``1.20 × 4.35 × 0.68 = 3.55``."""
    return " × ".join(fixed(x, digits) for x in factors.values()) + f" = {fixed(math.prod(factors.values()), digits)}"
