"""The service node without Ray: ``cluster="...?service=..."`` parsed, the CPUs a service gets
on its node, errors sent back as data, and the service actor's class driving a real local
service directly (no actor: the same methods, called here)."""

from __future__ import annotations

import pytest

from benchlib.core.errors import BenchlibError, ParameterError, ServiceStartError, ToolchainMissing
from benchlib.core.placement import ClusterSpec, parse_cluster
from benchlib.run.cluster.servicehost import (
    Address,
    Raised,
    ServiceHost,
    Started,
    Stopped,
    boot_id,
    net_namespace,
    node_cpus,
)
from benchlib.runtime.base import StartOptions
from benchlib.runtime.local import LocalRuntime
from benchlib.runtime.manifest import get_manifest
from benchlib.runtime.ports import free_port


@pytest.mark.parametrize("value, want", [
    ("local:3?service=benchlib_host_0", ClusterSpec("local", nodes=3, service="benchlib_host_0")),
    ("local:2?service=benchlib_host_1&server_cpus=all",
     ClusterSpec("local", nodes=2, service="benchlib_host_1", server_cpus="all")),
    ("auto?service=server_box&server_cpus=4", ClusterSpec("address", address="auto", service="server_box",
                                                          server_cpus=4)),
    ("ray://head:10001?service=db.box", ClusterSpec("address", address="ray://head:10001", service="db.box")),
    ("local:3?service=benchlib_host_1&min_hosts=1", ClusterSpec("local", nodes=3, service="benchlib_host_1", min_hosts=1)),
    ("auto?min_hosts=4", ClusterSpec("address", address="auto", min_hosts=4)),
])
def test_the_service_node_is_an_option_of_the_cluster_value(value: str, want: ClusterSpec) -> None:
    assert parse_cluster(value) == want


