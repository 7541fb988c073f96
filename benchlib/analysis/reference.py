"""The seeds' published numbers (``data/reference/*.csv``), to set beside ours.

Each study has one or more CSV files named ``<study>*.csv`` (for example
``04_rust_vs_go_logging.csv``); their columns are the study's own (what the original
reported). These numbers are the *claims* under test: they are shown, never used as results.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchlib.core.errors import ParameterError

__all__ = ["load_reference", "reference_dir"]


def reference_dir() -> Path:
    """The project's ``data/reference`` folder."""
    from benchlib.runtime.manifest import find_services_dir

    return find_services_dir().parent / "data" / "reference"


def load_reference(study: str, name: str | None = None) -> Any:
    """The published numbers of ``study`` as a DataFrame.

    Parameters
    ----------
    study: the study's prefix, e.g. ``"04"`` or ``"04_rust_vs_go_logging"``.
    name: when the study has several files, the one whose stem ends with ``name``.

    Raises
    ------
    ParameterError
        when no (or more than one matching) file exists; the message lists what exists.
    """
    import pandas as pd

    d = reference_dir()
    files = sorted(p for p in d.glob("*.csv") if p.stem.startswith(study))
    if name is not None:
        files = [p for p in files if p.stem.endswith(name)]
    if len(files) != 1:
        have = ", ".join(p.name for p in sorted(d.glob("*.csv"))) or "none"
        what = "no" if not files else "more than one"
        raise ParameterError(f"{what} reference file for study {study!r}" + (f" and name {name!r}" if name else "")
                             + f" in {d}; files: {have}")
    return pd.read_csv(files[0], comment="#")
