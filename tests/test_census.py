"""benchlib.publish.census: the issue-23 definitions on stored verdict files (pure logic on files written here)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from benchlib.publish import census as cz
from benchlib.core.errors import ParameterError


def _run(root: Path, study: str, run_id: str, verdicts: dict[str, list[dict]]) -> Path:
    folder = root / study / run_id
    (folder / "derived").mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"study": study, "run_id": run_id, "notebook_parameters": {}}))
    for family, vs in verdicts.items():
        (folder / "derived" / f"{family}.json").write_text(json.dumps({"rows": [], "verdicts": vs}))
    return folder


def _v(kind: str, arm: str, metric: str = "p50_ms", mde: float | str | None = None) -> dict:
    return {"kind": kind, "arm": arm, "baseline": "base", "metric": metric, "labels": {"condition": "c"}, "mde": mde}


def test_headline_rows_leave_out_error_rates_arms_not_run_and_omitted(tmp_path: Path) -> None:
    f = _run(tmp_path, "s", "r1", {"comparison": [
        _v("faster", "a"), _v("no_difference", "b", mde=0.08), _v("insufficient", "c", mde="inf"),
        _v("slower", "a", metric="error_rate"), _v("not_run", "dotnet"), _v("omitted", "a", metric="p99_ms"),
        _v("client_bound", "d"), _v("equivalent", "e", mde=0.01)]})
    study, run_id, rows = cz.headline_rows(f)
    assert (study, run_id) == ("s", "r1")
    assert sorted(r.arm for r in rows) == ["a", "b", "c", "d", "e"]
    c = cz.census(study, run_id, rows)
    assert (c.rows, c.decided, c.explained) == (5, 2, 1)
    assert c.mdes == (0.08, math.inf)  # the insufficient row without a finite MDE counts as infinite
    assert c.within(0.10) == 1 and not c.meets(0.10)


def test_goal_needs_every_undecided_row_within_target_and_median_within_half(tmp_path: Path) -> None:
    rows = [cz.Row("s", "f", f"a{i}", "b", "p50_ms", "{}", cz.VerdictKind.NO_DIFFERENCE, m)
            for i, m in enumerate((0.04, 0.05, 0.09))]
    decided = [cz.Row("s", "f", f"d{i}", "b", "p50_ms", "{}", cz.VerdictKind.FASTER, 0.02) for i in range(7)]
    assert cz.census("s", "r", rows + decided).meets(0.10)  # median 5% <= 10%/2, max 9% <= 10%
    worse = rows[:2] + [cz.Row("s", "f", "x", "b", "p50_ms", "{}", cz.VerdictKind.NO_DIFFERENCE, 0.11)]
    assert not cz.census("s", "r", worse + decided).meets(0.10)
    too_many_explained = [cz.Row("s", "f", f"c{i}", "b", "p50_ms", "{}", cz.VerdictKind.CLIENT_BOUND, math.inf)
                          for i in range(2)]
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
