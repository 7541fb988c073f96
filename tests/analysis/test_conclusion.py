"""Conclusion phrases from typed verdicts (``benchlib.analysis.conclusion``, pure): numbers
from the verdict's fields, decisions from its kind, never from its text."""

from __future__ import annotations

import math

from benchlib.analysis import conclusion as say
from benchlib.stats.verdict import Verdict, VerdictKind


def _v(kind: VerdictKind, estimate: float = 1.62, **kw: object) -> Verdict:
    base = dict(arm="go", baseline="actix", metric="throughput_rps", effect="ratio", estimate=estimate,
                ci_lo=estimate * 0.9, ci_hi=estimate * 1.1, p_adj=0.0123, correction="holm", family_size=6,
                margin=0.02, word={VerdictKind.FASTER: "faster", VerdictKind.SLOWER: "slower"}.get(kind, ""),
                significant=kind.directional, practical=kind.directional)
    base.update(kw)
    return Verdict(kind, **base)  # type: ignore[arg-type]


def test_phrases_take_every_number_from_the_verdict() -> None:
    fast = _v(VerdictKind.FASTER)
    assert say.ratio(fast) == "1.62× [1.46, 1.78]"
    assert say.inverse(fast) == "0.62× [0.56, 0.69]"
    assert say.p_text(fast) == "Holm-adjusted p = 0.012 over 6 rows"
    assert say.effect(fast) == "1.62× [1.46, 1.78], Holm p = 0.012 → **faster**"
    assert say.says(fast, "Go", "actix-web") == "verdict **faster**: Go served more requests per second than actix-web"
    assert say.says(_v(VerdictKind.EQUIVALENT, 1.0), "Go", "actix") == (
        "verdict **equivalent (±2%)**: Go and actix served the same rate within ±2%")
    assert say.says(fast, "gRPC", "JSON", latency=True) == "verdict **faster**: gRPC answered sooner than JSON"
    assert say.says(_v(VerdictKind.SLOWER, 1.3), "gRPC", "JSON", latency=True).endswith("gRPC answered later than JSON")
    assert say.says(_v(VerdictKind.EQUIVALENT, 1.0), "a", "b", latency=True).endswith(
        "a and b answered within ±2% of each other")


def test_decisions_come_from_the_kind() -> None:
    fast, slow = _v(VerdictKind.FASTER), _v(VerdictKind.SLOWER, 0.5)
    assert say.decided(fast) and say.direction(fast) == "up" and say.direction(slow) == "down"
    within = _v(VerdictKind.SLOWER, 0.99, qualifier="within", practical=False)
    assert not say.decided(within) and say.direction(within) == "down"
    unsure = _v(VerdictKind.INSUFFICIENT, need=8, paired=True)
    assert not say.decided(unsure) and say.direction(unsure) is None and say.estimated(unsure)
    assert say.effect(unsure).endswith("→ **insufficient trials (need ≥ 8 blocks)**")
    assert not say.decided(None) and not say.estimated(None) and say.effect(None) == "not compared"


def test_rows_not_compared_read_as_what_they_are() -> None:
    gone = Verdict.not_run("no .NET SDK", arm="dotnet-fair")
    empty = Verdict.no_valid_trial("go-fair (6 invalid)", arm="go-fair")
    assert say.effect(gone) == "not run: no .NET SDK" and say.effect(empty) == "no valid trial: go-fair (6 invalid)"
    assert not say.estimated(gone) and say.direction(empty) is None
    assert say.says(gone, "a", "b").endswith("nothing to compare")
    omitted = _v(VerdictKind.OMITTED, math.nan)
    assert say.effect(omitted) == "**omitted (no values)**"


def test_factors_multiply_and_the_largest_is_farthest_from_one() -> None:
    factors = {"build": 4.35, "framework": 0.68, "logging": 1.2}
    assert say.largest_factor(factors) == ("build", 4.35)
    assert say.largest_factor({"a": 0.2, "b": 3.0}) == ("a", 0.2)  # 1/5 is farther from 1 than 3
    assert say.product_text({"a": 2.0, "b": 0.5}) == "2.00 × 0.50 = 1.00"


def test_a_difference_effect_reads_in_its_units_not_as_a_ratio() -> None:
    more = _v(VerdictKind.SLOWER, 0.98, metric="error_rate", effect="difference", unit="%", ci_lo=0.971, ci_hi=0.99,
              word="more errors")
    assert say.difference(more) == "+98.0 pp [+97.1, +99.0]"
    assert say.effect(more) == "+98.0 pp [+97.1, +99.0], Holm p = 0.012 → **more errors**"
    ms = _v(VerdictKind.SLOWER, 1.25, effect="difference", unit="ms", ci_lo=0.5, ci_hi=math.inf)
    assert say.difference(ms) == "+1.25 ms [+0.5, ∞]"


