"""Fronts (a reverse proxy before the service under test) and multi-process services.

Pure parts: the manifest fields (``role``, ``[run] ports``, ``ports_env``, ``front_env``),
``Arm(front=..., front_variant=...)``, the placeholders a front gets, the ports a start
uses, and run.json parameters unchanged for arms without a front (old runs still resume).

Integration (real processes on 127.0.0.1): an experiment with one arm behind nginx (the
FastCGI application's 4 processes start first, then nginx with their ports; the contract
check and the load go through nginx; nginx stops first; both logs are kept; the trial's
metadata records the front) and one arm without a front (as before: no front in its
metadata); afterwards no process, port or scratch folder is left. The same through the
Docker runtime (marked ``docker``): the application and nginx in containers of their own.
"""

from __future__ import annotations

import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from benchlib.core.errors import ManifestError, ParameterError
from benchlib.core.model import Arm, Condition, Experiment, LoadSpec
from benchlib.loadgen.guard import client_side_only
from benchlib.run.runner import experiment_parameters, run_experiment
from benchlib.runtime import StartOptions
from benchlib.runtime.base import placeholder_values, service_ports
from benchlib.runtime.local import port_in_use
from benchlib.runtime.manifest import find_services_dir, load_manifest
from benchlib.store.records.run import RunRecord

SERVICES = find_services_dir()


def _manifest(tmp_path: Path, run_extra: str = "", top: str = "", name: str = "svc") -> Path:
    d = tmp_path / name
    d.mkdir(exist_ok=True)
    (d / "service.toml").write_text(textwrap.dedent(f"""
        name = "{name}"
        language = "python"
        framework = "test"
        {top}
        [run]
        command = ["{{python}}", "x.py"]
        port_env = "PORT"
        {run_extra}
    """))
    return d


@pytest.mark.parametrize(("run_extra", "top", "field"), [
    ("ports = 0", "", "run.ports"), ("ports = 65", "", "run.ports"), ("ports = true", "", "run.ports"),
    ('ports = "4"', "", "run.ports"), ('ports_env = "1X"', "", "run.ports_env"),
    ("front_env = { A = 1 }", "", "run.front_env"), ("", 'role = "proxy"', "role"),
])
def test_bad_manifest_fields_are_refused_in_one_line(tmp_path: Path, run_extra: str, top: str, field: str) -> None:
    with pytest.raises(ManifestError, match=rf"field '{re.escape(field)}'") as info:
        load_manifest(_manifest(tmp_path, run_extra, top))
    assert "\n" not in str(info.value)


def test_ports_and_front_env_resolve_per_variant(tmp_path: Path) -> None:
    d = _manifest(tmp_path, 'ports = 4\nfront_env = { FASTCGI_PARAM_X = "1" }\n'
                            '[variants.one]\nrun = { ports = 1 }\n[variants.four]\n')
    m = load_manifest(d)
    assert m.role == "service"
    one, four = m.resolve("one"), m.resolve("four")
    assert (one.ports, four.ports, four.ports_env) == (1, 4, "PORTS")
    assert one.front_env == four.front_env == {"FASTCGI_PARAM_X": "1"}
    with pytest.raises(ManifestError, match=r"field 'variants.bad.run.ports'"):
        load_manifest(_manifest(tmp_path, "[variants.bad]\nrun = { ports = 100 }", name="svc2"))


def test_arm_front_is_checked() -> None:
    a = Arm("a", "node-fastcgi", front="nginx-fastcgi", front_variant="keep-conn-on")
    assert (a.front, a.front_variant) == ("nginx-fastcgi", "keep-conn-on")
    with pytest.raises(ParameterError, match="front_variant 'keep-conn-on' without a front"):
        Arm("a", "node-fastcgi", front_variant="keep-conn-on")
    with pytest.raises(ParameterError, match="front .* must match"):
        Arm("a", "node-fastcgi", front="../nginx")
    with pytest.raises(ParameterError, match="front_variant must be a string"):
        Arm("a", "node-fastcgi", front="nginx-fastcgi", front_variant=3)  # type: ignore[arg-type]


def test_run_parameters_of_arms_without_a_front_still_resume() -> None:
    cond = (Condition("c", LoadSpec()),)
    plain = experiment_parameters(Experiment("s", (Arm("a", "go-fcgi"),), cond))
    assert plain["arms"][0]["front"] is None and plain["arms"][0]["front_variant"] is None
    fronted = experiment_parameters(Experiment("s", (Arm("a", "go-fcgi", front="nginx-fastcgi"),), cond))
    assert fronted["arms"][0]["front"] == "nginx-fastcgi" and fronted["arms"][0]["front_variant"] is None
    # an arm stored before fronts existed reads as one without a front
    older = {**plain, "arms": [{k: v for k, v in plain["arms"][0].items() if k not in ("front", "front_variant")}]}
    assert RunRecord.from_json({"parameters": older}).parameters == plain


