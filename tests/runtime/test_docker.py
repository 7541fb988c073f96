"""The Docker runtime against a real engine (marked ``docker``; skipped with the reason when
no engine answers): builds, limits read back from the container's cgroup, health, logs,
OOM kills, services killed mid-trial, the label sweep, clean-up on signals, bad input."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchlib.core.errors import BuildError, ParameterError, RuntimeUnavailable, ServiceStartError
from benchlib.core.model import Arm, Condition, Experiment, Limits, LoadSpec
from benchlib.runtime import get_runtime
from benchlib.runtime.base import StartOptions
from benchlib.runtime.cleanup import sweep
from benchlib.runtime.docker import SEED_LIMITS, DockerRuntime, detect_ca_bundle, iter_benchlib_containers, owner_label
from benchlib.runtime.local import free_port
from benchlib.runtime.manifest import load_manifest

REPO = Path(__file__).resolve().parents[2]


def _containers(client: Any, run_id: str) -> list[Any]:
    return list(iter_benchlib_containers(client, run_id))


def _service(tmp_path: Path, name: str, dockerfile: str, files: dict[str, str] | None = None,
             toml_extra: str = "", health: str = 'kind = "http"\npath = "/"', ready_timeout_s: float = 20) -> Any:
    d = tmp_path / name
    d.mkdir()
    (d / "Dockerfile").write_text(textwrap.dedent(dockerfile))
    for fname, text in (files or {}).items():
        (d / fname).write_text(textwrap.dedent(text))
    (d / "service.toml").write_text(textwrap.dedent(f"""\
        schema = 1
        name = "{name}"
        description = "test service"
        language = "test"
        framework = "test"
        [run]
        command = ["unused-locally"]
        port_env = "PORT"
        env = {{ HOST = "{{host}}" }}
        ready_timeout_s = {ready_timeout_s}
        [health]
        """) + health + textwrap.dedent("""
        [docker]
        dockerfile = "Dockerfile"
        [[endpoints]]
        name = "root"
        path = "/"
        """) + toml_extra)
    return load_manifest(d).resolve()


# ----------------------------------------------------------------------------- no engine needed

def test_unreachable_engine_says_how_to_start_one_or_use_local(tmp_path: Path) -> None:
    rt = get_runtime("docker", base_url=f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(RuntimeUnavailable) as err:
        rt.check()
    msg = str(err.value)
    assert "no Docker engine answers" in msg and "no-engine.sock" in msg
    assert "scripts/docker-engine.sh start" in msg and 'runtime="local"' in msg


def test_ca_bundle_detection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bundle = tmp_path / "proxy-ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    for name in ("BENCHLIB_BUILD_CA_BUNDLE", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", str(tmp_path / "pip.conf"))
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "pip.conf").write_text(f"[global]\ncert = {bundle}\n")
    if not Path("/etc/pip.conf").exists():
        assert detect_ca_bundle("auto") == bundle  # pip's cert setting
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    assert detect_ca_bundle("auto") == bundle
    monkeypatch.setenv("BENCHLIB_BUILD_CA_BUNDLE", "none")
    assert detect_ca_bundle("auto") is None
    assert detect_ca_bundle(None) is None and detect_ca_bundle(str(bundle)) == bundle
    with pytest.raises(ParameterError, match="does not exist"):
        detect_ca_bundle(str(tmp_path / "missing.pem"))


def test_default_limits_mirror_the_seeds_and_are_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BENCHLIB_DOCKER_LIMITS", raising=False)
    rt = DockerRuntime()
    assert rt.effective_limits(Limits()) == SEED_LIMITS == Limits(cpus=1.0, memory_mb=512)
    assert rt.effective_limits(Limits(memory_mb=256)) == Limits(memory_mb=256)  # asked: no CPU quota
    assert rt.effective_limits(Limits(), role="dependency") == Limits()
    monkeypatch.setenv("BENCHLIB_DOCKER_LIMITS", "cpus=2,memory_mb=1024")
    assert DockerRuntime().effective_limits(Limits()) == Limits(cpus=2.0, memory_mb=1024)
    monkeypatch.setenv("BENCHLIB_DOCKER_LIMITS", "none")
    assert DockerRuntime().effective_limits(Limits()) == Limits()
    monkeypatch.setenv("BENCHLIB_DOCKER_LIMITS", "cpu=2")
    with pytest.raises(ParameterError, match="unknown field 'cpu'; valid: none, or the fields cpus and memory_mb"):
        DockerRuntime()


# ----------------------------------------------------------------------------- the two quickstart services

@pytest.mark.docker
@pytest.mark.parametrize("name", ["go-nethttp-hello", "python-aiohttp-hello"])
def test_service_image_builds_runs_and_limits_are_read_back(
        name: str, docker_runtime: DockerRuntime, prepared_services: dict[str, Any], docker_client: Any,
        run_id: str, tmp_path: Path) -> None:
    prepared = prepared_services[name]
    assert prepared.image and prepared.info["tag"].startswith(f"benchlib/{name}:fair-")
    again = docker_runtime.prepare(prepared.service)
    assert again.built is False and again.image == prepared.image  # content-hash cache
    port = free_port()
    log_path = tmp_path / "service.log"
    with docker_runtime.start(prepared, StartOptions(port=port, cpus=(1,), limits=Limits(cpus=0.5, memory_mb=256),
                                                     run_id=run_id, log_path=log_path)) as h:
        r = httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
        assert (r.status_code, r.text) == (200, "Hello, World!")
        e = h.enforced
        # read back from the container's cgroup files, not from what was asked
        assert e["source"].startswith("host cgroup files") and h.container.id in e["source"]
        assert (e["cpus"], e["cpu_quota"], e["memory_mb"], e["swap"]) == ([1], 0.5, 256, "disabled"), e
        assert all(e[k].startswith("enforced") for k in ("cpuset", "cpu", "memory")), e
        (c,) = _containers(docker_client, run_id)
        assert c.labels["benchlib.service"] == name and c.labels["benchlib.role"] == "service"
        assert c.attrs["HostConfig"]["NetworkMode"] == "host"
        for _ in range(40):
            httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
        time.sleep(1.2)
        samples = h.resource_samples()
        assert len(samples) >= 2 and samples[-1]["cpu_s"] >= samples[0]["cpu_s"] > 0
        assert 0 < samples[-1]["memory_mb"] < 256
    info = h.stop()
    assert (info.died_early, info.oom_killed) == (False, False) and info.detail == "stopped by benchlib"
    assert _containers(docker_client, run_id) == []
    assert log_path.exists()


@pytest.mark.docker
def test_default_limits_and_exec_read_back(docker_client: Any, prepared_services: dict[str, Any],
                                            run_id: str) -> None:
    rt = DockerRuntime(readback="exec", default_limits=SEED_LIMITS)
    port = free_port()
    with rt.start(prepared_services["go-nethttp-hello"], StartOptions(port=port, cpus=(1,), run_id=run_id)) as h:
        e = h.enforced
        assert e["source"] == "container cgroup files (docker exec)"
        assert (e["cpus"], e["cpu_quota"], e["memory_mb"]) == ([1], 1.0, 512), e
        assert e["host_config"]["nano_cpus"] == 10**9 and e["host_config"]["memory_bytes"] == 512 * 2**20


@pytest.mark.docker
def test_provenance_names_engine_storage_cgroup_and_images(docker_runtime: DockerRuntime,
                                                           prepared_services: dict[str, Any]) -> None:
    p = docker_runtime.provenance()
    json.dumps(p)
    assert p["engine"]["version"] and p["engine"]["storage_driver"] and p["engine"]["cgroup_version"] in ("v1", "v2")
    assert p["images"]["go-nethttp-hello/fair"]["image_id"] == prepared_services["go-nethttp-hello"].image
    assert p["images"]["go-nethttp-hello/fair"]["versions"]["go"]
    assert p["network_mode"] == "host"


# ----------------------------------------------------------------------------- failures, named

@pytest.mark.docker
def test_failing_dockerfile_raises_build_error_with_log_tail(docker_runtime: DockerRuntime, base_image: str,
                                                             tmp_path: Path) -> None:
    svc = _service(tmp_path, "broken-build", """\
        FROM debian:bookworm-slim
        RUN echo compiling-the-service && exit 3
        """)
    with pytest.raises(BuildError) as err:
        docker_runtime.prepare(svc)
    assert "docker build" in str(err.value) and "non-zero code: 3" in str(err.value)
    assert "compiling-the-service" in "\n".join(err.value.__notes__)


@pytest.mark.docker
def test_early_exit_raises_start_error_with_log_tail_and_leaves_nothing(
        docker_runtime: DockerRuntime, docker_client: Any, base_image: str, tmp_path: Path, run_id: str) -> None:
    svc = _service(tmp_path, "exits-early", """\
        FROM debian:bookworm-slim
        CMD ["sh", "-c", "echo missing-config-file >&2; exit 4"]
        """)
    prepared = docker_runtime.prepare(svc)
    with pytest.raises(ServiceStartError, match="exited with code 4") as err:
        docker_runtime.start(prepared, StartOptions(port=free_port(), cpus=(1,), run_id=run_id))
    assert "missing-config-file" in "\n".join(err.value.__notes__)
    assert _containers(docker_client, run_id) == []


@pytest.mark.docker
def test_never_healthy_times_out_and_leaves_nothing(docker_runtime: DockerRuntime, docker_client: Any,
                                                     base_image: str, tmp_path: Path, run_id: str) -> None:
    svc = _service(tmp_path, "never-healthy", """\
        FROM debian:bookworm-slim
        CMD ["sh", "-c", "echo waiting-forever; sleep 60"]
        """, health='kind = "tcp"', ready_timeout_s=1.5)
    prepared = docker_runtime.prepare(svc)
    with pytest.raises(ServiceStartError, match="did not become healthy within 1.5 s") as err:
        docker_runtime.start(prepared, StartOptions(port=free_port(), cpus=(1,), run_id=run_id))
    assert "waiting-forever" in "\n".join(err.value.__notes__)
    assert _containers(docker_client, run_id) == []


@pytest.mark.docker
def test_port_in_use_is_named(docker_runtime: DockerRuntime, prepared_services: dict[str, Any],
                              run_id: str) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ServiceStartError, match=f"port {port} on 127.0.0.1 is already in use"):
            docker_runtime.start(prepared_services["go-nethttp-hello"],
                                 StartOptions(port=port, cpus=(1,), run_id=run_id))


@pytest.mark.docker
def test_memory_cap_too_small_at_start_is_reported_as_oom(docker_runtime: DockerRuntime, docker_client: Any,
                                                           prepared_services: dict[str, Any], run_id: str) -> None:
    with pytest.raises(ServiceStartError, match="OOM") as err:
        docker_runtime.start(prepared_services["python-aiohttp-hello"],
                             StartOptions(port=free_port(), cpus=(1,), limits=Limits(memory_mb=8), run_id=run_id))
    assert "did not become healthy" not in str(err.value)  # an OOM kill, not a timeout
    assert _containers(docker_client, run_id) == []


@pytest.fixture()
def alloc_service(tmp_path: Path, prepared_services: dict[str, Any], docker_runtime: DockerRuntime) -> Any:
    """A tiny HTTP service (on the Python image) that allocates ``mb`` MiB on GET /alloc?mb=N."""
    tag = prepared_services["python-aiohttp-hello"].info["tag"]
    svc = _service(tmp_path, "alloc-probe", f"""\
        FROM {tag}
        COPY probe.py /app/probe.py
        CMD ["/opt/venv/bin/python", "/app/probe.py"]
        """, files={"probe.py": """\
        import os
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from urllib.parse import parse_qs, urlparse
        KEEP = []
        class H(BaseHTTPRequestHandler):
            def do_GET(self):
                q = parse_qs(urlparse(self.path).query)
                if self.path.startswith("/alloc"):
                    KEEP.append(b"x" * (int(q["mb"][0]) * 2**20))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")
            def log_message(self, *a):
                pass
        ThreadingHTTPServer((os.environ["HOST"], int(os.environ["PORT"])), H).serve_forever()
        """})
    return docker_runtime.prepare(svc)


@pytest.mark.docker
def test_oom_kill_during_the_trial_is_reported_as_oom(docker_runtime: DockerRuntime, docker_client: Any,
                                                       alloc_service: Any, run_id: str) -> None:
    port = free_port()
    h = docker_runtime.start(alloc_service, StartOptions(port=port, cpus=(1,), limits=Limits(memory_mb=64),
                                                         run_id=run_id))
    assert httpx.get(f"http://127.0.0.1:{port}/alloc?mb=8", timeout=5).text == "ok"
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"http://127.0.0.1:{port}/alloc?mb=200", timeout=10)
    deadline = time.monotonic() + 10
    while h.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    info = h.stop()
    assert info.oom_killed and info.died_early, info
    assert "OOM" in info.detail and "64 MiB" in info.detail
    assert _containers(docker_client, run_id) == []


@pytest.mark.docker
def test_container_killed_mid_trial_is_recorded_and_removed(docker_runtime: DockerRuntime, docker_client: Any,
                                                             prepared_services: dict[str, Any], run_id: str) -> None:
    port = free_port()
    h = docker_runtime.start(prepared_services["go-nethttp-hello"], StartOptions(port=port, cpus=(1,), run_id=run_id))
    assert h.alive()
    h.container.kill()
    deadline = time.monotonic() + 10
    while h.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    info = h.stop()
    assert info.died_early and info.exit_code == 137 and not info.oom_killed
    assert "exited on its own with code 137" in info.detail
    assert "go-nethttp-hello listening on 127.0.0.1" in h.logs_tail(5)  # kept after removal
    assert _containers(docker_client, run_id) == []


@pytest.mark.docker
def test_runner_records_a_service_killed_mid_trial_and_leaves_no_container(
        docker_runtime: DockerRuntime, docker_client: Any, prepared_services: dict[str, Any], run_id: str,
        tmp_path: Path) -> None:
    from benchlib.run.runner import run_experiment

    exp = Experiment(study="docker-kill", arms=(Arm("go", "go-nethttp-hello"),),
                     conditions=(Condition("main", LoadSpec(connections=2, duration_s=3.0, warmup_s=0.5)),),
                     trials=1, runtime="docker", between_trials_s=0)
    killed: list[str] = []

    def killer() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            running = docker_client.containers.list(filters={"label": f"benchlib.run_id={run_id}"})
            if running:
                time.sleep(1.5)  # health, contract check, warm-up: then kill mid-measurement
                running[0].kill()
                killed.append(running[0].name)
                return
            time.sleep(0.05)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    result = run_experiment(exp, run_id=run_id, out_dir=tmp_path, progress=False)
    t.join(timeout=5)
    assert killed, "the service container never appeared"
    (trial,) = result.trials
    meta = trial.meta
    assert meta["status"] == "failed" and "died" in meta["reason"], meta.get("reason")
    assert meta["stop"]["died_early"] and meta["stop"]["exit_code"] == 137
    assert meta["enforced"]["runtime"] == "docker"
    assert _containers(docker_client, run_id) == []


# ----------------------------------------------------------------------------- sweep and exit paths

_CHILD = """\
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C, even when started in the background
from benchlib.runtime.manifest import get_manifest
from benchlib.runtime.base import StartOptions
from benchlib.runtime.docker import DockerRuntime
from benchlib.runtime.local import free_port
rt = DockerRuntime()
h = rt.start(rt.prepare(get_manifest("go-nethttp-hello").resolve()),
             StartOptions(port=free_port(), cpus=(1,), run_id=sys.argv[1]))
