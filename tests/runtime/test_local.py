"""The local runtime against real services on 127.0.0.1: build cache, pinning, health,
logs, stop, and the clear errors of bad input (issue 2's "leaves nothing running")."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import textwrap
from pathlib import Path

import pytest

from benchlib.core.errors import BuildError, ServiceStartError, ToolchainMissing
from benchlib.runtime import StartOptions, get_runtime
from benchlib.runtime.local import free_port
from benchlib.runtime.manifest import get_manifest, load_manifest

pytestmark = pytest.mark.integration


def _service(tmp_path: Path, body: str, name: str = "tmp-svc") -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "service.toml").write_text(textwrap.dedent(body))
    return d


def _python_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, build_command: str, variants: str = "") -> Path:
    """A service whose ``[build] command`` is ``build_command`` (a TOML array) and whose run
    does nothing, with ``variants`` (TOML tables) after it; its builds go to a cache of its own."""
    monkeypatch.setenv("BENCHLIB_CACHE", str(tmp_path / "cache"))
    header = textwrap.dedent("""
        name = "tmp-svc"
        language = "python"
        framework = "none"
        toolchains = ["python"]
        [build]
        command = {build}
        [run]
        command = ["{{python}}", "-c", "pass"]
    """).format(build=build_command)
    return _service(tmp_path, header + textwrap.dedent(variants))


def _no_process_left(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/status").read_text().find("State:\tZ") >= 0


@pytest.mark.skipif(shutil.which("go") is None, reason="needs the go toolchain")
def test_go_service_builds_once_starts_pinned_and_stops(tmp_path: Path) -> None:
    rt = get_runtime("local")
    svc = get_manifest("go-nethttp-hello").resolve()
    first = rt.prepare(svc)
    again = rt.prepare(svc)
    assert again.built is False and again.info["source_hash"] == first.info["source_hash"]
    log = tmp_path / "svc.log"
    with rt.start(again, StartOptions(port=free_port(), cpus=(1,), log_path=log)) as h:
        assert h.alive() and h.enforced["cpus_read_back"] == [1]
        with socket.create_connection((h.host, h.port)) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert b"Hello, World!" in s.recv(4096)
        pid = h.proc.pid
    assert _no_process_left(pid)
    assert "listening on" in log.read_text()


def test_port_in_use_is_named(tmp_path: Path) -> None:
    rt = get_runtime("local")
    svc = get_manifest("python-aiohttp-hello").resolve()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ServiceStartError, match=f"port {port} on 127.0.0.1 is already in use"):
            rt.start(rt.prepare(svc), StartOptions(port=port, cpus=(1,)))


def test_a_service_that_exits_shows_its_log_tail_and_leaves_nothing(tmp_path: Path) -> None:
    d = _service(tmp_path, """
        name = "tmp-svc"
        language = "python"
        framework = "none"
        toolchains = ["python"]
        [run]
        command = ["{python}", "-c", "import sys; print('boom: cannot open database'); sys.exit(3)"]
        port_env = "PORT"
    """)
    rt = get_runtime("local")
    svc = load_manifest(d).resolve()
    with pytest.raises(ServiceStartError, match="exited with code 3") as err:
        rt.start(rt.prepare(svc), StartOptions(port=free_port(), cpus=(1,)))
    assert "boom: cannot open database" in "\n".join(err.value.__notes__)


def test_a_service_that_never_becomes_healthy_times_out_and_is_killed(tmp_path: Path) -> None:
    import uuid

    marker = f"marker-{uuid.uuid4().hex}"
    d = _service(tmp_path, f"""
        name = "tmp-svc"
        language = "python"
        framework = "none"
        toolchains = ["python"]
        [run]
        command = ["{{python}}", "-c", "import time; print('sleeping', flush=True); time.sleep(60)", "{marker}"]
        ready_timeout_s = 1.5
    """)
    rt = get_runtime("local")
    svc = load_manifest(d).resolve()
    with pytest.raises(ServiceStartError, match="did not become healthy within 1.5 s") as err:
        rt.start(rt.prepare(svc), StartOptions(port=free_port(), cpus=(1,)))
    assert "sleeping" in "\n".join(err.value.__notes__)
    left = []
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and marker in Path(f"/proc/{p}/cmdline").read_text(errors="replace"):
                left.append(p)
        except OSError:
            pass
    assert not left, f"processes left running: {left}"


def test_missing_toolchain_names_it_and_how_to_install(tmp_path: Path) -> None:
    d = _service(tmp_path, """
        name = "tmp-svc"
        language = "csharp"
        framework = "aspnet"
        toolchains = ["dotnet"]
        [run]
        command = ["dotnet", "run"]
    """)
    if shutil.which("dotnet"):
        pytest.skip("dotnet is installed here")
    with pytest.raises(ToolchainMissing, match="needs 'dotnet'.*install the .NET 8 SDK"):
        get_runtime("local").prepare(load_manifest(d).resolve())


def test_failing_build_shows_the_build_log_tail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fail = """["{python}", "-c", "import sys; print('compile error: missing semicolon'); sys.exit(1)"]"""
    d = _python_build(tmp_path, monkeypatch, fail)
    with pytest.raises(BuildError, match="build failed with exit code 1") as err:
        get_runtime("local").prepare(load_manifest(d).resolve())
    assert "missing semicolon" in "\n".join(err.value.__notes__)


def test_variants_with_the_same_build_are_built_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Variants that differ only in how they run share one build folder: the second is
    "cached"; a variant with its own build command gets its own folder and build."""
    count = ("""["{python}", "-c", "import pathlib, sys; p = pathlib.Path(sys.argv[1]) / 'builds'; """
             """p.write_text(p.read_text() + 'x' if p.exists() else 'x')", "{build_dir}"]""")
    d = _python_build(tmp_path, monkeypatch, count, """
        [variants.a]
        [variants.b]
        run = { env = { MODE = "b" } }
        [variants.own]
        build = { env = { OTHER = "1" } }
    """)
    m = load_manifest(d)
    rt = get_runtime("local")
    a, b, own = (rt.prepare(m.resolve(v)) for v in ("a", "b", "own"))
    assert (a.built, b.built, own.built) == (True, False, True)
    assert a.build_dir == b.build_dir != own.build_dir and b.info["build"] == "cached"
    assert (a.build_dir / "builds").read_text() == "x" and (own.build_dir / "builds").read_text() == "x"
    assert m.resolve("b").build_variant == "a" and m.resolve("own").build_variant == "own"


