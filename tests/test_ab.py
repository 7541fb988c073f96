"""Study 10_ab, your own A against B (issue 40): the sides as generated services, the one-line
refusals of bad input that need no service started, the gate's rule and its exit status. Nothing
here starts a service (tests/test_ab_services.py does)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from benchlib import cli
from benchlib.analysis.studies import a_vs_b as ab
from benchlib.analysis.studies.registry import study
from benchlib.core.errors import ParameterError
from benchlib.runtime.contract import check_response
from benchlib.runtime.manifest import get_manifest


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHLIB_CACHE", str(tmp_path / "cache"))


def _design(**given: Any) -> ab.AbDesign:
    record = study("10_ab").parameters
    return ab.design(record.read({}, **{**record.EXAMPLE, **given}))  # type: ignore[arg-type]


def test_the_sides_are_generated_services_with_the_request_and_what_a_correct_answer_is() -> None:
    d = _design(b_env="EXTRA_WORK_US=3,X=1", method="post", path="/echo", headers="X-A: 1; Accept: text/plain",
                body="hi", expect_body="hello (1)", expect_json="status=ok,data.id=1")
    a, b = (get_manifest(n).resolve() for n in d.services)
    assert [arm.name for arm in d.experiment.arms] == ["A", "B"] and d.experiment.baseline == "A"
    assert {arm.runtime for arm in d.experiment.arms} == {"local"} and a.port_env == "PORT" and a.fixed_port is None
    assert dict(b.run_env) == {"EXTRA_WORK_US": "3", "X": "1"} and not a.run_env
    ep = b.endpoint()
    assert (ep.method, ep.path, ep.body, dict(ep.headers)) == ("POST", "/echo", b"hi",
                                                              {"X-A": "1", "Accept": "text/plain"})
    assert ep.contract.status == 200 and ep.contract.json_fields == (("status", "ok"), ("data.id", 1))
    ok = check_response(ep.contract, 200, {}, b'{"status": "ok", "data": {"id": 1}, "say": "hello (1)!"}')
    assert ok == []
    bad = check_response(ep.contract, 200, {}, b'{"status": "down", "data": {}}')
    assert any("does not match" in p for p in bad) and "JSON field 'status' = \"down\", expected \"ok\"" in bad
    assert "JSON field 'data.id' missing in" in " ".join(bad)
    # the same side is the same folder; the project's services/ is not touched
    assert _design(b_env="EXTRA_WORK_US=3,X=1", method="post", path="/echo", headers="X-A: 1; Accept: text/plain",
                   body="hi", expect_body="hello (1)", expect_json="status=ok,data.id=1").services == d.services
    assert all(not (Path("services") / n).exists() for n in d.services)


@pytest.mark.parametrize(("given", "match"), [
    ({"a_image": "x:1"}, r"^side A: give a_image \(an image in the local Docker engine\) or a_command \(a command "
                         r"run here\), exactly one of them$"),
    ({"b_command": ""}, r"^side B: give b_image .* exactly one of them$"),
    ({"b_command": "{python} -m http.server {port}"},
     r"^both sides are the same command \{python\} -m http.server \{port\}: with aa True an A/A run"),
    ({"a_port": 8080, "b_port": 8080, "a_command": "srv-a", "b_command": "srv-b"},
     r"^a_port and b_port are both 8080: the sides cannot listen at once \(side by side\); .* side_by_side no$"),
    ({"a_port": "8080"}, r"^a_port '8080' is not valid; valid: a whole number$"),
    ({"protocol": "http3"}, r"^protocol 'http3' is not valid; valid: http1, h2c, grpc$"),
    ({"aa": "yes"}, r"^aa 'yes' is not valid; valid: True or False$"),
    ({"a_env": "EXTRA_WORK_US"}, r"^a_env item 'EXTRA_WORK_US' is not valid; valid: NAME=VALUE items"),
    ({"gate_metrics": "p50_ms,p95_ms"}, r"^unknown gate metric\(s\) \['p95_ms'\]; valid: p50_ms, p90_ms"),
    ({"model": "open"}, r"^rate_rps must be a positive number \(arrivals per second of the open model\), got 0.0$"),
    ({"body": "x", "body_file": "/etc/hostname"}, r"^give body or body_file, not both$"),
    ({"protocol": "grpc"}, r"^protocol grpc needs body_file: the serialized request message$"),
    ({"b_label": "A"}, r"^a_label and b_label are both 'A'; give the sides different names$"),
])
def test_bad_input_is_one_line_before_anything_runs(given: dict[str, Any], match: str) -> None:
    with pytest.raises(ParameterError, match=match) as err:
        _design(**given)
    assert "\n" not in str(err.value)


def test_the_same_service_twice_runs_with_aa_and_one_fixed_port_one_after_the_other() -> None:
    same = _design(b_command="{python} -m http.server {port}", aa=True)
    assert len(set(same.services)) == 2 and same.sides[0].what == same.sides[1].what
    fixed = _design(a_port=8080, b_port=8080, a_command="srv-a", b_command="srv-b", side_by_side="no")
    assert [get_manifest(n).resolve().fixed_port for n in fixed.services] == [8080, 8080]


def _v(lo: float, hi: float, better: str = "lower", effect: str = "ratio") -> Any:
    return SimpleNamespace(ci_lo=lo, ci_hi=hi, better=better, effect=effect)


def test_the_gate_fails_only_on_a_whole_interval_beyond_the_margin_in_the_worse_direction() -> None:
    assert ab.regressed(_v(1.06, 1.3), 0.05) and not ab.regressed(_v(1.04, 1.3), 0.05)
    assert not ab.regressed(_v(0.7, 0.9), 0.05)  # faster: no regression
    assert ab.regressed(_v(0.8, 0.94, "higher"), 0.05) and not ab.regressed(_v(0.8, 0.96, "higher"), 0.05)
    assert not ab.regressed(_v(1.2, math.inf), 0.05) and not ab.regressed(None, 0.05)  # too few blocks: unbounded
    assert ab.regressed(_v(0.06, 0.1, effect="difference"), 0.05)  # an error rate: 5 percentage points


def test_a_stored_failed_gate_makes_benchlib_run_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    passed, failed = tmp_path / "r1", tmp_path / "r2"
    for folder, bad in ((passed, []), (failed, ["p50_ms"])):
        (folder / "derived").mkdir(parents=True)
        (folder / ab.GATE_FILE).write_text(json.dumps({"margin": 0.05, "metrics": ["p50_ms"], "failed": bad}))
    assert cli._gate_status([passed, tmp_path / "no-gate"]) == 0
    assert cli._gate_status([passed, failed]) == 1
    assert capsys.readouterr().err == f"benchlib: regression beyond 5% on p50_ms (run {failed}; derived/gate.json)\n"
    args = cli.build_parser().parse_args(["run", "10_ab", "--fail-on-regression", "5%"])
    assert args.fail_on_regression == pytest.approx(0.05)


def test_the_guide_quotes_the_ci_example_as_it_is() -> None:
    root = Path(__file__).resolve().parents[1]
    guide = (root / "docs" / "ab.md").read_text()
    block = guide.split("<!-- example: ab-gate.sh -->\n```sh\n", 1)[1].split("```\n<!-- end -->", 1)[0]
    assert block == (root / "scripts" / "ab-gate.sh").read_text()


def test_a_claim_is_checked_before_the_run_and_tested_at_its_size_after_it() -> None:
    with pytest.raises(ParameterError, match=r"^claim 'claim': the claimed ratio must be a positive number other "
                                             r"than 1, got 1.0$"):
        _design(claim=1.0)
    import pandas as pd

    rows = [{"condition": ab.CONDITION, "arm": arm, "block": blk, "valid": True, "throughput_rps": rps * (1 + blk / 100)}
            for blk in range(10) for arm, rps in (("A", 1000.0), ("B", 1500.0))]
    r = ab.claim_result(pd.DataFrame(rows), "A", "B", 1.5, "throughput_rps")
    assert r.outcome.value == "holds" and r.n == 10 and r.ratio == pytest.approx(1.5)
    assert "measured 1.500 [1.500, 1.500] over 10 blocks" in ab.claim_markdown(r, "A", "B", "throughput_rps")


def test_make_report_leaves_it_out_and_benchlib_run_finds_it() -> None:
    from benchlib.publish.notebooks import find_notebook, list_notebooks, report_notebooks

    assert "10_ab" in {p.stem for p in list_notebooks()} and find_notebook("10_ab").stem == "10_ab"
    assert "10_ab" not in {p.stem for p in report_notebooks()} and "00_quickstart" in {p.stem for p in report_notebooks()}
