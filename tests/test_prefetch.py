"""``benchlib.runtime.prefetch``: the downloads ``scripts/test.sh`` runs beside the pure tests. The plan
covers every Go module folder, Cargo.lock, peer tool and the base image, and compiles nothing;
a step that fails is one line and does not stop the others; a real step resolves a service's
modules without building it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchlib.loadgen.grpcgo import GRPC_SERVER_DIR
from benchlib.loadgen.peers import bombardier, ghz, k6
from benchlib.runtime import prefetch

SERVICES = Path(__file__).resolve().parents[1] / "services"
needs_go = pytest.mark.skipif(shutil.which("go") is None, reason="no go on PATH")
needs_cargo = pytest.mark.skipif(shutil.which("cargo") is None, reason="no cargo on PATH")


@needs_go
@needs_cargo
def test_the_plan_covers_every_module_folder_lock_and_peer_tool_and_compiles_nothing() -> None:
    steps = prefetch.plan(SERVICES)
    argv = {s.name: s.argv for s in steps}
    go_dirs = {s.cwd for s in steps if s.argv[:2] == ("go", "build")}
    assert go_dirs == {p.parent for p in SERVICES.glob("*/go.mod")} | {GRPC_SERVER_DIR}
    assert argv[f"k6 {k6.K6_VERSION}"] == ("go", "install", "-n", f"{k6.K6_MODULE}@{k6.K6_VERSION}")
    assert argv[f"ghz {ghz.GHZ_VERSION}"][-1] == f"{ghz.GHZ_MODULE}@{ghz.GHZ_VERSION}"
    assert argv[f"bombardier {bombardier.BOMBARDIER_VERSION}"][-1].endswith(bombardier.BOMBARDIER_VERSION)
    crates = {s.name for s in steps if s.argv[:2] == ("cargo", "fetch")}
    assert crates == {f"crates of {p.parent.name}" for p in SERVICES.glob("*/Cargo.lock")}
    assert any(s.name.startswith("ferretdb ") and s.call is not None for s in steps)
    for s in steps:  # resolve and download only: `go -n` prints the build and runs none of it
        if s.argv[:1] == ("go",):
            assert "-n" in s.argv and dict(s.env)["CGO_ENABLED"] == "0", s
    assert steps[-1].name == "Docker base image"
    assert all(s.name != "Docker base image" for s in prefetch.plan(SERVICES, docker=False))


def test_a_failing_step_is_one_line_and_the_others_still_run(tmp_path: Path) -> None:
    done: list[str] = []
    steps = [prefetch.Step("fails", ("sh", "-c", "echo first >&2; echo 'the reason' >&2; exit 3")),
             prefetch.Step("raises", call=lambda: str(1 / 0)),
             prefetch.Step("works", ("sh", "-c", "pwd > out.txt"), cwd=tmp_path, env=(("X", "1"),)),
             prefetch.Step("says", call=lambda: "a detail")]
    results = prefetch.run(steps, parallel=2, on_done=lambda r: done.append(r.name))
    assert [r.name for r in results] == ["fails", "raises", "works", "says"] and sorted(done) == sorted(
        r.name for r in results)
    assert [r.ok for r in results] == [False, False, True, True]
    assert results[0].detail == "exit 3: the reason" and results[0].line().startswith("FAIL")
    assert results[1].detail.startswith("ZeroDivisionError")
    assert (tmp_path / "out.txt").read_text().strip() == str(tmp_path)
    assert results[3].line().endswith("says  (a detail)")


@needs_go
def test_a_go_step_resolves_a_services_modules_without_building_it(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOCACHE", str(tmp_path / "gocache"))  # nothing compiled: it stays empty of objects
    step = next(s for s in prefetch.plan(SERVICES, docker=False) if s.cwd == SERVICES / "go-nethttp-hello")
    [r] = prefetch.run([step])
    assert r.ok, r.detail
    entries = list((tmp_path / "gocache").rglob("*-d"))  # the Go tool's cache entries (file lists, hashes)
    assert entries and not [e for e in entries if e.read_bytes()[:8] == b"!<arch>\n"]  # no compiled package
    assert not (SERVICES / "go-nethttp-hello" / "server").exists()