def test_every_build_and_cache_hit_is_recorded_with_its_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With $BENCHLIB_BUILD_TIMES set, a build and the cache hit that follows each append one
    record (what, runtime, cache hit or not), and the summary counts them on one row."""
    from benchlib.core.buildcache import build_times_summary, read_build_records

    d = _python_build(tmp_path, monkeypatch, """["{python}", "-c", "pass"]""", """
        [variants.a]
        [variants.b]
        run = { env = { MODE = "b" } }
    """)
    times = tmp_path / "builds.jsonl"
    monkeypatch.setenv("BENCHLIB_BUILD_TIMES", str(times))
    m = load_manifest(d)
    rt = get_runtime("local")
    rt.prepare(m.resolve("a"))
    rt.prepare(m.resolve("b"))
    records = read_build_records(times)
    assert [(r.kind, r.name, r.runtime, r.cached) for r in records] == [
        ("service", "tmp-svc/a", "local", False), ("service", "tmp-svc/a", "local", True)]
    row = build_times_summary(records).splitlines()[1].split()
    assert row[1:] == ["1", "1", "service", "local", "tmp-svc/a"]


def test_log_sinks_file_and_discard(tmp_path: Path) -> None:
    rt = get_runtime("local")
    svc = get_manifest("python-aiohttp-hello").resolve()
    prepared = rt.prepare(svc)
    log = tmp_path / "file.log"
    with rt.start(prepared, StartOptions(port=free_port(), cpus=(1,), log_sink="file", log_path=log)) as h:
        assert h.alive()
    with rt.start(prepared, StartOptions(port=free_port(), cpus=(1,), log_sink="discard")) as h:
        assert "discard" in h.logs_tail()


def test_unknown_runtime_lists_valid_ones() -> None:
    from benchlib.core.errors import ParameterError

    with pytest.raises(ParameterError, match="valid: local, docker"):
        get_runtime("podman")


def test_memory_cap_kills_a_hungry_service_and_the_stop_says_oom(tmp_path: Path) -> None:
    from benchlib.core.model import Limits

    d = _service(tmp_path, """
        name = "tmp-svc"
        language = "python"
        framework = "none"
        toolchains = ["python"]
        [run]
        command = ["{python}", "-c", '''
import os, socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(os.environ["PORT"]))); s.listen()
time.sleep(0.5)
hog = [bytearray(16 * 2**20) for _ in range(40)]
time.sleep(30)
''']
        port_env = "PORT"
        [health]
        kind = "tcp"
    """)
    rt = get_runtime("local")
    svc = load_manifest(d).resolve()
    h = rt.start(rt.prepare(svc), StartOptions(port=free_port(), cpus=(1,), limits=Limits(memory_mb=96)))
    if not str(h.enforced.get("memory", "")).startswith("enforced"):
        h.stop()
        pytest.skip(f"memory cap not enforceable here: {h.enforced.get('memory')}")
    import time

    deadline = time.monotonic() + 20
    while h.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    info = h.stop()
    assert info.died_early and info.oom_killed and "OOM" in info.detail


# ----------------------------------------------------------------------------- environment and owner

def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(e.decode(errors="replace").split("=", 1) for e in raw if b"=" in e)


def test_a_service_gets_a_minimal_environment_not_the_callers_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHLIB_TEST_API_TOKEN", "s3cret-token")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cret-key")
    monkeypatch.setenv("LC_TIME", "C.UTF-8")
    rt = get_runtime("local")
    svc = get_manifest("python-aiohttp-hello").resolve()
    with rt.start(rt.prepare(svc), StartOptions(port=free_port(), cpus=(1,), env={"ARM_SETTING": "x"})) as h:
        env = _environ(h.proc.pid)  # taskset execs the service: the same process
        assert "server.py" in Path(f"/proc/{h.proc.pid}/cmdline").read_text()
        assert h.enforced["parent_death_signal"] == "SIGTERM"
    assert "BENCHLIB_TEST_API_TOKEN" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert not [v for v in env.values() if "s3cret" in v]
    assert env["PATH"] == os.environ["PATH"] and env["LC_TIME"] == "C.UTF-8"
    assert env["HOST"] == "127.0.0.1" and env["PORT"] == str(h.port) and env["ARM_SETTING"] == "x"


_OWNER = """\
import json, sys, time
from benchlib.runtime.manifest import load_manifest
from benchlib.runtime import StartOptions, get_runtime
from benchlib.runtime.local import free_port
rt = get_runtime("local")
h = rt.start(rt.prepare(load_manifest(sys.argv[1]).resolve()), StartOptions(port=free_port(), cpus=(1,), run_id=sys.argv[2]))
print(json.dumps({"pid": h.proc.pid, "port": h.port, "cgroup": h.enforced.get("cgroup_path")}), flush=True)
time.sleep(120)
"""

_SERVER = """
import os, signal, socket, sys, time
if "--ignore-term" in sys.argv:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
s = socket.socket(); s.bind(("127.0.0.1", int(os.environ["PORT"]))); s.listen()
while True:
    time.sleep(1)
