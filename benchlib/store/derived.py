"""What a run's notebook derived and stored beside its trials, read without opening the trials.

A study notebook stores each verdict table as ``derived/<family>.json``
(:meth:`benchlib.stats.report.Comparison.to_json`); a second experiment of the same notebook
execution (e.g. study 04's sweep) is a companion run ``<run_id>-<part>`` of the same study and
scale. :func:`stored_verdicts` reads a run folder's verdicts with its companions'; the census
(:mod:`benchlib.publish.census`) and the study pages' findings read them here.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib.core.errors import ParameterError
from benchlib.stats.verdict import Verdict, VerdictKind
from benchlib.store.records.run import RunRecord
from benchlib.store.runstore import RunStore

__all__ = ["StoredVerdicts", "scale_of", "stored_verdict", "stored_verdicts"]


def scale_of(parameters: Mapping[str, object]) -> str:
    """The scale a notebook ran at, from its parameters: ``full`` when its ``full`` parameter is
    true (``True`` or the text ``true``/``1``/``yes``, as ``-p full true`` passes it), else ``default``."""
    full = parameters.get("full", False)
    return "full" if full is True or str(full).strip().lower() in ("true", "1", "yes") else "default"


def _verdict_files(folder: Path) -> dict[str, list[Mapping[str, Any]]]:
    """Family (file stem) -> stored verdicts of a run folder's ``derived/*.json``."""
    verdicts = {}
    for f in sorted((folder / "derived").glob("*.json")):
        doc = json.loads(f.read_text(encoding="utf-8"))
        if isinstance(doc, dict) and isinstance(doc.get("verdicts"), list):
            verdicts[f.stem] = doc["verdicts"]
    return verdicts


@dataclass(frozen=True)
class StoredVerdicts:
    """What :func:`stored_verdicts` reads: the run's ``run.json`` (``run``, typed), its scale, the
    verdicts by family (file stem) with its companion runs' folded in, and ``parts``: each
    companion run's id -> its 1-min load average before it."""

    run: RunRecord
    study: str
    run_id: str
    scale: str
    verdicts: dict[str, list[Mapping[str, Any]]]
    parts: dict[str, float | None]


def stored_verdicts(run_folder: str | Path) -> StoredVerdicts:
    """The stored verdicts of one run folder (run.json and ``derived/*.json``) and of its
    companion runs (folders ``<run_id>-<part>`` of the same study and scale, e.g. study 04's
    sweep): one notebook execution's verdict tables, without opening its trials."""
    folder = Path(run_folder)
    run = RunStore(folder).read_run()
    if run is None:
        raise ParameterError(f"{folder}: no run.json; give a run folder (data/runs/<study>/<run_id> or "
                             "reports/<study>/<run_id>)")
    study = run.study or folder.parent.name
    scale = scale_of(run.notebook_parameters)
    verdicts = _verdict_files(folder)
    if not verdicts:
        raise ParameterError(f"{folder}: no derived/*.json with verdicts (run the study's notebook on it first)")
    parts: dict[str, float | None] = {}
    for other in sorted(folder.parent.glob(f"{folder.name}-*")):
        o = RunStore(other).read_run() if other.is_dir() else None
        if o is None or (o.study or study) != study or scale_of(o.notebook_parameters) != scale:
            continue
        extra = {k: v for k, v in _verdict_files(other).items() if k not in verdicts}
        if extra:
            verdicts.update(extra)
            parts[o.run_id or other.name] = o.provenance.loadavg_1min
    return StoredVerdicts(run, study, run.run_id or folder.name, scale, verdicts, parts)


def stored_verdict(d: Mapping[str, Any]) -> Verdict:
    """A verdict as ``Comparison.to_json`` stored it (NaN as ``None``, infinity as ``"inf"``)."""
    kw: dict[str, Any] = {}
    for f in dataclasses.fields(Verdict):
        if f.name not in d or f.name == "kind":
            continue
        x = d[f.name]
        if f.type in ("float", float):
            x = math.nan if x is None else float(x)
        kw[f.name] = x
    return Verdict(VerdictKind(d["kind"]), **kw)
