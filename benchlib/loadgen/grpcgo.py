"""The grpc-go test server (``benchlib/loadgen/grpcserver``): build it, run it.

A real gRPC server (grpc-go, default options) serving seed 004's two unary methods
(``/SmallPayloadService/SendSmallPayload``, ``/HugePayloadService/SendHugePayload``; see
``grpcserver/main.go``) for the load generator's tests and ``bench/grpc_vs_peers.py``.
:func:`build_grpc_server` builds it once per source version into
``$BENCHLIB_CACHE/build/grpcserver/<hash>/`` (outside the clone; Go modules from the module
proxy); :func:`serve_grpc` runs it pinned and yields ``(host, port)``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from benchlib.core import buildcache
from benchlib.core.errors import BuildError, ToolchainMissing

__all__ = ["GRPC_SERVER_DIR", "PROTO", "SMALL_METHOD", "SMALL_REQUEST", "SMALL_RESPONSE", "HUGE_METHOD",
           "build_grpc_server", "serve_grpc"]

GRPC_SERVER_DIR = Path(__file__).resolve().parent / "grpcserver"
#: The ``.proto`` declaring the served methods and messages (no package).
PROTO = GRPC_SERVER_DIR / "payloads.proto"
SMALL_METHOD = "/SmallPayloadService/SendSmallPayload"
HUGE_METHOD = "/HugePayloadService/SendHugePayload"
#: ``SmallRequest{Message="SmallRequest"}`` and the server's answer, serialized.
SMALL_REQUEST = b"\x0a\x0cSmallRequest"
SMALL_RESPONSE = b"\x0a\x0dSmallResponse"


def build_grpc_server(*, timeout_s: float = 900.0) -> Path:
    """The path of the built grpc-go test server, building it if its sources changed.

    Raises
    ------
    ToolchainMissing  no ``go`` on ``PATH``.
    BuildError        ``go build`` failed (its output's tail attached).
    """
    key = buildcache.source_hash(GRPC_SERVER_DIR, ("*.go", "go.mod", "go.sum"))
    out_dir = buildcache.cache_root() / "build" / "grpcserver" / key
    binary = out_dir / "grpcserver"
    if binary.is_file():
        buildcache.record_build("tool", "grpcserver", "local", 0.0, cached=True)
        return binary
    if shutil.which("go") is None:
        raise ToolchainMissing("go", "benchlib.loadgen.grpcgo", "install Go >= 1.22 to build the grpc-go test server")
    out_dir.mkdir(parents=True, exist_ok=True)
    with buildcache.locked(out_dir):
        if binary.is_file():
            return binary
        env = {**os.environ, "CGO_ENABLED": "0"}
        env.setdefault("GOTOOLCHAIN", "local")
        tmp = out_dir / "grpcserver.tmp"
        t0 = time.monotonic()
        try:
            proc = subprocess.run(["go", "build", "-trimpath", "-o", str(tmp), "."], cwd=GRPC_SERVER_DIR, env=env,
                                  capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise BuildError(f"go build of {GRPC_SERVER_DIR} ran longer than {timeout_s:g} s") from None
        if proc.returncode != 0:
            err = BuildError(f"go build of {GRPC_SERVER_DIR} failed with exit code {proc.returncode}")
            err.add_note("go output tail:\n" + (proc.stdout + proc.stderr)[-3000:])
            raise err
        tmp.replace(binary)
        buildcache.record_build("tool", "grpcserver", "local", time.monotonic() - t0, cached=False)
    return binary


@contextlib.contextmanager
def serve_grpc(*, cpus: Sequence[int] | None = None, host: str = "127.0.0.1") -> Iterator[tuple[str, int]]:
    """Run the grpc-go test server on ``host`` (a free port), pinned to ``cpus``; yield
    ``(host, port)``; stop it on exit."""
    from benchlib.loadgen.testservers import serve_process

    binary = build_grpc_server()
    addr = f"[{host}]:0" if ":" in host else f"{host}:0"
    with serve_process([str(binary), "-addr", addr], "grpcserver", cpus=cpus) as port:
        yield host, port
