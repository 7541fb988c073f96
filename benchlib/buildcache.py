"""The build cache: where service builds live (outside the clone) and when to rebuild.

``$BENCHLIB_CACHE`` (default ``~/.cache/benchlib``) holds ``build/<service>/<variant>/``,
one folder per service variant (variants with the same build share the first one's folder:
:attr:`benchlib.manifest.ResolvedService.build_variant`), rebuilt in place (so incremental compilers such as cargo
stay fast) whenever the *source hash* changes: a hash of the build command, its
environment, the input files and the toolchain versions.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from benchlib import settings

__all__ = ["build_dir_for", "cache_root", "locked", "read_stamp", "source_hash", "write_stamp"]

#: Folders never hashed as build inputs (build outputs and package caches).
IGNORED_DIRS = frozenset({"target", "node_modules", "__pycache__", ".git", "bin", "obj", "dist", "build"})


def cache_root() -> Path:
    """``$BENCHLIB_CACHE`` or ``~/.cache/benchlib`` (created)."""
    root = settings.CACHE.value()
    root.mkdir(parents=True, exist_ok=True)
    return root


def build_dir_for(service: str, variant: str) -> Path:
    """The build folder of one service variant (created)."""
    d = cache_root() / "build" / service / variant
    d.mkdir(parents=True, exist_ok=True)
    return d


def _input_files(directory: Path, patterns: Sequence[str]) -> list[Path]:
    if patterns:
        files = {p for pat in patterns for p in directory.glob(pat) if p.is_file()}
    else:
        files = set()
        for root, dirs, names in os.walk(directory):
            dirs[:] = sorted(d for d in dirs if d not in IGNORED_DIRS and not d.startswith("."))
            files.update(Path(root) / n for n in names)
    return sorted(files)


def source_hash(directory: Path, patterns: Sequence[str], *, extra: Mapping[str, object] | None = None) -> str:
    """SHA-256 (hex, 16 chars) over the input files' names and bytes plus ``extra`` (JSON)."""
    h = hashlib.sha256()
    h.update(json.dumps(extra or {}, sort_keys=True, default=str).encode())
    for path in _input_files(directory, patterns):
        h.update(str(path.relative_to(directory)).encode() + b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:16]


_STAMP = ".benchlib-build.json"


def read_stamp(build_dir: Path) -> dict[str, object] | None:
    """The stamp of the last successful build in ``build_dir``, or ``None``."""
    try:
        data: dict[str, object] = json.loads((build_dir / _STAMP).read_text())
        return data
    except (OSError, ValueError):
        return None


def write_stamp(build_dir: Path, stamp: Mapping[str, object]) -> None:
    """Record a successful build (atomically)."""
    tmp = build_dir / (_STAMP + ".tmp")
    tmp.write_text(json.dumps(dict(stamp), indent=1, sort_keys=True, default=str))
    tmp.replace(build_dir / _STAMP)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive inter-process lock on ``path`` (a lock file beside it), so two
    processes never build the same folder at once."""
    lock_path = path.with_name(path.name + ".lock")
    with open(lock_path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
