"""Another engine than the default one: the plumbing of remote endpoints (``DOCKER_HOST`` or
``base_url``), tested with a second dockerd on its own unix socket, started and stopped by
``scripts/docker-engine.sh --name``. Marked ``docker``; needs root to start the engine."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchlib.core.model import Limits
from benchlib.runtime.base import StartOptions
from benchlib.runtime.cleanup import sweep
from benchlib.runtime.docker import DockerRuntime, connect
from benchlib.runtime.docker.images import bootstrap_base_image
from benchlib.runtime.local import free_port
from benchlib.runtime.manifest import load_manifest

pytestmark = pytest.mark.docker

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "docker-engine.sh"
NAME = "pytest"
SOCKET = f"/run/benchlib-dockerd-{NAME}/docker.sock"


@pytest.fixture(scope="module")
def second_engine() -> Iterator[str]:
    """``unix:///run/benchlib-dockerd-pytest/docker.sock``: started for this module (its data
    root persists in /var/lib/benchlib-dockerd-pytest, so images stay cached), and stopped
    afterwards if this fixture started it."""
    if os.geteuid() != 0 or shutil.which("dockerd") is None:
        pytest.skip("starting a second dockerd needs root and dockerd (apt-get install docker.io)")
    first = subprocess.run([str(SCRIPT), "start", "--name", NAME], capture_output=True, text=True, timeout=180)
    assert first.returncode == 0, first.stderr
    started = first.stdout.startswith("started dockerd")
    again = subprocess.run([str(SCRIPT), "start", "--name", NAME], capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "already" in again.stdout, again.stdout  # idempotent
    status = subprocess.run([str(SCRIPT), "status", "--name", NAME], capture_output=True, text=True, timeout=60)
    assert status.stdout.startswith("running:"), status.stdout
    yield f"unix://{SOCKET}"
    if started:
        stop = subprocess.run([str(SCRIPT), "stop", "--name", NAME], capture_output=True, text=True, timeout=120)
        assert stop.returncode == 0 and stop.stdout.startswith("stopped dockerd"), stop.stdout + stop.stderr
        assert not Path(SOCKET).exists() or subprocess.run(
            [str(SCRIPT), "status", "--name", NAME], capture_output=True, text=True).returncode == 3


@pytest.fixture(scope="module")
def engine_b(second_engine: str) -> Iterator[Any]:
    client = connect(second_engine)
    yield client
    client.close()


def _go_binary(docker_client: Any, image: str) -> bytes:
    """The go-nethttp-hello server binary, copied out of its image on the default engine."""
    c = docker_client.containers.create(image)
    try:
        stream, _ = c.get_archive("/usr/local/bin/server")
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tf:
            member = tf.extractfile("server")
            assert member is not None
            return member.read()
    finally:
        c.remove(force=True)


@pytest.fixture(scope="module")
def relay_service(tmp_path_factory: pytest.TempPathFactory, docker_client: Any,
                  prepared_services: dict[str, Any]) -> Any:
    """A service whose Dockerfile copies the Go server binary onto debian:bookworm-slim, so the
    second engine builds it in seconds (its build context travels over that engine's socket)."""
    d = tmp_path_factory.mktemp("remote") / "remote-hello"
    d.mkdir()
    (d / "server").write_bytes(_go_binary(docker_client, prepared_services["go-nethttp-hello"].image))
    (d / "server").chmod(0o755)
    (d / "Dockerfile").write_text(textwrap.dedent("""\
        FROM debian:bookworm-slim
        COPY server /usr/local/bin/server
        USER 65534:65534
        CMD ["/usr/local/bin/server"]
        """))
    (d / "service.toml").write_text(textwrap.dedent("""\
        schema = 1
        name = "remote-hello"
        description = "the Go hello server, for the remote-engine plumbing test"
        language = "go"
        framework = "net/http"
        [run]
        command = ["unused-locally"]
        port_env = "PORT"
        env = { HOST = "{host}" }
        ready_timeout_s = 20
        [health]
        kind = "http"
        path = "/"
        [docker]
        dockerfile = "Dockerfile"
        [[endpoints]]
        name = "hello"
        path = "/"
        """))
    return load_manifest(d).resolve()


def test_base_image_on_a_fresh_engine_comes_from_the_cached_tarball(engine_b: Any, base_image: str) -> None:
    result = bootstrap_base_image(client=engine_b)
    assert result.action in ("present", "imported", "pulled", "debootstrapped"), result
    assert engine_b.images.get("debian:bookworm-slim").id == result.image_id
    assert str(result).startswith("debian:bookworm-slim: ")


@pytest.mark.parametrize("how", ["DOCKER_HOST", "base_url"])
def test_build_run_read_back_and_sweep_on_the_other_engine(
        how: str, second_engine: str, engine_b: Any, docker_client: Any, relay_service: Any, run_id: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    bootstrap_base_image(client=engine_b)
    if how == "DOCKER_HOST":
        monkeypatch.setenv("DOCKER_HOST", second_engine)
        rt = DockerRuntime(readback="exec")
    else:
        rt = DockerRuntime(base_url=second_engine)
    rt.check()
    prepared = rt.prepare(relay_service)
    assert engine_b.images.get(prepared.info["tag"]).id == prepared.image
    port = free_port()
    with rt.start(prepared, StartOptions(port=port, cpus=(1,), limits=Limits(cpus=0.5, memory_mb=128),
                                         run_id=run_id)) as h:
        assert httpx.get(f"http://127.0.0.1:{port}/", timeout=5).text == "Hello, World!"
        e = h.enforced
        assert (e["cpus"], e["cpu_quota"], e["memory_mb"]) == ([1], 0.5, 128), e
        assert ("docker exec" in e["source"]) == (how == "DOCKER_HOST")
        on_b = engine_b.containers.list(filters={"label": f"benchlib.run_id={run_id}"})
        on_a = docker_client.containers.list(all=True, filters={"label": f"benchlib.run_id={run_id}"})
        assert len(on_b) == 1 and on_a == []
        prov = rt.provenance()
        assert prov["endpoint"] == second_engine and prov["engine"]["storage_driver"]
    assert engine_b.containers.list(all=True, filters={"label": f"benchlib.run_id={run_id}"}) == []
    # a leftover on engine B is found by a sweep of engine B
    leftover = engine_b.containers.run(prepared.image, detach=True, network_mode="host",
                                       environment={"PORT": str(free_port())},
                                       labels={"benchlib.run_id": run_id, "benchlib.service": "remote-hello"})
    result = sweep(run_id, client=engine_b, include_cgroups=False)
    assert [c["id"] for c in result.removed] == [leftover.short_id]
