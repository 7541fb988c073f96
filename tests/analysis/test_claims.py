"""The seeds' claims as typed questions (issue 38, item 1): the registry's claim rows, their arms in
each study's designs, and how a run answers them (benchlib.analysis.claims; pure, on summaries)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis.claims import (
    NOT_IN_RUN,
    NOT_RUN,
    Claim,
    ClaimAnswer,
    answer_claims_of_run,
    claims_markdown,
    load_claims,
    save_claims,
)
from benchlib.analysis.reference import load_reference
from benchlib.analysis.studies.registry import STUDIES, Study
from benchlib.core.errors import ParameterError

#: the claim rows issue 38 asks for, as the registry lists them: study -> (key, variant, claimed ratio)
EXPECTED = {
    "01_rest_mongo_go_dotnet_rust": [("helloWorld-faithful", "faithful", 1.40), ("helloWorld-fair", "fair", 1.40),
                                     ("users-faithful", "faithful", 0.88), ("users-fair", "fair", 0.88)],
    "02_iris_vs_kestrel": [("kestrel", "faithful", 13.32), ("actix", "nearest", 13.32)],
    "03_fastcgi_nginx": [("dotnet-c20", "faithful", 1.0), ("go-c20", "nearest", 1.0), ("dotnet-c400", "faithful", 1.0),
                         ("go-c400", "nearest", 1.0)],
    "04_rust_vs_go_logging": [("faithful", "faithful", 2.40), ("fair", "fair", 1.91)],
    "05_grpc_vs_json": [(f"{lang}-{pl}", "faithful" if lang == "dotnet" else "nearest", r)
                        for lang in ("dotnet", "go", "rust", "python") for pl, r in (("small", 4.42), ("huge", 3.47))],
}


def test_the_registry_lists_the_claim_rows_of_issue_38() -> None:
    got = {s.id: [(c.key, c.variant, round(c.claimed, 2)) for c in s.claims] for s in STUDIES if s.claims}
    assert got == EXPECTED
    assert all(not s.claims for s in STUDIES if not s.seed)


@pytest.mark.parametrize("entry", [s for s in STUDIES if s.claims], ids=lambda s: s.id)
def test_each_claim_asks_arms_of_its_studys_full_design_and_the_number_of_its_reference(entry: Study) -> None:
    d = entry.design(entry.parameters.read(full=True))
    arms = {a.name for a in d.experiment.arms}
    conditions = {c.name for c in d.experiment.conditions}
    ref = load_reference(entry.id[:2])
    for c in entry.claims:
        assert {c.numerator, c.denominator} <= arms, (c.key, sorted(arms))
        assert c.condition in conditions, c.key
        assert c.reference.startswith("data/reference/") and not (c.variant == "nearest") == (not c.nearest)
        nums = {round(float(x), 2) for col in ref.columns if ref[col].dtype.kind in "fi" for x in ref[col].dropna()}
        for figure in [x for x in c.reference.replace(",", "").split() if x.replace(".", "").isdigit()]:
            assert round(float(figure), 2) in nums, (c.key, figure)  # every number is the original's


def _summaries(ratio: float, *, blocks: int = 10, client_cpu: float | None = None) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rows = []
    for b in range(blocks):
        level = rng.normal(0, 0.2)
        for arm, r in (("a", ratio), ("b", 1.0)):
            v = math.exp(level) * r * math.exp(rng.normal(0, 0.02))
            rows.append({"condition": "closed", "arm": arm, "block": b, "valid": True, "status": "ok", "reason": None,
                         "throughput_rps": 1000 * v, "server_cpu_us_per_req": 100 / v,
                         "client_cpu": client_cpu if client_cpu is not None else 0.3})
    return pd.DataFrame(rows)


def _claim(**kw: object) -> Claim:
    base = dict(key="k", label="A / B throughput", original="\"A is twice B\"", claimed=2.0,
                reference="data/reference/x.csv", numerator="a", denominator="b", metric="throughput_rps",
                condition="closed")
    return Claim(**{**base, **kw})  # type: ignore[arg-type]


def test_a_run_answers_its_claims_and_says_what_did_not_run(tmp_path) -> None:
    claims = [_claim(), _claim(key="gone", numerator="c"), _claim(key="left", numerator="d")]
    got = answer_claims_of_run(claims, _summaries(2.3), arms=["a", "b", "c"], unavailable={"c": "no dotnet toolchain"})
    assert [a.outcome for a in got] == ["holds", NOT_RUN, NOT_IN_RUN]
    assert got[0].family == 1 and got[0].lo <= got[0].ratio <= got[0].hi and got[0].answered_on == "throughput_rps"
    assert got[1].outcome_text() == "not run: c: no dotnet toolchain"
    # a table row keeps each arm's reason, not its how-to (the report's claim table has it whole)
    long = replace(got[1], why="c: no dotnet toolchain (install the .NET 8 SDK); e: no dotnet toolchain (install it)")
    assert long.outcome_text() == "not run: c: no dotnet toolchain; e: no dotnet toolchain"
    save_claims(got, tmp_path)
    back = load_claims(tmp_path)
    assert [a.outcome for a in back] == [a.outcome for a in got] and back[0].ratio == pytest.approx(got[0].ratio)
    text = claims_markdown(back)
    assert "| A / B throughput |" in text and "holds" in text and "not run: c: no dotnet toolchain" in text


def test_a_client_bound_throughput_claim_is_a_bound_answered_on_cpu_per_request() -> None:
    (a,) = answer_claims_of_run([_claim()], _summaries(1.5, client_cpu=0.99), arms=["a", "b"], unavailable={})
    assert a.answered_on == "server_cpu_us_per_req" and set(a.client_bound) == {"a", "b"}
    assert a.outcome == "smaller than claimed" and "CPU time per request" in a.outcome_text()
    assert a.ratio == pytest.approx(1.5, rel=0.05)  # the inverse of the CPU ratio: the rate ratio
    assert "≥ " in claims_markdown([a]) and "client-bound" in claims_markdown([a])


def test_an_undecided_claim_prints_its_mde_against_the_claim() -> None:
    a = ClaimAnswer(_claim(), "not decided", ratio=1.9, lo=1.2, hi=2.9, mde_vs_claim=0.31)
    assert a.outcome_text() == "~ not decided at this design (MDE 31% against the claim)"


def test_a_nearest_question_says_why_it_is_the_nearest() -> None:
    with pytest.raises(ParameterError, match="why it is the nearest"):
        _claim(variant="nearest")
    with pytest.raises(ParameterError, match="variant 'other'"):
        _claim(variant="other")


def test_a_run_without_trials_reads_too_few_trials_not_an_error() -> None:
    (a,) = answer_claims_of_run([_claim()], pd.DataFrame(), arms=["a", "b"], unavailable={})
    assert a.outcome == "too few trials" and not a.decided and a.ran


@pytest.mark.parametrize("entry", [s for s in STUDIES if s.claims], ids=lambda s: s.id)
def test_every_seed_notebook_shows_its_claims_right_after_run_study(entry: Study) -> None:
    from pathlib import Path

    import nbformat

    nb = nbformat.read(str(Path(__file__).resolve().parents[2] / "notebooks" / f"{entry.id}.ipynb"), as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    at = next(i for i, src in enumerate(code) if "study = run_study(" in src)
    assert code[at + 1].strip() == "study.show_claims()"


def test_a_client_bound_claim_without_cpu_figures_keeps_its_rates_as_bounds() -> None:
    s = _summaries(2.3, client_cpu=0.99).assign(server_cpu_us_per_req=float("nan"))
    (a,) = answer_claims_of_run([_claim()], s, arms=["a", "b"], unavailable={})
    assert a.answered_on == "throughput_rps" and a.outcome == "holds" and set(a.client_bound) == {"a", "b"}
    assert a.outcome_text() == "holds (the client set the rates: a ratio of lower bounds)"