class _Handle:
    name, host, port, ports = "app", "127.0.0.1", 7070, (7070, 7071, 7072, 7073)


def test_ports_and_backend_placeholders() -> None:
    node = load_manifest(SERVICES / "node-fastcgi").resolve("fastcgi")
    got = service_ports(node, StartOptions(port=7000, cpus=(1,)))
    assert len(got) == 4 == len(set(got)) and got[0] == 7000
    assert service_ports(node, StartOptions(port=7000, cpus=(1,), ports=(7000, 1, 2, 3))) == (7000, 1, 2, 3)
    with pytest.raises(Exception, match=r"must list its 4 port\(s\)"):
        service_ports(node, StartOptions(port=7000, cpus=(1,), ports=(7000, 1)))
    http = load_manifest(SERVICES / "node-fastcgi").resolve("http")
    assert service_ports(http, StartOptions(port=7000, cpus=(1,))) == (7000,)
    nginx = load_manifest(SERVICES / "nginx-fastcgi").resolve()
    values = placeholder_values(nginx, build_dir=None, port=8080, backend=_Handle())  # type: ignore[arg-type]
    assert (values["backend.host"], values["backend.port"], values["backend.ports"]) == (
        "127.0.0.1", "7070", "7070,7071,7072,7073")
    assert values["ports"] == "8080"


def test_roles_are_enforced_before_anything_runs(tmp_path: Path) -> None:
    cond = (Condition("c", LoadSpec(connections=1, duration_s=0.2, warmup_s=0)),)
    with pytest.raises(ParameterError, match="'nginx-fastcgi' is a front, not a service to load directly"):
        run_experiment(Experiment("s", (Arm("a", "nginx-fastcgi"),), cond), out_dir=tmp_path, progress=False)
    with pytest.raises(ParameterError, match="front 'go-fcgi' is not a front .* fronts: nginx-fastcgi"):
        run_experiment(Experiment("s", (Arm("a", "go-fcgi", front="go-fcgi"),), cond), out_dir=tmp_path,
                       progress=False)


def _processes_mentioning(text: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if text in line and "ps -eo" not in line]


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_an_arm_behind_nginx_and_one_without(tmp_path: Path) -> None:
    from benchlib.runtime import toolchains

    for name in ("node-fastcgi", "go-fcgi", "nginx-fastcgi"):
        ok, why = toolchains.availability(load_manifest(SERVICES / name))
        if not ok:
            pytest.skip(f"not run: {why}")
    n = 300
    # an open model at a rate far below what either side can do: the trials are valid on an idle
    # and on a busy machine alike (a closed loop of new connections can saturate the client CPU)
    load = LoadSpec(model="open", rate_rps=200, connections=4, duration_s=n / 200, warmup_s=0, keep_alive=False,
                    http_version="1.0")
    exp = Experiment("front_test", (
        Arm("node-nginx", "node-fastcgi", front="nginx-fastcgi", front_variant="keep-conn-off"),
        Arm("go-http", "go-fcgi", variant="http"),
    ), (Condition("seed", load),), trials=1, between_trials_s=0)
    result = run_experiment(exp, out_dir=tmp_path, progress=False)
    trials = {t.arm: t for t in result.trials}
    assert result.unavailable == {} and set(trials) == {"node-nginx", "go-http"}
    fronted, plain = trials["node-nginx"].meta, trials["go-http"].meta
    # the trials are measured: "ok", or "invalid" only because the client side of a busy
    # 2-core machine could not keep the schedule that minute (the guard's decision, not the front's)
    for m in (fronted, plain):
        assert m["status"] == "ok" or (m["status"] == "invalid" and client_side_only(m.get("reason"))), m.get("reason")

    # the arm behind nginx: 4 backend ports, the front recorded, the contract and the load through it
    ports = fronted["ports"]
    assert len(ports) == 4 == len(set(ports))
    front = fronted["front"]
    assert (front["service"], front["variant"]) == ("nginx-fastcgi", "keep-conn-off")
    assert front["port"] not in ports and front["enforced"]["cpus"] == fronted["enforced"]["cpus"]
    assert front["stop"]["died_early"] is False and front["stop"]["exit_code"] == 0
    # samples as benchlib's load started and ended (and every second): nginx's CPU during the load
    assert len(front["resources"]) >= 2 and front["resources"][-1]["cpu_s"] >= front["resources"][0]["cpu_s"] > 0
    assert len(fronted["resources"]) >= 2 and {s["cpu_source"] for s in fronted["resources"]} <= {"cgroup", "process group"}
    assert fronted["contract"]["ok"] and fronted["contract"]["url"] == f"http://127.0.0.1:{front['port']}/"
    assert fronted["load"]["status_counts"] == {"200": n}
    assert fronted["load"]["loadspec"]["keep_alive"] is False and fronted["load"]["loadspec"]["http_version"] == "1.0"
    log = result.store.log_path("seed", "node-nginx", 0)
    front_log = log.with_suffix(".nginx-fastcgi.log").read_text()
    for p in ports:  # nginx was started after the application, with every port of it
        assert f"server 127.0.0.1:{p};" in front_log
    assert f"listen 127.0.0.1:{front['port']} default_server;" in front_log
    assert f"access log: {n + 1} lines" in front_log  # the contract check and every request of the load
    app_log = log.read_text()
    for p in ports:
        assert f"listening on 127.0.0.1:{p} (FastCGI)" in app_log

    # the server's CPU per request over the measured window: service and nginx, nginx's share apart
    summ = result.summaries().set_index("arm")
    total, front_part = summ.loc["node-nginx", "server_cpu_us_per_req"], summ.loc["node-nginx", "front_cpu_us_per_req"]
    assert 0 < front_part < total < 1e6 and 0 < summ.loc["go-http", "server_cpu_us_per_req"] < 1e6
    assert 0 < summ.loc["node-nginx", "server_cpu_frac"] <= 1.05  # both on the one server CPU
    assert "front_cpu_us_per_req" not in summ.columns or summ["front_cpu_us_per_req"].isna()["go-http"]

    # the arm without a front: as before
    assert "front" not in plain and "ports" not in plain
    assert plain["contract"]["ok"] and plain["load"]["status_counts"] == {"200": n}
    plain_log = result.store.log_path("seed", "go-http", 0)
    assert plain_log.exists() and not plain_log.with_suffix(".nginx-fastcgi.log").exists()

    # nothing left: ports free, no process, the scratch folder removed
    prefix = re.search(r"prefix (\S+), config", front_log).group(1)  # type: ignore[union-attr]
    assert not Path(prefix).exists()
    for p in (*ports, front["port"]):
        assert not port_in_use("127.0.0.1", p)
        assert not _processes_mentioning(f"index.js {p}")
    assert not _processes_mentioning(prefix)


