"""Words follow verdicts (issue 24, item 1): every study's conclusion builder, fed verdicts of
one kind at a time, says only what that kind allows. Pure logic: the families are the studies'
own, the comparison is a stand-in that answers every row with a verdict of the kind under test."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pytest

from benchlib.analysis import conclusion as say
from benchlib.analysis.questions import Answer, Family
from benchlib.analysis.reference import load_reference
from benchlib.analysis.studies import a_vs_b, fastcgi_nginx, grpc_json, iris_kestrel, rest_mongo, rust_vs_go
from benchlib.analysis.studies.registry import STUDIES
from benchlib.analysis.studies.registry import study as registered
from benchlib.analysis.verdicts import verdict_sentences
from benchlib.stats.metrics import metric_info
from benchlib.stats.verdict import Verdict, VerdictKind

K = VerdictKind
#: the cases the rule names: every kind, and the single-trial (within-run) form of "insufficient"
CASES = [k.value for k in VerdictKind] + ["single_trial"]
EST = 1.37  # a point estimate no undecided sentence may print (nor its inverse, square or product)
DIRECTIONAL = re.compile(r"\b(faster|slower|sooner|later|cheaper|costlier|beats?|more requests|fewer requests|"
                         r"does not hold up|holds up|comes mostly|largest factor|in Go's favour|works? against Go|"
                         r"is the product of|served 1\.37|1\.37×|0\.73×|1\.88×)", re.I)
NO_DIFFERENCE = re.compile(r"no difference|do not differ|the same rate|equivalent", re.I)


def _verdict(case: str, arm: str, metric: str, baseline: str | None, labels: dict[str, Any]) -> Verdict:
    info = metric_info(metric)
    common = dict(arm=arm, baseline=baseline or "base", metric=metric, labels=labels, better=info.better,
                  effect="ratio" if info.scale == "log" else "difference", unit=info.unit, correction="holm",
                  family_size=8, alpha=0.05, margin=0.02, mde=0.59, mde_power=0.8, n_baseline=9, n_arm=9)
    if case == "not_run":
        return Verdict.not_run("no dotnet toolchain", arm=arm, baseline=baseline or "", metric=metric, labels=labels)
    if case == "no_valid_trial":
        return Verdict.no_valid_trial("6 invalid", arm=arm, baseline=baseline or "", metric=metric, labels=labels)
    if case == "omitted":
        return Verdict(K.OMITTED, **common)  # type: ignore[arg-type]
    nums = dict(estimate=EST, ci_lo=0.61, ci_hi=2.9, p_raw=0.3, p_adj=0.6)
    if case in ("faster", "slower"):
        good = case == "faster"
        est = EST if (info.better == "higher") == good else 1 / EST
        return Verdict(K(case), word=info.good if good else info.bad, significant=True, practical=True,  # type: ignore[arg-type]
                       **{**common, **nums, "estimate": est, "ci_lo": est * 0.95, "ci_hi": est * 1.05, "p_adj": 0.01})
    if case == "equivalent":
        return Verdict(K.EQUIVALENT, equivalent=True,  # type: ignore[arg-type]
                       **{**common, **nums, "estimate": 1.004, "ci_lo": 0.995, "ci_hi": 1.012})
    if case == "single_trial":
        return Verdict(K.INSUFFICIENT, between_run_variance_estimated=False, mde_is_lower_bound=True,  # type: ignore[arg-type]
                       **{**common, **nums, "mde": 0.05})
    if case == "insufficient":
        return Verdict(K.INSUFFICIENT, need=12, paired=True, **{**common, **nums, "mde": float("inf")})  # type: ignore[arg-type]
    if case == "no_difference":
        return Verdict(K.NO_DIFFERENCE, **{**common, **nums})  # type: ignore[arg-type]
    # a kind added after this test: no figures, so its template must still name it
    return Verdict(K(case), **common)  # type: ignore[arg-type]


@dataclass
class _OneKind:
    """Stands in for ``compare``'s result: every row a verdict of ``case``."""

    case: str
    metrics: tuple[str, ...] = ("p50_ms",)
    made: list[Verdict] = field(default_factory=list)

    def verdict(self, arm: str, metric: str, *, baseline: str | None = None, **labels: Any) -> Verdict:
        v = _verdict(self.case, arm, metric, baseline, labels)
        self.made.append(v)
        return v

    @property
    def verdicts(self) -> list[Verdict]:
        return [_verdict(self.case, arm, m, "base", {"condition": "closed"}) for arm in ("go", "py") for m in self.metrics]

    @property
    def table(self) -> pd.DataFrame:
        return pd.DataFrame({"arm": ["go"], "condition": ["closed"], "metric": ["p50_ms"],
                             "verdict_kind": [K(self.case) if self.case in K.__members__.values() else K.INSUFFICIENT]})


def _answers(fams: list[Family], case: str) -> dict[str, Answer]:
    return {f.key: Answer(f, _OneKind(case)) for f in fams}


def _study01(case: str) -> str:
    return rest_mongo.conclusion_markdown(Answer(rest_mongo.family(), _OneKind(case)), load_reference("01"))


def _study02(case: str) -> str:
    arms = [a.name for a in iris_kestrel.study_arms()]
    return iris_kestrel.conclusion_markdown(_answers(iris_kestrel.families(arms), case), load_reference("02"))


def _study03(case: str) -> str:
    arms = [a.name for a in fastcgi_nginx.study_arms()]
    return fastcgi_nginx.conclusion_markdown(_answers(fastcgi_nginx.families(arms, ["c20", "c400"]), case),
                                             load_reference("03"), pd.DataFrame(), pd.DataFrame())


