"""Provenance: the facts about the machine and software that a run's numbers depend on.

Collected into ``run.json`` for every run: CPU model and count, governor, kernel, OS,
memory, Python and package versions, toolchain versions, the git SHA of the project (and
whether the tree was dirty), cgroup layout and load average at the start.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess
import sys
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["collect", "git_info", "package_versions"]

#: Python packages whose versions matter for the numbers or the analysis.
PACKAGES = ("benchlib", "numpy", "scipy", "pandas", "pyarrow", "uvloop", "httpx", "seaborn", "matplotlib",
            "docker", "papermill", "nbconvert", "aiohttp", "hdrhistogram")


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (``platform.processor()`` elsewhere)."""
    info = _read("/proc/cpuinfo") or ""
    for line in info.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def package_versions(names: Iterable[str] = PACKAGES) -> dict[str, str]:
    """Installed versions of ``names`` ("not installed" for missing ones)."""
    out = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = "not installed"
    return out


def git_info(path: str | Path | None = None) -> dict[str, Any]:
    """The project's git SHA, branch and whether the working tree had changes."""
    cwd = Path(path) if path else Path(__file__).resolve().parents[2]

    def git(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    sha = git("rev-parse", "HEAD")
    if sha is None:
        return {"sha": None, "note": "not a git checkout"}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"sha": sha, "branch": git("rev-parse", "--abbrev-ref", "HEAD"), "dirty": bool(status)}


def governors() -> dict[str, str]:
    """The CPU frequency governor per CPU ("not exposed" on VMs without cpufreq)."""
    out = {}
    for cpu in sorted(os.sched_getaffinity(0)):
        g = _read(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor")
        out[str(cpu)] = g or "not exposed"
    return out


def cgroup_layout() -> str:
    """``v2`` (unified), ``v1`` or ``hybrid`` (v1 controllers plus a unified mount)."""
    if Path("/sys/fs/cgroup/cgroup.controllers").exists():
        return "v2"
    if Path("/sys/fs/cgroup/unified").is_dir():
        return "hybrid"
    return "v1" if Path("/sys/fs/cgroup/memory").is_dir() else "none"


def collect(toolchains: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Everything above, as one JSON-able dict; ``toolchains``: the version of each toolchain
    the run uses (name -> version, or ``"not installed"``), as the caller found them
    (:func:`benchlib.runtime.toolchains.versions`)."""
    mem_kb = None
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
    try:
        load = os.getloadavg()
    except OSError:
        load = (float("nan"),) * 3
    return {
        "collected_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "hostname": platform.node(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_available": sorted(os.sched_getaffinity(0)),
        "governor": governors(),
        "memory_gb": round(mem_kb / 2**20, 1) if mem_kb else None,
        "kernel": platform.release(),
        "os": (_read("/etc/os-release") or "").split("PRETTY_NAME=")[-1].split("\n")[0].strip('"') or platform.platform(),
        "cgroups": cgroup_layout(),
        "loadavg_at_start": [round(x, 2) for x in load],
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "packages": package_versions(),
        "toolchains": dict(sorted((toolchains or {}).items())),
        "git": git_info(),
    }