@pytest.mark.docker
@pytest.mark.timeout(1800)
def test_an_arm_behind_nginx_in_containers(tmp_path: Path) -> None:
    """The same through the Docker runtime: the application's container (4 Go FastCGI
    processes), then nginx's own container with their ports; contract and load through nginx;
    both containers removed afterwards."""
    from benchlib.runtime.docker import iter_benchlib_containers, shared_client

    n = 300
    # an open model at a rate far below what either side can do: the trials are valid on an idle
    # and on a busy machine alike (a closed loop of new connections can saturate the client CPU)
    load = LoadSpec(model="open", rate_rps=200, connections=4, duration_s=n / 200, warmup_s=0, keep_alive=False,
                    http_version="1.0")
    exp = Experiment("front_docker", (
        Arm("go-nginx", "go-fcgi", variant="fcgi-4", front="nginx-fastcgi", front_variant="keep-conn-on"),
    ), (Condition("seed", load),), trials=1, between_trials_s=0, runtime="docker")
    result = run_experiment(exp, out_dir=tmp_path, progress=False)
    (trial,) = result.trials
    meta = trial.meta
    assert meta["status"] == "ok" or (meta["status"] == "invalid" and client_side_only(meta.get("reason"))), \
        meta.get("reason")
    front = meta["front"]
    assert (front["service"], front["variant"], front["enforced"]["runtime"]) == ("nginx-fastcgi", "keep-conn-on", "docker")
    assert front["enforced"]["cpus"] == meta["enforced"]["cpus"] and front["enforced"]["container"]
    assert front["enforced"]["container"] != meta["enforced"]["container"]
    assert len(meta["ports"]) == 4 and meta["load"]["status_counts"] == {"200": n}
    assert meta["contract"]["ok"] and meta["contract"]["url"] == f"http://127.0.0.1:{front['port']}/"
    front_log = result.store.log_path("seed", "go-nginx", 0).with_suffix(".nginx-fastcgi.log").read_text()
    for p in meta["ports"]:
        assert f"server 127.0.0.1:{p};" in front_log
    assert "keepalive 400;" in front_log and f"access log: {n + 1} lines" in front_log
    left = [c.name for c in iter_benchlib_containers(shared_client(None), result.run_id)]
    assert left == []
    for p in (*meta["ports"], front["port"]):
        assert not port_in_use("127.0.0.1", p)