def _study04(case: str) -> str:
    arms = [a.name for a in rust_vs_go.study_arms()]
    return rust_vs_go.conclusion_markdown(_answers(rust_vs_go.closed_families(arms), case), load_reference("04"))


def _study05(case: str) -> str:
    arms = [a.name for a in grpc_json.study_arms()]
    conditions = ["c1", "c16"]
    return grpc_json.conclusion_markdown(_answers(grpc_json.families(arms, conditions), case), ["go", "rust"])


def _study10(case: str) -> str:
    family = Family.against("ab", "A", ["A", "B"], conditions=[a_vs_b.CONDITION], metrics=a_vs_b.METRICS)
    return a_vs_b.conclusion_markdown(Answer(family, _OneKind(case)), "A", "B")


def _verdict_sentences(case: str) -> str:  # the quickstart's and study 90's conclusion (StudyRun.show_conclusion)
    return verdict_sentences(_OneKind(case, ("p50_ms", "p99_ms", "throughput_rps")))


#: every registered study's conclusion builder, by study id
BUILDERS: dict[str, Callable[[str], str]] = {
    "00_quickstart": _verdict_sentences, "01_rest_mongo_go_dotnet_rust": _study01, "02_iris_vs_kestrel": _study02,
    "03_fastcgi_nginx": _study03, "04_rust_vs_go_logging": _study04, "05_grpc_vs_json": _study05,
    "10_ab": _study10, "90_harness_overhead": _verdict_sentences,
}


def test_every_registered_study_has_its_conclusion_fed_every_kind() -> None:
    assert list(BUILDERS) == [s.id for s in STUDIES], "a study added to the registry needs its builder here"


def _claims(text: str) -> str:
    """The text without its questions in bold (``**Does Go beat actix-web here?**``), which
    are not this run's claims."""
    return re.sub(r"\*\*[^*]*\?\*\*", "", text)


def test_every_verdict_kind_has_a_sentence_template() -> None:
    missing = [k.value for k in VerdictKind if k not in say.TEMPLATES]
    assert not missing, f"verdict kinds without a sentence template in benchlib.analysis.conclusion: {missing}"
    for k in VerdictKind:
        text = say.sentence(_verdict(k.value, "go", "p50_ms", "py", {}), "Go", "Python")
        assert "Go" in text and "Python" in text
        if not k.directional:
            assert not DIRECTIONAL.search(text), (k, text)
        if k is not VerdictKind.EQUIVALENT:
            assert not NO_DIFFERENCE.search(text), (k, text)


def test_a_kind_without_a_template_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchlib.core.errors import ParameterError

    monkeypatch.setattr(say, "TEMPLATES", {k: t for k, t in say.TEMPLATES.items() if k is not K.EQUIVALENT})
    with pytest.raises(ParameterError, match="no sentence template for verdict kind 'equivalent'"):
        say.sentence(_verdict("equivalent", "go", "p50_ms", "py", {}), "Go", "Python")


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("study", list(BUILDERS))
def test_each_studys_conclusion_says_only_what_its_rows_kinds_allow(study: str, case: str) -> None:
    text = _claims(BUILDERS[study](case))
    assert text.strip(), "an empty conclusion"
    nothing = re.search(r"_(Too few arms ran|No comparison could)", text)
    if case not in ("faster", "slower"):
        hit = DIRECTIONAL.search(text)
        assert not hit, f"study {study}, all rows {case}: {hit.group(0)!r} in\n{text}"
    if case != "equivalent":
        hit = NO_DIFFERENCE.search(text)
        assert not hit, f"study {study}, all rows {case}: {hit.group(0)!r} in\n{text}"
    expected = {"no_difference": "not decided at this design", "insufficient": "too few trials to decide",
                "single_trial": "one trial per arm, so nothing is decided across runs", "not_run": "not run",
                "no_valid_trial": "no valid trial", "omitted": "not compared (no values)",
                "equivalent": "no difference beyond ±2%"}.get(case)
    if expected is not None and not nothing:
        assert expected in text, f"study {study}, all rows {case}: {expected!r} missing in\n{text}"
    if case in ("faster", "slower"):
        assert re.search(r"\*\*(faster|slower|cheaper|costlier|fewer errors|more errors)", text), text


def test_a_report_names_the_seeds_stacks_that_ran_and_those_that_did_not(tmp_path: Any) -> None:
    """Issue 24: a report's first lines say which of the seed's stacks ran here (.NET, the
    headline stack of four seeds, never ran on these machines), from the run's arms."""
    from types import SimpleNamespace

    from benchlib.analysis import seed_stacks_markdown
    from benchlib.core.model import Experiment
    from benchlib.store.results import Run

    exp = Experiment(study="01_rest_mongo", arms=rest_mongo.study_arms(("fair",), extras=False),
                     conditions=rest_mongo.study_conditions(), trials=2)
    run = Run("01_rest_mongo", "r1", tmp_path, trials=(SimpleNamespace(arm="go-fair"),),  # type: ignore[arg-type]
              experiment=exp, unavailable={"dotnet-fair": "no .NET SDK"})
    text = seed_stacks_markdown(run, registered("01").seed_stacks)
    assert text.startswith("**The seed's stacks in this run**: ran here: Go (gin); did not run here: "
                           ".NET (ASP.NET Core MVC) (no .NET SDK), Rust (Rocket) (no trial).")
    assert "a result for another stack is no result for it" in text
    for entry in STUDIES:  # the seeds' stacks: .NET in every seed but study 04's; none for benchlib's own studies
        dotnet = bool(entry.seed) and entry.id != "04_rust_vs_go_logging"
        assert any(".NET" in label for label in entry.seed_stacks) == dotnet, entry.id
