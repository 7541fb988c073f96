"""A claimed ratio tested at its own size (pure).

A claim says "A is C times B" on one metric (``C = 1.40``: A's p50 is 1.40 times B's; ``C =
2``: A serves twice B's throughput). Testing it against "no difference" answers another
question; here the ratio ``A / B`` (per-trial values on a log scale, paired by block or not)
is placed against the claim's own size. With ``θ`` the log ratio, ``c = log C``, ``d`` the
claim's direction (the sign of ``c``), the margin ``m`` (the claim holds when the ratio is at
least ``C / (1 + m)`` in C's direction: ``h = |c| - log(1 + m)``) and the equivalence margin
``e`` (``log(1 + 0.02)`` by default), each outcome is a region of ``dθ`` with its test:

==================  ========================  ==============================================
outcome             region                    test (its p-value on the two-sided scale)
==================  ========================  ==============================================
reversed            ``dθ < 0``                "dθ >= 0" rejected (one-sided at 0)
no difference       ``|θ| < e``               TOST at ``±e`` (both one-sided tests)
holds               ``dθ >= h``               "dθ < h" rejected (one-sided at h)
smaller than        ``0 < dθ < h``            "dθ <= 0" and "dθ >= h" both rejected
claimed                                       (intersection-union: the larger p-value)
not decided         otherwise                 (the MDE against C is printed)
==================  ========================  ==============================================

A claim of parity ("A can reach B's performance": ``parity=True``, ``C = 1``) has two outcomes
only, with ``h = -log(1 + m)`` and ``d = +1`` (the ratio oriented so that higher is A's claim):
*holds* (``θ >= h``, "θ < h" rejected: A is at least ``1 / (1 + m)`` of B) and *smaller than
claimed* (``θ < h``, "θ >= h" rejected).

Each one-sided p-value is twice the one-sided tail (``p_at(c)`` of the two-sided test when
the estimate lies on the rejecting side, else 1), so a row's decision at level α is that of a
two-sided ``1 - α`` interval lying wholly in the region: a wrong outcome needs the interval to
miss the true ratio on one side, at most α/2 each. The claim rows of a study form one Holm
family: a row's p-value is the smallest of its outcomes' p-values; where the Holm-adjusted
p-value is at most α, the outcomes whose own p-value reaches the row's Holm level are decided,
and the first of them in the order above is the row's outcome (reversed, then no
difference, holds, smaller). The tests are those of :func:`benchlib.stats.compare` (exact
Wilcoxon signed-rank paired by block, exact Mann-Whitney unpaired), so the interval printed
with a claim is the same Hodges-Lehmann ratio and exact interval as the verdict table's.
``docs/statistics.md`` ("A claim at its own size") has the size and power at the default
design, simulated through :func:`answer_claims`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from benchlib.core.errors import ParameterError
from benchlib.stats.estimate import estimate, shift_pvalue
from benchlib.stats.multiplicity import adjust
from benchlib.stats.power import mde_shift, planning_alpha

__all__ = ["ClaimData", "ClaimOutcome", "ClaimResult", "EQUIVALENCE", "MARGIN", "claim_boundary", "answer_claims"]

#: The claim holds when the ratio reaches ``C / (1 + MARGIN)`` in C's direction (default).
MARGIN = 0.10
#: "No difference" means within ``±EQUIVALENCE`` (a ratio in ``[1/1.02, 1.02]``).
EQUIVALENCE = 0.02


class ClaimOutcome(StrEnum):
    """What the re-run says of a claimed ratio (``docs/statistics.md``, "A claim at its own size")."""

    REVERSED = "reversed"
    NO_DIFFERENCE = "no difference"
    HOLDS = "holds"
    SMALLER = "smaller than claimed"
    NOT_DECIDED = "not decided"
    TOO_FEW = "too few trials"


#: the decided outcomes in their order of precedence
PRECEDENCE: tuple[ClaimOutcome, ...] = (ClaimOutcome.REVERSED, ClaimOutcome.NO_DIFFERENCE, ClaimOutcome.HOLDS,
                                        ClaimOutcome.SMALLER)


@dataclass(frozen=True)
class ClaimData:
    """One claim row's data: the claimed ratio ``numerator / denominator`` and the per-trial
    values of both arms on the log scale (aligned by block when ``paired``)."""

    key: str
    claimed: float
    numerator: np.ndarray
    denominator: np.ndarray
    paired: bool = True
    margin: float = MARGIN
    equivalence: float = EQUIVALENCE
    parity: bool = False


@dataclass(frozen=True)
class ClaimResult:
    """A claim row's answer.

    Attributes
    ----------
    key: the row's name.
    claimed: the claimed ratio C.
    outcome: :class:`ClaimOutcome`.
    ratio, lo, hi: the Hodges-Lehmann ratio and its exact interval at ``confidence``.
    achieved: the interval's achieved coverage.
    p: the row's p-value (the smallest of its outcomes'), ``p_adj`` Holm-adjusted over the claims.
    p_outcomes: each outcome's own p-value (two-sided scale).
    boundary: ``C / (1 + margin)`` in C's direction: where "holds" begins (a ratio).
    mde_vs_claim: the smallest distance (relative, e.g. 0.08 for 8%) from that boundary the
        design finds with 80% power at the row's Holm level; ``inf`` when it cannot.
    n: blocks (paired) or the smaller arm's trials.
    """

    key: str
    claimed: float
    outcome: ClaimOutcome
    ratio: float
    lo: float
    hi: float
    achieved: float
    p: float
    p_adj: float
    p_outcomes: dict[str, float]
    boundary: float
    margin: float
    equivalence: float
    mde_vs_claim: float
    n: int
    paired: bool

    @property
    def decided(self) -> bool:
        return self.outcome in PRECEDENCE


def claim_boundary(claimed: float, margin: float = MARGIN) -> float:
    """``C / (1 + margin)`` in C's direction (``C * (1 + margin)`` for a claim below 1; a claim
    of parity, ``C = 1``: ``1 / (1 + margin)``)."""
    return claimed / (1.0 + margin) if claimed >= 1.0 else claimed * (1.0 + margin)


def _check(c: ClaimData) -> None:
    if c.parity:
        if c.claimed != 1.0 or not c.margin > 0:
            raise ParameterError(f"claim {c.key!r}: a claim of parity has the claimed ratio 1 and a positive margin, "
                                 f"got {c.claimed!r} and {c.margin!r}")
        return
    if not (math.isfinite(c.claimed) and c.claimed > 0 and c.claimed != 1.0):
        raise ParameterError(f"claim {c.key!r}: the claimed ratio must be a positive number other than 1, "
                             f"got {c.claimed!r}")
    if not (c.margin > 0 and c.equivalence > 0):
        raise ParameterError(f"claim {c.key!r}: margin and equivalence must be positive")
    h = abs(math.log(c.claimed)) - math.log1p(c.margin)
    if h <= math.log1p(c.equivalence):
        raise ParameterError(
            f"claim {c.key!r}: a claimed ratio of {c.claimed:g} with a margin of {c.margin:.0%} leaves no room between "
            f"'no difference' (±{c.equivalence:.0%}) and 'holds' (from {claim_boundary(c.claimed, c.margin):.3g}); "
            "use a smaller margin")


def _beyond(p_at_c: float, effect: float, c: float, above: bool) -> float:
    """Two-sided-scale p-value of "the effect is beyond ``c``" on one side (``above``: > c)."""
    on_side = effect > c if above else effect < c
    return float(p_at_c) if on_side else 1.0


def _row(c: ClaimData) -> tuple[dict[str, float], float, float, float, float, float, int]:
    a = np.asarray(c.denominator, dtype=float)
    b = np.asarray(c.numerator, dtype=float)
    est = estimate(a, b, paired=c.paired, method="rank", confidence=0.95, alpha=0.05)
    p_at = shift_pvalue(a, b, paired=c.paired, method="rank")
    d = 1.0 if c.claimed > 1.0 else -1.0
    h = abs(math.log(c.claimed)) - math.log1p(c.margin)
    e = math.log1p(c.equivalence)
    eff = est.effect
    if c.parity:
        d, h = 1.0, -math.log1p(c.margin)
    def exact(x: float) -> float:
        return 0.0 if x != eff else 1.0

    at: Callable[[float], float] = exact if est.lo == est.hi else p_at  # no spread: the effect is known exactly
    p0 = at(0.0)
    ph = at(d * h)
    p_rev = _beyond(p0, d * eff, 0.0, above=False)
    p_hold = _beyond(ph, d * eff, h, above=True)
    p_small = max(_beyond(p0, d * eff, 0.0, above=True), _beyond(ph, d * eff, h, above=False))
    p_eq = max(_beyond(at(e), eff, e, above=False), _beyond(at(-e), eff, -e, above=True))
    if c.parity:  # only "holds" and "smaller than claimed" apply
        p_rev = p_eq = 1.0
        p_small = _beyond(ph, eff, h, above=False)
    ps = {ClaimOutcome.REVERSED.value: p_rev, ClaimOutcome.NO_DIFFERENCE.value: p_eq,
          ClaimOutcome.HOLDS.value: p_hold, ClaimOutcome.SMALLER.value: p_small}
    n = int(a.size if c.paired else min(a.size, b.size))
    return ps, eff, est.lo, est.hi, est.achieved, est.sigma, n


def answer_claims(claims: Sequence[ClaimData], *, alpha: float = 0.05, power: float = 0.8) -> list[ClaimResult]:
    """Test each claim at its own size; the claims are one Holm family (see the module docstring).

    A row with fewer than 2 trials per arm (blocks when paired) reads ``too few trials`` and
    stays out of the family.
    """
    for c in claims:
        _check(c)
    rows = []
    for c in claims:
        n_min = min(np.asarray(c.numerator).size, np.asarray(c.denominator).size)
        rows.append(_row(c) if n_min >= 2 else None)
    tested = [i for i, r in enumerate(rows) if r is not None]
    m = max(1, len(tested))
    p_row = np.array([min(rows[i][0].values()) for i in tested])  # type: ignore[index]  # tested rows are not None
    p_adj = adjust(p_row, "holm") if tested else np.empty(0)
    # the Holm level at which each row was tested: alpha / (m - rank)
    order = np.argsort(p_row, kind="stable")
    level = np.empty(len(tested))
    for rank, j in enumerate(order):
        level[j] = alpha / (m - rank)
    out: list[ClaimResult] = []
    for i, c in enumerate(claims):
        boundary = claim_boundary(c.claimed, c.margin)
        r = rows[i]
        if r is None:
            out.append(ClaimResult(c.key, c.claimed, ClaimOutcome.TOO_FEW, math.nan, math.nan, math.nan, math.nan,
                                   math.nan, math.nan, {}, boundary, c.margin, c.equivalence, math.inf,
                                   int(min(np.asarray(c.numerator).size, np.asarray(c.denominator).size)), c.paired))
            continue
        ps, eff, lo, hi, achieved, sigma, n = r
        j = tested.index(i)
        outcome = ClaimOutcome.NOT_DECIDED
        if p_adj[j] <= alpha:
            for o in PRECEDENCE:
                if ps[o.value] <= level[j] * (1 + 1e-9):
                    outcome = o
                    break
        mde = mde_shift(n, sigma, alpha=planning_alpha(alpha, m, "holm"), power=power, paired=c.paired)
        out.append(ClaimResult(
            c.key, c.claimed, outcome, math.exp(eff), math.exp(lo), math.exp(hi), achieved, float(p_row[j]),
            float(p_adj[j]), ps, boundary, c.margin, c.equivalence,
            math.expm1(mde) if math.isfinite(mde) else math.inf, n, c.paired))
    return out
