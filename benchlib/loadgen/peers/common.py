"""Shared helpers for running peer load tools: pinning, the loopback rule, unit parsing."""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from benchlib.core import settings
from benchlib.core.errors import BuildError, LoadGenError, LoadSpecError, ParameterError, ToolchainMissing

__all__ = ["run_tool", "check_url", "ensure_go_tool", "go_tool_env", "tool_version_line", "parse_time_ms", "parse_size_bytes",
           "parse_count", "INSTALL_HINTS"]

INSTALL_HINTS = {
    "wrk": "apt-get install wrk",
    "ab": "apt-get install apache2-utils",
    "hey": "apt-get install hey",
    "h2load": "apt-get install nghttp2-client",
    "taskset": "apt-get install util-linux",
}

_TIME_UNITS_MS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}
_SIZE_UNITS = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4, "K": 1024, "M": 1024**2, "G": 1024**3}
_COUNT_UNITS = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}


def parse_time_ms(text: str) -> float:
    """``"459.14us"`` -> 0.45914 (milliseconds). Units ns, us, ms, s, m, h."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*(ns|us|µs|ms|s|m|h)\s*", text)
    if not m:
        raise ValueError(f"not a time with a unit: {text!r}")
    return float(m.group(1)) * _TIME_UNITS_MS[m.group(2)]


def parse_size_bytes(text: str) -> float:
    """``"31.43MB"`` -> bytes (binary multiples, as wrk and h2load print them)."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]?B|[KMG])\s*", text)
    if not m:
        raise ValueError(f"not a size with a unit: {text!r}")
    return float(m.group(1)) * _SIZE_UNITS[m.group(2)]