"""


def _tcp_service(tmp_path: Path, *extra: str) -> Path:
    d = _service(tmp_path, f"""
        name = "tmp-svc"
        language = "python"
        framework = "none"
        toolchains = ["python"]
        [run]
        command = ["{{python}}", "{{service_dir}}/server.py", {", ".join(f'"{e}"' for e in extra)}]
        port_env = "PORT"
        [health]
        kind = "tcp"
    """)
    (d / "server.py").write_text(_SERVER)
    return d


def _start_in_child(d: Path, run_id: str) -> tuple[subprocess.Popen[str], dict]:
    import json
    import subprocess
    import sys

    owner = subprocess.Popen([sys.executable, "-c", _OWNER, str(d), run_id], stdout=subprocess.PIPE, text=True)
    assert owner.stdout is not None
    return owner, json.loads(owner.stdout.readline())


def _wait_gone(pid: int, timeout_s: float = 15.0) -> bool:
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if "State:\tZ" in Path(f"/proc/{pid}/status").read_text():
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_a_service_does_not_outlive_the_process_that_started_it(tmp_path: Path) -> None:
    """SIGKILL of the starter leaves it no clean-up: the parent-death signal (SIGTERM) stops
    the service anyway, and the sweep removes its empty cgroup."""
    from benchlib.runtime import cgroups

    owner, info = _start_in_child(_tcp_service(tmp_path), f"t-owner-{os.getpid()}")
    owner.kill()
    owner.communicate()
    assert _wait_gone(info["pid"]), "the service outlived its starter"
    if info["cgroup"]:
        removed = cgroups.sweep(kill_orphans=True)
        assert any(r.endswith(Path(info["cgroup"]).name) for r in removed)


def test_cleanup_kills_a_service_that_ignores_sigterm_after_its_starter_died(tmp_path: Path) -> None:
    from benchlib.runtime import cgroups

    if not any(os.access(b.parent, os.W_OK) for b in cgroups._base_dirs(cgroups.detect()).values()):
        pytest.skip("no writable cgroup hierarchy: services are not in cgroups here")
    owner, info = _start_in_child(_tcp_service(tmp_path, "--ignore-term"), f"t-orphan-{os.getpid()}")
    owner.kill()
    owner.communicate()
    assert not _wait_gone(info["pid"], 1.0), "it ignores SIGTERM, so it is still running"
    name = Path(info["cgroup"]).name
    assert not any(r.endswith(name) for r in cgroups.sweep())  # without kill_orphans: kept
    removed = cgroups.sweep(kill_orphans=True)
    assert _wait_gone(info["pid"]) and any(r.endswith(name) for r in removed)


def test_a_service_started_from_a_worker_thread_is_not_tied_to_that_thread(tmp_path: Path) -> None:
    """The parent-death signal follows the thread that forks: a service started from a
    thread that then ends must not die with it, so it is not set there."""
    import threading
    import time

    rt = get_runtime("local")
    prepared = rt.prepare(load_manifest(_tcp_service(tmp_path)).resolve())
    handles = []
    t = threading.Thread(target=lambda: handles.append(rt.start(prepared, StartOptions(port=free_port(), cpus=(1,)))))
    t.start()
    t.join()
    (h,) = handles
    try:
        time.sleep(0.5)
        assert h.alive() and h.enforced["parent_death_signal"].startswith("not set")
    finally:
        h.stop()
