"""The Docker runtime on engines that are not this machine's own socket: no plain-TCP remote
engine unless allowed, loopback listen addresses unless the user asks otherwise (a
dependency with the study's credentials never on the network by default), and a sweep that
removes only this machine's leftovers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchlib.core.errors import ParameterError, RuntimeUnavailable
from benchlib.runtime.base import StartOptions
from benchlib.runtime.cleanup import sweep
from benchlib.runtime.docker import DockerRuntime, check_endpoint_security, owner_alive, owner_label
from benchlib.runtime.local import free_port


@pytest.mark.parametrize("url,env,refused", [
    ("tcp://192.0.2.1:2375", {}, True),
    ("http://docker.example:2375", {}, True),
    ("tcp://192.0.2.1:2376", {"DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": "/certs"}, False),
    ("tcp://192.0.2.1:2376", {"DOCKER_CERT_PATH": "/certs"}, False),
    ("tcp://192.0.2.1:2375", {"BENCHLIB_ALLOW_INSECURE_DOCKER": "1"}, False),
    ("tcp://192.0.2.1:2375", {"BENCHLIB_ALLOW_INSECURE_DOCKER": "0"}, True),
    ("tcp://127.0.0.1:2375", {}, False),
    ("ssh://bench@192.0.2.1", {}, False),
    ("unix:///var/run/docker.sock", {}, False),
])
def test_a_remote_engine_over_plain_tcp_is_refused_unless_allowed(url: str, env: dict[str, str], refused: bool) -> None:
    if refused:
        with pytest.raises(RuntimeUnavailable, match="plain TCP .*DOCKER_TLS_VERIFY.*ssh://.*BENCHLIB_ALLOW_INSECURE_DOCKER=1"):
            check_endpoint_security(url, env)
    else:
        check_endpoint_security(url, env)


def test_an_allowance_that_is_neither_1_nor_0_is_refused_in_one_line() -> None:
    with pytest.raises(ParameterError, match=r"^BENCHLIB_ALLOW_INSECURE_DOCKER='yes' is not valid; valid: 1 \(allow\), "
                                             r"0 \(refuse\)$"):
        check_endpoint_security("tcp://192.0.2.1:2375", {"BENCHLIB_ALLOW_INSECURE_DOCKER": "yes"})


def test_the_refusal_comes_before_any_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "BENCHLIB_ALLOW_INSECURE_DOCKER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DOCKER_HOST", "tcp://192.0.2.1:2375")  # TEST-NET: nothing would answer anyway
    with pytest.raises(RuntimeUnavailable, match="plain TCP") as err:
        DockerRuntime().check()
    assert "\n" not in str(err.value)


def test_a_remote_engine_needs_the_users_bind_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BENCHLIB_DOCKER_BIND_HOST", raising=False)
    monkeypatch.delenv("BENCHLIB_DOCKER_DEPENDENCY_BIND_HOST", raising=False)
    with pytest.raises(RuntimeUnavailable, match="BENCHLIB_DOCKER_BIND_HOST"):
        DockerRuntime(base_url="ssh://bench@192.0.2.1").check()
    rt = DockerRuntime(base_url="ssh://bench@192.0.2.1", bind_host="0.0.0.0")
    assert rt.bind_host == "0.0.0.0" and rt.dependency_bind_host == "127.0.0.1"
    assert DockerRuntime().bind_host == DockerRuntime().dependency_bind_host == "127.0.0.1"
    monkeypatch.setenv("BENCHLIB_DOCKER_DEPENDENCY_BIND_HOST", "10.0.0.5")
    assert DockerRuntime().dependency_bind_host == "10.0.0.5"


def test_only_labels_of_this_machine_and_boot_can_be_judged() -> None:
    mine = owner_label()
    host, boot, pid, ticks = mine.split("/")
    assert owner_alive(mine) is True
    assert owner_alive(f"{host}/{boot}/{2**22 + 1}/1") is False  # this machine, no such process
    assert owner_alive(f"other-host/{boot}/{pid}/{ticks}") is None
    assert owner_alive(f"{host}/00000000/{pid}/{ticks}") is None  # an earlier boot


def _listen_address(port: int) -> str | None:
    """The local address of the socket listening on ``port`` (host network: /proc/net/tcp)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        addr, _, p = f[1].partition(":")
        if f[3] == "0A" and int(p, 16) == port:
            return ".".join(str(int(addr[i:i + 2], 16)) for i in (6, 4, 2, 0))
    return None


@pytest.mark.docker
def test_a_dependency_binds_loopback_even_when_services_are_exposed(
        docker_client: Any, prepared_services: dict[str, Any], run_id: str) -> None:
    rt = DockerRuntime(bind_host="0.0.0.0")
    prepared = prepared_services["python-aiohttp-hello"]
    with rt.start(prepared, StartOptions(port=free_port(), cpus=(1,), run_id=run_id, role="dependency")) as dep, \
            rt.start(prepared, StartOptions(port=free_port(), cpus=(1,), run_id=run_id, deps={"db": dep})) as svc:
        assert _listen_address(dep.port) == "127.0.0.1"
        assert _listen_address(svc.port) == "0.0.0.0"  # asked for by the user
        assert dep.container.attrs["Config"]["Env"].count("HOST=127.0.0.1") == 1
        assert dep.reach_host == "127.0.0.1"


@pytest.mark.docker
def test_the_sweep_leaves_other_machines_containers_alone(
        docker_client: Any, prepared_services: dict[str, Any], run_id: str) -> None:
    image = prepared_services["go-nethttp-hello"].image
    host, boot, _, _ = owner_label().split("/")
    foreign = docker_client.containers.create(image, labels={
        "benchlib.run_id": run_id, "benchlib.owner": f"another-machine/{boot}/1234/5678"})
    old_boot = docker_client.containers.create(image, labels={
        "benchlib.run_id": run_id, "benchlib.owner": f"{host}/00000000/1234/5678"})
    dead = docker_client.containers.create(image, labels={
        "benchlib.run_id": run_id, "benchlib.owner": f"{host}/{boot}/{2**22 + 1}/1"})
    try:
        result = sweep(client=docker_client, include_cgroups=False)
        removed = {c["name"] for c in result.removed}
        kept = {c["name"]: c["why"] for c in result.kept}
        assert dead.name in removed and foreign.name not in removed and old_boot.name not in removed
        assert "another machine" in kept[foreign.name] and "all_owners" in kept[old_boot.name]
        # (all_owners=True would remove them, and every other benchlib container on this shared
        # engine with them: other sessions' running services; not done here)
        by_run = sweep(run_id, client=docker_client, include_cgroups=False)
        assert {foreign.name, old_boot.name} <= {c["name"] for c in by_run.removed}
    finally:
        for c in (foreign, old_boot, dead):
            try:
                c.remove(force=True)
            except Exception:  # noqa: BLE001 - removed by the sweep
                pass
