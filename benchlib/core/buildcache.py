"""The build cache: where service builds live (outside the clone) and when to rebuild.

``$BENCHLIB_CACHE`` (default ``~/.cache/benchlib``) holds ``build/<service>/<variant>/``,
one folder per service variant (variants with the same build share the first one's folder:
:attr:`benchlib.runtime.manifest.ResolvedService.build_variant`), rebuilt in place (so incremental compilers such as cargo
stay fast) whenever the *source hash* changes: a hash of the build command, its
environment, the input files and the toolchain versions.

Where the time goes: when ``$BENCHLIB_BUILD_TIMES`` names a file, every build and every
build-cache look-up (local service builds, Docker images, base images, peer tools) appends a
:class:`BuildRecord` there as one JSON line (:func:`record_build`); :func:`build_times_summary`
turns the file into the table ``scripts/test.sh`` prints after each pytest run.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from benchlib.core import settings

__all__ = ["BUILD_KINDS", "BuildRecord", "build_dir_for", "cargo_target_dir", "build_times_summary", "cache_root",
           "locked", "read_build_records", "read_stamp", "record_build", "source_hash", "write_stamp"]

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


def cargo_target_dir() -> Path:
    """The one Cargo target folder that every Rust service's local builds share
    (``$BENCHLIB_CACHE/cargo-target``, created; the manifests' ``{cargo_target_dir}``): a crate
    at the same version, features and profile is compiled once per machine, not once per
    service (cargo locks the folder, so two builds never write it at once). Each service's
    binary has a name of its own (``tests/services/test_rust_builds.py`` checks it)."""
    d = cache_root() / "cargo-target"
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


# ----------------------------------------------------------------------------- build times

#: What a :class:`BuildRecord` is of: a service built by the local runtime, a Docker image of
#: a service, a base image (debootstrap, import, the toolchain image), a peer tool or test server.
BUILD_KINDS = ("service", "image", "base-image", "tool")


@dataclass(frozen=True)
class BuildRecord:
    """One build, or one look-up the cache answered.

    Attributes
    ----------
    kind: one of :data:`BUILD_KINDS`.
    name: what was built: ``<service>/<variant>`` (the variant whose folder or image it is),
        an image tag, or ``<tool>-<version>``.
    runtime: ``local`` (on this machine) or ``docker`` (inside the engine).
    seconds: wall time of the build (or of the look-up) in seconds.
    cached: the cache had it (nothing was built).
    detail: one short note (e.g. a base image's action), may be empty.
    """

    kind: str
    name: str
    runtime: str
    seconds: float
    cached: bool
    detail: str = ""


def record_build(kind: str, name: str, runtime: str, seconds: float, *, cached: bool, detail: str = "") -> None:
    """Append one :class:`BuildRecord` to ``$BENCHLIB_BUILD_TIMES`` (one JSON line, appended
    in one write so parallel processes do not interleave); nothing when it is unset.

    Raises ``ValueError`` for a ``kind`` not in :data:`BUILD_KINDS`."""
    if kind not in BUILD_KINDS:
        raise ValueError(f"build record kind {kind!r} is not one of {', '.join(BUILD_KINDS)}")
    path = settings.BUILD_TIMES.get()
    if path is None:
        return
    record = BuildRecord(kind, name, runtime, round(seconds, 2), cached, detail)
    line = (json.dumps(asdict(record), sort_keys=True) + "\n").encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def read_build_records(path: Path) -> list[BuildRecord]:
    """The records of a ``$BENCHLIB_BUILD_TIMES`` file (an absent file has none; a line that
    is not a record is skipped)."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            out.append(BuildRecord(**json.loads(line)))
        except (ValueError, TypeError):
            continue
    return out


def build_times_summary(records: Sequence[BuildRecord], *, top: int = 40) -> str:
    """A table of where build time went: one row per (kind, name, runtime), the slowest first
    (at most ``top`` rows), with builds, cache hits and seconds, then the totals.

    Examples
    --------
    >>> print(build_times_summary([BuildRecord("service", "web/fair", "local", 12.5, False),
    ...                            BuildRecord("service", "web/fair", "local", 0.01, True)]))
    build s  builds  hits  kind        runtime  name
       12.5       1     1  service     local    web/fair
    total: 12.5 s in 1 builds, 1 cache hits
    """
    rows: dict[tuple[str, str, str], list[float]] = {}
    for r in records:
        row = rows.setdefault((r.kind, r.runtime, r.name), [0.0, 0, 0])
        if r.cached:
            row[2] += 1
        else:
            row[0] += r.seconds
            row[1] += 1
    ordered = sorted(rows.items(), key=lambda kv: (-kv[1][0], kv[0]))
    lines = [f"{'build s':>7}  {'builds':>6}  {'hits':>4}  {'kind':<10}  {'runtime':<7}  name"]
    for (kind, runtime, name), (seconds, builds, hits) in ordered[:top]:
        lines.append(f"{seconds:7.1f}  {int(builds):6d}  {int(hits):4d}  {kind:<10}  {runtime:<7}  {name}")
    if len(ordered) > top:
        lines.append(f"... {len(ordered) - top} more rows")
    total = sum(v[0] for v in rows.values())
    lines.append(f"total: {total:.1f} s in {sum(int(v[1]) for v in rows.values())} builds, "
                 f"{sum(int(v[2]) for v in rows.values())} cache hits")
    return "\n".join(lines)
