"""The pure core imports nothing from runtime, loadgen or store (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "benchlib"
PURE = ["model.py", "schema.py", "design.py", "stats", "plots.py", "records/rows.py", "records/peer.py",
        "records/limits.py", "records/load.py", "records/_convert.py", "analysis/fmt.py", "analysis/params.py",
        "analysis/conclusion.py"]
FORBIDDEN = ("benchlib.runtime", "benchlib.loadgen", "benchlib.store", "benchlib.runner", "docker", "httpx")


def _modules(entry: str) -> list[Path]:
    p = PKG / entry
    return sorted(p.rglob("*.py")) if p.is_dir() else ([p] if p.exists() else [])


@pytest.mark.parametrize("path", [m for e in PURE for m in _modules(e)], ids=lambda p: str(p.relative_to(PKG)))
def test_pure_modules_do_not_import_io_layers(path: Path) -> None:
    tree = ast.parse(path.read_text())
    bad = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        bad += [n for n in names if n.startswith(FORBIDDEN)]
    assert not bad, f"{path.name} imports {bad}"


def test_import_benchlib_is_light_and_needs_no_docker() -> None:
    import subprocess
    import sys

    code = ("import sys, benchlib; benchlib.LoadSpec(); "
            "heavy = [m for m in ('docker', 'pandas', 'matplotlib', 'pyarrow', 'papermill') if m in sys.modules]; "
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"DOCKER_HOST": "unix:///nonexistent.sock", "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "[]", out.stdout
