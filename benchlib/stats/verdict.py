"""Verdicts as data: what one comparison row concluded, decided here and rendered here (pure).

:func:`decide` turns a row's numbers (effect, intervals, raw and adjusted p-values, the
design's smallest attainable p-value, the MDE) into a :class:`Verdict`; :func:`render`
turns a verdict into the words the reports print. Nothing else in benchlib decides a verdict
or parses one: tables, one-line forms and the studies' conclusions read the
:class:`Verdict` (``Comparison.verdicts``, ``Comparison.verdict(...)``).

The rules (statistics reference, section 5.6; ``docs/statistics.md``):

* **insufficient**: not significant, and the exact test cannot reach significance with this
  many trials (the minimum-p guard; significance is decided first, since the guard's best
  case assumes every row of the family at the floor, which Holm's step-down can beat;
  unpaired rank rows take the floor given their ties, so error rates that are 0 in nearly
  every trial read "insufficient" with the ties as the reason, not "~"), or there is one
  trial per arm (the between-run variance is not estimated, so no direction can be given);
  unless the equivalence test decides on its own.
* **faster / slower**: adjusted p below alpha; the metric's words ("faster"/"slower" for
  latency and throughput, "fewer errors"/"more errors" for the error rate), qualified
  "within ±2%" when the whole interval is inside the practical margin and "possibly within
  ±2%" when it straddles it.
* **equivalent**: not significant and the equivalence test (TOST: the larger of the two
  one-sided p-values at the margins), adjusted over the family like the difference
  p-values, is below alpha (for one row: the ``1 - 2 alpha`` interval lies inside the
  margin); decided even when the guard makes significance impossible.
* **no difference detected** ("~"): none of the above; always with the MDE.
* **undecidable** ("not decidable within the budget: MDE x% > target y%"): a
  group-sequential row with a target MDE (``SequentialDesign(target_mde=...)``) that is
  neither significant nor equivalent and whose MDE at the design's last look (before it: the
  projection from the blocks so far, on the 95% lower bound of their spread) exceeds the
  target, and, before the last look, whose chance of a decision by the last look at the effect
  seen so far is below :data:`FUTILITY_POWER`: the question may stop spending blocks on it
  (futility, non-binding: the efficacy boundary is unchanged). Not "~" (which names a design that could still reach
  the target) and never a claim of no difference.
* **omitted**: no values; **not run**: the arm could not run (with the reason); **no valid
  trial**: the arm ran, but none of its trials there counts (the guard invalidated them or
  they failed; with the reason).
* **client-bound** ("client-bound: <evidence>"): a row left undecided ("~", "insufficient"
  or "no valid trial") in which one arm's rate was set by benchlib's client, not by the server
  (its client CPU came near its limit, or the guard invalidated trials for it): the row
  cannot be decided on this machine's CPUs, and the verdict carries the measured evidence
  and the arm's rate as a lower bound of the server's (``Verdict.client_bound``; assigned
  by :func:`benchlib.analysis.run_family`, never by :func:`decide`). Never a claim either way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from enum import StrEnum
from typing import Any, TypedDict

from benchlib.stats.fmt import fmt_pct, fmt_value
from benchlib.stats.metrics import MetricInfo

__all__ = ["DECIDED", "FUTILITY_POWER", "VerdictKind", "Verdict", "decide", "render", "fmt_mde"]

_NAN = math.nan


class VerdictKind(StrEnum):
    """What a row concluded. ``FASTER``/``SLOWER`` mean better/worse in the metric's own
    direction (for throughput "faster" is higher; for the error rate they render as "fewer
    errors"/"more errors")."""

    FASTER = "faster"
    SLOWER = "slower"
    EQUIVALENT = "equivalent"
    NO_DIFFERENCE = "no_difference"
    INSUFFICIENT = "insufficient"
    UNDECIDABLE = "undecidable"
    OMITTED = "omitted"
    NOT_RUN = "not_run"
    NO_VALID_TRIAL = "no_valid_trial"
    CLIENT_BOUND = "client_bound"

    @property
    def directional(self) -> bool:
        """Whether the verdict claims a direction (a significant difference)."""
        return self in (VerdictKind.FASTER, VerdictKind.SLOWER)

    @property
    def without_figures(self) -> bool:
        """A row with no estimate, interval or MDE of its own (omitted, not run, no valid
        trial, client-bound): no further block of this design changes it."""
        return self in (VerdictKind.OMITTED, VerdictKind.NOT_RUN, VerdictKind.NO_VALID_TRIAL, VerdictKind.CLIENT_BOUND)


#: A sequential row stops for futility only when, besides an MDE out of the target's reach, its
#: chance of a decision by the last look at the effect seen so far
#: (:func:`benchlib.stats.sequential.conditional_power`) is below this. On the MDE alone,
#: futility threw away large effects seen through a wide spread: at a true +10% with 1.5x the
#: planned spread, 48% of rows "not decidable" and power 0.97 -> 0.52 (issue 39, item 4).
FUTILITY_POWER = 0.10

#: The verdict kinds that decide a row: a direction, or equivalence within the margin (the
#: census's "decided", :mod:`benchlib.publish.census`).
DECIDED: frozenset[VerdictKind] = frozenset({VerdictKind.FASTER, VerdictKind.SLOWER, VerdictKind.EQUIVALENT})


@dataclass(frozen=True)
class Verdict:
    """One row's conclusion with the numbers it rests on.

    Attributes
    ----------
    kind:
        The decision.
    arm, baseline, metric, labels:
        Which row (``labels``: the ``by`` columns, e.g. ``{"condition": "2000rps"}``).
    better:
        ``"lower"`` or ``"higher"``: the metric's good direction ("" if unknown).
    word:
        The metric's word for the verdict's direction (``faster``, ``slower``, ``fewer
        errors``, ``more errors``, ``better``, ``worse``); "" when not directional.
    effect:
        ``"ratio"`` (arm / baseline) or ``"difference"`` (arm - baseline, the metric's units).
    unit:
        The metric's unit (``ms``, ``req/s``, ``%``...).
    estimate, ci_lo, ci_hi, confidence:
        The effect with its interval and the interval's achieved confidence (NaN when no
        estimate was made).
    p_raw, p_adj:
        Raw and adjusted p-values (NaN when the row was not tested).
    min_p:
        The smallest p-value the design allows (the guard's input).
    correction, family_size, alpha:
        The multiplicity correction, the number of tested rows it runs over, and the level.
    significant, practical, equivalent:
        Adjusted p below alpha; significant with the interval beyond the margin; the
        ``1 - 2 alpha`` interval inside the margin.
    qualifier:
        For directional verdicts: ``""`` (beyond the margin), ``"within"`` or
        ``"possibly within"`` (the practical margin).
    margin:
        The practical / equivalence margin (relative, 0.02 = ±2%).
    mde, mde_power:
        Minimum detectable effect at ``mde_power``: relative (0.09 = 9%) for ratios,
        absolute (the metric's units) for differences; ``inf`` when the design can detect
        nothing.
    mde_is_lower_bound:
        The MDE ignores a variance component (single-trial mode: only the within-run
        variance is known; a run against another without the run-level variance), so the
        true MDE is at least this ("MDE ≥ x%").
    need, paired:
        For ``INSUFFICIENT``: trials per arm (blocks when ``paired``) the exact test needs.
    n_baseline, n_arm:
        Trials (blocks when paired) that entered the estimate.
    n_tied:
        Blocks whose two trials gave exactly the same value; like the signed-rank test, the
        guard, the estimate and the interval leave them out (paired rank method).
    between_run_variance_estimated:
        False in single-trial mode: one trial per arm, the interval comes from a block
        bootstrap of the requests and does not contain the run-to-run variation.
    all_equal:
        Zero-spread rows: the value every trial of both arms had (NaN otherwise).
    reason:
        For ``NOT_RUN``: why the arm did not run; for ``NO_VALID_TRIAL``: what became of its
        trials; for ``INSUFFICIENT``: why significance is impossible when it is not the
        trial count (e.g. ``"19 of 20 trials tied: smallest possible p 1.00"``).
    blocks_run, blocks_max:
        Group-sequential analysis (``compare(..., sequential=design)``): the blocks of the run
        the row rests on and the design's maximum (both 0 for a fixed-size analysis). The
        p-values, interval, MDE and guard are then the sequential test's, and the words say
        "sequential, 8 of 12 blocks".
    look, looks, bias_adjusted, estimate_unadjusted:
        Group-sequential analysis of a row analysed before its last look (its question
        stopped early): the look (1-based) and the number of looks, and then ``estimate`` is
        the bias-adjusted estimate (conditional on the look at which the row's test first
        crossed its boundary; :func:`benchlib.stats.sequential.early_stop_estimate`), kept
        inside the repeated interval, and ``estimate_unadjusted`` the plain Hodges-Lehmann
        one. The words say "stopped early at look 1 of 3; estimate bias-adjusted".
    p_tost, p_tost_adj:
        The equivalence test's (TOST) p-value, the larger of the one-sided p-values at the
        two margins, and that p-value adjusted over the family by the same correction as
        ``p_adj`` (NaN where equivalence cannot be decided: difference metrics, untested
        rows). "Equivalent" means ``p_tost_adj`` below alpha.
    drift:
        Group-sequential analysis: the looks disagree (their repeated intervals do not
        overlap, or a look's estimate lies on the other side of no change than the interval
        the row was decided on: the effect moved between looks). The interval is the one the
        row was decided on (the latest look's when none was), the row is never "equivalent",
        and the words say "drift between looks".
    target_mde, mde_budget:
        Group-sequential analysis with a target (``SequentialDesign.target_mde``, relative):
        the target and the MDE the row can reach by the design's last look (at that look its
        own MDE; before it projected from the blocks so far on the 95% lower confidence bound
        of their spread). NaN without a target.
    conditional_power:
        Group-sequential analysis with a target, before the last look: the chance of a
        decision by the last look if the true effect were the one seen so far
        (:func:`benchlib.stats.sequential.conditional_power`; NaN at the last look).
        ``UNDECIDABLE`` when ``mde_budget > target_mde`` and, before the last look,
        ``conditional_power`` is below :data:`FUTILITY_POWER`.
    client_trials, client_at_limit:
        ``CLIENT_BOUND``: the client-bound arm's trials (with a client CPU measure, or
        invalidated for the client's CPU) and those of them at the client's limit, the figure
        the census checks (0 and 0 for rows stored before it was recorded).
    """

    kind: VerdictKind
    arm: str = ""
    baseline: str = ""
    metric: str = ""
    labels: Mapping[str, Any] = field(default_factory=dict)
    better: str = ""
    word: str = ""
    effect: str = ""
    unit: str = ""
    estimate: float = _NAN
    ci_lo: float = _NAN
    ci_hi: float = _NAN
    confidence: float = _NAN
    p_raw: float = _NAN
    p_adj: float = _NAN
    min_p: float = _NAN
    correction: str = ""
    family_size: int = 0
    alpha: float = _NAN
    significant: bool = False
    practical: bool = False
    equivalent: bool = False
    qualifier: str = ""
    margin: float = _NAN
    mde: float = _NAN
    mde_power: float = _NAN
    mde_is_lower_bound: bool = False
    need: int | None = None
    paired: bool = False
    n_baseline: int = 0
    n_arm: int = 0
    n_tied: int = 0
    between_run_variance_estimated: bool = True
    all_equal: float = _NAN
    reason: str = ""
    blocks_run: int = 0
    blocks_max: int = 0
    drift: bool = False
    p_tost: float = _NAN
    p_tost_adj: float = _NAN
    look: int = 0
    looks: int = 0
    bias_adjusted: bool = False
    estimate_unadjusted: float = _NAN
    target_mde: float = _NAN
    mde_budget: float = _NAN
    conditional_power: float = _NAN
    client_trials: int = 0
    client_at_limit: int = 0

    def __hash__(self) -> int:
        return hash((self.kind, self.arm, self.baseline, self.metric, tuple(sorted(map(str, self.labels.items())))))

    @classmethod
    def not_run(cls, reason: str, *, arm: str = "", baseline: str = "", metric: str = "all",
                labels: Mapping[str, Any] | None = None) -> Verdict:
        """The verdict of a row whose arm (or baseline) could not run, with the reason."""
        return cls(VerdictKind.NOT_RUN, arm=arm, baseline=baseline, metric=metric, labels=dict(labels or {}),
                   reason=str(reason))

    @classmethod
    def no_valid_trial(cls, reason: str = "", *, arm: str = "", baseline: str = "", metric: str = "all",
                       labels: Mapping[str, Any] | None = None) -> Verdict:
        """The verdict of a row whose arm (or baseline) ran but has no valid trial there
        (``reason``: what became of its trials, e.g. ``"6 invalid"``)."""
        return cls(VerdictKind.NO_VALID_TRIAL, arm=arm, baseline=baseline, metric=metric, labels=dict(labels or {}),
                   reason=str(reason))

    @classmethod
    def client_bound(cls, evidence: str, *, of: Verdict, trials: int = 0, at_limit: int = 0) -> Verdict:
        """The verdict of ``of``'s row (its identity, metric and family kept; no estimate, no
        p-value, no MDE) when one of its arms was client-bound: ``evidence`` names the arm, its
        client CPU and its rate as a lower bound (``"actix's client CPU was 86%-91% busy in 8
        trials (8 at 80% or more, 2 invalid for it); its rate, 61,234 req/s (median of 8
        trials), is a lower bound of the server's"``); ``trials`` and ``at_limit`` are that
        figure as numbers (the arm's trials, those at the client's limit)."""
        return cls(VerdictKind.CLIENT_BOUND, arm=of.arm, baseline=of.baseline, metric=of.metric, labels=dict(of.labels),
                   better=of.better, effect=of.effect, unit=of.unit, correction=of.correction,
                   family_size=of.family_size, alpha=of.alpha, margin=of.margin, n_baseline=of.n_baseline,
                   n_arm=of.n_arm, paired=of.paired, reason=str(evidence), client_trials=int(trials),
                   client_at_limit=int(at_limit))

    @property
    def directional(self) -> bool:
        """Whether the verdict claims a direction (``FASTER`` or ``SLOWER``)."""
        return self.kind.directional

    @property
    def sequential(self) -> bool:
        """Whether the row comes from a group-sequential analysis."""
        return self.blocks_max > 0

    @property
    def stopped_early(self) -> bool:
        """A sequential row analysed before the design's maximum of blocks."""
        return self.sequential and 0 < self.blocks_run < self.blocks_max

    @property
    def improved(self) -> bool:
        """A significant change in the metric's good direction."""
        return self.kind is VerdictKind.FASTER

    @property
    def pct_change(self) -> float:
        """The ratio as a percent change (NaN for differences and missing estimates)."""
        return 100.0 * (self.estimate - 1.0) if self.effect == "ratio" else _NAN

    @property
    def mde_in_text(self) -> bool:
        """Whether :func:`render` prints the MDE (every "~" does, every "not decidable within
        the budget" (its MDE by the last look against the target), and single-trial rows)."""
        if self.kind is VerdictKind.NO_DIFFERENCE:
            return not math.isnan(self.mde)
        if self.kind is VerdictKind.UNDECIDABLE:
            return True
        return self.kind is VerdictKind.INSUFFICIENT and not self.between_run_variance_estimated and math.isfinite(
            self.mde)

    @property
    def text(self) -> str:
        """The verdict as the reports print it (:func:`render`)."""
        return render(self)

    def __str__(self) -> str:
        return render(self)

    def to_dict(self) -> dict[str, Any]:
        """Plain fields (``kind`` as its string value, ``text`` added); floats may be NaN/inf."""
        d = asdict(self)
        d["kind"] = self.kind.value
        d["labels"] = dict(self.labels)
        d["text"] = render(self)
        return d


def fmt_mde(v: Verdict) -> str:
    """The MDE as printed: ``9.0%`` (ratios, relative) or ``0.12 pp`` (error rates and other
    fractions, absolute); ``∞`` when nothing is detectable."""
    if v.effect == "ratio":
        return fmt_pct(100.0 * v.mde)
    if not math.isfinite(v.mde):
        return "∞"
    if v.unit == "%":
        return "0 pp" if v.mde == 0 else f"{100.0 * v.mde:.2g} pp"
    return "0" if v.mde == 0 else f"{v.mde:.3g}{(' ' + v.unit) if v.unit else ''}"


def render(v: Verdict) -> str:
    """The verdict's words, as every table and sentence shows them.

    ``faster``, ``slower, within ±2%``, ``slower, possibly within ±2%``, ``equivalent (±2%)``,
    ``~ (MDE 9.0%)``, ``~ (MDE ≥ 14%)`` (a lower bound), ``~ (all trials 0%, MDE 0 pp)``,
    ``insufficient trials (need ≥ 6 blocks)``,
    ``insufficient trials (need ≥ 4 per arm; between-run variance not estimated, MDE ≥ 1.2%)``,
    ``insufficient trials (19 of 20 trials tied: smallest possible p 1.00)``,
    ``not decidable within the budget: MDE 14% > target 5%``,
    ``omitted (no values)``, ``not run: <reason>``, ``no valid trial: <reason>``,
    ``client-bound: <evidence>``. A
    group-sequential row adds how many blocks it rests on: ``faster (sequential, 8 of 12
    blocks; stopped early at look 1 of 3; estimate bias-adjusted)``, ``~ (MDE 9.0%;
    sequential, 12 of 12 blocks)``, and when its looks disagree ``slower (sequential, 12 of
    12 blocks; drift between looks)``.
    """
    text = _render(v)
    if not v.sequential or v.kind.without_figures:
        return text
    bit = f"sequential, {v.blocks_run} of {v.blocks_max} blocks"
    if v.bias_adjusted:
        bit += f"; stopped early at look {v.look} of {v.looks}; estimate bias-adjusted"
    if v.drift:
        bit += "; drift between looks"
    if text.endswith(")"):
        return f"{text[:-1]}; {bit})"
    return f"{text} ({bit})"


def _apart(x: float, y: float) -> tuple[str, str]:
    """Two percentages printed so that they read as different numbers when ``x > y`` (``5.2%``
    and ``5.0%``; ``5.04%`` and ``5.00%`` where one decimal would print both as ``5.0%``)."""
    a, b = fmt_pct(x), fmt_pct(y)
    if a != b or not (math.isfinite(x) and math.isfinite(y)) or x == y:
        return a, b
    for digits in range(2, 7):
        a, b = f"{x:.{digits}f}%", f"{y:.{digits}f}%"
        if a != b:
            break
    return a, b


def _render(v: Verdict) -> str:
    k = v.kind
    mtxt = f"±{100 * v.margin:g}%" if math.isfinite(v.margin) else ""
    if k is VerdictKind.NOT_RUN:
        return f"not run: {v.reason}" if v.reason else "not run"
    if k is VerdictKind.NO_VALID_TRIAL:
        return f"no valid trial: {v.reason}" if v.reason else "no valid trial"
    if k is VerdictKind.CLIENT_BOUND:
        return f"client-bound: {v.reason}" if v.reason else "client-bound"
    if k is VerdictKind.OMITTED:
        return "omitted (no values)"
    if k.directional:
        return f"{v.word}, {v.qualifier} {mtxt}" if v.qualifier else v.word
    if k is VerdictKind.EQUIVALENT:
        return f"equivalent ({mtxt})"
    if k is VerdictKind.UNDECIDABLE:
        mde, target = _apart(100.0 * v.mde_budget, 100.0 * v.target_mde)
        cp = (f", chance of a decision at the effect so far {v.conditional_power:.0%}"
              if math.isfinite(v.conditional_power) else "")
        return f"not decidable within the budget: MDE {mde} > target {target}{cp}"
    if k is VerdictKind.INSUFFICIENT:
        unit = "blocks" if v.paired else "per arm"
        if v.n_tied:
            unit = "blocks that differ"
        extra = []
        if v.n_tied:
            extra.append(f"{v.n_tied} of {v.n_baseline + v.n_tied} tied")
        if not v.between_run_variance_estimated:
            bit = "between-run variance not estimated"
            if math.isfinite(v.mde):
                bit += f", MDE {'≥ ' if v.mde_is_lower_bound else ''}{fmt_mde(v)}"
            extra.append(bit)
        need = f"need ≥ {v.need} {unit}" if v.need is not None else "too few trials"
        if v.reason:  # not the trial count: e.g. ties (issue 19, item 10)
            need = v.reason
        return f"insufficient trials ({'; '.join([need, *extra])})"
    # no difference detected
    bits = []
    if math.isfinite(v.all_equal):
        bits.append(f"all trials {fmt_value(v.all_equal, v.unit)}")
    if not math.isnan(v.mde):
        bits.append(f"MDE {'≥ ' if v.mde_is_lower_bound else ''}{fmt_mde(v)}")
    return f"~ ({', '.join(bits)})" if bits else "~"


def decide(
    info: MetricInfo,
    *,
    status: str,
    alpha: float,
    margin: float,
    correction: str,
    family_size: int,
    power: float,
    effect: float = _NAN,
    lo: float = _NAN,
    hi: float = _NAN,
    tost_lo: float = _NAN,
    tost_hi: float = _NAN,
    achieved: float = _NAN,
    p_raw: float = _NAN,
    p_adj: float = _NAN,
    min_p: float = _NAN,
    best_adjusted: float = _NAN,
    mde: float = _NAN,
    need: int | None = None,
    paired: bool = False,
    n_baseline: int = 0,
    n_arm: int = 0,
    n_tied: int = 0,
    all_equal: float = _NAN,
    arm: str = "",
    baseline: str = "",
    labels: Mapping[str, Any] | None = None,
    blocks_run: int = 0,
    blocks_max: int = 0,
    reason: str = "",
    drift: bool = False,
    p_tost: float = _NAN,
    p_tost_adj: float = _NAN,
    effect_unadjusted: float = _NAN,
    look: int = 0,
    looks: int = 0,
    target_mde: float = _NAN,
    mde_budget: float = _NAN,
    conditional_power: float = _NAN,
    mde_is_lower_bound: bool = False,
) -> Verdict:
    """Decide one row's verdict from its numbers.

    Parameters
    ----------
    info:
        The metric (direction, scale, words).
    status:
        ``"ok"`` (estimated and tested), ``"single"`` (one trial per arm, within-run
        interval only), ``"too_few"`` (no estimate possible) or ``"omitted"`` (no values).
    alpha, margin, correction, family_size, power:
        Level, practical margin (relative), multiplicity correction, tested rows in the
        family, power at which ``mde`` is quoted.
    effect, lo, hi, tost_lo, tost_hi, achieved:
        The effect on the comparison scale (log ratio for ratio metrics, difference
        otherwise), its interval at the reported confidence (achieved level ``achieved``)
        and its ``1 - 2 alpha`` interval for the equivalence test.
    p_raw, p_adj, min_p, best_adjusted:
        Raw and adjusted p-values; the design's smallest p-value and the smallest adjusted
        p-value the family allows (the guard: not below ``alpha`` means "insufficient").
    mde:
        Minimum detectable effect on the comparison scale (log shift or difference); for
        ``"single"`` the within-run lower bound.
    need:
        Trials per arm (blocks) needed for significance to be possible.
    n_baseline, n_arm, n_tied, paired, all_equal:
        Trial counts (tied blocks left out), the design, and for zero-spread rows the
        common value.
    blocks_run, blocks_max:
        Group-sequential analysis: blocks of the run used and the design's maximum (0: fixed).
    reason:
        Why the guard says "insufficient" when it is not the trial count (e.g. ties that
        keep the exact p-value from going below alpha); printed instead of the trials needed.
    drift:
        Group-sequential analysis: the looks' repeated intervals do not overlap (the row is
        then never "equivalent").
    p_tost, p_tost_adj:
        The TOST p-value and its family-adjusted value: equivalence is ``p_tost_adj <
        alpha``. When ``p_tost_adj`` is NaN (not given), the unadjusted rule for one row:
        the ``1 - 2 alpha`` interval inside the margin.
    effect_unadjusted, look, looks:
        Group-sequential row analysed before its last look: ``effect`` is then the
        bias-adjusted estimate and ``effect_unadjusted`` the plain one; ``look`` of ``looks``.
    target_mde, mde_budget, conditional_power:
        Group-sequential analysis with a target MDE (relative): a row neither significant nor
        equivalent whose ``mde_budget`` (relative: the MDE reachable by the design's last
        look) exceeds ``target_mde`` and whose ``conditional_power`` (its chance of a decision
        by the last look at the effect seen so far; NaN at the last look) is not at least
        :data:`FUTILITY_POWER` is ``UNDECIDABLE`` (futility)
        instead of "~" or "insufficient"; NaN (default): no target.
    mde_is_lower_bound:
        The MDE leaves out a variance component the design cannot estimate (a run against
        another without the run-level variance): the verdict says "MDE ≥ x%".
    """
    v = _decide(info, status=status, alpha=alpha, margin=margin, correction=correction, family_size=family_size,
                power=power, effect=effect, lo=lo, hi=hi, tost_lo=tost_lo, tost_hi=tost_hi, achieved=achieved,
                p_raw=p_raw, p_adj=p_adj, min_p=min_p, best_adjusted=best_adjusted, mde=mde, need=need, paired=paired,
                n_baseline=n_baseline, n_arm=n_arm, n_tied=n_tied, all_equal=all_equal, arm=arm, baseline=baseline,
                labels=labels, blocks_run=blocks_run, blocks_max=blocks_max, reason=reason, drift=drift, p_tost=p_tost,
                p_tost_adj=p_tost_adj, effect_unadjusted=effect_unadjusted, look=look, looks=looks,
                target_mde=target_mde, mde_budget=mde_budget, conditional_power=conditional_power)
    return replace(v, mde_is_lower_bound=True) if mde_is_lower_bound and not v.mde_is_lower_bound else v


class _Row(TypedDict):
    """The fields of every :class:`Verdict` that :func:`_decide` builds (its row and design)."""

    arm: str
    baseline: str
    metric: str
    labels: dict[str, Any]
    better: str
    effect: str
    unit: str
    correction: str
    family_size: int
    alpha: float
    margin: float
    mde_power: float
    paired: bool
    n_baseline: int
    n_arm: int
    n_tied: int
    blocks_run: int
    blocks_max: int
    drift: bool


class _Numbers(TypedDict):
    """The estimate, interval (on the metric's own scale: ratio or difference), p-values and
    sequential figures of a :class:`Verdict` with data."""

    estimate: float
    ci_lo: float
    ci_hi: float
    confidence: float
    p_raw: float
    p_adj: float
    min_p: float
    p_tost: float
    p_tost_adj: float
    look: int
    looks: int
    bias_adjusted: bool
    estimate_unadjusted: float
    target_mde: float
    mde_budget: float
    conditional_power: float


def _decide(info: MetricInfo, *, status: str, alpha: float, margin: float, correction: str, family_size: int,
            power: float, effect: float, lo: float, hi: float, tost_lo: float, tost_hi: float, achieved: float,
            p_raw: float, p_adj: float, min_p: float, best_adjusted: float, mde: float, need: int | None, paired: bool,
            n_baseline: int, n_arm: int, n_tied: int, all_equal: float, arm: str, baseline: str,
            labels: Mapping[str, Any] | None, blocks_run: int, blocks_max: int, reason: str, drift: bool,
            p_tost: float, p_tost_adj: float, effect_unadjusted: float, look: int, looks: int, target_mde: float,
            mde_budget: float, conditional_power: float) -> Verdict:
    """:func:`decide`'s rules (its parameters)."""
    log = info.scale == "log"
    base = _Row(
        arm=arm, baseline=baseline, metric=info.name, labels=dict(labels or {}), better=info.better,
        effect="ratio" if log else "difference", unit=info.unit, correction=correction,
        family_size=int(family_size), alpha=float(alpha), margin=float(margin), mde_power=float(power),
        paired=bool(paired), n_baseline=int(n_baseline), n_arm=int(n_arm), n_tied=int(n_tied),
        blocks_run=int(blocks_run), blocks_max=int(blocks_max), drift=bool(drift),
    )
    if status == "omitted":
        return Verdict(VerdictKind.OMITTED, **base)
    if status == "too_few":
        return Verdict(VerdictKind.INSUFFICIENT, need=need, **base)
    conv = math.exp if log else (lambda x: x)

    def scale_mde(x: float) -> float:
        return math.expm1(x) if log and math.isfinite(x) else x

    nums = _Numbers(estimate=conv(effect), ci_lo=conv(lo), ci_hi=conv(hi), confidence=float(achieved),
                p_raw=float(p_raw), p_adj=float(p_adj), min_p=float(min_p), p_tost=float(p_tost),
                p_tost_adj=float(p_tost_adj), look=int(look), looks=int(looks),
                bias_adjusted=not math.isnan(effect_unadjusted), estimate_unadjusted=conv(effect_unadjusted),
                target_mde=float(target_mde), mde_budget=float(mde_budget),
                conditional_power=float(conditional_power))
    futile = bool(log and math.isfinite(target_mde) and not math.isnan(mde_budget) and mde_budget > target_mde
                  and not conditional_power >= FUTILITY_POWER)
    if status == "single":
        return Verdict(VerdictKind.INSUFFICIENT, need=need, mde=scale_mde(mde), mde_is_lower_bound=True,
                       between_run_variance_estimated=False, **nums, **base)
    lo_m, hi_m = 1.0 / (1.0 + margin), 1.0 + margin
    if math.isnan(p_tost_adj):
        equiv = bool(
            log and margin > 0 and not drift and math.isfinite(tost_lo) and math.isfinite(tost_hi)
            and lo_m <= math.exp(tost_lo) and math.exp(tost_hi) <= hi_m
        )
    else:  # the TOST p-value adjusted over the family
        equiv = bool(log and margin > 0 and not drift and p_tost_adj < alpha)
    # significance first: a row whose adjusted p is below alpha is decided, whatever the
    # guard says (the guard's best case assumes every row of the family at the design's
    # floor, which Holm's step-down can beat: issue 19, item 4)
    sig = bool(p_adj < alpha)
    if sig:
        # the word follows the interval: the side of no change it lies on (the estimate only
        # where the interval holds no change, e.g. a confidence other than 1 - alpha)
        good = info.is_good(lo if lo > 0 else hi if hi < 0 else effect)
        kind = VerdictKind.FASTER if good else VerdictKind.SLOWER
        qualifier = ""
        if log and margin > 0:
            inside = lo_m <= math.exp(lo) and math.exp(hi) <= hi_m
            outside = math.exp(hi) < lo_m or math.exp(lo) > hi_m
            qualifier = "" if outside else ("within" if inside else "possibly within")
        return Verdict(kind, word=info.good if good else info.bad, significant=True, practical=qualifier == "",
                       equivalent=equiv, qualifier=qualifier, mde=scale_mde(mde), **nums, **base)
    if not best_adjusted < alpha:
        if equiv:
            return Verdict(VerdictKind.EQUIVALENT, equivalent=True, mde=scale_mde(mde), **nums, **base)
        if futile:
            return Verdict(VerdictKind.UNDECIDABLE, mde=scale_mde(mde), **nums, **base)
        return Verdict(VerdictKind.INSUFFICIENT, need=need, mde=math.inf, reason=reason, **nums, **base)
    if equiv:
        return Verdict(VerdictKind.EQUIVALENT, equivalent=True, mde=scale_mde(mde), **nums, **base)
    if futile:
        return Verdict(VerdictKind.UNDECIDABLE, mde=scale_mde(mde), **nums, **base)
    return Verdict(VerdictKind.NO_DIFFERENCE, mde=scale_mde(mde), all_equal=float(all_equal), **nums, **base)
