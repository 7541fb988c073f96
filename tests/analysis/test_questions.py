"""Questions as families (``benchlib.analysis.questions`` and ``verdicts``), on simulated
per-trial summaries: which rows are compared in one Holm family, what is said about the
others (typed ``not run`` / ``no valid trial`` verdicts in every table), and the lookups a
conclusion uses (pure)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchlib import stats
from benchlib.analysis import (
    Contrast,
    Family,
    answer_table,
    answer_tables,
    blocks_needed,
    family_markdown,
    planned_rows,
    run_family,
)
from benchlib.core.errors import ParameterError
from benchlib.stats.simulate import simulate_summaries
from benchlib.stats.verdict import Verdict, VerdictKind


def _summaries(arms: dict[str, float], conditions: tuple[str, ...] = ("c1", "c2"), trials: int = 10,
               seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    parts = [simulate_summaries(rng, arms=arms, trials=trials, trial_sd=0.02, sigma=0.1, condition=c, quantiles=(0.5,))
             for c in conditions]
    out = pd.concat(parts, ignore_index=True)
    out["status"] = "ok"
    return out


def test_a_family_against_one_baseline_is_one_holm_family_over_every_condition() -> None:
    s = _summaries({"base": 1.0, "fast": 0.5, "same": 1.0})
    fam = Family.against("all", "base", ["base", "fast", "same"], conditions=("c1", "c2"), metrics=("p50_ms",))
    assert fam.baseline == "base" and [c.arm for c in fam.contrasts] == ["fast", "same"]
    answer = run_family(s, fam, seed=1)
    t = answer.comparison.table
    assert len(t) == 4 and (t["family_size"] == 4).all() and answer.notes == [] and answer.missing == []
    expected = stats.compare(s, baseline="base", metrics=("p50_ms",), seed=1).table
    pd.testing.assert_series_equal(t["p_adj"], expected["p_adj"])  # the same call as compare() itself
    v = answer.verdict("fast", "p50_ms", group="c2")
    assert v.kind is VerdictKind.FASTER and v.estimate == pytest.approx(0.5, rel=0.05)
    assert answer.verdict("nope", "p50_ms", group="c2") is None


def test_grouped_families_relabel_arms_and_take_each_group_from_its_condition() -> None:
    s = _summaries({"a-pipe": 1.0, "a-file": 0.8, "b-pipe": 1.0, "b-file": 1.0}, conditions=("closed",))
    fam = Family.grouped("logging", baseline="pipe", metrics=("p50_ms",), condition="closed",
                         groups={"a": {"a-pipe": "pipe", "a-file": "file"}, "b": {"b-pipe": "pipe", "b-file": "file"}})
    assert [(c.group, c.baseline, c.arm, *c.labels) for c in fam.rows()] == [
        ("a", "a-pipe", "a-file", "pipe", "file"), ("b", "b-pipe", "b-file", "pipe", "file")]
    answer = run_family(s, fam, seed=0)
    t = answer.comparison.table
    assert list(t["condition"]) == ["a", "b"] and set(t["arm"]) == {"file"} and set(t["baseline"]) == {"pipe"}
    assert answer.verdict("file", "p50_ms", group="a").kind is VerdictKind.FASTER
    with pytest.raises(ParameterError, match="exactly one arm must be labelled 'pipe'"):
        Family.grouped("x", baseline="pipe", metrics=("p50_ms",), groups={"a": {"a-file": "file"}})


def test_rows_whose_arms_did_not_run_or_have_no_valid_trial_stay_as_typed_verdicts(tmp_path: Path) -> None:
    s = _summaries({"go": 1.0, "rust": 0.8, "py": 1.5, "node": 1.2})
    s.loc[(s["arm"] == "node") & (s["condition"] == "c2"), ["valid", "status"]] = (False, "invalid")
    s = s[~((s["arm"] == "py") & (s["condition"] == "c2"))]  # py has no trial at all in c2
    fam = Family("q", (Contrast("go", "rust", question="lang"), Contrast("go", "node", question="lang"),
                       Contrast("go", "py", question="lang"), Contrast("go", "dotnet", question="lang"),
                       Contrast("rust", "node", question="other")),
                 ("p50_ms",), conditions=("c1", "c2"), questions={"lang": "languages", "other": "rust vs node"})
    answer = run_family(s, fam, unavailable={"dotnet": "no dotnet toolchain"}, seed=2)
    kinds = {(v.arm, v.baseline, v.labels["condition"]): (v.kind, v.reason) for v in answer.missing}
    assert kinds == {
        ("dotnet", "go", "c1"): (VerdictKind.NOT_RUN, "no dotnet toolchain"),
        ("dotnet", "go", "c2"): (VerdictKind.NOT_RUN, "no dotnet toolchain"),
        ("node", "go", "c2"): (VerdictKind.NO_VALID_TRIAL, "node (10 invalid)"),
        ("py", "go", "c2"): (VerdictKind.NO_VALID_TRIAL, "py (no trial stored)"),
        ("node", "rust", "c2"): (VerdictKind.NO_VALID_TRIAL, "node (10 invalid)"),
    }
    assert "node (c2): no valid trial" in answer.notes and "dotnet (c1): not run: no dotnet toolchain" in answer.notes
    # several baselines in one family: compared as contrasts, one Holm family over both conditions
    t = answer.comparison.table
    assert answer.comparison.params["contrasts"] and (t["family_size"] == len(t)).all() and len(t) == 5
    assert answer.verdict("dotnet", "p50_ms", group="c1").text == "not run: no dotnet toolchain"
    assert answer.verdict("node", "p50_ms", group="c2", baseline="rust").text == "no valid trial: node (10 invalid)"
    tables = answer_tables(answer)
    c2 = tables["c2"]
    assert list(c2["question"]) == ["languages"] * 4 + ["rust vs node"]  # sub-questions in their order
    assert set(c2.loc[c2["verdict"].str.startswith("no valid trial"), "arm"]) == {
        "node (no valid trial)", "py (no valid trial)"}
    assert "dotnet (not run)" in set(c2["arm"]) and "go" in set(c2["baseline"])  # only the absent side is marked
    one = answer_table(answer)
    assert list(dict.fromkeys(one["group"])) == ["c1", "c2"] and len(one) == len(t) + 5
    # stored, the family keeps every row: the compared ones and the 5 it could not compare
    doc = json.loads(answer.to_json(tmp_path / "comparison-q.json").read_text())
    assert len(doc["verdicts"]) == len(t) + 5 and len(doc["rows"]) == len(t)
    assert {(r["arm"], r["labels"]["condition"], r["kind"]) for r in doc["verdicts"][len(t):]} == {
        ("dotnet", "c1", "not_run"), ("dotnet", "c2", "not_run"), ("node", "c2", "no_valid_trial"),
        ("py", "c2", "no_valid_trial")}
    assert doc["verdicts"][len(t):][0]["reason"] == "no dotnet toolchain" and doc["params"]["contrasts"]


def test_groups_without_valid_trials_are_said_and_nothing_is_compared_without_a_pair(tmp_path: Path) -> None:
    s = _summaries({"base": 1.0, "arm": 1.0}, conditions=("c1",))
    s["valid"], s["status"] = False, "failed"
    fam = Family.against("x", "base", ["arm"], conditions=("c1",), metrics=("p50_ms",), title="T", text="Q?")
    answer = run_family(s, fam)
    assert answer.comparison is None
    assert answer.notes == ["no valid trial in group(s) c1 (see the status table for the reasons)"]
    assert answer.missing[0].text == "no valid trial: base (10 failed), arm (10 failed)"
    assert family_markdown(answer).startswith("### T\n\nQ?\n\n**Not compared**: no valid trial in group(s) c1")
    assert len(answer_table(answer)) == 1
    assert answer.to_json(tmp_path / "c.json") is None and not (tmp_path / "c.json").exists()  # nothing compared


def test_planned_rows_count_the_metrics_each_condition_supports() -> None:
    fam = Family("q", (Contrast("a", "b"), Contrast("a", "c")), ("p50_ms", "p99_ms", "throughput_rps"),
                 conditions=("big", "small"))
    # p99 needs 5,000 requests: supported in "big" only; p50 (100) and throughput in both
    assert planned_rows(fam, {"big": 10_000, "small": 200}) == 2 * 3 + 2 * 2
    assert planned_rows(fam, {"big": 10_000, "small": 200}, {"c": "not here"}) == 3 + 2


def test_blocks_needed_are_the_fewest_at_which_holm_over_the_rows_can_decide() -> None:
    fam = Family("q", tuple(Contrast("a", x) for x in "bcde"), ("p50_ms", "p99_ms", "throughput_rps", "cpu_us"),
                 conditions=("c",))
    assert blocks_needed(fam, {"c": 50_000}) == (16, 10)  # 2/2^10 x 16 < 0.05, 2/2^9 x 16 is not
    assert blocks_needed(fam, {"c": 2_000}) == (12, 9)  # no p99 below 5,000 requests
    assert blocks_needed(fam, {"c": 50_000}, {"e": "no toolchain"}) == (12, 9)
    assert blocks_needed(fam, {"c": 50_000}, {"a": "gone"}) == (0, stats.min_trials(alpha=0.05, paired=True))

def test_trials_answered_mostly_with_errors_count_in_the_error_rate_only() -> None:
    # "broken" answers errors (a proxy's 502s, fast) in every trial of c1 and in 3 trials of c2
    s = _summaries({"base": 1.0, "good": 0.5, "broken": 0.2})
    s["error_rate"] = 0.0
    s.loc[(s["arm"] == "broken") & (s["condition"] == "c1"), "error_rate"] = 1.0
    s.loc[(s["arm"] == "broken") & (s["condition"] == "c2") & (s["block"] < 3), "error_rate"] = 0.9
    s["goodput_rps"] = s["throughput_rps"] * (1 - s["error_rate"]) / s["p50_ms"]
    fam = Family.against("k", "base", ["good", "broken"], conditions=("c1", "c2"),
                         metrics=("goodput_rps", "p50_ms", "error_rate"))
    fam = Family(fam.key, fam.contrasts, fam.metrics, conditions=fam.conditions, max_error_rate=0.05)
    answer = run_family(s, fam, seed=1)
    gone = answer.verdict("broken", "goodput_rps", group="c1")
    assert gone.kind is VerdictKind.NO_VALID_TRIAL and gone.metric == "goodput_rps"
    assert gone.reason == ("broken answered errors in 10 of 10 trials (median error rate 100%, above 5%): its "
                           "goodput_rps is that of error answers")
    assert answer.verdict("broken", "p50_ms", group="c1").kind is VerdictKind.NO_VALID_TRIAL
    errors = answer.verdict("broken", "error_rate", group="c1")
    assert errors.kind is VerdictKind.SLOWER and errors.word == "more errors" and errors.estimate == pytest.approx(1.0)
    part = answer.verdict("broken", "goodput_rps", group="c2")  # the 7 blocks without errors are compared
    assert part.n_arm == 7 and part.kind is not VerdictKind.NO_VALID_TRIAL
    assert answer.errored == {("c1", "broken"): (10, 10, 1.0), ("c2", "broken"): (3, 10, 0.9)}
    assert ("broken (c2): 3 of 10 valid trials answered errors (median error rate 90%, above 5%): they count in the "
            "error rate only") in answer.notes
    t = answer.comparison.table
    hidden = t[(t["arm"] == "broken") & (t["condition"] == "c1") & (t["metric"] != "error_rate")]
    assert (hidden["verdict_kind"] == "no_valid_trial").all() and hidden["verdict"].str.startswith("no valid trial").all()
    assert (t["family_size"] == len(t) - len(hidden)).all()  # rows without values are not in the Holm family
    assert answer.verdict("good", "goodput_rps", group="c1").kind is VerdictKind.FASTER
    with pytest.raises(ParameterError, match="max_error_rate must be a fraction in \\[0, 1\\) or None"):
        Family("k", fam.contrasts, fam.metrics, max_error_rate=1.5)


def test_an_undecided_row_of_an_arm_the_client_could_not_saturate_reads_client_bound() -> None:
    """Issue 23: a row that an arm's client-bound trials leave undecided says so, with the
    arm's measured client CPU and its rate as a lower bound; decided rows keep their verdicts."""
    s = _summaries({"go": 1.0, "actix": 0.5, "node": 1.0}, conditions=("discard", "pipe"), trials=8)
    s["client_cpu"] = 0.5
    s["reason"] = None
    fast = (s["arm"] == "actix") & (s["condition"] == "discard")
    s.loc[fast, "client_cpu"] = 0.86
    s.loc[fast & (s["block"] < 2), ["client_cpu", "valid", "status", "reason"]] = (
        0.91, False, "invalid", "client CPU 1 was 91% busy (limit 90%): the client, not the server, may have limited it")
    s.loc[fast, "throughput_rps"] = 61_234.0
    fam = Family.against("framework", "go", ["actix", "node"], conditions=("discard", "pipe"), metrics=("p50_ms",))
    answer = run_family(s, fam, seed=1)
    bound = answer.verdict("actix", "p50_ms", group="discard")  # 6 of 8 blocks left: the design's minimum is 8
    assert bound.kind is VerdictKind.CLIENT_BOUND
    assert bound.reason == ("actix's client CPU was 86%-91% busy in 8 trials (8 at 80% or more, 2 invalid for it); "
                            "its rate, 61,234 req/s (median of 8 trials), is a lower bound of the server's")
    assert bound.text.startswith("client-bound: actix's client CPU") and bound.estimate != bound.estimate
    t = answer.comparison.table
    row = t[(t["arm"] == "actix") & (t["condition"] == "discard")].iloc[0]
    assert (row["verdict_kind"], row["verdict"]) == ("client_bound", bound.text)
    assert answer.verdict("actix", "p50_ms", group="pipe").kind is VerdictKind.FASTER  # its client was not the limit
    assert answer.verdict("node", "p50_ms", group="discard").kind is not VerdictKind.CLIENT_BOUND
    # summaries stored before the client CPU column: nothing is relabelled
    old = run_family(s.drop(columns=["client_cpu"]), fam, seed=1)
    assert old.verdict("actix", "p50_ms", group="discard").kind is VerdictKind.INSUFFICIENT
    # a budget's futility verdict on such an arm is client-bound too (study 03's go-http: 15 of 17
    # trials invalid for the client's CPU read "not decidable within the budget", MDE infinite)
    from benchlib.analysis.questions import _client_bound_verdicts

    futile = Verdict(VerdictKind.UNDECIDABLE, arm="actix", baseline="go", metric="p50_ms", mde=math.inf,
                     labels={"condition": "discard"})
    from benchlib.analysis.questions import ClientBound

    _, (relabelled,) = _client_bound_verdicts(None, [futile], {("discard", "actix"): ClientBound(bound.reason, 8, 8)})
    assert relabelled.kind is VerdictKind.CLIENT_BOUND and relabelled.reason == bound.reason
    assert (bound.client_trials, bound.client_at_limit) == (8, 8) == (relabelled.client_trials,
                                                                     relabelled.client_at_limit)


