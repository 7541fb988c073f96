"""Conclusions from verdict data: the phrases a study's conclusion is assembled from (pure).

A conclusion looks its rows up as typed :class:`~benchlib.stats.verdict.Verdict` objects
(:meth:`benchlib.analysis.questions.Answer.verdict`) and writes them with these helpers, so
no conclusion parses verdict text or reads table columns: every number comes from the
verdict (estimate, interval, adjusted p-value, family size), every decision from its kind.
``None`` (no such row) and ``not run`` / ``no valid trial`` verdicts are handled by each
helper.

**The rule** (``docs/studies.md``, "Words follow verdicts"): a sentence about an effect is
written by :func:`sentence`, whose template is chosen by the verdict's kind
(:data:`TEMPLATES`, one per :class:`~benchlib.stats.verdict.VerdictKind` member). Only a
directional verdict supports a direction or a factor ("served 1.62× ... **faster**"); only an
equivalence verdict supports "no difference beyond ±m"; a "~" row is "not decided at this
design (MDE x%)", never "no difference" or "does not hold up"; insufficient, single-trial
(within-run), not-run, no-valid-trial and omitted rows say that they decide nothing.
Sentences that cite several rows (a decomposition, an "in short") use :func:`undecided` to
name the rows that keep them from being said, and :func:`all_directional` /
:func:`kinds_allow` to check before they state a factor or a direction.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import TypeGuard

from benchlib.analysis.display import metric_words
from benchlib.analysis.formats import fixed, inverse_ci, ratio_ci, within_run
from benchlib.core.errors import ParameterError
from benchlib.stats.multiplicity import CORRECTION_LABELS
from benchlib.stats.verdict import Verdict, VerdictKind, fmt_mde

__all__ = ["TEMPLATES", "all_directional", "decided", "difference", "direction", "effect", "estimated", "inverse",
           "factors_sentence", "kinds_allow", "largest_factor", "p_text", "product_text", "ratio", "says", "sentence",
           "undecided", "whole_sentence"]


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
    if v.kind in (VerdictKind.NOT_RUN, VerdictKind.NO_VALID_TRIAL, VerdictKind.CLIENT_BOUND):
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
    elif k is VerdictKind.UNDECIDABLE:
        core = (f"the budget's blocks cannot resolve a difference of {100 * v.target_mde:.3g}% here, so this "
                "question stopped spending blocks (which says nothing about whether they differ)")
    elif k in (VerdictKind.NOT_RUN, VerdictKind.NO_VALID_TRIAL):
        core = "nothing to compare"
    elif k is VerdictKind.CLIENT_BOUND:
        core = "the client, not the server, set a rate here, so this machine cannot tell"
    elif k is VerdictKind.NO_DIFFERENCE:
        core = "not decided at this design"
    else:
        core = "not compared"
    return f"verdict **{v.text}**: {core}"


def largest_factor(factors: Mapping[str, float]) -> tuple[str, float]:
    """The factor farthest from 1 on the log scale (a ratio and its reciprocal weigh alike)."""
    name = max(factors, key=lambda k: abs(math.log(factors[k])) if factors[k] > 0 else math.inf)
    return name, factors[name]


def product_text(factors: Mapping[str, float], digits: int = 2) -> str:
    """``1.20 × 4.35 × 0.68 = 3.55``."""
    return " × ".join(fixed(x, digits) for x in factors.values()) + f" = {fixed(math.prod(factors.values()), digits)}"


# -- sentences keyed by the verdict's kind ---------------------------------------------------------

def _words(v: Verdict, what: str) -> str:
    return what or ("requests per second" if v.metric.endswith("_rps") else metric_words(v.metric))


def _interval(v: Verdict) -> str:
    """The interval without a point estimate (for rows that decide nothing)."""
    if not (math.isfinite(v.ci_lo) or math.isfinite(v.ci_hi)):
        return ""
    iv = "within-run interval" if not v.between_run_variance_estimated else "interval"
    if v.effect == "ratio":
        return f"{iv} [{fixed(v.ci_lo, 2)}, {fixed(v.ci_hi, 2)}]"
    inside = difference(v).split(" [", 1)[1].split("]", 1)[0]
    return f"{iv} [{inside}]"


def _directional(v: Verdict, arm: str, baseline: str, what: str) -> str:
    size = difference(v) if v.effect == "difference" else ratio(v)
    claim = (f"{arm}'s {_words(v, what)} differed from {baseline}'s by {size}" if v.effect == "difference" else
             f"{arm}'s {_words(v, what)} was {size} {baseline}'s")
    return f"{claim} ({p_text(v)}): **{v.text}**"


def _equivalent(v: Verdict, arm: str, baseline: str, what: str) -> str:
    return (f"{arm} and {baseline}: no difference beyond ±{100 * v.margin:g}% in {_words(v, what)} "
            f"({_interval(v) or 'equivalence test'}, equivalence test adjusted over the family): **{v.text}**")


def _not_decided(v: Verdict, arm: str, baseline: str, what: str) -> str:
    bits = [x for x in (_interval(v),) if x]
    mde = f"MDE {fmt_mde(v)}" if not math.isnan(v.mde) else "MDE not known"
    return (f"{arm} against {baseline}, {_words(v, what)}: not decided at this design ({mde}"
            + "".join(f"; {b}" for b in bits) + f"): **{v.text}**")


def _insufficient(v: Verdict, arm: str, baseline: str, what: str) -> str:
    if not v.between_run_variance_estimated:
        iv = _interval(v)
        return (f"{arm} against {baseline}, {_words(v, what)}: one trial per arm, so nothing is decided across runs"
                + (f" ({iv})" if iv else "") + f": **{v.text}**")
    return f"{arm} against {baseline}, {_words(v, what)}: too few trials to decide: **{v.text}**"


def _undecidable(v: Verdict, arm: str, baseline: str, what: str) -> str:
    # the verdict's own words carry the numbers ("not decidable within the budget: MDE x% >
    # target y%", the MDE by the last look), as every table prints them
    return (f"{arm} against {baseline}, {_words(v, what)}: this question stopped spending blocks, which says "
            f"nothing about whether they differ: **{v.text}**")


def _client_bound(v: Verdict, arm: str, baseline: str, what: str) -> str:
    # the evidence (which arm, its client CPU, its rate as a lower bound) is the verdict's own text
    return (f"{arm} against {baseline}, {_words(v, what)}: not decidable on this machine, since benchlib's client, "
            f"not the server, set a rate in this row: **{v.text}**")


def _omitted(v: Verdict, arm: str, baseline: str, what: str) -> str:
    return f"{arm} against {baseline}, {_words(v, what)}: not compared (no values)"


def _missing(v: Verdict, arm: str, baseline: str, what: str) -> str:
    return f"{arm} against {baseline}: not compared ({v.text})"


Template = Callable[[Verdict, str, str, str], str]
#: one sentence template per verdict kind (a kind without one is refused by :func:`sentence`;
#: ``tests/analysis/test_conclusion.py`` checks every member of the enum has one)
TEMPLATES: Mapping[VerdictKind, Template] = {
    VerdictKind.FASTER: _directional,
    VerdictKind.SLOWER: _directional,
    VerdictKind.EQUIVALENT: _equivalent,
    VerdictKind.NO_DIFFERENCE: _not_decided,
    VerdictKind.INSUFFICIENT: _insufficient,
    VerdictKind.UNDECIDABLE: _undecidable,
    VerdictKind.OMITTED: _omitted,
    VerdictKind.NOT_RUN: _missing,
    VerdictKind.NO_VALID_TRIAL: _missing,
    VerdictKind.CLIENT_BOUND: _client_bound,
}


def sentence(v: Verdict | None, arm: str, baseline: str, what: str = "") -> str:
    """One row in a sentence, by its kind's template (:data:`TEMPLATES`): ``Go's requests per
    second was 1.62× [1.46, 1.78] actix-web's (Holm-adjusted p = 0.012 over 6 rows): **faster**``;
    ``Go and actix-web: no difference beyond ±2% in requests per second (...)``; ``Go against
    actix-web, requests per second: not decided at this design (MDE 59%; interval [0.61, 2.9])``;
    ``... one trial per arm, so nothing is decided across runs``; ``... too few trials to decide``;
    ``Go against .NET: not compared (not run: no .NET SDK)``. ``what``: the metric in words
    (default: from the metric's name); ``None``: ``... not compared``.

    Raises
    ------
    ParameterError
        For a kind without a template (add one to :data:`TEMPLATES`).
    """
    if v is None:
        return f"{arm} against {baseline}: not compared"
    template = TEMPLATES.get(v.kind)
    if template is None:
        raise ParameterError(f"no sentence template for verdict kind {v.kind.value!r}; templates exist for "
                             f"{', '.join(k.value for k in TEMPLATES)}: add one to benchlib.analysis.conclusion.TEMPLATES")
    return template(v, arm, baseline, what)


def all_directional(*rows: Verdict | None) -> bool:
    """Every cited row has a directional verdict beyond the margin (:func:`decided`): only then
    may a sentence state a factor, a direction or a decomposition built on them."""
    return all(decided(v) for v in rows)


def kinds_allow(rows: Iterable[Verdict | None], *kinds: VerdictKind) -> bool:
    """Every cited row's kind is one of ``kinds``."""
    return all(v is not None and v.kind in kinds for v in rows)


def undecided(named: Mapping[str, Verdict | None]) -> str:
    """Why a sentence citing several rows cannot be said: ``"not decided at this design: the
    fair comparison (~ (MDE 59%)), the build mode (insufficient trials ...)"``; "" when every
    row is decided."""
    bits = [f"{name} ({v.text if v is not None else 'not compared'})" for name, v in named.items() if not decided(v)]
    return "not decided at this design: " + ", ".join(bits) if bits else ""


def whole_sentence(name: str, whole: Verdict | None, arm: str, baseline: str, what: str = "") -> str:
    """What one row says about a claim as a whole (e.g. the original's Rust/Go difference),
    by its kind: decided → its direction and size; equivalent → "no difference beyond ±m:
    {name} is not reproduced here"; every other kind → {name} "is neither confirmed nor
    refuted at this design" (with the row's own words)."""
    if decided(whole):
        return f"{name}: {sentence(whole, arm, baseline, what)}"
    if whole is not None and whole.kind is VerdictKind.EQUIVALENT:
        return f"{name} is not reproduced here: {sentence(whole, arm, baseline, what)}"
    return f"{name} is neither confirmed nor refuted at this design: {sentence(whole, arm, baseline, what)}"


def factors_sentence(name: str, whole: Verdict | None, parts: Iterable[tuple[str, Verdict | None, int]]) -> str:
    """A ratio read as the product of factors that each have their own row (``parts``: name,
    verdict, exponent +1 or -1). Factors are stated only when the whole and every part are
    decided (:func:`all_directional`), with the largest named; otherwise the sentence names
    the decided factors and the rows that keep the rest from being said."""
    parts = list(parts)
    if not decided(whole):
        return (f"{name} is not split into factors: the whole is not decided "
                f"({whole.text if whole is not None else 'not compared'}).")
    assert whole is not None
    est = {n: (v.estimate ** e) for n, v, e in parts if decided(v)}
    said = "; ".join(f"{n} {fixed(x, 2)}× (**{v.text}**)" for n, v, e in parts if decided(v) and (x := v.estimate ** e))
    if all_directional(*(v for _, v, _ in parts)):
        big, x = largest_factor(est)
        return (f"{name}, {ratio(whole)} (**{whole.text}**), is the product of: {said} "
                f"(product {fixed(math.prod(est.values()), 2)}×); the largest factor is **{big}** ({fixed(x, 2)}×).")
    rest = undecided({n: v for n, v, _ in parts})
    return (f"{name}, {ratio(whole)} (**{whole.text}**): "
            + (f"decided factors: {said}; " if said else "") + f"{rest}, so which part dominates is not decided.")