print("READY", h.container.id, flush=True)
time.sleep(120)
"""


def _child_with_container(run_id: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, run_id], stdout=subprocess.PIPE, text=True, cwd=REPO)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("READY"), f"child did not start its container: {line!r}"
    return proc, line.split()[1]


@pytest.mark.docker
def test_sweep_removes_leftovers_of_a_killed_run_but_not_of_a_live_one(
        docker_runtime: DockerRuntime, docker_client: Any, prepared_services: dict[str, Any], run_id: str) -> None:
    dead_run = run_id + "-killed"
    proc, cid = _child_with_container(dead_run)
    proc.kill()  # SIGKILL: no atexit, no handler; the container stays
    proc.communicate()
    (left,) = _containers(docker_client, dead_run)
    assert left.id == cid and left.status == "running"
    live = docker_runtime.start(prepared_services["go-nethttp-hello"],
                                StartOptions(port=free_port(), cpus=(1,), run_id=run_id))
    # a stopped container of a live owner (say, a service that just died, not yet inspected)
    stopped = docker_client.containers.create(prepared_services["go-nethttp-hello"].image,
                                              labels={"benchlib.run_id": run_id, "benchlib.owner": owner_label()})
    try:
        result = sweep(client=docker_client)
        assert [c["run_id"] for c in result.removed if c["run_id"] in (dead_run, run_id)] == [dead_run]
        kept = [c["name"] for c in result.kept if c["run_id"] == run_id and "still running" in c["why"]]
        assert sorted(kept) == sorted([live.container.name, stopped.name])
        assert f"removed {left.name}" in str(result)
        assert _containers(docker_client, dead_run) == []
        assert live.alive()
    finally:
        live.stop()
        stopped.remove(force=True)
    assert _containers(docker_client, run_id) == []


@pytest.mark.docker
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signals_remove_the_containers(sig: int, docker_client: Any, prepared_services: dict[str, Any],
                                       run_id: str) -> None:
    proc, _ = _child_with_container(run_id)
    try:
        assert len(_containers(docker_client, run_id)) == 1
        proc.send_signal(sig)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert _containers(docker_client, run_id) == []


@pytest.mark.docker
def test_sweep_by_run_id_and_without_engine(docker_runtime: DockerRuntime, docker_client: Any,
                                            prepared_services: dict[str, Any], run_id: str,
                                            monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    h = docker_runtime.start(prepared_services["go-nethttp-hello"],
                             StartOptions(port=free_port(), cpus=(1,), run_id=run_id))
    result = sweep(run_id, client=docker_client, include_cgroups=False)
    assert [c["name"] for c in result.removed] == [h.container.name]
    info = h.stop()  # the container is already gone: still a clean StopInfo
    assert "engine error while stopping" in info.detail or info.died_early
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/none.sock")
    offline = sweep()
    assert offline.removed == [] and offline.errors and "no Docker engine answers" in offline.errors[0]