def test_one_trial_invalid_for_the_clients_cpu_does_not_make_an_arm_client_bound() -> None:
    """Issue 39, item 3: one of an arm's trials invalid for the client's CPU turned every undecided
    row with that arm (its baseline's too) into "client-bound", which the census counts as
    explained; the arm must be at the client's limit in half of its trials or more."""
    s = _summaries({"go": 1.0, "actix": 1.0}, conditions=("discard",), trials=6)
    s["client_cpu"] = 0.5
    s["reason"] = None
    one = (s["arm"] == "go") & (s["block"] == 0)  # the baseline's first trial only
    s.loc[one, ["client_cpu", "valid", "status", "reason"]] = (
        0.91, False, "invalid", "client CPU 1 was 91% busy (limit 90%): the client, not the server, may have limited it")
    fam = Family.against("framework", "go", ["actix"], conditions=("discard",), metrics=("p50_ms",))
    v = run_family(s, fam, seed=1).verdict("actix", "p50_ms", group="discard")
    assert v.kind is not VerdictKind.CLIENT_BOUND, v.text
    most = (s["arm"] == "go") & (s["block"] < 3)  # half of its trials: client-bound, with the figure
    s.loc[most, ["client_cpu", "valid", "status", "reason"]] = s.loc[one, ["client_cpu", "valid", "status",
                                                                         "reason"]].iloc[0].tolist()
    w = run_family(s, fam, seed=1).verdict("actix", "p50_ms", group="discard")
    assert w.kind is VerdictKind.CLIENT_BOUND and (w.client_trials, w.client_at_limit) == (6, 3)
