"""``docs/studies.md`` stays true: its example study module and notebook cells, taken out of
the page, are small, import, and run against the real services (``go-nethttp-hello`` and
``python-aiohttp-hello`` on 127.0.0.1) with tiny parameters; what they show is checked."""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd
import pytest

from benchlib.core.errors import ParameterError
from benchlib.core.model import Arm
from benchlib.stats.verdict import VerdictKind

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "studies.md"


def _block(label: str) -> str:
    m = re.search(rf"<!-- example: {label} -->\n```python\n(.*?)```\n<!-- end -->", GUIDE.read_text(), re.S)
    assert m, f"docs/studies.md has no '{label}' example block"
    return m.group(1)


@pytest.fixture()
def study(tmp_path: Path) -> ModuleType:
    path = tmp_path / "hello_example.py"
    path.write_text(_block("study module"))
    spec = importlib.util.spec_from_file_location("hello_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["hello_example"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("hello_example", None)


def test_the_example_module_is_small_and_its_parts_hold(study: ModuleType) -> None:
    lines = _block("study module").count("\n")
    assert lines < 80 and f"Its module is {lines} lines" in GUIDE.read_text()
    assert [a.name for a in study.study_arms("go-nethttp, python-aiohttp")] == ["python-aiohttp", "go-nethttp"]
    with pytest.raises(ParameterError, match=r"unknown arm\(s\) \['rust'\]; valid: python-aiohttp, go-nethttp"):
        study.study_arms("rust")
    conds = study.study_conditions(1.0, 0.2)
    assert [(c.name, c.load.connections, c.cross_check.tool) for c in conds] == [("c4", 4, "wrk"), ("c32", 32, "wrk")]
    fam = study.family(study.study_arms())
    assert [(c.group, c.baseline, c.arm) for c in fam.rows()] == [("c4", "python-aiohttp", "go-nethttp"),
                                                                 ("c32", "python-aiohttp", "go-nethttp")]


@pytest.mark.integration
def test_the_example_notebook_cells_run_on_real_services(study: ModuleType, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import benchlib.analysis

    shown: list[Any] = []
    monkeypatch.setattr(benchlib.analysis, "show", shown.append)
    wrk = shutil.which("wrk") is not None
    params = dict(runtime="local", trials=2, duration_s=0.3, warmup_s=0.1, arms="python-aiohttp,go-nethttp",
                  wrk_check=wrk, seed=2, out_dir=str(tmp_path / "runs"), run_id="guide", progress=False)
    namespace: dict[str, Any] = {"study": study, **params}
    exec(compile(_block("notebook"), "docs/studies.md", "exec"), namespace)  # noqa: S102 - the page's own code

    result, answer = namespace["result"], namespace["answer"]
    assert {t.arm for t in result.trials} == {"python-aiohttp", "go-nethttp"} and len(result.trials) == 8
    assert "**Run** `guide` of study `hello_example`" in shown[0]
    t = answer.comparison.table if answer.comparison is not None else pd.DataFrame()
    valid = {(s.meta["condition"], s.arm) for s in result.trials if s.meta["status"] == "ok"}
    compared = {g for g in ("c4", "c32") if {(g, "python-aiohttp"), (g, "go-nethttp")} <= valid}
    assert set(t.get("condition", [])) == compared and len(t) == 3 * len(compared)
    kinds = {(v.labels["condition"], v.kind) for v in answer.missing}
    assert {g for g, _ in kinds} == {"c4", "c32"} - compared and all(k is VerdictKind.NO_VALID_TRIAL for _, k in kinds)
    tables = [o.data for o in shown if isinstance(getattr(o, "data", None), pd.DataFrame)]  # styled tables
    verdicts = next(d for d in tables if "verdict" in d.columns)
    assert len(verdicts) == 3 * len(compared) + len(answer.missing)
    conclusion = study.conclusion_markdown(answer)
    assert conclusion in shown and conclusion.count("\n") == 1
    for g in compared:  # two blocks cannot decide anything: the verdict says so, with the figures
        v = answer.verdict("go-nethttp", "throughput_rps", group=g)
        assert v.kind is VerdictKind.INSUFFICIENT and (
            f"**{g}**: Go against Python, requests per second: too few trials to decide" in conclusion)
    if wrk:
        beside = namespace["beside"]
        assert len(beside) == 8 and (beside["peer_rps"] > 0).all() and set(beside["order"]) == {"first", "second"}
    # an arm that could not run stays in the answer as such
    more = study.family((*study.ARMS, Arm("rust-hello", "no-such-service")))
    gone = benchlib.analysis.run_family(namespace["summaries"], more, unavailable={"rust-hello": "no cargo toolchain"})
    assert gone.verdict("rust-hello", "p50_ms", group="c4").text == "not run: no cargo toolchain"
