"""environment.yml must mirror pyproject.toml's dependencies and every extra (names and lower
bounds); requirements.lock must pin each of them (scripts/lock.sh makes it)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: PyPI name -> conda-forge name, where they differ.
CONDA_NAMES = {"docker": "docker-py", "ray": "ray-core"}


def _req(spec: str) -> tuple[str, str]:
    m = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*(.*)", spec)
    assert m, spec
    return m.group(1).lower(), m.group(2).replace(" ", "")


def _pyproject() -> dict[str, str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    deps = list(data["project"]["dependencies"])
    for extra in data["project"]["optional-dependencies"].values():
        deps += extra
    return dict(_req(d) for d in deps)


def _environment() -> tuple[dict[str, str], dict[str, str], str]:
    conda: dict[str, str] = {}
    pip: dict[str, str] = {}
    python = ""
    section = None
    for line in (ROOT / "environment.yml").read_text().splitlines():
        stripped = line.split("#", 1)[0].rstrip()
        if not stripped.strip():
            continue
        if stripped.startswith("dependencies:"):
            section = "conda"
            continue
        if re.match(r"^\s+- pip:\s*$", stripped):
            section = "pip"
            continue
        m = re.match(r"^\s+-\s+(.+)$", stripped)
        if not m or section is None:
            continue
        item = m.group(1).strip()
        if item.startswith("-e ") or item == "pip":
            continue
        if item.startswith("python="):
            python = item.split("=", 1)[1]
            continue
        name, bound = _req(item)
        (conda if section == "conda" else pip)[name] = bound
    return conda, pip, python


def test_every_pyproject_dependency_is_in_environment_yml_with_the_same_bound() -> None:
    conda, pip, _ = _environment()
    missing, different = [], []
    for name, bound in _pyproject().items():
        env_name = CONDA_NAMES.get(name, name)
        got = conda.get(env_name, pip.get(name))
        if got is None:
            missing.append(name)
        elif got != bound:
            different.append(f"{name}: pyproject {bound!r}, environment.yml {got!r}")
    assert not missing, f"in pyproject.toml but not in environment.yml: {missing}"
    assert not different, "bounds differ: " + "; ".join(different)


def test_environment_yml_has_nothing_pyproject_lacks() -> None:
    conda, pip, _ = _environment()
    py = _pyproject()
    reverse = {v: k for k, v in CONDA_NAMES.items()}
    extra = [n for n in conda if reverse.get(n, n) not in py] + [n for n in pip if n not in py]
    assert not extra, f"in environment.yml but not in pyproject.toml: {extra}"


def test_python_version_matches_requires_python() -> None:
    _, _, python = _environment()
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    lower = data["project"]["requires-python"].removeprefix(">=")
    assert python.startswith(lower), (python, lower)
