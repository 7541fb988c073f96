"""The split of the suite for ``make test`` (``tests/conftest.py``, ``scripts/test.sh``): the
parallel list names files that exist, and the two parts together are the default run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

TESTS = Path(__file__).resolve().parent


def _conftest(config: pytest.Config) -> ModuleType:
    path = str(TESTS / "conftest.py")
    (module,) = [p for p in config.pluginmanager.get_plugins() if getattr(p, "__file__", None) == path]
    return module


def test_every_parallel_entry_names_an_existing_test_file_or_folder(request: pytest.FixtureRequest) -> None:
    entries = _conftest(request.config).PARALLEL_FILES
    missing = [e for e in entries if not ((TESTS / e).is_dir() if e.endswith("/") else (TESTS / e).is_file())]
    assert not missing, f"PARALLEL_FILES names what is not there: {missing}"
    assert len(set(entries)) == len(entries)


def test_measuring_markers_keep_a_test_serial(request: pytest.FixtureRequest) -> None:
    conftest = _conftest(request.config)
    assert set(conftest.SERIAL_MARKERS) == {"integration", "docker", "notebook", "cluster"}
    # a notebook test in a listed file (study 01's) is serial, its pure neighbours are not
    items = {i.nodeid.rsplit("::", 1)[-1]: i for i in request.session.items
             if i.path.name == "test_study01_notebook.py"}
    # collected in this run (not under -k or a single file; `--part` keeps only its own half)
    if "test_notebook_runs_and_its_tables_hold_every_arm" in items:
        assert not conftest.is_parallel_safe(items["test_notebook_runs_and_its_tables_hold_every_arm"])
    if "test_parameters_and_their_defaults" in items:
        assert conftest.is_parallel_safe(items["test_parameters_and_their_defaults"])
    assert not any(conftest.is_parallel_safe(i) for i in request.session.items if i is request.node)


def test_the_parts_add_up_to_the_default_run() -> None:
    def ids(*args: str) -> list[str]:
        out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
                              *args, "tests/test_sweep.py", "tests/test_suite_parts.py", "tests/loadgen/test_open.py"],
                             cwd=TESTS.parent, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stdout + out.stderr
        return [line for line in out.stdout.splitlines() if "::" in line]

    everything, parallel, serial = ids(), ids("--part", "parallel"), ids("--part", "serial")
    assert sorted(parallel + serial) == sorted(everything) and not set(parallel) & set(serial)
    assert any("test_sweep" in i for i in parallel) and any("test_open" in i for i in serial)
    assert all("test_suite_parts" in i for i in serial if "test_open" not in i)  # not listed: serial
