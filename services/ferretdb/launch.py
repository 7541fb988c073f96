"""Start FerretDB (SQLite backend) with a fresh data directory outside the clone.

Usage::

    python launch.py --binary BUILD_DIR/ferretdb --listen 127.0.0.1:PORT [--data-root DIR]

FerretDB's SQLite backend needs an existing directory (``--sqlite-url=file:DIR/``), and its
state file (``state.json``) goes to ``--state-dir``. This launcher creates a new directory
(``benchlib-ferretdb-<pid>-...`` under ``--data-root``, default ``$BENCHLIB_CACHE/run`` or
``~/.cache/benchlib/run``), runs FerretDB as its child with both pointing there, forwards
SIGTERM/SIGINT, and deletes the directory when FerretDB exits. Directories left behind by
launchers that were killed (SIGKILL) are removed at the next start.

``--server mongod`` does the same for a local MongoDB server (``mongod --auth``, for users who
have one installed; Debian does not package it): the root user is then created by
``seed.py`` through mongod's localhost exception, as the official image does.

Authentication is FerretDB's "new authentication" (SCRAM-SHA-1 and SCRAM-SHA-256, user
credentials stored in the backend), with the study's user ``admin``/``admin`` created in the
``admin`` database at start (``--setup-*`` flags), so ``mongodb://admin:admin@HOST:PORT/``
authenticates as it did against the study's ``mongo`` image. ``--no-auth`` turns that off.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

PREFIX = "benchlib-ferretdb-"


def default_data_root() -> Path:
    root = Path(os.environ.get("BENCHLIB_CACHE") or Path.home() / ".cache" / "benchlib") / "run"
    root.mkdir(parents=True, exist_ok=True)
    return root


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(root: Path) -> list[Path]:
    """Delete data directories whose launcher process no longer exists."""
    removed = []
    for d in root.glob(PREFIX + "*"):
        try:
            pid = int(d.name[len(PREFIX):].split("-", 1)[0])
        except ValueError:
            continue
        if pid != os.getpid() and not _pid_alive(pid):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def normalize_listen(listen: str) -> str:
    """``HOST:PORT`` with an IPv6 host put in brackets (``::1:27017`` -> ``[::1]:27017``)."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise SystemExit(f"launch.py: --listen {listen!r}: expected HOST:PORT")
    host = host.strip("[]")
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def ferretdb_argv(binary: str, listen: str, data_dir: Path, *, auth: bool, user: str, password: str,
                  log_level: str) -> list[str]:
    """The FerretDB command line (SQLite backend, no telemetry, no debug HTTP listener)."""
    argv = [
        binary,
        "--handler=sqlite",
        f"--sqlite-url=file:{data_dir}/",
        f"--listen-addr={listen}",
        f"--state-dir={data_dir}",
        "--debug-addr=-",
        "--telemetry=disable",
        f"--log-level={log_level}",
    ]
    if auth:
        argv += [
            "--test-enable-new-auth",
            "--setup-database=admin",
            f"--setup-username={user}",
            f"--setup-password={password}",
        ]
    return argv


def mongod_argv(binary: str, listen: str, data_dir: Path) -> list[str]:
    """The mongod command line: authentication on, loopback only, data in ``data_dir``."""
    host, _, port = listen.rpartition(":")
    return [binary, "--auth", "--bind_ip", host.strip("[]"), "--port", port, "--dbpath", str(data_dir),
            "--quiet"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", choices=["ferretdb", "mongod"], default="ferretdb")
    parser.add_argument("--binary", required=True, help="the ferretdb (or mongod) executable")
    parser.add_argument("--listen", required=True, help="HOST:PORT to listen on (loopback)")
    parser.add_argument("--data-root", type=Path, default=None, help="where the data directory is created")
    parser.add_argument("--no-auth", action="store_true", help="no authentication (FerretDB's default)")
    parser.add_argument("--user", default="admin")
    parser.add_argument("--password", default="admin")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warn", "error"])
    args = parser.parse_args(argv)

    listen = normalize_listen(args.listen)
    root = (args.data_root or default_data_root()).resolve()
    root.mkdir(parents=True, exist_ok=True)
    remove_stale(root)
    data_dir = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=root))
    if args.server == "mongod":
        if shutil.which(args.binary) is None:
            shutil.rmtree(data_dir, ignore_errors=True)
            print(f"launch.py: {args.binary!r} not found: install MongoDB's mongod, or use the Docker "
                  "runtime (Dockerfile.mongo), or this service's 'sqlite' variant (FerretDB)", file=sys.stderr)
            return 127
        cmd = mongod_argv(args.binary, listen, data_dir)
    else:
        cmd = ferretdb_argv(args.binary, listen, data_dir, auth=not args.no_auth, user=args.user,
                            password=args.password, log_level=args.log_level)
    print(f"launch.py: data directory {data_dir}", flush=True)
    try:
        child = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)
    except BaseException:
        shutil.rmtree(data_dir, ignore_errors=True)
        raise

    def forward(signum: int, _frame: object) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    try:
        code = child.wait()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        shutil.rmtree(data_dir, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
