"""The pure core: benchlib.stats and benchlib.plots import nothing from runtime, loadgen, store."""

from __future__ import annotations

import subprocess
import sys

import pytest

FORBIDDEN = ("benchlib.runtime", "benchlib.loadgen", "benchlib.store")


@pytest.mark.parametrize("module", ["benchlib.stats", "benchlib.plots", "benchlib.stats.simulate"])
def test_pure_modules_do_not_import_io_layers(module):
    code = (
        f"import sys, {module}\n"
        f"import benchlib.stats.compare, benchlib.stats.shift, benchlib.stats.bootstrap\n"
        f"bad = sorted(m for m in sys.modules if m.startswith({FORBIDDEN!r}))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
