"""The CLI: thin wrappers, one clear line for user errors, no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchlib.cli import main


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "benchlib.cli", *args], capture_output=True, text=True, timeout=120)


def test_unknown_notebook_is_one_line_listing_valid_ones() -> None:
    out = _run("run", "no_such_notebook")
    assert out.returncode == 2
    assert out.stderr.startswith("benchlib: error: unknown notebook 'no_such_notebook'; valid: 00_quickstart")
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_unknown_parameter_lists_the_notebooks_parameters() -> None:
    out = _run("run", "00_quickstart", "-p", "conections", "4")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "unknown parameter 'conections'; valid: " in out.stderr and "connections" in out.stderr


def test_bad_parameter_value_names_the_declared_type() -> None:
    out = _run("run", "00_quickstart", "-p", "trials", "many")
    assert out.returncode == 2 and "parameter 'trials' is declared int; cannot use 'many'" in out.stderr


def test_services_lists_every_service_with_availability(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["services"]) == 0
    out = capsys.readouterr().out
    assert "go-nethttp-hello" in out and "python-aiohttp-hello" in out
    for line in out.splitlines():
        assert "available" in line or "not runnable here" in line


def test_missing_command_is_a_usage_error() -> None:
    out = _run()
    assert out.returncode == 2 and "usage: benchlib" in out.stderr


def test_version_names_the_package_version_and_the_checkouts_commit() -> None:
    import benchlib
    from benchlib.core.provenance import git_info

    out = _run("--version")
    assert out.returncode == 0 and out.stdout.startswith(f"benchlib {benchlib.__version__}")
    sha = git_info().get("sha")
    if sha:  # tests run from a checkout
        assert f"(git {sha[:12]}" in out.stdout
