"""One registry of studies (issue 37, item 2): each entry, its module and its notebook agree, a
notebook declares exactly its study's parameters record and imports only the public API, and
a value that does not fit is one line naming the parameter and the valid values (pure)."""

from __future__ import annotations

import ast
import dataclasses
import re
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import nbformat
import pytest

import benchlib
from benchlib.analysis.params import NOT_STORED, StudyParameters
from benchlib.analysis.planned import StudyDesign
from benchlib.analysis.studies.registry import STUDIES, Study, study
from benchlib.core.errors import ParameterError
from benchlib.publish.notebooks import list_notebooks, notebook_parameters

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
IDS = [s.id for s in STUDIES]


def _notebook(entry: Study) -> Path:
    return NOTEBOOKS / f"{entry.id}.ipynb"


def _code(entry: Study) -> str:
    nb = nbformat.read(str(_notebook(entry)), as_version=4)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "code" and "parameters" not in c.metadata.get("tags", []))


def test_every_notebook_has_one_entry_in_its_order() -> None:
    assert IDS == [p.stem for p in list_notebooks(NOTEBOOKS)]
    assert study("04") is study("04_rust_vs_go_logging") is STUDIES[4]
    with pytest.raises(ParameterError, match=r"^unknown study 'nope'; valid: 00_quickstart, 01_rest_mongo"):
        study("nope")


@pytest.mark.parametrize("entry", STUDIES, ids=IDS)
def test_the_entry_names_its_module_title_and_seed(entry: Study) -> None:
    module = entry.load()
    assert module.STUDY == entry.id and issubclass(entry.parameters, StudyParameters) and callable(entry.design)
    nb = nbformat.read(str(_notebook(entry)), as_version=4)
    heading = nb.cells[0].source.splitlines()[0]
    assert re.sub(r"^# (Study \d\d: )?", "", heading) == entry.title
    assert bool(entry.seed) == bool(entry.source) == bool(entry.seed_stacks)
    assert not entry.seed or re.fullmatch(r"\d{3}_[0-9a-f]{16}\.txt", entry.seed)


def _cell_type(hint: Any) -> str:
    """A record field's type as papermill names the parameters cell's annotation."""
    if get_origin(hint) is Literal:
        return type(get_args(hint)[0]).__name__
    if get_origin(hint) in (Union, types.UnionType):
        inner = [a for a in get_args(hint) if a is not type(None)]
        return f"Optional[{inner[0].__name__}]"
    return str(hint.__name__)


@pytest.mark.parametrize("entry", STUDIES, ids=IDS)
def test_the_parameters_cell_declares_the_record(entry: Study) -> None:
    """Names, types and defaults of the notebook's parameters cell are its record's fields:
    run_study reads them from the notebook's namespace without retyping them."""
    cell = notebook_parameters(_notebook(entry))
    record = entry.parameters
    hints = get_type_hints(record)
    fields = {f.name: f.default for f in dataclasses.fields(record)}
    assert set(cell) == set(fields), (set(cell) ^ set(fields))
    for name, default in fields.items():
        assert ast.literal_eval(cell[name]["default"]) == default, name
        assert cell[name]["inferred_type_name"] == _cell_type(hints[name]), name
        assert cell[name]["help"], name
    # the default design builds (peer tools off: building them is not this test's business)
    off = {k: v for k, v in (("k6_check", False), ("bombardier", "none")) if k in fields}
    off.update(getattr(record, "EXAMPLE", {}))  # a study of the user's own services: an example of them
    chosen = dataclasses.replace(record.read({}, **off), cluster="local:2")  # Ray need not be installed here
    built = entry.design(chosen)
    assert isinstance(built, StudyDesign) and built.experiment.study == entry.id and built.families
    assert built.experiment.cluster == "local:2" and built.experiment.seed == chosen.seed
    assert all(f.key for f in built.families)


@pytest.mark.parametrize("entry", STUDIES, ids=IDS)
def test_the_notebook_imports_only_the_public_api_and_runs_its_study_once(entry: Study) -> None:
    tree = ast.parse(_code(entry))
    own = entry.module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("benchlib"):
            assert node.module in ("benchlib", "benchlib.analysis", own.rpartition(".")[0]), node.module
            if node.module == "benchlib":
                assert {a.name for a in node.names} <= set(benchlib.__all__)
            if node.module == own.rpartition(".")[0]:
                assert [a.name for a in node.names] == [own.rpartition(".")[2]]
        if isinstance(node, ast.Import):
            assert not any(a.name.startswith("benchlib") for a in node.names)
    # run_study reads the parameters from the notebook's namespace: no import or assignment may
    # shadow one (running the cells again in JupyterLab would read it instead)
    bound = {a.asname or a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
             for a in n.names}
    bound |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    assert not bound & set(entry.parameters.names()), bound & set(entry.parameters.names())
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "run_study"]
    assert [ast.unparse(c) for c in calls] == [f"run_study({entry.id!r}, globals())"]
    for section in ("show_run", "show_contracts", "show_verdicts", "show_design", "show_provenance"):
        assert f"study.{section}(" in ast.unparse(tree), section


def test_a_value_that_does_not_fit_is_one_line_naming_the_valid_values() -> None:
    record = study("04").parameters
    for given, match in [
        ({"runtime": "podman"}, r"^runtime 'podman' is not valid; valid: local, docker$"),
        ({"sequential": "maybe"}, r"^sequential 'maybe' is not valid; valid: auto, yes, no$"),
        ({"trials": "ten"}, r"^trials 'ten' is not valid; valid: a whole number$"),
        ({"full": 1}, r"^full 1 is not valid; valid: True or False$"),
        ({"duration_s": float("nan")}, r"^duration_s nan is not valid; valid: a number$"),
        ({"cluster": 3}, r"^cluster 3 is not valid; valid: text or None$"),
        ({"conections": 4}, r"^unknown parameter 'conections'; valid: full, trials, seed, cluster, "),
        ({"budget_min": -1.0}, r"^budget_min must be a positive number"),
    ]:
        with pytest.raises(ParameterError, match=match):
            record.read({}, **given)
    with pytest.raises(ParameterError, match=r"^unknown log sink\(s\) \['tty'\]; valid: pipe, file, discard$"):
        study("04").design(record.read({"sinks": "pipe,tty"}))


def test_parameters_are_read_once_from_the_namespace_and_stored_as_asked() -> None:
    record = study("00").parameters
    namespace = {"trials": 4, "duration_s": 0.0, "connections": 8, "run_id": "r1", "Optional": object(), "plt": None}
    p = record.read(namespace, seed=3)
    # the design's values fill what was left unset (0); what was given stays; the rest is the default
    assert (p.trials, p.duration_s, p.warmup_s, p.connections, p.seed, p.run_id) == (4, 1.0, 0.5, 8, 3, "r1")
    asked = p.asked()
    assert not set(asked) & set(NOT_STORED) and "target_mde" not in asked and asked["budget_min"] == 0.0
    assert record.read({"full": True}).duration_s == 10.0
    assert record.read({"budget_min": 3.0}).asked()["target_mde"] == 5.0
    # a study whose full scale sets its size whatever was given
    assert study("02").parameters.read({"full": True, "scale": 0.1}).scale == 1.0

