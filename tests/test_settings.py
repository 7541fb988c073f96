"""The ``BENCHLIB_*`` environment variables: defined and read in ``benchlib.core.settings`` only,
read when asked (a variable set at run time counts), refused in one line when not valid, and
all listed in ``docs/settings.md`` (the table there is the module's)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from benchlib.core import settings
from benchlib.core.errors import ParameterError

REPO = Path(__file__).resolve().parent.parent
NAME = re.compile(r"BENCHLIB_[A-Z0-9_]*[A-Z0-9]")


def test_every_setting_is_named_once_and_documented_in_full() -> None:
    names = [s.name for s in settings.SETTINGS]
    assert len(names) == len(set(names)) and all(NAME.fullmatch(n) for n in names)
    assert not set(names) & set(settings.NOT_SETTINGS)
    for s in settings.SETTINGS:
        assert s.kind and s.default and s.meaning and s.valid and s.reader, s.name


def test_the_docs_table_is_the_modules() -> None:
    page = (REPO / "docs" / "settings.md").read_text()
    assert settings.markdown_table() in page, "docs/settings.md is stale: paste `python -m benchlib.core.settings` into it"


def test_a_variable_set_at_run_time_counts_from_the_next_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("BENCHLIB_CACHE", raising=False)
    assert settings.CACHE.value() == Path.home() / ".cache" / "benchlib"
    monkeypatch.setenv("BENCHLIB_CACHE", str(tmp_path))
    assert settings.CACHE.value() == tmp_path
    from benchlib.core.buildcache import cache_root

    assert cache_root() == tmp_path
    monkeypatch.setenv("BENCHLIB_CACHE", "")  # empty counts as unset
    assert settings.CACHE.value() == Path.home() / ".cache" / "benchlib" and not settings.CACHE.is_set()
    monkeypatch.delenv("BENCHLIB_DATA", raising=False)
    assert settings.DATA.get() is None  # no fallback: the reader decides (data/runs of the project)
    with pytest.raises(LookupError, match="BENCHLIB_DATA has no fallback"):
        settings.DATA.value()
    assert settings.ALLOW_REMOTE_TARGET.value({"BENCHLIB_ALLOW_REMOTE_TARGET": "1"}) is True  # another environment
    assert settings.STOP_GRACE_S.value({}) == 60.0


@pytest.mark.parametrize("setting,value,why", [
    (settings.STOP_GRACE_S, "ten", "not a number; valid: seconds from 0 to 3600"),
    (settings.STOP_GRACE_S, "4000", "outside 0..3600; valid: seconds from 0 to 3600"),
    (settings.ALLOW_REMOTE_TARGET, "yes", "valid: 1 (allow), 0 (loopback only)"),
    (settings.DOCKER_LIMITS, "cpus=two", "cpus='two' is not a number; valid: none, or the fields cpus and memory_mb"),
    (settings.DEBIAN_MIRROR, "ftp://mirror/debian", "not an http://, https:// or file:// URL"),
    (settings.DOCKER_BIND_HOST, "0.0.0.0 extra", "not a host name or IP address"),
    (settings.BUILD_CA_BUNDLE, "/nonexistent/ca.pem", "'/nonexistent/ca.pem' does not exist; valid: an existing PEM file"),
])
def test_a_value_that_is_not_valid_is_refused_in_one_line_naming_the_valid_ones(
        monkeypatch: pytest.MonkeyPatch, setting: settings.Setting, value: str, why: str) -> None:
    monkeypatch.setenv(setting.name, value)
    with pytest.raises(ParameterError) as err:
        setting.get()
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{setting.name}={value!r} is not valid")
    assert why in message and "valid: " in message


def test_values_are_parsed_to_their_types(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env = {"BENCHLIB_STOP_GRACE_S": "2.5", "BENCHLIB_DOCKER_LIMITS": "cpus=2,memory_mb=1024",
           "BENCHLIB_DEBIAN_MIRROR": "http://mirror.example/debian/", "BENCHLIB_ALLOW_INSECURE_DOCKER": "0",
           "BENCHLIB_DOCKER_BIND_HOST": "::", "BENCHLIB_BUILD_CA_BUNDLE": "none", "BENCHLIB_K6": "~/bin/k6"}
    assert settings.STOP_GRACE_S.get(env) == 2.5
    assert settings.DOCKER_LIMITS.get(env) == {"cpus": 2.0, "memory_mb": 1024}
    assert settings.DOCKER_LIMITS.get({"BENCHLIB_DOCKER_LIMITS": "none"}) == {}
    assert settings.DEBIAN_MIRROR.get(env) == "http://mirror.example/debian"
    assert settings.ALLOW_INSECURE_DOCKER.get(env) is False and settings.DOCKER_BIND_HOST.get(env) == "::"
    assert settings.BUILD_CA_BUNDLE.get(env) is None and settings.BUILD_CA_BUNDLE.is_set(env)
    assert settings.K6.get(env) == Path.home() / "bin" / "k6"


# -- one reader --------------------------------------------------------------------------------

def _python_files(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (REPO / f).rglob("*.py") if "__pycache__" not in p.parts)


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _reads_of_the_environment(tree: ast.AST) -> list[str]:
    """``BENCHLIB_*`` names read with ``environ.get(...)``, ``environ[...]`` or ``getenv(...)``."""
    found = []
    for node in ast.walk(tree):
        arg = None
        if isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("get", "getenv", "pop"):
            arg = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            arg = node.slice
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and NAME.fullmatch(arg.value):
            found.append(arg.value)
    return found


def test_no_module_but_settings_names_or_reads_a_benchlib_variable() -> None:
    """In the package and bench/, a variable's name as a string appears only in
    benchlib/core/settings.py (everything else asks it: ``settings.CACHE.value()``,
    ``settings.CACHE.name``); prose in docstrings and messages may mention names."""
    bad = []
    for path in _python_files("benchlib", "bench", "scripts"):
        if path == REPO / "benchlib" / "core" / "settings.py":
            continue
        tree = ast.parse(path.read_text())
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs \
                    and NAME.fullmatch(node.value.strip("$")):
                bad.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}")
    assert not bad, "read these through benchlib.core.settings:\n" + "\n".join(bad)


def test_no_test_reads_a_benchlib_variable_itself() -> None:
    bad = [f"{p.relative_to(REPO)}: {n}" for p in _python_files("tests") for n in _reads_of_the_environment(
        ast.parse(p.read_text()))]
    assert not bad, "tests set variables (monkeypatch) and read them through benchlib.core.settings:\n" + "\n".join(bad)


def test_the_finder_sees_a_read() -> None:
    a, b = "BENCHLIB" + "_A", "BENCHLIB" + "_B"  # made up (the next test would find them written out)
    tree = ast.parse(f'import os\nx = os.environ.get("{a}")\ny = os.environ["{b}"]\nz = os.getenv("HOME")')
    assert _reads_of_the_environment(tree) == [a, b]


def test_every_benchlib_name_anywhere_in_the_project_is_a_setting() -> None:
    """Code, scripts, services, tests, notebooks and docs mention no ``BENCHLIB_*`` variable
    that the settings table does not list (or that is not a known non-setting)."""
    known = {s.name for s in settings.SETTINGS} | set(settings.NOT_SETTINGS)
    seen: dict[str, str] = {}
    roots = ["benchlib", "bench", "scripts", "services", "tests", "notebooks", "docs"]
    files = [REPO / "README.md", *(p for r in roots for p in (REPO / r).rglob("*") if p.is_file())]
    for p in files:
        if p.suffix in (".pyc", ".parquet", ".png", ".jar", ".so") or "node_modules" in p.parts:
            continue
        try:
            text = p.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        for name in NAME.findall(text):
            seen.setdefault(name, str(p.relative_to(REPO)))
    unknown = {n: where for n, where in seen.items() if n not in known}
    assert not unknown, f"BENCHLIB_* names that benchlib.core.settings does not define: {unknown}"
    for s in settings.SETTINGS:
        if s.reader.startswith("scripts/"):
            assert s.name in (REPO / s.reader).read_text(), f"{s.reader} does not use {s.name}"
