"""``docs/studies.md`` stays true: its example registry entry, study module, parameters cell and
notebook cells, taken out of the page, are small, agree with each other, and run against the real
services (``go-nethttp-hello`` and ``python-aiohttp-hello`` on 127.0.0.1) with tiny parameters;
what they show is checked."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import re
import shutil
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pandas as pd
import pytest

from benchlib.analysis.studies import registry
from benchlib.core.errors import ParameterError
from benchlib.stats.verdict import VerdictKind

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "studies.md"
MODULE = "benchlib.analysis.studies.hello"


def _block(label: str) -> str:
    m = re.search(rf"<!-- example: {label} -->\n```python\n(.*?)```\n<!-- end -->", GUIDE.read_text(), re.S)
    assert m, f"docs/studies.md has no '{label}' example block"
    return m.group(1)


@pytest.fixture()
def study(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """The example's module as ``benchlib.analysis.studies.hello`` and its entry in the registry."""
    path = tmp_path / "hello.py"
    path.write_text(_block("study module"))
    spec = importlib.util.spec_from_file_location(MODULE, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, MODULE, module)
    spec.loader.exec_module(module)
    entry = eval(_block("registry entry").strip().rstrip(","),
                 {"Study": registry.Study, "_PACKAGE": "benchlib.analysis.studies"})
    monkeypatch.setattr(registry, "STUDIES", (*registry.STUDIES, entry))
    return module


def _parameters() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(_block("parameters"), "docs/studies.md", "exec"), namespace)
    return {k: v for k, v in namespace.items() if not k.startswith("__") and k != "Optional"}


def test_the_example_is_small_and_its_entry_module_and_parameters_agree(study: ModuleType) -> None:
    lines = _block("study module").count("\n")
    assert lines < 80 and f"Its module is {lines} lines" in GUIDE.read_text()
    entry = registry.study("06_hello")
    assert entry.load() is study and entry.parameters is study.Parameters and study.STUDY == entry.id
    # the parameters cell declares the record: same names and defaults
    cell = _parameters()
    assert cell == {f.name: f.default for f in dataclasses.fields(study.Parameters)}
    p = study.Parameters.read(cell)
    built = study.design(p)
    assert [(c.name, c.load.connections, c.cross_check.tool) for c in built.experiment.conditions] == [
        ("c4", 4, "wrk"), ("c32", 32, "wrk")]
    assert [(c.group, c.baseline, c.arm) for c in built.families[0].rows()] == [
        ("c4", "python-aiohttp", "go-nethttp"), ("c32", "python-aiohttp", "go-nethttp")]
    assert [a.name for a in study.design(study.Parameters.read(arms="go-nethttp, python-aiohttp")).experiment.arms] \
        == ["python-aiohttp", "go-nethttp"]
    with pytest.raises(ParameterError, match=r"unknown arm\(s\) \['rust'\]; valid: python-aiohttp, go-nethttp"):
        study.design(study.Parameters.read(arms="rust"))
    with pytest.raises(ParameterError, match=r"^runtime 'podman' is not valid; valid: local, docker$"):
        study.Parameters.read(cell, runtime="podman")
    # the notebook cells run the study once, from the notebook's namespace
    tree = ast.parse(_block("notebook"))
    calls = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "run_study"]
    assert calls == ["run_study('06_hello', globals())"]


@pytest.mark.integration
def test_the_example_notebook_cells_run_on_real_services(study: ModuleType, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import IPython.display

    shown: list[Any] = []
    monkeypatch.setattr(IPython.display, "display", shown.append)
    wrk = shutil.which("wrk") is not None
    namespace = {**_parameters(), "trials": 2, "duration_s": 0.3, "warmup_s": 0.1, "wrk_check": wrk, "seed": 2,
                 "out_dir": str(tmp_path / "runs"), "run_id": "guide", "progress": False}
    exec(compile(_block("notebook"), "docs/studies.md", "exec"), namespace)
    texts = [o.data for o in shown if isinstance(getattr(o, "data", None), str)]

    done = namespace["study"]
    result, answer = done.run, done.answer()
    assert {t.arm for t in result.trials} == {"python-aiohttp", "go-nethttp"} and len(result.trials) == 8
    assert texts[0].startswith("**The seed's stacks in this run**: ran here: net/http (Go), aiohttp (Python)")
    assert any("**Run** `guide` of study `06_hello`" in t for t in texts)
    t = answer.comparison.table if answer.comparison is not None else pd.DataFrame()
    valid = {(s.condition, s.arm) for s in result.trials if s.valid}
    compared = {g for g in ("c4", "c32") if {(g, "python-aiohttp"), (g, "go-nethttp")} <= valid}
    assert set(t.get("condition", [])) == compared
    kinds = {(v.labels["condition"], v.kind) for v in answer.missing}
    assert {g for g, _ in kinds} == {"c4", "c32"} - compared and all(k is VerdictKind.NO_VALID_TRIAL for _, k in kinds)
    assert (tmp_path / "runs" / "06_hello" / "guide" / "derived" / "comparison-go-vs-python.json").exists() == bool(
        compared)
    assert any(t_.startswith("### Go net/http against Python aiohttp") for t_ in texts)
    tables = [o.data for o in shown if isinstance(getattr(o, "data", None), pd.DataFrame)]  # styled tables
    verdicts = next(d for d in tables if "verdict" in d.columns)
    assert len(verdicts) == len(t) + len(answer.missing)
    conclusion = study.conclusion_markdown(answer)
    assert conclusion in texts and conclusion.count("\n") == 1
    for g in compared:  # two blocks cannot decide anything: the verdict says so, with the figures
        v = answer.verdict("go-nethttp", "throughput_rps", group=g)
        assert v.kind is VerdictKind.INSUFFICIENT and (
            f"**{g}**: Go against Python, requests per second: too few trials to decide" in conclusion)
    assert any("(`sequential=auto`): off" in t_ for t_ in texts)  # the design section: one look, the last
    assert any("rebuild this report from the stored trials: `benchlib run 06_hello " in t_ for t_ in texts)
    if wrk:
        beside = namespace["beside"]
        assert len(beside) == 8 and (beside["peer_rps"] > 0).all() and set(beside["order"]) == {"first", "second"}
    # an arm that could not run stays in the answer as such
    from benchlib.analysis import Family, run_family

    more = Family.against("more", "python-aiohttp", ["go-nethttp", "rust-hello"], conditions=["c4"],
                          metrics=study.METRICS)
    gone = run_family(done.summaries, more, unavailable={"rust-hello": "no cargo toolchain"})
    assert gone.verdict("rust-hello", "p50_ms", group="c4").text == "not run: no cargo toolchain"
