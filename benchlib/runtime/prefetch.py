"""Fetch ahead of the builds: the downloads a cold machine's builds would wait for, done while
something else uses the CPUs.

On a machine with nothing cached, a build first waits on the network: ``go install
go.k6.io/k6@v0.50.0`` spends about 14 s of its 51 s fetching 309 MB of modules (2.3 s of CPU),
FerretDB, ghz and the Go services fetch theirs, cargo its crates, and the Docker tests' first
base image is made with debootstrap from Debian's mirror. ``scripts/test.sh`` runs this module
beside the pure tests (which use the CPUs, not the network), so the serial part's builds find
their downloads done. Nothing is compiled and nothing the builds decide changes: the same
caches (``GOMODCACHE``, cargo's registry, the engine's base image and ``$BENCHLIB_CACHE/images``)
that a build fills itself are filled earlier.

Steps (:func:`plan`), each with the same environment as the build it serves:

* Go peer tools: ``go install -n <module>@<version>`` (``-n``: resolve and download, run nothing);
* Go services and the gRPC test server: ``go build -n`` in their folders;
* FerretDB: its pinned module, then ``go build -n ./cmd/ferretdb`` in a copy of it;
* Rust services: ``cargo fetch --locked``;
* the Docker base image (:func:`benchlib.runtime.docker.images.bootstrap_base_image`), when an
  engine answers.

A step that fails says so in one line and is otherwise ignored: the build it serves fetches
again and reports its own error. ``python -m benchlib.runtime.prefetch`` runs every step (four at a
time) and prints a line per step; ``--list`` prints the plan.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PrefetchResult", "Step", "main", "plan", "run"]

#: Steps run at once (network-bound; the Go tool and cargo lock their caches themselves).
PARALLEL_STEPS = 4
#: Bound on one step's run time, in seconds.
STEP_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Step:
    """One download step: ``name`` for the log, and either ``argv`` run in ``cwd`` with ``env``
    added to this process's environment, or ``call`` (a function returning a one-line detail)."""

    name: str
    argv: tuple[str, ...] = ()
    cwd: Path | None = None
    env: tuple[tuple[str, str], ...] = ()
    call: Callable[[], str] | None = None


@dataclass(frozen=True)
class PrefetchResult:
    """What one step did: ``ok``, its wall ``seconds`` and a one-line ``detail`` (the error's
    last line when it failed)."""

    name: str
    ok: bool
    seconds: float
    detail: str = ""

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'} {self.seconds:6.1f} s  {self.name}" + (
            f"  ({self.detail})" if self.detail else "")


def _go_env(**extra: str) -> tuple[tuple[str, str], ...]:
    """The peer tools' ``go install`` environment (:func:`benchlib.loadgen.peers.common.go_tool_env`),
    GOBIN a scratch folder (``-n`` writes nothing there), with ``extra`` over it."""
    from benchlib.loadgen.peers.common import go_tool_env

    return tuple({**go_tool_env(Path(tempfile.gettempdir()) / "benchlib-prefetch-gobin"), **extra}.items())


def _peer_tools() -> list[tuple[str, str, str]]:
    """(name, module, version) of the peer tools benchlib builds with ``go install``."""
    from benchlib.loadgen.peers import bombardier, ghz, k6

    return [("k6", k6.K6_MODULE, k6.K6_VERSION), ("ghz", ghz.GHZ_MODULE, ghz.GHZ_VERSION),
            ("bombardier", bombardier.BOMBARDIER_MODULE, bombardier.BOMBARDIER_VERSION)]


def _ferretdb_step(build_script: Path) -> Step:
    """FerretDB's pinned module (``services/ferretdb/build.py``'s MODULE and VERSION), then the
    modules its build needs, resolved in a copy of its source (the module cache is read-only)."""
    spec = importlib.util.spec_from_file_location("benchlib_ferretdb_build", build_script)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    module, version = str(mod.MODULE), str(mod.VERSION)
    env = {**os.environ, **dict(_go_env(GOFLAGS="-mod=mod -buildvcs=false"))}

    def fetch() -> str:
        with tempfile.TemporaryDirectory(prefix="benchlib-prefetch-") as tmp:
            out = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"], cwd=tmp, env=env,
                                 capture_output=True, text=True, timeout=STEP_TIMEOUT_S, check=True).stdout
            src = Path(tmp) / "src"
            shutil.copytree(json.loads(out)["Dir"], src)
            subprocess.run(["go", "build", "-n", "-o", os.devnull, "./cmd/ferretdb"], cwd=src, env=env, capture_output=True,
                           text=True, timeout=STEP_TIMEOUT_S, check=True)
        return f"{module}@{version}"

    return Step(f"ferretdb {version}", call=fetch)


