"""Docker build contexts: the files sent, their content hash, and the extra CA bundle."""

from __future__ import annotations

import configparser
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchlib.core import buildcache, settings
from benchlib.core.errors import ParameterError

#: Name of the extra CA bundle in the build context (the Dockerfiles look for it).
CA_FILE_NAME = "extra-ca-certificates.crt"
_CA_ENV = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE")
_IGNORED_DIRS = buildcache.IGNORED_DIRS


def _pip_cert() -> str | None:
    files = [os.environ.get("PIP_CONFIG_FILE") or "", "/etc/pip.conf", "/etc/xdg/pip/pip.conf",
             str(Path.home() / ".config/pip/pip.conf"), str(Path.home() / ".pip/pip.conf")]
    found = None
    for f in files:
        if not f or not os.path.isfile(f):
            continue
        cp = configparser.ConfigParser()
        try:
            cp.read(f)
        except configparser.Error:
            continue
        for section in ("global", "install"):
            if cp.has_option(section, "cert"):
                found = cp.get(section, "cert")
    return found


def detect_ca_bundle(setting: str | os.PathLike[str] | None = "auto") -> Path | None:
    """The extra CA bundle to add to Docker build contexts, or ``None``.

    Parameters
    ----------
    setting: a path (used as is), ``"none"``/``""``/``None`` (no bundle), or ``"auto"``:
        ``$BENCHLIB_BUILD_CA_BUNDLE`` (a path or ``none``), else the first of
        ``$SSL_CERT_FILE``, ``$REQUESTS_CA_BUNDLE``, ``$PIP_CERT``, ``$CURL_CA_BUNDLE`` and
        pip's ``cert`` setting that names an existing file.

    Raises
    ------
    ParameterError
        when an explicitly given path does not exist.
    """
    if setting is None:
        return None
    value = str(setting)
    if value == "auto":
        if settings.BUILD_CA_BUNDLE.is_set():
            return settings.BUILD_CA_BUNDLE.get()
        else:
            for name in _CA_ENV:
                path = os.environ.get(name)
                if path and os.path.isfile(path):
                    return Path(path)
            pip_cert = _pip_cert()
            return Path(pip_cert) if pip_cert and os.path.isfile(pip_cert) else None
    if value.lower() in ("", "none", "off", "0"):
        return None
    path = Path(value).expanduser()
    if not path.is_file():
        raise ParameterError(f"CA bundle {str(path)!r} does not exist; give a PEM file, \"auto\" or \"none\"")
    return path


# ----------------------------------------------------------------------------- build context

def _context_files(directory: Path, dockerfile: str) -> list[str]:
    """Files sent as the build context: ``.dockerignore`` rules if the service has one, else
    everything but build outputs and dot folders."""
    from docker.utils.build import exclude_paths

    ignore = directory / ".dockerignore"
    if ignore.is_file():
        patterns = [ln.strip() for ln in ignore.read_text().splitlines() if ln.strip() and not ln.startswith("#")]
        return sorted(exclude_paths(str(directory), patterns, dockerfile=dockerfile))
    out: list[str] = []
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d not in _IGNORED_DIRS and not d.startswith("."))
        for n in sorted(names):
            out.append(str((Path(root) / n).relative_to(directory)))
    return sorted(out)


def _content_hash(directory: Path, files: list[str], extra: Mapping[str, Any]) -> str:
    h = hashlib.sha256(json.dumps(dict(extra), sort_keys=True, default=str).encode())
    for rel in files:
        h.update(rel.encode() + b"\0")
        h.update((directory / rel).read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:12]


def _sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


