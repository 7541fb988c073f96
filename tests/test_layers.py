"""benchlib's layout is its architecture: eight packages in one order, each importing only from
the packages below it (docs/architecture.md), no import cycles, and a pure core of computations."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "benchlib"

#: The packages from the bottom up: each may import from those before it and from itself only.
#: ``benchlib`` itself (the notebook API, ``cli``) and ``_project`` (tools that keep README,
#: notebooks and pages in sync with the data) stand above them all.
LAYERS: tuple[str, ...] = ("core", "stats", "loadgen", "runtime", "store", "run", "analysis", "publish")
TOP: tuple[str, ...] = ("benchlib", "benchlib.cli", "benchlib._project")

#: Modules of pure computation: they import no I/O layer (and no Docker or HTTP client).
PURE = ["core/model.py", "core/schema.py", "core/design.py", "core/placement.py", "core/sweep.py", "core/slicing.py", "stats",
        "store/records/rows.py", "store/records/peer.py", "store/records/limits.py", "store/records/load.py",
        "store/records/cpu.py", "store/records/disturbance.py", "store/records/interleave.py", "store/records/_convert.py",
        "store/records/plan.py",
        "store/records/run.py", "run/events.py",
        "analysis/formats.py", "analysis/params.py", "analysis/conclusion.py", "analysis/plots.py"]
FORBIDDEN = ("benchlib.runtime", "benchlib.loadgen", "benchlib.store.runstore", "benchlib.store.results",
             "benchlib.run", "docker", "httpx")


def _modules(entry: str) -> list[Path]:
    p = PKG / entry
    return sorted(p.rglob("*.py")) if p.is_dir() else ([p] if p.exists() else [])


def test_every_module_lives_in_one_of_the_packages() -> None:
    stray = sorted(p.name for p in PKG.glob("*.py") if p.stem not in ("__init__", "cli"))
    packages = sorted(p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists())
    assert not stray, f"modules outside the eight packages: {stray}"
    assert packages == sorted([*LAYERS, "_project"]), packages


def test_no_module_name_is_used_twice() -> None:
    names: dict[str, list[str]] = {}
    for p in PKG.rglob("*.py"):
        if p.name != "__init__.py":
            names.setdefault(p.name, []).append(str(p.relative_to(PKG)))
    assert not {k: v for k, v in names.items() if len(v) > 1}


def layer_of(module: str) -> int:
    """The index of a module's package in :data:`LAYERS` (``len(LAYERS)`` for the top)."""
    parts = module.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else len(LAYERS)


def test_each_package_imports_only_from_the_packages_below_it() -> None:
    graph = import_graph()
    up = sorted(f"{m} -> {t}" for m, ts in graph.items() for t in ts if layer_of(t) > layer_of(m))
    assert not up, "imports back up (move the shared piece down, or the importer up):\n" + "\n".join(up)


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


# -- no import cycles ---------------------------------------------------------------------------

def _module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """benchlib's modules and the benchlib modules each imports, from the source (AST): imports
    at module level, in functions and under ``TYPE_CHECKING`` alike (an import moved into a
    function still makes a cycle). ``from benchlib.x import y`` counts as importing
    ``benchlib.x.y`` when that is a module, else ``benchlib.x``."""
    modules = {_module_name(p): p for p in PKG.rglob("*.py")}

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for t in targets:
                if t.split(".")[0] == "benchlib" and (o := owner(t)) is not None and o != mod:
                    graph[mod].add(o)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_cycle_finder_finds_a_cycle_and_names_its_edges() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert import_cycles(graph) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_graph_sees_function_level_and_relative_imports() -> None:
    graph = import_graph()
    assert "benchlib.runtime.docker.connection" in graph["benchlib.runtime.docker.images"]  # module level
    assert "benchlib.runtime.docker.leftovers" in graph["benchlib.runtime.cleanup"]  # in a function
    assert "benchlib.store.runstore" in graph["benchlib.store.records.trial"]  # in a function


def test_benchlib_has_no_import_cycles() -> None:
    graph = import_graph()
    cycles = import_cycles(graph)
    described = ["{" + ", ".join(c) + "}: " + "; ".join(f"{m} -> {', '.join(sorted(graph[m] & set(c)))}" for m in c)
                 for c in cycles]
    assert not cycles, "import cycles (move the shared piece into a module both can import):\n" + "\n".join(described)
