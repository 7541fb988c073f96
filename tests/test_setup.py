"""scripts/setup.sh's Python environment: the project's .venv made from BASE_PYTHON (CI: Debian's
externally managed /usr/bin/python3), holding exactly requirements.lock, with the kernel
``benchlib`` registered; an externally managed interpreter given as PYTHON is refused."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
IN_PROJECT_VENV = Path(sys.prefix).resolve() == VENV.resolve()


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def lock_pins() -> dict[str, str]:
    """requirements.lock's pins: canonical name -> version."""
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)==([^\s;\\]+)", line)
        if m:
            pins[_canonical(m.group(1))] = m.group(2)
    return pins


def _real_executable(python: str) -> str:
    out = subprocess.run([python, "-c", "import os, sys; print(os.path.realpath(sys.executable))"],
                         capture_output=True, text=True, check=True, timeout=60)
    return out.stdout.strip()


def _python_picks_another_environment() -> bool:
    """``PYTHON`` names an environment other than the project's .venv (``make`` passes
    ``PYTHON=.venv/bin/python``, relative to the project, for the venv itself)."""
    given = os.environ.get("PYTHON")
    if not given:
        return False
    return Path(os.path.normpath(ROOT / given)) != VENV / "bin" / "python"


@pytest.mark.skipif(not os.environ.get("BASE_PYTHON") or _python_picks_another_environment(),
                    reason="BASE_PYTHON not given (CI's .ci/run gives /usr/bin/python3), or PYTHON picks another "
                           "environment")
def test_the_suite_runs_in_the_project_venv_made_from_BASE_PYTHON() -> None:
    base = os.environ["BASE_PYTHON"]
    assert IN_PROJECT_VENV, f"the tests run in {sys.prefix}, not in {VENV} (scripts/setup.sh's venv)"
    assert sys.prefix != sys.base_prefix, "not a virtual environment"
    assert os.path.realpath(sys._base_executable) == _real_executable(base), (sys._base_executable, base)
    if base == "/usr/bin/python3" and Path("/etc/debian_version").exists():
        # the point of CI's choice: the base refuses pip installs (PEP 668); the venv does not
        marker = Path(sysconfig.get_path("stdlib")) / "EXTERNALLY-MANAGED"
        assert marker.exists(), f"{base} carries no {marker.name} marker here"


@pytest.mark.skipif(not IN_PROJECT_VENV, reason="not running in the project's .venv (scripts/setup.sh)")
def test_the_project_venv_holds_exactly_the_lock_and_the_kernel() -> None:
    wrong = {}
    for name, pinned in lock_pins().items():
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            have = "not installed"
        if have != pinned:
            wrong[name] = f"lock {pinned}, installed {have}"
    assert not wrong, wrong
    import benchlib

    assert Path(benchlib.__file__).resolve().is_relative_to(ROOT), "benchlib is not the editable install of this checkout"
    spec = json.loads((VENV / "share" / "jupyter" / "kernels" / "benchlib" / "kernel.json").read_text())
    assert spec["argv"][:3] == [str(VENV / "bin" / "python"), "-m", "benchlib.publish.kernel"]


def test_the_lock_pins_every_dependency_extra_and_build_requirement_with_hashes() -> None:
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted = list(data["project"]["dependencies"]) + list(data["build-system"]["requires"])
    for extra in data["project"]["optional-dependencies"].values():
        wanted += extra
    pins = lock_pins()
    missing = [w for w in wanted if _canonical(re.split(r"[<>=!~;\[ ]", w, maxsplit=1)[0]) not in pins]
    assert not missing, f"not in requirements.lock (run scripts/lock.sh): {missing}"
    lines = (ROOT / "requirements.lock").read_text().splitlines()
    unhashed = [line.split("==")[0] for i, line in enumerate(lines)
                if re.match(r"^[A-Za-z0-9].*==", line) and not lines[i + 1].strip().startswith("--hash=sha256:")]
    assert not unhashed, f"pins without hashes: {unhashed}"
    header = [line for line in lines if line.startswith("#")]
    assert any("scripts/lock.sh" in line for line in header), "the lock's header says how to regenerate it"


@pytest.mark.skipif(not (Path("/usr/bin/python3").exists() and any(Path("/usr/lib").glob("python3*/EXTERNALLY-MANAGED"))),
                    reason="no externally managed /usr/bin/python3 here")
def test_setup_refuses_an_externally_managed_PYTHON_and_says_what_to_do_instead() -> None:
    env = {**os.environ, "PYTHON": "/usr/bin/python3", "BENCHLIB_SKIP_APT": "1", "BENCHLIB_SKIP_DOCKER": "1"}
    out = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh")], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "externally managed" in out.stderr and "leave PYTHON unset" in out.stderr, out.stderr
    assert "installing" not in out.stdout  # refused before pip ran


def test_the_kernel_benchlib_runs_this_interpreter_and_benchlib_run_finds_its_own_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from jupyter_client.kernelspec import KernelSpecManager

    from benchlib.publish import kernel

    folder = kernel.install(tmp_path / "elsewhere")
    spec = json.loads((folder / "kernel.json").read_text())
    assert folder.name == kernel.NAME and spec["argv"] == [sys.executable, "-m", "benchlib.publish.kernel", "-f",
                                                           "{connection_file}"]
    before = (folder / "kernel.json").stat().st_mtime_ns
    assert kernel.install(tmp_path / "elsewhere") == folder and (folder / "kernel.json").stat().st_mtime_ns == before
    # another environment's kernel of the same name, found before this one's: benchlib run still uses its own
    other = {**spec, "argv": ["/nonexistent/python", *spec["argv"][1:]]}
    (folder / "kernel.json").write_text(json.dumps(other))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "elsewhere"))
    assert KernelSpecManager().get_kernel_spec(kernel.NAME).argv[0] == "/nonexistent/python"
    with kernel.this_python_kernel() as name:
        assert name == kernel.NAME and KernelSpecManager().get_kernel_spec(name).argv[0] == sys.executable
    assert os.environ["JUPYTER_PATH"] == str(tmp_path / "elsewhere")


def test_the_kernel_drops_only_the_interrupt_line_that_every_shutdown_may_cause() -> None:
    import logging

    from benchlib.publish.kernel import _drop_shutdown_interrupt

    def record(msg: str) -> logging.LogRecord:
        return logging.LogRecord("BenchlibKernelApp", logging.ERROR, __file__, 1, msg, None, None)

    assert not _drop_shutdown_interrupt(record("KeyboardInterrupt caught in kernel."))
    assert _drop_shutdown_interrupt(record("Exception in message handler:"))
