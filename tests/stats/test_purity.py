"""The pure core: importing benchlib.stats and benchlib.analysis.plots (and everything they pull in,
transitively) loads nothing from runtime, loadgen, store or runner."""

from __future__ import annotations

import subprocess
import sys

FORBIDDEN = ("benchlib.runtime", "benchlib.loadgen", "benchlib.store.runstore", "benchlib.run.runner", "docker", "httpx")
MODULES = ("benchlib.stats", "benchlib.analysis.plots", "benchlib.stats.simulate", "benchlib.stats.validation",
           "benchlib.stats.compare", "benchlib.stats.shift", "benchlib.stats.bootstrap")


def test_pure_modules_do_not_import_io_layers():
    code = (
        "import importlib, sys\n"
        f"for m in {MODULES!r}: importlib.import_module(m)\n"
        f"bad = sorted(m for m in sys.modules if m.startswith({FORBIDDEN!r}))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
