"""Shared test set-up: tests marked ``docker`` are skipped, with the reason and the command
that starts an engine, when no Docker engine answers; every other test runs as usual. The
``executed_notebook`` fixture runs a study notebook under papermill and checks that it ran
cleanly.

``--part parallel`` / ``--part serial`` split the suite in two for ``make test``
(``scripts/test.sh``): the *parallel* part, run by pytest-xdist workers side by side, is the
tests of :data:`PARALLEL_FILES` that carry none of :data:`SERIAL_MARKERS`; everything else
(services, pinned CPUs, load, timing, notebooks) is the *serial* part, run alone afterwards.
The two parts together are exactly the default run (``--part all``).

With ``--durations``, the terminal summary adds the time by test file (:func:`file_times`);
when ``$BENCHLIB_BUILD_TIMES`` is set, it ends with the table of builds and build-cache hits
recorded there (:func:`benchlib.core.buildcache.build_times_summary`).
"""

from __future__ import annotations

import functools
import os
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


#: Test files (relative to ``tests/``) of pure computations: statistics, tables, parsing,
#: manifests, notebooks' parameters read without running them. None of their tests starts a
#: service, pins a CPU or measures time, so xdist may run them side by side. A file not listed
#: here runs serially: list a new file only when that holds for every test in it.
PARALLEL_FILES: tuple[str, ...] = (
    "stats/",
    "analysis/test_client_cost.py", "analysis/test_conclusion.py", "analysis/test_conclusion_rule.py",
    "analysis/test_params_fmt_display.py", "analysis/test_pilot.py",
    "analysis/test_questions.py", "analysis/test_run_info.py", "analysis/test_tables_peers.py",
    "analysis/test_variance_sources.py",
    "cluster/test_cluster_pure.py", "loadgen/test_http1_props.py", "loadgen/test_shares.py", "peers/test_ghz.py",
    "test_bad_input.py", "test_check_subjects.py", "test_cli.py", "test_cold_ci.py", "test_contract.py", "test_design.py",
    "test_environment_sync.py", "test_exported_members.py", "test_history.py", "test_layers.py", "test_manifest.py",
    "test_measurements.py",
    "test_prefetch.py",
    "test_model.py", "test_plots.py", "test_progress.py", "test_records.py", "test_results.py", "test_server_cpu.py",
    "test_settings.py", "test_settle.py", "test_site.py", "test_store.py", "test_studies_guide.py", "test_studypages.py",
    "test_sweep.py",
    "test_study01_notebook.py", "test_study02_notebook.py", "test_study03_notebook.py",
    "test_study04_notebook.py", "test_study05_notebook.py",
)

#: A test with one of these markers is serial wherever its file is listed.
SERIAL_MARKERS: tuple[str, ...] = ("integration", "docker", "notebook", "cluster")

PARTS = ("all", "parallel", "serial")
_TESTS_DIR = Path(__file__).resolve().parent


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--part", choices=PARTS, default="all",
                     help="run only the parallel-safe tests (parallel), only the others (serial), or all (default)")


def pytest_configure(config: pytest.Config) -> None:
    # the disturbance measure is recorded and reported, never a reason to invalidate a trial in
    # the suite: its tests assert what the code decides, not how busy the machine's host was
    # (tests/test_disturbance.py sets `judge` where it tests the rule)
    os.environ.setdefault("BENCHLIB_DISTURBANCE_RULE", "record")
    # the pause between trials (0.5 s by default, for sockets and caches to settle before the
    # next measurement) is at most 0.1 s in the suite: a study notebook's test runs up to 48 trials
    os.environ.setdefault("BENCHLIB_MAX_BETWEEN_TRIALS_S", "0.1")
    workers = config.getoption("numprocesses", default=None)
    if workers and config.getoption("--part") != "parallel":
        raise pytest.UsageError(
            f"-n {workers} would run tests that start services, pin CPUs or measure side by side; "
            "add --part parallel (then run --part serial without -n), or use `make test`")
    from benchlib.core.settings import VALIDATION_REPORT

    if workers and VALIDATION_REPORT.get() is not None:
        raise pytest.UsageError(f"{VALIDATION_REPORT.name} collects the validation figures in one process; "
                                "run without -n (e.g. pytest -m slow tests/stats/test_validation.py)")


def is_parallel_safe(item: pytest.Item) -> bool:
    """Is ``item`` in the parallel part: its file listed in :data:`PARALLEL_FILES`, and none
    of :data:`SERIAL_MARKERS` on it?"""
    try:
        rel = item.path.resolve().relative_to(_TESTS_DIR).as_posix()
    except ValueError:
        return False
    listed = any(rel == f or (f.endswith("/") and rel.startswith(f)) for f in PARALLEL_FILES)
    return listed and not any(item.get_closest_marker(m) is not None for m in SERIAL_MARKERS)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    part = config.getoption("--part")
    if part == "all":
        return
    keep = [i for i in items if is_parallel_safe(i) == (part == "parallel")]
    dropped = [i for i in items if is_parallel_safe(i) != (part == "parallel")]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = keep


def file_times(reports: list[Any]) -> list[tuple[str, float, int]]:
    """Where a run's time went by test file: ``(file, seconds, tests)`` from pytest's test
    reports (each with ``nodeid``, ``when`` and ``duration`` in seconds; setup, call and
    teardown summed), the longest first."""
    seconds: dict[str, float] = {}
    tests: dict[str, set[str]] = {}
    for r in reports:
        if getattr(r, "when", None) not in ("setup", "call", "teardown"):
            continue
        path = r.nodeid.split("::", 1)[0]
        seconds[path] = seconds.get(path, 0.0) + float(r.duration)
        tests.setdefault(path, set()).add(r.nodeid)
    return sorted(((f, s, len(tests[f])) for f, s in seconds.items()), key=lambda t: (-t[1], t[0]))


def file_times_table(rows: list[tuple[str, float, int]]) -> str:
    """:func:`file_times` as lines: seconds, tests, file; then the total."""
    lines = [f"{'s':>8}  {'tests':>5}  file"] + [f"{s:8.1f}  {n:5d}  {f}" for f, s, n in rows]
    lines.append(f"total: {sum(s for _, s, _ in rows):.1f} s in {sum(n for _, _, n in rows)} tests, "
                 f"{len(rows)} files (test time, summed over workers)")
    return "\n".join(lines)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Where the time went in this run, after pytest's ``--durations`` (when asked for): by
    test file (every file, setup, call and teardown summed), then the ``$BENCHLIB_BUILD_TIMES`` file's table of
    builds (``scripts/test.sh`` sets one file per part)."""
    from benchlib.core import buildcache, settings

    reports = [r for key in ("passed", "failed", "skipped", "error", "") for r in terminalreporter.stats.get(key, [])
               if hasattr(r, "duration") and hasattr(r, "nodeid")]
    rows = file_times(reports) if config.getoption("durations", None) is not None else []
    if rows:
        terminalreporter.write_sep("=", "time by test file")
        terminalreporter.write_line(file_times_table(rows))
    path = settings.BUILD_TIMES.get()
    records = buildcache.read_build_records(path) if path is not None else []
    if records:
        terminalreporter.write_sep("=", f"build times ({path})")
        terminalreporter.write_line(buildcache.build_times_summary(records))


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
    in the report); return the :class:`benchlib.publish.execute.NotebookRun`."""
    def run(name: str, parameters: Mapping[str, Any]) -> Any:
        import nbformat

        from benchlib.publish.execute import run_notebook

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