def parse_count(text: str) -> float:
    """``"51.01k"`` -> 51010.0 (decimal multiples)."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([kKMG]?)\s*", text)
    if not m:
        raise ValueError(f"not a count: {text!r}")
    return float(m.group(1)) * _COUNT_UNITS[m.group(2)]


def check_url(url: str) -> None:
    """Refuse a URL whose host is not a loopback address (see :mod:`benchlib.loadgen.preflight`)."""
    from benchlib.loadgen.preflight import _is_loopback

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LoadSpecError(f"peer tools need an http:// or https:// URL with a host, got {url!r}")
    if not _is_loopback(parts.hostname) and not settings.ALLOW_REMOTE_TARGET.value():
        raise LoadSpecError(f"{url!r} is not on a loopback address; set {settings.ALLOW_REMOTE_TARGET.name}=1 to load "
                            "a machine of your own")


def run_tool(
    argv: Sequence[str], *, cpus: Sequence[int] | None = None, timeout_s: float = 600.0
) -> dict[str, Any]:
    """Run a peer tool (pinned with ``taskset`` to ``cpus``); return its output and CPU use.

    Returns
    -------
    dict with ``command``, ``stdout``, ``stderr``, ``returncode``, ``wall_s``, ``cpu_s``
    (user + system of the tool, from ``wait4``) and ``cpu_fraction`` (cpu_s / wall_s).

    Raises
    ------
    benchlib.core.errors.ToolchainMissing  when the tool (or ``taskset``) is not installed.
    benchlib.core.errors.LoadGenError      when it exits non-zero or runs past ``timeout_s``.
    """
    tool = argv[0]
    if shutil.which(tool) is None:
        raise ToolchainMissing(tool, "benchlib.loadgen.peers",
                               f"install it with {INSTALL_HINTS.get(tool, 'your package manager')}")
    cmd = list(argv)
    if cpus:
        if shutil.which("taskset") is None:
            raise ToolchainMissing("taskset", "benchlib.loadgen.peers", INSTALL_HINTS["taskset"])
        cmd = ["taskset", "-c", ",".join(str(c) for c in cpus)] + cmd
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise LoadGenError(f"{' '.join(cmd)} ran longer than {timeout_s:g} s") from None
    wall = time.monotonic() - t0
    # this child's CPU: communicate() reaped it, so it is the change in the children's totals
    # (exact unless another thread of this process reaps children at the same time)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (ru.ru_utime + ru.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    stdout, stderr = out.decode(errors="replace"), err.decode(errors="replace")
    if proc.returncode != 0:
        raise LoadGenError(f"{' '.join(cmd)} exited with {proc.returncode}:\n{stderr[-2000:]}{stdout[-2000:]}")
    return {"command": cmd, "stdout": stdout, "stderr": stderr, "returncode": proc.returncode,
            "wall_s": wall, "cpu_s": cpu_s, "cpu_fraction": cpu_s / wall if wall > 0 else None}


def tool_version_line(argv: Sequence[str]) -> str | None:
    """The first line a ``<tool> version``-style command prints (stdout, else stderr), or
    ``None`` when it cannot run or exits non-zero."""
    try:
        out = subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    line = (out.stdout or out.stderr).strip().splitlines()
    return line[0] if out.returncode == 0 and line else None


def go_tool_env(gobin: Path) -> dict[str, str]:
    """The variables :func:`ensure_go_tool` adds to the environment of ``go install`` (also
    used by :mod:`benchlib.runtime.prefetch`, so its downloads resolve as the build does): ``GOBIN``,
    ``CGO_ENABLED=0``, ``-trimpath -buildvcs=false``, ``GOTOOLCHAIN`` (``local`` unless set)."""
    return {"GOBIN": str(gobin), "CGO_ENABLED": "0", "GOFLAGS": "-trimpath -buildvcs=false",
            "GOTOOLCHAIN": os.environ.get("GOTOOLCHAIN", "local")}


def ensure_go_tool(
    *,
    name: str,
    module: str,
    version: str,
    setting: settings.Setting[Path],
    describe: Callable[[str | os.PathLike[str]], str | None],
    is_pinned: Callable[[str | os.PathLike[str]], bool],
    ldflags: str = "",
    build: bool = True,
    timeout_s: float = 1800.0,
) -> Path:
    """The path of peer tool ``name`` at ``version``, built from the Go module proxy into
    the cache if needed (``$BENCHLIB_CACHE/tools/<name>-<version>/<name>``, outside the clone).

    Looks at ``setting`` (a :mod:`benchlib.core.settings` path, ``$BENCHLIB_K6``, ...), then the cache, then ``name``
    on ``PATH``; any of them must pass
    ``is_pinned``. Otherwise, with ``build``, runs ``go install [-ldflags ...]
    <module>@<version>`` with ``GOBIN`` in the cache (``CGO_ENABLED=0``, ``-trimpath``), one
    build at a time under a lock, and writes ``build-info.json`` (build seconds, version line)
    beside the binary.

    Parameters
    ----------
    name: the binary's name (the last element of ``module``'s path).
    describe: the tool's version line for a binary (``None`` when it cannot run).
    is_pinned: whether a binary is ``version``.

    Raises
    ------
    ParameterError     ``setting`` names a file that is not ``version``.
    ToolchainMissing   no pinned binary and no ``go`` to build it (or ``build=False``).
    BuildError         ``go install`` failed (its output's tail attached).
    """
    from benchlib.core import buildcache

    env_path = setting.get()
    if env_path is not None:
        if not is_pinned(env_path):
            raise ParameterError(f"${setting.name}={str(env_path)!r} is not {name} {version} "
                                 f"(reports {describe(env_path)!r}); unset it or point it at {name} {version}")
        return env_path
    tool_dir = buildcache.cache_root() / "tools" / f"{name}-{version}"
    cached = tool_dir / name
    if cached.is_file() and is_pinned(cached):
        buildcache.record_build("tool", f"{name}-{version}", "local", 0.0, cached=True)
        return cached
    on_path = shutil.which(name)
    if on_path and is_pinned(on_path):
        return Path(on_path)
    flags = f'-ldflags "{ldflags}" ' if ldflags else ""
    hint = (f"install Go and let benchlib build it (`GOBIN={tool_dir} go install {flags}{module}@{version}`), "
            f"or set {setting.name} to a {name} {version} binary")
    if not build:
        raise ToolchainMissing(name, f"benchlib.loadgen.peers.{name}", hint)
    if shutil.which("go") is None:
        raise ToolchainMissing("go", f"benchlib.loadgen.peers.{name}", hint)
    tool_dir.mkdir(parents=True, exist_ok=True)
    with buildcache.locked(tool_dir):
        if cached.is_file() and is_pinned(cached):
            return cached
        env = {**os.environ, **go_tool_env(tool_dir)}
        argv = ["go", "install", *(["-ldflags", ldflags] if ldflags else []), f"{module}@{version}"]
        t0 = time.monotonic()
        try:
            proc = subprocess.run(argv, env=env, cwd=tool_dir, capture_output=True, text=True, timeout=timeout_s,
                                  check=False)
        except subprocess.TimeoutExpired:
            raise BuildError(f"go install {module}@{version} ran longer than {timeout_s:g} s") from None
        if proc.returncode != 0 or not is_pinned(cached):
            err = BuildError(f"go install {module}@{version} failed with exit code {proc.returncode}")
            err.add_note("go output tail:\n" + (proc.stdout + proc.stderr)[-3000:])
            raise err
        build_s = time.monotonic() - t0
        (tool_dir / "build-info.json").write_text(json.dumps(
            {"module": module, "version": version, "ldflags": ldflags, "build_s": round(build_s, 1),
             f"{name}_version": describe(cached)}, indent=1) + "\n")
        buildcache.record_build("tool", f"{name}-{version}", "local", build_s, cached=False)
    return cached
