"""scripts/dev/cold-ci.sh's choices, without running it (its real run stops the Docker engine
and moves every cache aside): ``--dry-run`` only prints, ``--report`` swaps .ci/run for a
new user's ``make report`` and says where its time is recorded, a bad argument names the valid ones."""

from __future__ import annotations

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "dev" / "cold-ci.sh"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=120, check=False)


def test_report_mode_dry_run_names_make_report_and_the_first_run_record() -> None:
    done = _run("--dry-run", "--report")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    plan = next(ln for ln in lines if "would clone" in ln)
    assert "run make report (BASE_PYTHON=/usr/bin/python3) under time" in plan and ".ci/run" not in plan
    assert "record its time as first-run (builds cold)" in plan and plan.endswith("data/measurements.json")
    assert lines[-1] == "cold-ci: dry run: nothing changed"


def test_unknown_argument_names_the_valid_ones() -> None:
    done = _run("--reports")
    assert done.returncode == 2
    assert "unknown argument '--reports'" in done.stderr and "--report, --dry-run" in done.stderr


def test_the_time_by_test_file_sums_each_files_phases_longest_first() -> None:
    from types import SimpleNamespace as R

    from tests.conftest import file_times, file_times_table

    reports = [R(nodeid="tests/a.py::t1", when="setup", duration=2.0), R(nodeid="tests/a.py::t1", when="call", duration=1.0),
               R(nodeid="tests/a.py::t2", when="call", duration=0.5), R(nodeid="tests/b.py::t", when="call", duration=9.0),
               R(nodeid="tests/b.py::t", when="teardown", duration=1.0), R(nodeid="tests/c.py", when="collect", duration=5.0)]
    rows = file_times(reports)
    assert rows == [("tests/b.py", 10.0, 1), ("tests/a.py", 3.5, 2)]
    table = file_times_table(rows)
    assert table.splitlines()[1].split() == ["10.0", "1", "tests/b.py"]
    assert table.endswith("total: 13.5 s in 3 tests, 2 files (test time, summed over workers)")
