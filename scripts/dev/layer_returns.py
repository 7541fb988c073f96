"""Follow an Experiment's trials through a run and count the calls that go back up the layers.

The measure behind issue 37's "returns to a higher layer": ``run_experiment`` runs a small
experiment on :mod:`benchlib.run.testing`'s stand-ins (no service process, no load engine; the
contract check still speaks HTTP to each fake service on 127.0.0.1) as a study notebook runs it,
with a sequential stopping rule (``until``) and the ``decided`` hook of the progress line, under
``sys.setprofile``. Every call made in the run's thread from a module of a lower package into a
module of a higher one (``tests/test_layers.py``'s order: core, stats, loadgen, runtime, store,
run, analysis, publish) is counted; the caller is the nearest benchlib frame on the stack (a call
through the standard library, e.g. a ``contextlib`` callback, counts as the benchlib frame's).
Module bodies (imports) are not counted: a first run imports everything, the second is measured.
The stand-ins count as the layer they stand in for (the fake runtime and its services:
``runtime``; the fake load and cross-check: ``loadgen``).

A second count says how often the run reads itself back: calls of ``RunStore.trials`` (a
listing of the run folder's trial files, their metadata read), ``RunStore.read_run`` and
``TrialRecord.from_meta`` (a stored trial's record made from its metadata), as when the runner
reopened the whole run through the read side after every block.

Prints the upward calls' distinct edges (from function -> to function, with how often), the
reads, and totals;
``--json`` prints them as one JSON object. ``--late-imports benchlib/run`` lists instead the
benchlib imports made inside functions of a folder's modules.

    .venv/bin/python scripts/dev/layer_returns.py [--blocks 6] [--json]
    .venv/bin/python scripts/dev/layer_returns.py --late-imports benchlib/run
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

LAYERS: tuple[str, ...] = ("core", "stats", "loadgen", "runtime", "store", "run", "analysis", "publish")

#: What each stand-in of benchlib.run.testing stands in for (by the first part of its qualified name).
STAND_INS = {"FakeRuntime": "runtime", "FakeHandle": "runtime", "_Answer": "runtime", "_Server": "runtime",
             "write_manifest": "runtime", "fake_manifests": "runtime", "FakeLoad": "loadgen", "Outcome": "loadgen",
             "_rows": "loadgen", "_meta": "loadgen", "FakeCrossCheck": "loadgen"}


def _place(frame: FrameType) -> tuple[str, int] | None:
    """``(module:function, layer index)`` of a benchlib frame in one of the packages, else ``None``."""
    module = str(frame.f_globals.get("__name__", ""))
    parts = module.split(".")
    if parts[0] != "benchlib" or len(parts) < 2 or parts[1] not in LAYERS:
        return None
    qual = frame.f_code.co_qualname
    layer = parts[1]
    if module == "benchlib.run.testing":
        layer = STAND_INS.get(qual.split(".")[0], layer)
    return f"{module}:{qual}", LAYERS.index(layer)


def _caller(frame: FrameType) -> tuple[str, int] | None:
    """The nearest benchlib frame in one of the packages above ``frame`` (``None``: none, or a
    benchlib frame outside the packages, the notebook API, comes first)."""
    up = frame.f_back
    while up is not None:
        place = _place(up)
        if place is not None:
            return place
        if str(up.f_globals.get("__name__", "")).startswith("benchlib"):
            return None
        up = up.f_back
    return None


def _stand_in(place: str) -> bool:
    return place.startswith("benchlib.run.testing:")


#: The functions whose calls say the run reads itself back (see the module's docstring).
READS = ("benchlib.store.runstore:RunStore.trials", "benchlib.store.runstore:RunStore.read_run",
         "benchlib.store.records.trial:TrialRecord.from_meta")


class Tracer:
    """Counts upward calls and the run's reads of itself (see the module's docstring) while
    installed with ``sys.setprofile``."""

    def __init__(self) -> None:
        self.calls: Counter[tuple[str, str]] = Counter()
        self.reads: Counter[str] = Counter()
        self.benchlib_calls = 0

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call" or frame.f_code.co_name == "<module>":
            return
        here = _place(frame)
        if here is None:
            return
        self.benchlib_calls += 1
        if here[0] in READS:
            self.reads[here[0]] += 1
        caller = _caller(frame)
        if caller is None or (_stand_in(caller[0]) and _stand_in(here[0])):
            return  # the fake load finds its fake service through the fake runtime: not the runner's path
        if here[1] > caller[1]:
            self.calls[(caller[0], here[0])] += 1


def _experiment(blocks: int) -> tuple[Any, dict[str, Any]]:
    from benchlib.analysis.questions import Family, decided_questions
    from benchlib.analysis.stopping import stopping_rule
    from benchlib.core.model import Arm, Condition, Experiment, LoadSpec

    exp = Experiment("layer-returns", (Arm("A", "a"), Arm("B", "b")),
                     (Condition("main", LoadSpec(connections=2, duration_s=0.3, warmup_s=0.1)),), trials=blocks, seed=3,
                     between_trials_s=0)
    families = [Family.against("ab", "A", ["B"], conditions=["main"], metrics=["p50_ms"])]
    stopping = stopping_rule(families, blocks, "yes")
    return exp, {"until": stopping.until, "decided": decided_questions(families, sequential=stopping.design)}


def _edges(counter: Counter[tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"from": a, "to": b, "times": n} for (a, b), n in sorted(counter.items())]


def measure(blocks: int) -> dict[str, Any]:
    """Run the experiment twice (the first imports everything), the second under the tracer."""
    from benchlib.core import settings
    from benchlib.run.runner import run_experiment
    from benchlib.run.testing import FakeLoad, FakeRuntime, Outcome, fake_manifests

    with tempfile.TemporaryDirectory(prefix="layer-returns-") as tmp:
        os.environ[settings.SERVICES.name] = str(fake_manifests(Path(tmp) / "services", ("a", "b")))
        tracer = Tracer()
        for attempt in ("warm", "measured"):
            rt = FakeRuntime()
            load = FakeLoad(rt, {"a": [Outcome(latency_ms=2.0)] * blocks, "b": [Outcome(latency_ms=3.0)] * blocks})
            exp, hooks = _experiment(blocks)
            if attempt == "measured":
                sys.setprofile(tracer)
            try:
                run = run_experiment(exp, run_id=attempt, out_dir=Path(tmp) / "runs", progress=False, runtime=rt,
                                     load=load, **hooks)
            finally:
                sys.setprofile(None)
    return {"blocks": blocks, "trials": len(run.trials), "benchlib_calls": tracer.benchlib_calls,
            "upward_calls": {"edges": len(tracer.calls), "times": sum(tracer.calls.values()),
                             "list": _edges(tracer.calls)},
            "reads": {name: tracer.reads[name] for name in READS}}


def late_imports(folder: Path) -> list[str]:
    """Every import of a benchlib module made inside a function (or method) of the modules under
    ``folder``, as ``path:line module``."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else
                         ["(relative)"] if isinstance(node, ast.ImportFrom) else [])
                found += [f"{path}:{node.lineno} {n}" for n in names if n.startswith("benchlib") or n == "(relative)"]
    return sorted(set(found))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=6, help="blocks of the experiment (2 arms, 1 condition; default 6)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--late-imports", metavar="FOLDER", type=Path,
                    help="instead: list the benchlib imports made inside functions of FOLDER's modules")
    args = ap.parse_args(argv)
    if args.late_imports is not None:
        found = late_imports(args.late_imports)
        print("\n".join(found) + f"\n{len(found)} benchlib import(s) inside functions under {args.late_imports}")
        return 0
    assert threading.current_thread() is threading.main_thread()
    got = measure(args.blocks)
    if args.json:
        print(json.dumps(got, indent=1))
        return 0
    up = got["upward_calls"]
    print(f"calls up the layers: {up['edges']} distinct, {up['times']} times")
    for e in up["list"]:
        print(f"  {e['times']:5d}  {e['from']}  ->  {e['to']}")
    print("the run read back: " + ", ".join(f"{name.split(':')[1]} {n}" for name, n in got["reads"].items()))
    print(f"({got['trials']} trials stored, {got['blocks']} blocks; {got['benchlib_calls']} benchlib calls in the "
          "run's thread)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