def test_single_trial_intervals_are_labelled_within_run_everywhere() -> None:
    """Issue 19, item 3: one trial per arm gives a within-run interval (a block bootstrap of
    the requests) that excludes 1 in 59% of A/A pairs; it was printed under "[95% CI]" like
    a between-run interval. Every place that shows it (the text table, its one-line form,
    the HTML verdict table, the sentences, the conclusion phrases) now marks it
    "(within-run)"; a row with several trials per arm is unmarked."""
    import numpy as np
    import pandas as pd

    from benchlib.analysis.verdicts import verdict_sentences, verdict_table
    from benchlib.stats import compare, summarize_trial
    from benchlib.stats.simulate import trial_latencies_ms, trial_rows

    rng = np.random.default_rng(20)
    recs = []
    for arm in ("A", "B"):
        s = summarize_trial(trial_rows(trial_latencies_ms(3000, rng, phi=0.9, trial_sd=0.03), rate_rps=2000),
                            block_bootstrap=100, seed=1)
        recs.append({"condition": "c", "arm": arm, "block": 0, "position": len(recs), "seq": len(recs),
                     "valid": True, **s})
    c = compare(pd.DataFrame(recs), baseline="A", metrics=("p50_ms",))
    v = c.verdicts[0]
    assert not v.between_run_variance_estimated and v.ci_lo < v.ci_hi
    row = next(line for line in c.to_text().splitlines() if line.startswith("p50"))
    assert "] (within-run)" in row, row
    assert "] (within-run) (" in c.one_line(0), c.one_line(0)
    assert verdict_table(c)["arm / baseline [95% CI]"].iloc[0].endswith("] (within-run)")
    assert "one trial per arm, so nothing is decided across runs (within-run interval [" in verdict_sentences(c)
    assert say.ratio(v).endswith("] (within-run)") and say.inverse(v).endswith("] (within-run)")
    assert say.effect(v).startswith("1.09× [1.01, 1.18] (within-run), no test across runs → **insufficient trials")
    # several trials per arm: no mark
    assert "within-run" not in say.ratio(_v(VerdictKind.FASTER))


def test_not_decidable_within_the_budget_reads_alike_in_every_table_and_sentence() -> None:
    """Planning gaps, item 3: an ``UNDECIDABLE`` row prints "not decidable within the budget:
    MDE x% > target y%" (its MDE by the last look) wherever a verdict is shown: the comparison's
    text and one-line forms, the report's verdict table, the sentences of a conclusion and the
    site's census. Parent commit: the sentence printed the MDE of the blocks so far beside the
    verdict's projection (two figures for one row), the one-line form added a second "MDE(80%)",
    and the site's census counted the row as "other"."""
    import re

    import numpy as np

    from benchlib.analysis.verdicts import verdict_sentences, verdict_table
    from benchlib.publish.site.data import VerdictRow, verdict_summary
    from benchlib.stats import compare
    from benchlib.stats.sequential import SequentialDesign
    from benchlib.stats.simulate import simulate_summaries

    df = simulate_summaries(np.random.default_rng(3), arms={"A": 1.0, "B": 1.0}, trials=8, n_req=2000, phi=0.9,
                            trial_sd=0.2)
    design = SequentialDesign.every(16, first=8, step=4, target_mde=0.03)
    comp = compare(df, baseline="A", metrics=("p50_ms",), sequential=design, shift=False)
    v = comp.verdicts[0]
    assert v.kind is VerdictKind.UNDECIDABLE and v.mde != v.mde_budget  # before the last look: a projection
    words = re.match(r"not decidable within the budget: MDE \S+% > target 3\.0%", v.text)
    assert words is not None and v.mde_in_text
    phrase = words.group(0)
    assert phrase in comp.to_text()
    line = comp.one_line(0)
    assert phrase in line and "MDE(80%)" not in line
    assert any(phrase in str(x) for x in verdict_table(comp)["verdict"])
    text = verdict_sentences(comp)
    assert phrase in text and len(re.findall(r"MDE \S+%", text)) == 1 and "no difference" not in text
    for said in (say.sentence(v, "B", "A"), say.says(v, "B", "A"), say.effect(v), say.undecided({"B": v}),
                 say.whole_sentence("the claim", v, "B", "A")):
        assert phrase in said, said
    row = VerdictRow("comparison", "", "B", "A", "p50_ms", v.estimate, v.ci_lo, v.ci_hi, v.text, v.kind.value)
    assert verdict_summary([row]) == "1 not decidable within the budget"