@pytest.mark.parametrize("value, match", [
    ("local:1?service=benchlib_host_0", "leaves no node to send load from; use local:2 or more"),
    ("local:2?service=benchlib_host_2", "not a node of local:2; valid: benchlib_host_0, benchlib_host_1"),
    ("local:2?server_cpus=all", "server_cpus needs a service node"),
    ("auto?service=x&server_cpus=0", "server_cpus must be 'all' or a positive number of CPUs; got '0'"),
    ("auto?service=x&server_cpus=some", "server_cpus must be 'all' or a positive number"),
    ("auto?host=x", "options after '\\?' are service=<node resource>, server_cpus=all\\|<n> and min_hosts=<n>"),
    ("local:3?service=benchlib_host_1&min_hosts=3", "min_hosts must be 1..2 \\(local:3 has 2 load node\\(s\\)\\); got '3'"),
    ("local:2?min_hosts=0", "min_hosts must be 1..2"),
    ("auto?min_hosts=two", "min_hosts must be a positive number; got 'two'"),
    ("auto?service=x&service=y", "options after '\\?' are"),
    ("auto?", "options after '\\?' are"),
    ("auto?service=no spaces", "is not a Ray resource name"),
])
def test_bad_service_options_name_the_valid_ones(value: str, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        parse_cluster(value)


def test_the_service_node_is_described() -> None:
    spec = parse_cluster("local:3?service=benchlib_host_0")
    assert spec is not None and spec.describe() == "a local Ray cluster of 3 nodes, the services on the node with benchlib_host_0"


def test_the_cpus_a_service_gets_on_its_node() -> None:
    assert node_cpus(None, (3,), (0, 1, 2, 3)) == (3,)  # the run's plan (a local cluster: one machine)
    assert node_cpus("all", (3,), (0, 1, 2, 3)) == (0, 1, 2, 3)
    assert node_cpus(2, (3,), (0, 1, 2, 3)) == (2, 3)
    with pytest.raises(ParameterError, match=r"server_cpus=5, but the service node has 4 CPU\(s\) .*valid: all or 1..4"):
        node_cpus(5, (3,), (0, 1, 2, 3))
    with pytest.raises(ParameterError, match=r"server CPUs \[7\] are not all on the service node"):
        node_cpus(None, (7,), (0, 1))


def test_a_node_serves_on_loopback_only_in_the_drivers_machine_and_network_namespace() -> None:
    def address(*driver: str) -> str:
        host = ServiceHost("10.213.1.10", None, *driver)
        host.stop_all()  # its temporary folder
        return host.address

    assert net_namespace().startswith("net:[")
    assert address(boot_id(), net_namespace()) == "127.0.0.1"  # a local:N node
    assert address(boot_id(), "net:[1]") == "10.213.1.10"  # a namespace of its own: its address there
    assert address("another-machine", net_namespace()) == "10.213.1.10"
    assert address() == "10.213.1.10"  # the driver's machine unknown


def test_an_error_raised_on_the_node_comes_back_whole() -> None:
    exc = ToolchainMissing("go", "svc", "install Go 1.22")  # its constructor does not take its message
    exc.add_note("build log tail: ...")
    back = Raised.of(exc).rebuild()
    assert type(back) is ToolchainMissing and str(back) == str(exc) and back.missing == "no go toolchain"
    assert back.__notes__ == ["build log tail: ..."] and isinstance(back, BenchlibError)


def test_the_service_actor_class_runs_a_real_service_and_sends_its_log_back(tmp_path) -> None:
    host = ServiceHost("127.0.0.1", "all")
    assert isinstance(host.use("local", LocalRuntime()), dict)
    svc = get_manifest("python-aiohttp-hello").resolve()
    prepared = host.prepare("local", svc)
    dep = Address("db", "127.0.0.1", 5999, (5999,))  # what the node sees of another service
    started = host.start("local", prepared, StartOptions(port=free_port(), cpus=(0,), log_path=tmp_path / "a.log",
                                                         deps={"db": dep}))  # type: ignore[dict-item]
    try:
        assert isinstance(started, Started) and started.host == "127.0.0.1" and started.pid
        assert started.enforced["cpus_read_back"] == list(host.info().cpus)  # server_cpus=all
        assert host.alive(started.key) and host.sample_now(started.key)
        assert host.resource_samples(started.key)[-1]["cpu_s"] >= 0
    finally:
        stopped = host.stop(started.key)  # type: ignore[union-attr]
    assert isinstance(stopped, Stopped) and stopped.stop.detail == "stopped by benchlib" and not stopped.stop.died_early
    assert isinstance(stopped.log, bytes) and not list(host._dir.iterdir())  # the node keeps no log file
    assert not (tmp_path / "a.log").exists()  # the driver's path is the driver's to write
    assert not host.alive(started.key) and host.stop(started.key) is None  # gone from the node
    # CPUs the node does not have (pinned as the run's plan says): the start fails there and
    # comes back as the runner's error
    host.server_cpus = None
    failed = host.start("local", prepared, StartOptions(port=free_port(), cpus=(999,)))
    assert isinstance(failed, Raised) and isinstance(failed.rebuild(), ParameterError)
    assert host.stop_all() == 0


def test_a_service_that_cannot_start_on_the_node_is_a_service_start_error(tmp_path, monkeypatch) -> None:
    from benchlib.run.testing import write_manifest

    write_manifest(tmp_path, "broken", command=["{python}", "-c", "raise SystemExit(3)"])
    monkeypatch.setenv("BENCHLIB_SERVICES", str(tmp_path))
    host = ServiceHost("127.0.0.1", None)
    host.use("local", LocalRuntime())
    svc = get_manifest("broken").resolve()
    got = host.start("local", host.prepare("local", svc), StartOptions(port=free_port(), cpus=(0,)))
    assert isinstance(got, Raised)
    err = got.rebuild()
    assert isinstance(err, ServiceStartError) and "exited with code 3 before it became healthy" in str(err)
