"""Shared test set-up: tests marked ``docker`` are skipped, with the reason and the command
that starts an engine, when no Docker engine answers; every other test runs as usual. The
``executed_notebook`` fixture runs a study notebook under papermill and checks that it ran
cleanly."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest


@functools.lru_cache(maxsize=1)
def docker_unavailable_reason() -> str | None:
    """``None`` when a Docker engine answers, else why not (cached for the session)."""
    from benchlib.runtime.docker import engine_unavailable_reason

    reason = engine_unavailable_reason()
    if reason is None:
        return None
    return f"{reason} (the docker-marked tests need an engine: `sudo scripts/docker-engine.sh start`)"


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("docker") is not None:
        reason = docker_unavailable_reason()
        if reason is not None:
            pytest.skip(f"no Docker engine: {reason}")


@pytest.fixture
def executed_notebook(tmp_path: Path) -> Callable[[str, Mapping[str, Any]], Any]:
    """``run(name, parameters)``: execute the notebook with papermill, its runs stored under
    ``tmp_path / "runs"`` (``out_dir``) and its report under ``tmp_path / "reports"``; assert
    that it succeeded, that no cell raised and that nothing was written to stderr (no warning
    in the report); return the :class:`benchlib.report.NotebookRun`."""
    def run(name: str, parameters: Mapping[str, Any]) -> Any:
        import nbformat

        from benchlib.report import run_notebook

        done = run_notebook(name, {**parameters, "out_dir": str(tmp_path / "runs")}, reports_dir=tmp_path / "reports")
        assert done.ok, done.error
        outputs = [o for c in nbformat.read(str(done.executed), as_version=4).cells if c.cell_type == "code"
                   for o in c.get("outputs", [])]
        errors = [o for o in outputs if o.output_type == "error"]
        assert not errors, errors[0].get("evalue")
        stderr = [o.text for o in outputs if o.output_type == "stream" and o.name == "stderr"]
        assert not stderr, stderr
        return done

    return run
