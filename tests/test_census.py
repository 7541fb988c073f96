"""benchlib.publish.census: the issue-23 definitions on stored verdict files (pure logic on files written here)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from benchlib.core.errors import ParameterError
from benchlib.publish import census as cz


def _run(root: Path, study: str, run_id: str, verdicts: dict[str, list[dict]]) -> Path:
    folder = root / study / run_id
    (folder / "derived").mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"study": study, "run_id": run_id, "notebook_parameters": {}}))
    for family, vs in verdicts.items():
        (folder / "derived" / f"{family}.json").write_text(json.dumps({"rows": [], "verdicts": vs}))
    return folder


def _v(kind: str, arm: str, metric: str = "p50_ms", mde: float | str | None = None) -> dict:
    return {"kind": kind, "arm": arm, "baseline": "base", "metric": metric, "labels": {"condition": "c"}, "mde": mde}


def test_headline_rows_leave_out_error_rates_and_arms_not_run(tmp_path: Path) -> None:
    f = _run(tmp_path, "s", "r1", {"comparison": [
        _v("faster", "a"), _v("no_difference", "b", mde=0.08), _v("insufficient", "c", mde="inf"),
        _v("slower", "a", metric="error_rate"), _v("not_run", "dotnet"), _v("omitted", "a", metric="p99_ms"),
        _v("client_bound", "d"), _v("equivalent", "e", mde=0.01)]})
    study, run_id, rows = cz.headline_rows(f)
    assert (study, run_id) == ("s", "r1")
    assert sorted(r.arm for r in rows) == ["a", "a", "b", "c", "d", "e"]
    c = cz.census(study, run_id, rows)
    # the omitted row is undecided without an MDE; the client-bound row stored without its figure
    # is not explained (issue 39, item 3)
    assert (c.rows, c.decided, c.explained, c.omitted, c.unexplained_bound) == (6, 2, 0, 1, 1)
    assert c.mdes == (0.08, math.inf, math.inf, math.inf)  # rows without a finite MDE count as infinite
    assert c.within(0.10) == 1 and not c.meets(0.10)


def test_goal_needs_every_undecided_row_within_target_and_median_within_half(tmp_path: Path) -> None:
    rows = [cz.Row("s", "f", f"a{i}", "b", "p50_ms", "{}", cz.VerdictKind.NO_DIFFERENCE, m)
            for i, m in enumerate((0.04, 0.05, 0.09))]
    decided = [cz.Row("s", "f", f"d{i}", "b", "p50_ms", "{}", cz.VerdictKind.FASTER, 0.02) for i in range(7)]
    assert cz.census("s", "r", rows + decided).meets(0.10)  # median 5% <= 10%/2, max 9% <= 10%
    worse = rows[:2] + [cz.Row("s", "f", "x", "b", "p50_ms", "{}", cz.VerdictKind.NO_DIFFERENCE, 0.11)]
    assert not cz.census("s", "r", worse + decided).meets(0.10)
    too_many_explained = [cz.Row("s", "f", f"c{i}", "b", "p50_ms", "{}", cz.VerdictKind.CLIENT_BOUND, math.inf, 1.0)
                          for i in range(2)]
    assert cz.census("s", "r", decided + too_many_explained).explained == 2
    assert not cz.census("s", "r", decided + too_many_explained).meets(0.10)  # 2 of 9 > 10%


def test_agreement_counts_alike_opposite_and_one_run_only() -> None:
    def row(arm: str, kind: str) -> cz.Row:
        return cz.Row("s", "f", arm, "b", "p50_ms", "{}", cz.VerdictKind(kind), 0.05)

    a = [row("x", "faster"), row("y", "slower"), row("z", "no_difference"), row("w", "faster"), row("only_a", "faster")]
    b = [row("x", "faster"), row("y", "faster"), row("z", "no_difference"), row("w", "no_difference")]
    g = cz.agreement("s", a, b)
    assert (g.rows, g.alike, g.opposite, g.one, g.either) == (4, 1, 1, 1, 3)
    assert g.share() == pytest.approx(1 / 3)


def test_main_prints_census_and_agreement_and_refuses_two_runs_of_a_study(tmp_path: Path, capsys) -> None:
    a = _run(tmp_path / "A", "s", "r1", {"comparison": [_v("faster", "a"), _v("no_difference", "b", mde=0.2)]})
    b = _run(tmp_path / "B", "s", "r2", {"comparison": [_v("faster", "a"), _v("slower", "b", mde=0.05)]})
    assert cz.main([str(a), "--against", str(b)]) == 0
    out = capsys.readouterr().out
    assert "decided   1 (50%)" in out and "MDE median 20.0%" in out and "not met" in out
    assert "alike   1" in out and "one run only   1" in out
    with pytest.raises(ParameterError, match="two runs of s"):
        cz.main([str(a), str(b)])


def _stored(root: Path, study: str, run_id: str, comparisons: dict[str, object]) -> Path:
    """A run folder whose ``derived/<family>.json`` are ``Comparison.to_json`` of real comparisons."""
    folder = root / study / run_id
    (folder / "derived").mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"study": study, "run_id": run_id, "notebook_parameters": {}}))
    for family, comp in comparisons.items():
        comp.to_json(str(folder / "derived" / f"{family}.json"))  # type: ignore[attr-defined]
    return folder


def test_a_report_that_decided_nothing_does_not_meet_the_goal(tmp_path: Path, capsys) -> None:
    """Issue 39, item 3, through compare() and the census: four arms with one trial each (their
    MDEs only within-run lower bounds, "MDE ≥ 2.3%") read "decided 0 (0%) ... MDE median 2.3% ...
    goal met"; a lower bound now counts as no MDE. A question whose every row the design could
    not report ("omitted (no values)") stays in the headline, undecided and named apart."""
    import pandas as pd

    from benchlib.stats import compare

    one = pd.DataFrame({"condition": "c", "arm": ["base", "a", "b", "c"], "block": 0, "trial": range(4),
                        "p50_ms": [5.0, 5.05, 4.97, 5.02], "p50_ms_lse": 0.005, "p99_ms": float("nan")})
    single = compare(one, baseline="base", metrics=("p50_ms",), shift=False)
    assert all(v.mde_is_lower_bound and "MDE ≥" in v.text for v in single.verdicts)
    rows_df = pd.concat([one.assign(block=k, trial=range(4 * k, 4 * k + 4), p50_ms_lse=float("nan")) for k in range(6)])
    tails = compare(rows_df, baseline="base", metrics=("p99_ms",), shift=False)
    assert {v.kind.value for v in tails.verdicts} == {"omitted"}
    f = _stored(tmp_path, "s", "r1", {"single": single, "tails": tails})
    study, run_id, rows = cz.headline_rows(f)
    c = cz.census(study, run_id, rows)
    assert (c.rows, c.decided, c.explained, c.omitted) == (6, 0, 0, 3)
    assert c.mdes == (math.inf,) * 6 and not c.meets(0.10)
    assert cz.main([str(f)]) == 0
    out = capsys.readouterr().out
    assert "goal" in out and "not met" in out and "omitted by the design: 3" in out


def test_client_bound_rows_are_explained_only_with_the_figure(tmp_path: Path) -> None:
    """Issue 39, item 3: a client-bound row counts as explained when its client-bound arm was at
    the client's limit in half of its trials or more (the figure the verdict carries); one
    trial of ten, or no figure (a row stored before it), leaves it undecided without an MDE."""
    def bound(arm: str, trials: int | None, at: int | None) -> dict:
        v = _v("client_bound", arm)
        if trials is not None:
            v.update(client_trials=trials, client_at_limit=at)
        return v

    f = _run(tmp_path, "s", "r1", {"q": [bound("most", 10, 6), bound("one", 10, 1), bound("old", None, None),
                                         _v("no_valid_trial", "errs"), _v("faster", "x")]})
    c = cz.census(*cz.headline_rows(f))
    assert (c.rows, c.decided, c.explained, c.unexplained_bound) == (5, 1, 2, 2)
    assert c.mdes == (math.inf, math.inf)
    assert "client-bound without the figure: 2" in c.line(0.10)


def test_opposite_means_opposite_directions_and_direction_against_equivalent_is_apart() -> None:
    def row(arm: str, kind: str) -> cz.Row:
        return cz.Row("s", "f", arm, "b", "p50_ms", "{}", cz.VerdictKind(kind), 0.05)

    a = [row("x", "faster"), row("y", "faster"), row("z", "equivalent")]
    b = [row("x", "slower"), row("y", "equivalent"), row("z", "slower")]
    g = cz.agreement("s", a, b)
    assert (g.alike, g.opposite, g.split, g.one, g.either) == (0, 1, 2, 0, 3)


def test_claim_rows_are_counted_apart_and_compared_across_two_runs(tmp_path: Path, capsys) -> None:
    from benchlib.analysis.claims import ClaimAnswer, save_claims
    from benchlib.analysis.studies.registry import study

    faithful, fair = study("04").claims
    a = _run(tmp_path / "A", "s", "r1", {"comparison": [_v("faster", "a")]})
    b = _run(tmp_path / "B", "s", "r2", {"comparison": [_v("faster", "a")]})
    save_claims([ClaimAnswer(faithful, "holds", ratio=2.5, lo=2.3, hi=2.7),
                 ClaimAnswer(fair, "not decided", mde_vs_claim=0.12)], a)
    save_claims([ClaimAnswer(faithful, "holds"), ClaimAnswer(fair, "smaller than claimed")], b)
    assert "ran  2  decided  1 (faithful holds); not decided: fair (MDE 12%); not run 0" in cz.claim_line("s", a)
    assert cz.claim_agreement(a, b) == (1, 2, ["fair: not decided / smaller than claimed"])
    assert cz.main([str(a), "--against", str(b)]) == 0
    out = capsys.readouterr().out
    assert out.index("claim rows (first)") < out.index("other rows (first)")
    assert "1 of 2; differing: fair: not decided / smaller than claimed" in out


def test_a_report_is_compared_with_the_runs_recorded_in_a_findings_file(tmp_path: Path, capsys) -> None:
    """--against-findings: the default-scale runs of data/findings.json (their folders on another
    host), rows and claims as recorded; a full-scale finding is not the default report's."""
    from benchlib._project.studypages import Finding, save
    from benchlib.analysis.claims import ClaimAnswer
    from benchlib.analysis.studies.registry import study

    faithful, fair = study("04").claims
    a = _run(tmp_path / "A", "s", "r1", {"comparison": [_v("faster", "a"), _v("slower", "b"), _v("faster", "c")]})
    from benchlib.analysis.claims import save_claims

    save_claims([ClaimAnswer(faithful, "holds"), ClaimAnswer(fair, "holds")], a)
    recorded = {"comparison": [_v("faster", "a"), _v("faster", "b"), _v("no_difference", "c", mde=0.2)]}
    file = save({"s": Finding("s", "old", "2026-12-06 10:00", 0.5, verdicts=recorded,
                              claims=(ClaimAnswer(faithful, "holds").to_dict(),
                                      ClaimAnswer(fair, "reversed").to_dict())),
                 "s:full": Finding("s", "full", "2026-12-06 11:00", 0.5, scale="full", verdicts={})},
                tmp_path / "findings.json")
    got = cz.recorded_runs(file)
    assert list(got) == ["s"] and got["s"].run_id == "old" and len(got["s"].rows) == 3
    assert cz.main([str(a), "--against-findings", str(file)]) == 0
    out = capsys.readouterr().out
    assert "other rows (recorded)" in out and "1 of 2; differing: fair: holds / reversed" in out
    assert "decided in either 3, alike 1 (33%), opposite 1" in out
    with pytest.raises(ParameterError, match="no findings file"):
        cz.recorded_runs(tmp_path / "none.json")