def _base_image() -> str:
    from benchlib.runtime.docker import engine_unavailable_reason
    from benchlib.runtime.docker.images import DEFAULT_BASE_IMAGE, bootstrap_base_image

    reason = engine_unavailable_reason()
    if reason is not None:
        return f"skipped: no Docker engine ({reason})"
    return str(bootstrap_base_image(DEFAULT_BASE_IMAGE))


def plan(services_dir: Path | None = None, *, docker: bool = True) -> list[Step]:
    """The steps for the project's services (``services_dir``, default the project's), its
    peer tools and gRPC test server, and (with ``docker``) the Docker base image. Without
    ``go`` or ``cargo`` on PATH their steps are left out."""
    from benchlib.loadgen.grpcgo import GRPC_SERVER_DIR
    from benchlib.runtime.manifest import find_services_dir

    services = Path(services_dir) if services_dir is not None else find_services_dir()
    steps: list[Step] = []
    if shutil.which("go"):
        for name, module, version in _peer_tools():
            steps.append(Step(f"{name} {version}", ("go", "install", "-n", f"{module}@{version}"), env=_go_env()))
        go_dirs = sorted(p.parent for p in services.glob("*/go.mod")) + [GRPC_SERVER_DIR]
        for d in go_dirs:
            steps.append(Step(f"go modules of {d.name}", ("go", "build", "-n", "-o", os.devnull, "."), cwd=d,
                              env=_go_env()))
        ferretdb = services / "ferretdb" / "build.py"
        if ferretdb.is_file():
            steps.append(_ferretdb_step(ferretdb))
    if shutil.which("cargo"):
        for lock in sorted(services.glob("*/Cargo.lock")):
            steps.append(Step(f"crates of {lock.parent.name}",
                              ("cargo", "fetch", "--locked", "--manifest-path", str(lock.parent / "Cargo.toml"))))
    if docker:
        steps.append(Step("Docker base image", call=_base_image))
    return steps


def _run_step(step: Step) -> PrefetchResult:
    t0 = time.monotonic()
    try:
        if step.call is not None:
            detail = step.call()
        else:
            subprocess.run(step.argv, cwd=step.cwd, env={**os.environ, **dict(step.env)}, capture_output=True,
                           text=True, timeout=STEP_TIMEOUT_S, check=True)
            detail = ""
        return PrefetchResult(step.name, True, time.monotonic() - t0, detail)
    except subprocess.CalledProcessError as e:
        tail = ((e.stderr or "") + (e.stdout or "")).strip().splitlines()
        return PrefetchResult(step.name, False, time.monotonic() - t0,
                              f"exit {e.returncode}: {tail[-1] if tail else 'no output'}")
    except Exception as e:  # noqa: BLE001 - one line per failed step; the build reports its own error
        return PrefetchResult(step.name, False, time.monotonic() - t0, f"{type(e).__name__}: {e}")


def run(steps: Sequence[Step], *, parallel: int = PARALLEL_STEPS,
        on_done: Callable[[PrefetchResult], None] | None = None) -> list[PrefetchResult]:
    """Run ``steps``, ``parallel`` at a time; the results in the steps' order (``on_done`` is
    called as each ends)."""
    results: dict[int, PrefetchResult] = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, parallel)) as pool:
        futures = {pool.submit(_run_step, s): i for i, s in enumerate(steps)}
        for f in concurrent.futures.as_completed(futures):
            results[futures[f]] = r = f.result()
            if on_done is not None:
                on_done(r)
    return [results[i] for i in range(len(steps))]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchlib.runtime.prefetch", description=__doc__.split("\n\n")[0])
    p.add_argument("--list", action="store_true", help="print the steps and run none")
    p.add_argument("--no-docker", action="store_true", help="leave out the Docker base image")
    p.add_argument("--parallel", type=int, default=PARALLEL_STEPS, help="steps at once (default 4)")
    args = p.parse_args(argv)
    steps = plan(docker=not args.no_docker)
    if args.list:
        for s in steps:
            print(s.name + (f": {' '.join(s.argv)}" if s.argv else ""))
        return 0
    t0 = time.monotonic()
    results = run(steps, parallel=args.parallel, on_done=lambda r: print(f"prefetch: {r.line()}", flush=True))
    failed = sum(not r.ok for r in results)
    print(f"prefetch: {len(results)} steps in {time.monotonic() - t0:.1f} s, {failed} failed"
          + (" (the builds fetch again and report their own errors)" if failed else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
