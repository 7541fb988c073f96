"""Group-sequential analysis of randomized blocks: stop adding blocks once a question is settled (pure).

A question (one Holm family of rows, one :func:`~benchlib.stats.compare` call) is analysed at
planned *looks*, after ``n_1 < n_2 < ... < n_K`` blocks. At each look every row gets its
exact Wilcoxon signed-rank p-value ``p_k`` on the within-block log ratios of the blocks run so
far, turned into ``z_k = Phi^-1(1 - p_k / 2)``. The row's statistic after look ``j`` is

``W_j = max_{k <= j} z_k * (n_k / n_K) ** (1/2 - shape)``

(the Wang-Tsiatis family of boundaries: ``shape = 0.5`` is Pocock's constant boundary,
``shape = 0`` O'Brien-Fleming's; the default 0.25 lies between). Its **sequential p-value**
is ``P_0(W_K >= W_j)``: the chance, with no true difference, that the statistic would reach
the observed value at *any* of the K looks. Under the null the paths ``(p_1, ..., p_K)`` are
distribution-free (random signs of blocks whose absolute differences are in random order), so
``P_0`` is known up to Monte-Carlo error: :data:`NULL_DRAWS` seeded sign-flip paths per
schedule, cached (its SD at 0.05 is 0.0005).

Why this controls the error rates whatever the stopping rule: ``W_j`` never decreases, so the
sequential p-value never increases from look to look, and its value at the last look is a
valid p-value (``P(p <= u) <= u``). Any stopping time therefore gives a valid p-value, for
every row; Holm over the rows' sequential p-values at the look where the question stops is
the closed test of weighted-Bonferroni group-sequential tests (Maurer & Bretz 2013), and keeps
the family-wise error at alpha. The repeated confidence interval (the shifts the sequential
test does not reject, Jennison & Turnbull 1989) holds its level over all looks at once;
equivalence (TOST) is its ``1 - 2 alpha`` version inside the margin, so "equivalent" is also
decided at any look at level alpha. Decisions never revert: a row significant or equivalent
at one look stays so at every later one.

Limits: the looks must be fixed before the data are seen (:class:`SequentialDesign`); the
analysis at a block count that is not a planned look (an interrupted run) adds that count as
a look (conservative when the count is not chosen from the data). Tied blocks (zero
differences) are dropped as in the fixed analysis, which makes the null law approximate for
metrics with many ties. Only the rank method on paired blocks is sequential.

How many blocks such a design needs for a target is planned in
:func:`benchlib.stats.planning.sample_size.plan_sequential`. See ``docs/statistics.md``
("Stopping early") for the validation figures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import optimize, special

from benchlib.core.errors import ParameterError
from benchlib.stats._checks import probability
from benchlib.stats.estimate import Estimate, tost_pvalue
from benchlib.stats.exact import _t_cdf, hodges_lehmann_center, min_p_paired, signed_rank, walsh_averages
from benchlib.stats.multiplicity import best_case_adjusted
from benchlib.stats.power import min_trials
from benchlib.stats.variance import variance_bound
from benchlib.stats.verdict import FUTILITY_POWER, VerdictKind

__all__ = [
    "DEFAULT_SHAPE",
    "NULL_DRAWS",
    "SequentialDesign",
    "SequentialRow",
    "LookStatus",
    "analyse_row",
    "FUTILITY_POWER",
    "budget_mde",
    "conditional_power",
    "early_stop_estimate",
    "first_crossing",
    "settled",
    "status",
]

#: Default Wang-Tsiatis shape of the boundaries (0 O'Brien-Fleming, 0.5 Pocock).
DEFAULT_SHAPE = 0.25
#: Sign-flip paths simulated for each schedule's null distribution.
NULL_DRAWS = 200_000
#: Simulated experiments per power evaluation (common random numbers, fixed seed).
POWER_DRAWS = 4000
_NULL_SEED = 20261203
_CHUNK = 20_000
_TOL = 1e-9


# ---------------------------------------------------------------------------------------
# The engine: exact signed-rank p-values along nested looks, and the null law of W


def _rank_p(x: np.ndarray) -> np.ndarray:
    """Exact two-sided signed-rank p-values of each row of ``x`` (2-D; no zeros and no ties in
    ``|x|`` within a row); identical to :func:`~benchlib.stats.exact.signed_rank` there."""
    n = x.shape[1]
    cdf = _t_cdf(n)
    ranks = np.argsort(np.argsort(np.abs(x), axis=1), axis=1) + 1
    t = (ranks * (x > 0)).sum(axis=1)
    lower = cdf[t]
    upper = np.where(t > 0, 1.0 - cdf[np.maximum(t - 1, 0)], 1.0)
    return np.minimum(1.0, 2.0 * np.minimum(lower, upper))


def _z(p: np.ndarray | float) -> np.ndarray:
    """``Phi^-1(1 - p/2)``: 0 at p = 1, growing as p falls."""
    return np.asarray(special.ndtri(1.0 - np.asarray(p, dtype=float) / 2.0))


def _weights(counts: tuple[int, ...], shape: float) -> np.ndarray:
    n = np.asarray(counts, dtype=float)
    return (n / n[-1]) ** (0.5 - shape)


def _w_paths(d: np.ndarray, counts: tuple[int, ...], shape: float, through: int) -> np.ndarray:
    """Running maximum of the weighted z over the first ``through`` looks, per row of ``d``
    (draws x blocks; the first ``counts[k]`` columns are look k's blocks)."""
    w = _weights(counts, shape)
    best = np.zeros(d.shape[0])
    for k in range(through):
        n = counts[k]
        if n < 1:
            continue
        best = np.maximum(best, _z(_rank_p(d[:, :n])) * w[k])
    return best


@lru_cache(maxsize=64)
def _null(counts: tuple[int, ...], shape: float) -> np.ndarray:
    """Sorted null draws of ``W_K`` for the schedule ``counts`` (read-only, cached)."""
    rng = np.random.default_rng(_NULL_SEED)
    out = []
    left = NULL_DRAWS
    while left > 0:
        m = min(_CHUNK, left)
        out.append(_w_paths(rng.standard_normal((m, counts[-1])), counts, shape, len(counts)))
        left -= m
    w = np.sort(np.concatenate(out))
    w.setflags(write=False)
    return w


def _p_of_w(w: float, counts: tuple[int, ...], shape: float) -> float:
    """Sequential p-value: ``(1 + #{null W >= w}) / (R + 1)``."""
    null = _null(counts, shape)
    above = null.size - int(np.searchsorted(null, w - _TOL * max(1.0, abs(w)), side="left"))
    return (1.0 + above) / (null.size + 1.0)


@lru_cache(maxsize=1024)
def _critical(counts: tuple[int, ...], shape: float, level: float) -> float:
    """Smallest ``c`` among the null's values with sequential p-value at ``c`` <= ``level``
    (``inf`` when no value reaches it): a row rejects at ``level`` iff ``W >= c``."""
    null = _null(counts, shape)
    vals = np.unique(null)
    above = null.size - np.searchsorted(null, vals - _TOL * np.maximum(1.0, np.abs(vals)), side="left")
    ok = vals[(1.0 + above) / (null.size + 1.0) <= level]
    return float(ok[0]) if ok.size else math.inf


def _max_w(counts: tuple[int, ...], shape: float, through: int) -> float:
    """The largest ``W`` reachable after ``through`` looks (every block's sign alike)."""
    w = _weights(counts, shape)
    return max((float(_z(min_p_paired(counts[k]))) * w[k] for k in range(through) if counts[k] >= 1), default=0.0)


@lru_cache(maxsize=16)
def _draws(n: int) -> np.ndarray:
    rng = np.random.default_rng([_NULL_SEED, n])
    z = rng.standard_normal((POWER_DRAWS, n))
    z.setflags(write=False)
    return z


def _power(delta: float, counts: tuple[int, ...], shape: float, level: float, through: int) -> float:
    """Power of the sequential test (reject at any of the first ``through`` looks) for normal
    differences with SD 1 shifted by ``delta``."""
    c = _critical(counts, shape, level)
    if not math.isfinite(c):
        return 0.0
    w = _w_paths(_draws(counts[-1]) + delta, counts, shape, through)
    return float(np.mean(w >= c - _TOL * max(1.0, abs(c))))


@lru_cache(maxsize=1024)
def _mde_units(counts: tuple[int, ...], shape: float, level: float, power: float, through: int) -> float:
    """Smallest shift (in SDs of the differences) found with ``power`` (bisection, cached)."""
    hi = 50.0
    if _power(hi, counts, shape, level, through) < power:
        return math.inf
    lo = 0.0
    while hi - lo > 1e-4:
        mid = (lo + hi) / 2.0
        if _power(mid, counts, shape, level, through) >= power:
            hi = mid
        else:
            lo = mid
    return hi


def _expected_stop(delta: float, counts: tuple[int, ...], shape: float, level: float) -> tuple[float, float]:
    """(power, expected looks' block count) of one row that stops at its first rejection."""
    c = _critical(counts, shape, level)
    d = _draws(counts[-1]) + delta
    w = _weights(counts, shape)
    best = np.zeros(d.shape[0])
    stop = np.full(d.shape[0], float(counts[-1]))
    done = np.zeros(d.shape[0], dtype=bool)
    for k, n in enumerate(counts):
        best = np.maximum(best, _z(_rank_p(d[:, :n])) * w[k])
        hit = ~done & (best >= c - _TOL * max(1.0, abs(c)))
        stop[hit] = n
        done |= hit
    return float(done.mean()), float(stop.mean())


# ---------------------------------------------------------------------------------------
# The design


@dataclass(frozen=True)
class SequentialDesign:
    """The planned looks of a group-sequential run: after how many blocks a question may stop.

    Attributes
    ----------
    looks:
        Block counts at which the runner asks whether a question is settled, strictly
        increasing; the last is the maximum number of blocks.
    shape:
        Wang-Tsiatis shape of the boundaries, in [0, 0.5]: 0.5 spends the error evenly over
        the looks (Pocock: stops earlier, needs more blocks at most), 0 keeps it for the last
        look (O'Brien-Fleming). Default :data:`DEFAULT_SHAPE`.
    require_practical:
        When True, a directional row counts as settled only when its interval lies beyond
        the practical margin or inside it (not "possibly within").
    target_mde:
        Futility (relative, 0.05 = 5%; ``None``: none): a row neither significant nor
        equivalent whose MDE by the last look (:func:`budget_mde`) exceeds it is
        "not decidable within the budget" (``VerdictKind.UNDECIDABLE``) and counts as settled,
        so its question stops spending blocks. Non-binding: the efficacy boundaries are the
        same with or without it, so a row that goes on anyway keeps its error rates; the
        futility stop can only lower the chance of a "faster"/"slower" verdict.

    Examples
    --------
    >>> SequentialDesign.every(12, first=6).looks
    (6, 8, 10, 12)
    """

    looks: tuple[int, ...]
    shape: float = DEFAULT_SHAPE
    require_practical: bool = False
    target_mde: float | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        looks = tuple(int(x) for x in self.looks)
        if not looks or any(b <= a for a, b in zip(looks, looks[1:], strict=False)) or looks[0] < 2:
            raise ParameterError(f"looks must be strictly increasing block counts of at least 2, got {self.looks!r}")
        if not (np.isfinite(self.shape) and 0.0 <= float(self.shape) <= 0.5):
            raise ParameterError(f"shape must lie in [0, 0.5] (0 O'Brien-Fleming, 0.5 Pocock), got {self.shape!r}")
        if self.target_mde is not None:
            t = self.target_mde
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not (math.isfinite(t) and 0.0 < t < 10.0):
                raise ParameterError(f"target_mde must be a relative change in (0, 10) (0.05 = 5%) or None, got {t!r}")
            object.__setattr__(self, "target_mde", float(t))
        object.__setattr__(self, "looks", looks)
        object.__setattr__(self, "shape", float(self.shape))

    @classmethod
    def every(cls, max_blocks: int, *, step: int = 2, first: int | None = None, n_comparisons: int = 1,
              alpha: float = 0.05, shape: float = DEFAULT_SHAPE, require_practical: bool = False,
              target_mde: float | None = None) -> SequentialDesign:
        """Looks every ``step`` blocks from ``first`` up to ``max_blocks``.

        ``first`` (default): the first block count at which a row of an ``n_comparisons``-row
        Holm family at level ``alpha`` can reach significance under these boundaries (an
        earlier look could never stop the question). ``target_mde``: futility (see the class).
        """
        max_blocks, step = int(max_blocks), int(step)
        if step < 1:
            raise ParameterError(f"step must be a positive number of blocks, got {step!r}")
        if max_blocks < 2:
            raise ParameterError(f"max_blocks must be at least 2, got {max_blocks!r}")
        probability("alpha", alpha)
        if first is not None and not 2 <= int(first) <= max_blocks:
            raise ParameterError(f"first must lie in [2, max_blocks={max_blocks}], got {first!r}")

        def looks_from(n0: int) -> tuple[int, ...]:
            out = list(range(n0, max_blocks + 1, step))
            return tuple(out if out[-1] == max_blocks else [*out, max_blocks])

        if first is not None:
            return cls(looks_from(int(first)), shape, require_practical, target_mde)
        # the looks from the fixed test's floor; those at which even the most extreme data
        # could not reach the boundary are dropped (that leaves the boundary's tail unchanged)
        level = alpha / max(1, int(n_comparisons))
        floor = min(max_blocks, min_trials(alpha=alpha, n_comparisons=max(1, int(n_comparisons)), paired=True))
        counts = looks_from(floor)
        c = _critical(counts, float(shape), level)
        feasible = [n for k, n in enumerate(counts) if _max_w(counts, float(shape), k + 1) >= c - _TOL * max(1.0, abs(c))]
        return cls(tuple(n for n in counts if n >= feasible[0]) if feasible else (max_blocks,), shape,
                   require_practical, target_mde)

    @property
    def max_blocks(self) -> int:
        """The last look: the most blocks a question can take."""
        return self.looks[-1]

    def is_look(self, blocks: int) -> bool:
        """Whether ``blocks`` blocks run is a planned look."""
        return int(blocks) in self.looks

    def next_look(self, blocks: int) -> int | None:
        """The first planned look after ``blocks`` blocks (``None`` after the last)."""
        return next((n for n in self.looks if n > int(blocks)), None)

    def counts(self, blocks: int | None = None) -> tuple[int, ...]:
        """The looks' block counts, with ``blocks`` added when it is not a planned look."""
        if blocks is None or int(blocks) in self.looks:
            return self.looks
        if int(blocks) > self.max_blocks:
            raise ParameterError(f"{blocks} blocks exceed the sequential design's maximum of {self.max_blocks} "
                                 f"(looks {list(self.looks)}); analyse with the design the run used")
        return tuple(sorted({*self.looks, int(blocks)}))

    def power(self, effect: float, sigma: float, *, alpha: float = 0.05, through: int | None = None) -> float:
        """Predicted power to detect a relative ``effect`` (0.05 = 5%) for a row whose
        within-block log ratios have SD ``sigma``, at row level ``alpha`` (``alpha / m`` under
        Holm), over the looks up to ``through`` blocks (default all)."""
        counts, k = self._through(through)
        if not (np.isfinite(sigma) and sigma > 0):
            return math.nan
        return _power(math.log1p(effect) / sigma, counts, self.shape, float(alpha), k)

    def mde(self, sigma: float, *, alpha: float = 0.05, power: float = 0.8, through: int | None = None) -> float:
        """Minimum detectable effect (relative) at ``power`` over the looks up to ``through``."""
        counts, k = self._through(through)
        if not (np.isfinite(sigma) and sigma > 0):
            return math.nan
        u = _mde_units(counts, self.shape, float(alpha), float(power), k)
        return math.expm1(u * sigma) if math.isfinite(u) else math.inf

    def expected_blocks(self, effect: float, sigma: float, *, alpha: float = 0.05) -> float:
        """Expected blocks run by a one-row question that stops at its first significant look
        (effect 0: the maximum unless equivalence stops it; that is not modelled here)."""
        if not (np.isfinite(sigma) and sigma > 0):
            return float(self.max_blocks)
        return _expected_stop(math.log1p(effect) / sigma, self.looks, self.shape, float(alpha))[1]

    def _through(self, through: int | None) -> tuple[tuple[int, ...], int]:
        counts = self.counts(through)
        b = self.max_blocks if through is None else int(through)
        return counts, sum(1 for n in counts if n <= b)

    def describe(self) -> str:
        """One line: the looks and the boundary."""
        kind = {0.0: "O'Brien-Fleming", 0.5: "Pocock"}.get(self.shape, f"Wang-Tsiatis shape {self.shape:g}")
        fut = (f"; a row that cannot reach an MDE of {100 * self.target_mde:.3g}% by the last look stops "
               "(non-binding futility)" if self.target_mde is not None else "")
        return (f"group-sequential: looks at {', '.join(map(str, self.looks))} blocks ({kind} boundaries, "
                f"Holm within a look{fut})")

    def to_dict(self) -> dict[str, Any]:
        """Plain fields (for JSON)."""
        out = {"looks": list(self.looks), "shape": self.shape, "require_practical": self.require_practical,
               "null_draws": NULL_DRAWS}
        if self.target_mde is not None:
            out["target_mde"] = self.target_mde
        return out


# ---------------------------------------------------------------------------------------
# One row


@dataclass(frozen=True)
class SequentialRow:
    """The sequential analysis of one row (paired, rank method).

    Attributes
    ----------
    estimate:
        What :func:`~benchlib.stats.compare` needs, with ``pvalue`` the sequential p-value,
        ``lo``/``hi`` the repeated confidence interval, ``tost_lo``/``tost_hi`` its
        ``1 - 2 alpha`` version and ``min_p`` the smallest sequential p-value reachable so far.
    p_fixed:
        The fixed-sample signed-rank p-value of all the blocks (for reference only).
    counts:
        The schedule's block counts of this row (blocks that differ), planned looks to come
        included; ``looks_done`` of them are in the data.
    blocks_run:
        Blocks of the run analysed.
    unplanned:
        ``blocks_run`` is not a planned look (the run was interrupted or resumed).
    drift:
        The looks disagree: their repeated intervals (at the reported level, or at
        ``1 - 2 alpha`` for equivalence) do not overlap (no shift is consistent with every
        look), or they overlap on one side of no difference while the plain estimate of a look
        at or after the one where the test rejected "no difference" lies on the other side.
        Either is evidence that the effect moved between looks. When they do not overlap, the
        interval is the one through the look where the test first rejected "no difference"
        (so the direction decided and the interval agree), or without such a look the latest
        look's alone (not a zero-width intersection); the row is never "equivalent".
    z_path:
        The weighted ``z`` of each look in the data (``W`` is their running maximum): at
        which look the row first crossed a boundary (:func:`early_stop_estimate`).
    plain:
        The plain Hodges-Lehmann estimate of all the blocks (log scale); ``estimate.effect`` is
        it kept inside the interval ``[estimate.lo, estimate.hi]``.
    observed:
        The within-block differences the row rests on (block order, tied blocks left out), for
        :func:`conditional_power`.
    """

    estimate: Estimate
    p_fixed: float
    counts: tuple[int, ...]
    looks_done: int
    blocks_run: int
    unplanned: bool
    drift: bool = False
    z_path: tuple[float, ...] = ()
    plain: float = math.nan
    observed: np.ndarray = field(default_factory=lambda: np.empty(0), compare=False, repr=False)


def _row_counts(blocks: np.ndarray, design: SequentialDesign, blocks_run: int) -> tuple[tuple[int, ...], int]:
    """This row's block counts at each look (blocks run -> blocks that differ) and how many of
    the looks are in the data."""
    plan = design.counts(blocks_run)
    done = [n for n in plan if n <= blocks_run]
    have = [int(np.count_nonzero(blocks < n)) for n in done]
    later = [have[-1] + (n - blocks_run) if have else n - blocks_run for n in plan if n > blocks_run]
    counts: list[int] = []
    looks_done = 0
    for i, c in enumerate(have + later):
        if c >= 1 and (not counts or c > counts[-1]):
            counts.append(c)
            looks_done += i < len(have)
    return tuple(counts), looks_done


def _z_path(d: np.ndarray, counts: tuple[int, ...], done: int, shape: float) -> tuple[float, ...]:
    """The weighted ``z`` of each of the first ``done`` looks (``d`` in block order, zeros
    dropped); ``W`` is their running maximum."""
    w = _weights(counts, shape)
    out = []
    for k in range(done):
        x = d[: counts[k]]
        if np.unique(np.abs(x)).size == x.size:
            p = float(_rank_p(x[None, :])[0])
        else:
            p = signed_rank(x).pvalue
        out.append(float(_z(p)) * float(w[k]))
    return tuple(out)


def _path_w(d: np.ndarray, counts: tuple[int, ...], done: int, shape: float) -> float:
    """Observed ``W`` after ``done`` looks (``d`` in block order, zeros dropped)."""
    return max(_z_path(d, counts, done, shape), default=0.0)


def _seq_p(d: np.ndarray, counts: tuple[int, ...], done: int, shape: float) -> float:
    if len(counts) == 1 and done == 1:
        return signed_rank(d[: counts[0]]).pvalue  # one look: the fixed test, exactly
    return _p_of_w(_path_w(d, counts, done, shape), counts, shape)


def _repeated_interval(d: np.ndarray, counts: tuple[int, ...], done: int, shape: float,
                       level: float, latest_only: bool = False) -> tuple[float, float, bool]:
    """The shifts the sequential test does not reject at ``level`` (ends at Walsh averages),
    and whether the looks disagree: when no shift survives every look (the looks' intervals
    do not overlap: evidence of drift between looks, not of precision), the latest look's
    interval alone is returned and the flag is True (``latest_only``: that interval in any
    case)."""
    wa = np.unique(walsh_averages(d[: counts[done - 1]]))
    span = float(wa[-1] - wa[0]) + 1.0
    cand = np.concatenate([[wa[0] - span], (wa[:-1] + wa[1:]) / 2.0, [wa[-1] + span]])
    drift = False
    if len(counts) == 1 and done == 1:
        acc = np.array([signed_rank(d - c).pvalue > level for c in cand])
    else:
        crit = _critical(counts, shape, level)
        w = _weights(counts, shape)
        best = np.zeros(cand.size)
        latest = best
        ties = np.unique(np.abs(d)).size < d.size
        for k in range(done):
            x = d[None, : counts[k]] - cand[:, None]
            if ties:
                p = np.array([signed_rank(row).pvalue for row in x])
            else:
                p = _rank_p(x)
            latest = _z(p) * w[k]
            best = np.maximum(best, latest)
        cut = crit - _TOL * max(1.0, abs(crit))
        acc = best < cut
        if latest_only or not acc.any():
            drift = not acc.any()
            acc = latest < cut
    idx = np.flatnonzero(acc)
    if idx.size == 0:  # not even the latest look accepts a shift (cannot happen with a finite boundary)
        est = float(np.median(wa))
        return est, est, drift
    j0, j1 = int(idx[0]), int(idx[-1])
    lo = float(wa[j0 - 1]) if j0 >= 1 else -math.inf
    hi = float(wa[j1]) if j1 <= wa.size - 1 else math.inf
    return lo, hi, drift


def analyse_row(a: np.ndarray, b: np.ndarray, blocks: np.ndarray, design: SequentialDesign, *, blocks_run: int,
                confidence: float = 0.95, alpha: float = 0.05, margin: float = math.nan) -> SequentialRow:
    """Sequential effect, repeated intervals and p-value of ``b`` against ``a`` (paired).

    Parameters
    ----------
    a, b:
        The two arms' values on the comparison scale (logs for ratio metrics), aligned by
        block.
    blocks:
        Each pair's block index (0-based, the order the blocks ran).
    design:
        The planned looks.
    blocks_run:
        Blocks of the run so far (a block whose trial is invalid still counts as run).
    confidence, alpha:
        Level of the repeated interval; the equivalence interval is at ``1 - 2 alpha``.
    margin:
        Equivalence margin on the comparison scale (``log(1 + m)``); given, the estimate
        carries the sequential TOST p-value (from the sequential p-values at ``±margin``).
    """
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    blocks = np.asarray(blocks, dtype=int)
    order = np.argsort(blocks, kind="stable")
    d_all = (b - a)[order]
    blk = blocks[order]
    nz = d_all != 0.0
    n_tied = int(np.count_nonzero(~nz))
    if n_tied == d_all.size:  # every block tied: zero spread, as the fixed analysis
        n_tied = 0
        nz = np.ones(d_all.size, dtype=bool)
    d, blk = d_all[nz], blk[nz]
    counts, done = _row_counts(blk, design, int(blocks_run))
    unplanned = not design.is_look(blocks_run)
    p_fixed = signed_rank(d).pvalue if d.size else 1.0
    if done == 0 or not np.any(d != 0.0):
        p_seq = 1.0
        lo = hi = tlo = thi = 0.0 if d.size else math.nan
        mp = 1.0
        drift = False
    else:
        p_seq = _seq_p(d, counts, done, design.shape)
        level = 1.0 - confidence
        lo, hi, drift_ci = _repeated_interval(d, counts, done, design.shape, level)
        tlo, thi, drift_tost = _repeated_interval(d, counts, done, design.shape, 2.0 * alpha)
        crossed = first_crossing(_z_path(d, counts, done, design.shape), counts, design.shape, level)
        if drift_ci and crossed >= 0:
            # the looks' intervals do not overlap, and the test rejected "no difference" at the
            # interval's level: the interval is that of the look where it first did, so the
            # direction the test decided and the interval shown agree (decisions never revert)
            lo, hi, _ = _repeated_interval(d, counts, crossed + 1, design.shape, level)
        elif drift_ci:  # no decision: the latest look's interval
            lo, hi, _ = _repeated_interval(d, counts, done, design.shape, level, latest_only=True)
        if drift_ci or drift_tost:  # equivalence on the latest look's interval (never decided: drift)
            tlo, thi, _ = _repeated_interval(d, counts, done, design.shape, 2.0 * alpha, latest_only=True)
        drift = drift_ci or drift_tost or _turned(d, counts, done, crossed, lo, hi)
        mp = (min_p_paired(counts[0]) if len(counts) == 1 else
              _p_of_w(_max_w(counts, design.shape, done), counts, design.shape))
    plain = hodges_lehmann_center(d) if d.size else math.nan
    # the estimate printed lies in the interval printed (at the last look too: only _early_stop
    # used to keep it there, and a row could read "ratio 0.995 [1.096, 1.100] -> faster")
    est = min(max(plain, lo), hi) if math.isfinite(plain) and lo <= hi else plain
    sigma = float(np.std(d, ddof=1)) if d.size > 1 else math.nan
    p_tost = math.nan
    if done and d.size and math.isfinite(margin) and margin > 0:
        p_tost = tost_pvalue(lambda c: _seq_p(d - c, counts, done, design.shape), est, margin)
    e = Estimate(est, lo, hi, float(confidence), tlo, thi, float(p_seq), float(mp), sigma,
                 "sequential Wilcoxon signed-rank", True, False, n_tied, p_tost)
    zp = _z_path(d, counts, done, design.shape) if done and d.size and np.any(d != 0.0) else ()
    return SequentialRow(e, float(p_fixed), counts, done, int(blocks_run), unplanned, drift, zp, plain, d)


def _turned(d: np.ndarray, counts: tuple[int, ...], done: int, crossed: int, lo: float, hi: float) -> bool:
    """Whether the looks disagree in direction although their intervals overlap: the interval
    lies on one side of no difference (the test rejected it at look ``crossed``, 0-based), and
    the plain estimate of that look or a later one lies on the other side."""
    if crossed < 0 or not (lo > 0.0 or hi < 0.0):
        return False
    side = 1.0 if lo > 0.0 else -1.0
    return any(side * hodges_lehmann_center(d[: counts[k]]) < 0.0 for k in range(crossed, done))


# ---------------------------------------------------------------------------------------
# Estimates of rows that stopped early: simulation-calibrated, conditional on the look

#: Knots (in SDs of the within-block differences) of the calibrated estimate's slopes.
_CAL_KNOTS = np.arange(0.0, 6.01, 0.25)
#: True effects (in SDs) over which the calibration holds the conditional mean.
_CAL_GRID = np.arange(0.0, 8.01, 0.1)
#: Penalties of the slope fit: towards no adjustment (slope 1), and towards equal slopes.
_CAL_RIDGE = 1e-4
_CAL_SMOOTH = 1e-4
#: Fewest simulated paths with the event at an effect for that effect to enter the fit.
_CAL_MIN_PATHS = 20


def _ramps(t: np.ndarray) -> np.ndarray:
    """Odd piecewise-linear basis on ``|t|``: column m rises with slope 1 between knots m and
    m + 1 (the last one without end); a non-negative combination is an increasing odd
    function of ``t``."""
    a = np.abs(t)[..., None]
    r = np.clip(a - _CAL_KNOTS, 0.0, None)
    r[..., :-1] = np.minimum(r[..., :-1], np.diff(_CAL_KNOTS))
    return np.sign(t)[..., None] * r


@lru_cache(maxsize=32)
def _cal_paths(counts: tuple[int, ...], shape: float, level: float) -> tuple[np.ndarray, ...]:
    """Simulated standard-normal difference paths (``POWER_DRAWS`` and their mirror images):
    per path and look, the shifts above ``up`` or at or below ``dn`` at which the look's
    weighted ``z`` reaches the boundary at ``level``, the Hodges-Lehmann estimate and the SD
    of the differences (the shift moves the estimate by itself and leaves the SD alone)."""
    z = _draws(counts[-1])
    z = np.concatenate([z, -z])
    c = _critical(counts, shape, level)
    w = _weights(counts, shape)
    k_looks = len(counts)
    up = np.full((z.shape[0], k_looks), np.inf)
    dn = np.full((z.shape[0], k_looks), -np.inf)
    hl = np.empty((z.shape[0], k_looks))
    sd = np.empty((z.shape[0], k_looks))
    for k, n in enumerate(counts):
        i, j = np.triu_indices(n)
        wa = np.sort((z[:, i] + z[:, j]) / 2.0, axis=1)
        hl[:, k] = np.median(wa, axis=1)
        sd[:, k] = z[:, :n].std(axis=1, ddof=1) if n > 1 else 1.0
        if not math.isfinite(c):
            continue
        # the look rejects the shift delta iff T+(z + delta) <= t_lo or >= N - t_lo, where
        # T+(z + delta) counts the Walsh averages of z above -delta
        p_star = float(2.0 * special.ndtr(-(c - _TOL * max(1.0, abs(c))) / w[k]))
        t_lo = int(np.searchsorted(2.0 * _t_cdf(n), p_star * (1 + 1e-12), side="right")) - 1
        if t_lo >= 0:
            up[:, k] = -wa[:, t_lo]
            dn[:, k] = -wa[:, wa.shape[1] - t_lo - 1]
    return up, dn, hl, sd


@lru_cache(maxsize=256)
def _cal_slopes(counts: tuple[int, ...], shape: float, level: float, crossed: int, look: int) -> np.ndarray:
    """Slopes of the calibrated estimate ``sd * f(hl / sd)`` of a row analysed at look index
    ``look`` whose first crossing was at look index ``crossed`` (-1: none through ``look``):
    non-negative (``f`` increasing and odd), fitted by least squares so that over the true
    effects of :data:`_CAL_GRID` the mean estimate of the simulated paths with that history
    equals the true effect (each effect weighted by the square root of its chance of that
    history)."""
    up, dn, hl, sd = _cal_paths(counts, shape, level)
    rows, rhs = [], []
    for delta in _CAL_GRID:
        hit = (delta > up) | (delta <= dn)
        first = np.where(hit.any(axis=1), hit.argmax(axis=1), -1)
        sel = first == crossed if crossed >= 0 else (first == -1) | (first > look)
        if np.count_nonzero(sel) < _CAL_MIN_PATHS:
            continue
        wt = math.sqrt(float(np.mean(sel)))
        t = (hl[sel, look] + delta) / sd[sel, look]
        rows.append(wt * (sd[sel, look][:, None] * _ramps(t)).mean(axis=0))
        rhs.append(wt * delta)
    m = _CAL_KNOTS.size
    if not rows:
        return np.ones(m)
    diff = np.diff(np.eye(m), axis=0)
    a = np.vstack([np.array(rows), math.sqrt(_CAL_RIDGE) * np.eye(m), math.sqrt(_CAL_SMOOTH) * diff])
    b = np.r_[np.array(rhs), math.sqrt(_CAL_RIDGE) * np.ones(m), np.zeros(m - 1)]
    slopes, _ = optimize.nnls(a, b)
    slopes.setflags(write=False)
    return slopes


def first_crossing(z_path: Sequence[float] | np.ndarray, counts: tuple[int, ...], shape: float, level: float) -> int:
    """Index of the first look whose weighted ``z`` reaches the boundary at ``level`` (-1: none)."""
    c = _critical(counts, shape, level)
    cut = c - _TOL * max(1.0, abs(c)) if math.isfinite(c) else math.inf
    return next((k for k, z in enumerate(z_path) if z >= cut), -1)


def early_stop_estimate(effect: float | np.ndarray, sigma: float | np.ndarray, counts: tuple[int, ...],
                        shape: float, level: float, crossed: int, look: int) -> float | np.ndarray:
    """The bias-adjusted estimate of a row analysed at look index ``look`` (0-based) of the
    schedule ``counts``, whose test first crossed its boundary (at row level ``level``) at look
    index ``crossed`` (-1: not through ``look``).

    The plain Hodges-Lehmann estimate of a row that stopped at an early look is biased away
    from zero (it stopped *because* its early blocks looked extreme). The adjusted estimate
    is ``sigma * f(effect / sigma)`` with ``f`` increasing and odd, calibrated by simulating
    the design (normal within-block differences, :data:`POWER_DRAWS` seeded paths and their
    mirror images) so that, among paths with the same history (first crossing at the same
    look), the mean estimate equals the true effect for true effects from 0 to 8 SDs of the
    differences. Vectorised over ``effect`` and ``sigma``; a non-positive or NaN ``sigma``
    leaves the estimate as it is.
    """
    eff = np.asarray(effect, dtype=float)
    sig = np.asarray(sigma, dtype=float)
    slopes = _cal_slopes(tuple(int(n) for n in counts), float(shape), float(level), int(crossed), int(look))
    ok = np.isfinite(sig) & (sig > 0) & np.isfinite(eff)
    safe = np.where(ok, sig, 1.0)
    out = np.where(ok, safe * (_ramps(eff / safe) @ slopes), eff)
    return float(out) if out.ndim == 0 else out


def row_mde(row: SequentialRow, design: SequentialDesign, *, alpha_row: float, power: float) -> float:
    """Minimum detectable shift (log scale) of a row's sequential test as run (its looks so
    far), at row level ``alpha_row`` and ``power``."""
    s = row.estimate.sigma
    if not (np.isfinite(s) and s >= 0) or not row.counts:
        return math.nan
    u = _mde_units(row.counts, design.shape, float(alpha_row), float(power), max(1, row.looks_done))
    return float(s * u) if math.isfinite(u) else math.inf


#: One-sided confidence of the lower bound on a row's spread that a futility projection rests on:
#: a row stops for futility only when even an optimistic spread leaves the target out of reach.
#: Stricter than the planner's 80% upper bound, so that a design planned at the target is rarely
#: stopped by a noisy first look (``docs/statistics.md``, "Futility").
FUTILITY_CONFIDENCE = 0.95


def budget_mde(row: SequentialRow, design: SequentialDesign, *, alpha_row: float, power: float,
               confidence: float = FUTILITY_CONFIDENCE) -> float:
    """The relative MDE a row can reach by the design's last look: at the last look its own
    MDE (:func:`row_mde`, relative); before it, the sequential test over all the planned looks
    with the SD of its within-block log ratios at the one-sided ``confidence`` *lower* bound
    (chi-square on the blocks so far), so a noisy early spread does not stop a row that could
    still reach the target. NaN when the spread is unknown (fewer than 2 blocks)."""
    s = row.estimate.sigma
    if not (np.isfinite(s) and s >= 0) or not row.counts or row.looks_done < 1:
        return math.nan
    if row.looks_done >= len(row.counts):
        m = row_mde(row, design, alpha_row=alpha_row, power=power)
        return math.expm1(m) if math.isfinite(m) else m
    n = row.counts[row.looks_done - 1]
    if n < 2:
        return math.nan
    s_lo = math.sqrt(variance_bound(s * s, n - 1, confidence, side="lower"))
    u = _mde_units(row.counts, design.shape, float(alpha_row), float(power), len(row.counts))
    return math.expm1(u * s_lo) if math.isfinite(u) else math.inf


def conditional_power(row: SequentialRow, design: SequentialDesign, *, alpha_row: float) -> float:
    """The chance that the row's sequential test rejects "no difference" at ``alpha_row`` by the
    design's last look, given the blocks so far, if the true shift were the one they show (the
    plain Hodges-Lehmann estimate) with their spread: the blocks still to come are simulated
    (:data:`POWER_DRAWS` seeded normal paths, the same for every row) and appended to the row's
    own, and the test's statistic ``W`` is taken over the looks to come. 1.0 when the row has
    already rejected; NaN at the last look (nothing is to come) or without a spread."""
    s = row.estimate.sigma
    k_looks, done = len(row.counts), row.looks_done
    if not (1 <= done < k_looks) or not row.z_path or not (math.isfinite(s) and s > 0):
        return math.nan
    c = _critical(row.counts, design.shape, float(alpha_row))
    if not math.isfinite(c):
        return 0.0
    cut = c - _TOL * max(1.0, abs(c))
    w_obs = max(row.z_path)
    if w_obs >= cut:
        return 1.0
    n0 = row.counts[done - 1]
    theta = row.plain if math.isfinite(row.plain) else row.estimate.effect
    future = theta + s * _draws(row.counts[-1])[:, : row.counts[-1] - n0]
    d = row.observed
    w = _weights(row.counts, design.shape)
    best = np.full(future.shape[0], w_obs)
    for k in range(done, k_looks):
        x = np.concatenate([np.broadcast_to(d[:n0], (future.shape[0], n0)), future[:, : row.counts[k] - n0]],
                           axis=1)
        best = np.maximum(best, _z(_rank_p(x)) * w[k])
    return float(np.mean(best >= cut))


def need_blocks(design: SequentialDesign, *, alpha: float, n_comparisons: int, correction: str) -> int | None:
    """The first planned look at which a row of the family can reach significance at all
    (``None`` if none can)."""
    counts = design.looks
    for k, n in enumerate(counts):
        p = _p_of_w(_max_w(counts, design.shape, k + 1), counts, design.shape)
        if best_case_adjusted(p, n_comparisons, correction) < alpha:
            return n
    return None


# ---------------------------------------------------------------------------------------
# The runner's question: is it settled?


def settled(v: Any, *, require_practical: bool = False) -> bool:
    """Whether a row is settled: "faster"/"slower" (with ``require_practical``: not "possibly
    within" the margin), "equivalent", or not decidable within the budget (futility)."""
    if v.kind in (VerdictKind.EQUIVALENT, VerdictKind.UNDECIDABLE):
        return True
    if v.kind.directional:
        return not (require_practical and v.qualifier == "possibly within")
    return False


@dataclass(frozen=True)
class LookStatus:
    """Whether a question (one comparison) may stop adding blocks.

    Attributes
    ----------
    blocks:
        Blocks run in the data analysed (the largest over the comparison's groups).
    at_look:
        ``blocks`` is a planned look.
    settled:
        Every row that can be decided is (see :func:`settled`).
    stop:
        Stop adding blocks for this question: settled at a planned look, or the maximum
        reached.
    open:
        The rows still undecided.
    next_look:
        The next planned look (``None`` after the last).
    """

    blocks: int
    at_look: bool
    settled: bool
    stop: bool
    open: tuple[Any, ...]
    next_look: int | None
    max_blocks: int

    def explain(self) -> str:
        """One line in words."""
        if self.stop and self.settled and self.blocks < self.max_blocks:
            return f"settled at {self.blocks} of {self.max_blocks} blocks: stop"
        if self.stop:
            return f"maximum of {self.max_blocks} blocks reached: stop ({len(self.open)} row(s) undecided)"
        where = f"next look at {self.next_look} blocks" if self.next_look else "no look left"
        return f"{len(self.open)} row(s) undecided after {self.blocks} blocks; {where}"


def status(comparison: Any) -> LookStatus:
    """Is the question settled? For a :class:`~benchlib.stats.Comparison` made with
    ``compare(..., sequential=design)``: the runner calls it after each block (with the
    summaries so far) and stops adding blocks for the question when ``.stop`` is True."""
    seq = comparison.params.get("sequential")
    if not seq:
        raise ParameterError("status() needs a comparison made with compare(..., sequential=design)")
    design = SequentialDesign(tuple(seq["looks"]), seq["shape"], seq["require_practical"], seq.get("target_mde"))
    blocks = int(seq["blocks_run"])
    open_rows = tuple(v for v in comparison.verdicts
                      if not v.kind.without_figures and not settled(v, require_practical=design.require_practical))
    at = design.is_look(blocks)
    done = not open_rows
    stop = (done and at) or blocks >= design.max_blocks
    return LookStatus(blocks, at, done, stop, open_rows, design.next_look(blocks), design.max_blocks)


def check_sequential(design: Any, method: str, paired_design: str) -> SequentialDesign:
    """Validate ``compare``'s ``sequential=`` argument."""
    if not isinstance(design, SequentialDesign):
        raise ParameterError(f"sequential= takes a benchlib.stats.sequential.SequentialDesign, got "
                             f"{type(design).__name__}")
    if method != "rank":
        raise ParameterError(f"sequential analysis uses the rank method (exact signed-rank tests); got method={method!r}")
    if paired_design == "unpaired":
        raise ParameterError("sequential analysis needs randomized blocks analysed paired; use design='auto' or 'paired'")
    return design


def blocks_run(frames: Sequence[Any]) -> int:
    """Blocks run: the largest block index in any of ``frames`` (valid or not) plus one."""
    best = 0
    for f in frames:
        if f is not None and len(f) and "block" in f.columns and f["block"].notna().any():
            best = max(best, int(f["block"].max()) + 1)
    return best
