"""Hosts with addresses of their own: a Ray cluster whose nodes live in network namespaces this
test makes (root only), joined by a bridge in a namespace of its own. The head (and the
driver, which needs a raylet of its own node) in one, the service node in another, two load
nodes in two more; every packet stays between these namespaces. The service listens on its
node's address, the load comes from the other two over the bridge: the path a real cluster
takes, on one machine. The nodes share this machine's CPUs: the test checks where things ran
and that every arrival is one row, not capacity."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("ray")

pytestmark = pytest.mark.cluster

HERE = Path(__file__).resolve().parent
#: The nodes: namespace suffix -> (address's last byte, the Ray resources of its node).
NODES = {"head": (1, {}), "svc": (10, {"benchlib_svc": 1}),
         "l1": (11, {"benchlib_load": 1}), "l2": (12, {"benchlib_load": 1})}


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def _netns_possible() -> str | None:
    """Why network namespaces cannot be made here (``None``: they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "no `ip` (iproute2)"
    probe = f"blprobe{os.getpid()}"
    try:
        _ip("netns", "add", probe)
    except subprocess.CalledProcessError as exc:
        return f"`ip netns add` refused: {exc.stderr.decode().strip()}"
    _ip("netns", "del", probe)
    return None


@dataclass
class NetnsCluster:
    """The namespaces (suffix -> name), the subnet's first three bytes, the head's address."""

    names: dict[str, str]
    prefix: str
    head: str

    def addr(self, node: str) -> str:
        return f"{self.prefix}.{NODES[node][0]}"


def _ray_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    from benchlib.run.cluster.session import LOCAL_RAY_ENV, RAY_ENV

    # nothing of this process's own Ray connection (a driver of another cluster, in the suite);
    # token authentication off on every node alike: once any local cluster has written
    # ~/.ray/auth_token, a head started without RAY_AUTH_MODE turns it on and its nodes are refused
    mine = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") and k != "PYTHONBREAKPOINT"}
    return {**mine, **RAY_ENV, **LOCAL_RAY_ENV, "RAY_AUTH_MODE": "disabled", "BENCHLIB_ALLOW_REMOTE_TARGET": "1",
            **(extra or {})}


def _kill_namespace(name: str) -> None:
    """SIGKILL every process in network namespace ``name``, then delete it."""
    out = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True, timeout=30)
    for pid in out.stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def netns_cluster() -> Iterator[NetnsCluster]:
    why = _netns_possible()
    if why:
        pytest.skip(why)
    tag = f"bl{os.getpid() % 100000}"
    prefix = f"10.213.{os.getpid() % 200 + 20}"
    switch = f"{tag}sw"
    names = {node: f"{tag}{node}" for node in NODES}
    made: list[str] = []
    ray = str(Path(sys.executable).parent / "ray")
    try:
        _ip("netns", "add", switch)
        made.append(switch)
        _ip("-n", switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", switch, "link", "set", "br0", "up")
        for node, (last, _) in NODES.items():
            ns = names[node]
            _ip("netns", "add", ns)
            made.append(ns)
            _ip("link", "add", f"p{node}", "netns", switch, "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("-n", switch, "link", "set", f"p{node}", "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"{prefix}.{last}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        # each node its own temporary folder, as on machines of their own (Ray keeps a node's
        # session, sockets and the head's address file there: nothing shared with another cluster)
        for ns in names.values():
            os.makedirs(f"/tmp/{ns}", exist_ok=True)
        head = f"{prefix}.1"
        common = ["--num-cpus=0", "--object-store-memory=83886080", "--disable-usage-stats"]
        for node, (last, resources) in NODES.items():
            where = ["--head", "--port=6379", "--include-dashboard=false"] if node == "head" else [f"--address={head}:6379"]
            cmd = ["ip", "netns", "exec", names[node], ray, "start", *where, f"--node-ip-address={prefix}.{last}",
                   f"--resources={json.dumps(resources)}", *common]
            done = subprocess.run(cmd, env=_ray_env({"TMPDIR": f"/tmp/{names[node]}"}), capture_output=True,
                                  text=True, timeout=300)
            assert done.returncode == 0, f"ray start on {node}: {done.stdout[-2000:]} {done.stderr[-2000:]}"
        yield NetnsCluster(names, prefix, head)
    finally:
        for ns in reversed(made):
            _kill_namespace(ns)
        for ns in names.values():
            shutil.rmtree(f"/tmp/{ns}", ignore_errors=True)


def test_service_and_load_hosts_in_namespaces_of_their_own(netns_cluster: NetnsCluster, tmp_path: Path) -> None:
    c = netns_cluster
    env = _ray_env({"RAY_ADDRESS": f"{c.head}:6379", "PYTHONPATH": str(HERE.parents[1]),
                    "TMPDIR": f"/tmp/{c.names['head']}"})  # the driver on the head's node
    t = time.monotonic()
    done = subprocess.run(["ip", "netns", "exec", c.names["head"], sys.executable, str(HERE / "netns_driver.py"),
                           str(tmp_path / "runs")], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["status"] in ("ok", "invalid"), out["reason"]  # invalid: a busy machine's guard
    svc = out["service_node"]
    # the node's own address, where the services listened: not loopback, though the same machine
    assert svc["resource"] == "benchlib_svc" and svc["address"] == svc["listen_address"] == c.addr("svc")
    assert svc["same_machine"]  # one kernel: one monotonic clock, no offset to estimate
    assert sorted(h["address"] for h in out["hosts"]) == [c.addr("l1"), c.addr("l2")]  # the load from the others
    assert out["rows"] == 120 and out["per_host"] == [60, 60] and out["intended_unique"] == 120
    assert out["ok_responses"] == 120  # every request crossed the bridge and was answered
    assert time.monotonic() - t < 600
