"""Toolchains the services need: are they installed, which version, and how to get them.

A service whose toolchain is missing is reported as unavailable with the reason (see
:func:`availability`), and stays in every table as "not run: <why>".
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from collections.abc import Iterable

from benchlib.core.errors import PythonPackageMissing, ToolchainMissing
from benchlib.runtime.manifest import Manifest

__all__ = ["INSTALL_HINTS", "PYTHON_PACKAGES_HINT", "availability", "missing_python_packages", "require", "version", "versions",
           "which"]

#: How to install the Python packages the services need (a manifest's ``python_packages``).
PYTHON_PACKAGES_HINT = ("install benchlib's services extra into the environment running benchlib: "
                        "pip install 'benchlib[services]' (scripts/setup.sh installs it with every extra)")

#: How to install each toolchain (shown when it is missing).
INSTALL_HINTS: dict[str, str] = {
    "go": "install Go >= 1.22 from https://go.dev/dl/ (or Debian's golang package) and put `go` on PATH",
    "cargo": "install Rust with rustup (https://rustup.rs) so that `cargo` is on PATH",
    "node": "install Node.js >= 20 (https://nodejs.org or Debian's nodejs) so that `node` is on PATH",
    "npm": "install npm with Node.js (Debian's npm package) so that `npm` is on PATH",
    "python": "python is the interpreter running benchlib; nothing to install",
    "dotnet": "install the .NET 8 SDK (https://dot.net) so that `dotnet` is on PATH, or use runtime='docker' "
    "with access to mcr.microsoft.com",
    "nginx": "install Debian's nginx package (apt-get install nginx; scripts/setup.sh does)",
    "php-fpm": "install Debian's php-fpm package (apt-get install php-fpm; scripts/setup.sh does)",
}

#: Where system daemons live when ``sbin`` is not on a user's PATH (Debian's nginx, php-fpm).
_SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")

_VERSION_ARGS: dict[str, list[str]] = {
    "go": ["go", "version"],
    "cargo": ["cargo", "--version"],
    "node": ["node", "--version"],
    "npm": ["npm", "--version"],
    "dotnet": ["dotnet", "--version"],
    "rustc": ["rustc", "--version"],
    "nginx": ["nginx", "-v"],
    "php-fpm": ["php-fpm", "-v"],
}


def _which(tool: str) -> str | None:
    if tool == "python":
        return sys.executable
    return which(tool)


def which(tool: str) -> str | None:
    """The executable of ``tool``: on PATH, else in the ``sbin`` folders (daemons such as nginx);
    ``php-fpm`` also matches Debian's versioned ``php-fpmX.Y``."""
    import glob
    import os

    found = shutil.which(tool) or shutil.which(tool, path=os.pathsep.join(_SBIN))
    if found is None and tool == "php-fpm":
        for d in (*os.environ.get("PATH", "").split(os.pathsep), *_SBIN):
            hits = sorted(glob.glob(os.path.join(d, "php-fpm[0-9]*")), reverse=True)
            if hits:
                return hits[0]
    return found


@functools.cache
def version(tool: str) -> str | None:
    """The tool's version line (e.g. ``go version go1.26.8 linux/amd64``), or ``None`` if missing."""
    if tool == "python":
        return f"Python {sys.version.split()[0]}"
    args = list(_VERSION_ARGS.get(tool, [tool, "--version"]))
    exe = _which(args[0])
    if exe is None:
        return None
    args[0] = exe
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if text else None


def versions(tools: Iterable[str]) -> dict[str, str]:
    """Each tool's version (:func:`version`), or ``"not installed"``: run.json's provenance."""
    return {t: version(t) or "not installed" for t in sorted(set(tools))}


def missing_python_packages(manifest: Manifest) -> list[str]:
    """The manifest's ``python_packages`` (import names) that this interpreter cannot import
    (the one ``{python}`` runs the service with)."""
    import importlib.util

    return [name for name in manifest.python_packages if importlib.util.find_spec(name) is None]


def availability(manifest: Manifest) -> tuple[bool, str]:
    """``(True, "")`` when every toolchain of ``manifest`` is installed (and its Python
    packages importable), else ``(False, "no <tool> ... (<hint>)")``."""
    for tool in manifest.toolchains:
        if _which(tool) is None:
            return False, f"no {tool} toolchain on PATH ({INSTALL_HINTS.get(tool, 'install it')})"
    missing = missing_python_packages(manifest)
    if missing:
        return False, f"no Python package {', '.join(map(repr, missing))} ({PYTHON_PACKAGES_HINT})"
    return True, ""


def require(manifest: Manifest) -> dict[str, str]:
    """Check every toolchain of ``manifest``; return their versions.

    Raises
    ------
    ToolchainMissing
        naming the first missing tool and how to install it
        (:class:`~benchlib.core.errors.PythonPackageMissing` for a Python package).
    """
    versions: dict[str, str] = {}
    for tool in manifest.toolchains:
        if _which(tool) is None:
            raise ToolchainMissing(tool, manifest.name, INSTALL_HINTS.get(tool, "install it"))
        versions[tool] = version(tool) or "unknown"
    for package in missing_python_packages(manifest):
        raise PythonPackageMissing(package, manifest.name, PYTHON_PACKAGES_HINT)
    if "cargo" in manifest.toolchains:
        versions["rustc"] = version("rustc") or "unknown"
    return versions
