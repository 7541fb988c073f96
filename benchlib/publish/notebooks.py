"""The study notebooks and their parameters: a notebook found by file name or stem, its
``parameters`` cell read, and the values given for it checked and converted to the declared
types (an unknown name, or a value that does not fit, is refused with the valid choices)."""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchlib.core.errors import ParameterError
from benchlib.core.model import check_name
from benchlib.runtime.manifest import find_services_dir

__all__ = ["coerce_parameters", "find_notebook", "list_notebooks", "notebook_parameters", "project_root",
           "report_notebooks"]


def project_root() -> Path:
    """The project folder (the one holding ``notebooks/`` and ``services/``)."""
    return find_services_dir().parent


def list_notebooks(directory: str | Path | None = None) -> list[Path]:
    """The study notebooks, in name order (``00_quickstart`` first)."""
    d = Path(directory) if directory else project_root() / "notebooks"
    return sorted(p for p in d.glob("[0-9][0-9]_*.ipynb"))


def report_notebooks(directory: str | Path | None = None) -> list[Path]:
    """The study notebooks ``make report`` (``benchlib report`` without names) runs: every one
    but those whose registry entry is outside the default set (``Study.in_report`` false:
    ``10_ab``, which needs the user's services; it runs when named)."""
    from benchlib.analysis.studies.registry import STUDIES

    left_out = {s.id for s in STUDIES if not s.in_report}
    return [p for p in list_notebooks(directory) if p.stem not in left_out]


def find_notebook(name: str, directory: str | Path | None = None) -> Path:
    """A notebook by path, file name or stem (``00_quickstart``); unknown names list the valid ones."""
    p = Path(name)
    if p.suffix == ".ipynb" and p.exists():
        return p
    for nb in list_notebooks(directory):
        if name in (nb.name, nb.stem) or nb.stem.startswith(name + "_"):
            return nb
    valid = ", ".join(nb.stem for nb in list_notebooks(directory))
    raise ParameterError(f"unknown notebook {name!r}; valid: {valid}")


def notebook_parameters(notebook: str | Path) -> dict[str, dict[str, Any]]:
    """The notebook's parameters (name -> default, type name, help) from its ``parameters`` cell."""
    # late: papermill takes about a second to import, and finding the project folder or a
    # notebook (the site, the README and page tools) needs it not
    import papermill as pm

    params: dict[str, dict[str, Any]] = dict(pm.inspect_notebook(str(notebook)))
    return params


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def coerce_parameters(notebook: str | Path, raw: Mapping[str, Any]) -> dict[str, Any]:
    """Check names against the notebook's parameters and convert string values to the
    declared types (``int``, ``float``, ``bool``, ``str``, lists as Python literals). A
    non-empty ``run_id`` must be a plain folder name (:func:`benchlib.core.model.check_name`, the
    store's own rule), checked here so that a bad one is refused before a kernel starts.

    Raises
    ------
    ParameterError
        naming the unknown parameter (and the valid ones) or the value that does not fit.
    """
    declared = notebook_parameters(notebook)
    out: dict[str, Any] = {}
    for name, value in raw.items():
        if name not in declared:
            raise ParameterError(f"{Path(notebook).stem}: unknown parameter {name!r}; valid: {', '.join(declared)}")
        if not isinstance(value, str):
            out[name] = value
            continue
        type_name = str(declared[name].get("inferred_type_name") or "None").lower()
        try:
            if type_name == "int":
                out[name] = int(value)
            elif type_name == "float":
                out[name] = float(value)
                if not math.isfinite(out[name]):
                    raise ValueError("expected a finite number")
            elif type_name == "bool":
                low = value.lower()
                if low not in _TRUE | _FALSE:
                    raise ValueError("expected true/false")
                out[name] = low in _TRUE
            elif type_name == "str":
                out[name] = value
            else:
                try:
                    out[name] = ast.literal_eval(value)
                except (ValueError, SyntaxError):
                    out[name] = value
        except ValueError as exc:
            raise ParameterError(f"{Path(notebook).stem}: parameter {name!r} is declared {type_name}; "
                                 f"cannot use {value!r} ({exc})") from None
    if out.get("run_id"):
        try:
            check_name("run id", out["run_id"])
        except ParameterError as exc:
            raise ParameterError(f"{Path(notebook).stem}: {exc}") from None
    return out
