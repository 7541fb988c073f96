"""Build FerretDB v1 (a MongoDB wire-protocol server) from its Go module, pinned.

Usage::

    python build.py --out BUILD_DIR

Steps: ``go mod download`` the pinned module version through the Go module proxy (the
checksum is verified by the Go tool against the checksum database, and again here against
the pinned ``h1:`` hash), copy its source into ``BUILD_DIR/src``, write
``build/version/version.txt`` (FerretDB's own release builds generate it with
``bin/task gen-version``; without it ``buildInfo`` reports ``ferretdbVersion: "unknown"``
or the binary refuses to start), build ``cmd/ferretdb`` with ``CGO_ENABLED=0`` (the SQLite
backend is the pure-Go ``modernc.org/sqlite``), check ``ferretdb --version`` and remove
the copied source. Everything lands in ``BUILD_DIR``, a cache outside the clone; the Go
module and build caches are the Go tool's own (``go env GOMODCACHE GOCACHE``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

MODULE = "github.com/FerretDB/FerretDB"
VERSION = "v1.24.2"
#: ``go mod download -json`` reports this ``Sum`` for the pinned version.
MODULE_SUM = "h1:trrUU0LbmusMbyubhPS1IELncvrIwKrsRT2LW1UUWCw="


def _run(argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    print("+", " ".join(argv), flush=True)
    proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-8000:])
        raise SystemExit(f"command failed with exit code {proc.returncode}: {' '.join(argv)}")
    return proc.stdout


def _make_writable(path: Path) -> None:
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            p = Path(root, name)
            p.chmod(p.stat().st_mode | stat.S_IWUSR)
    path.chmod(path.stat().st_mode | stat.S_IWUSR)


def build(out: Path) -> dict[str, object]:
    """Build ``out/ferretdb``; return facts about the build (for the build log)."""
    t0 = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOFLAGS": "-mod=mod -buildvcs=false", "CGO_ENABLED": "0"}
    env.setdefault("GOTOOLCHAIN", "local")
    info = json.loads(_run(["go", "mod", "download", "-json", f"{MODULE}@{VERSION}"], cwd=out, env=env))
    if info.get("Error"):
        raise SystemExit(f"go mod download {MODULE}@{VERSION} failed: {info['Error']}")
    if info.get("Sum") != MODULE_SUM:
        raise SystemExit(f"{MODULE}@{VERSION}: checksum {info.get('Sum')!r} != pinned {MODULE_SUM!r}")
    src = out / "src"
    if src.exists():
        _make_writable(src)
        shutil.rmtree(src)
    shutil.copytree(info["Dir"], src)
    _make_writable(src)
    vdir = src / "build" / "version"
    (vdir / "version.txt").write_text(VERSION + "\n")
    (vdir / "package.txt").write_text("benchlib-source\n")
    tmp = out / "ferretdb.tmp"
    _run(["go", "build", "-trimpath", "-o", str(tmp), "./cmd/ferretdb"], cwd=src, env=env)
    version_out = _run([str(tmp), "--version"])
    if VERSION not in version_out:
        raise SystemExit(f"built binary reports an unexpected version:\n{version_out}")
    tmp.replace(out / "ferretdb")
    _make_writable(src)
    shutil.rmtree(src)
    facts = {
        "module": MODULE,
        "version": VERSION,
        "sum": MODULE_SUM,
        "go": _run(["go", "env", "GOVERSION"]).strip(),
        "build_s": round(time.monotonic() - t0, 1),
        "version_output": version_out.strip(),
    }
    (out / "build-info.json").write_text(json.dumps(facts, indent=2) + "\n")
    print(json.dumps(facts, indent=2))
    return facts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path, help="build directory (outside the clone)")
    args = parser.parse_args(argv)
    build(args.out.resolve())


if __name__ == "__main__":
    main()
