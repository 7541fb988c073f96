"""Study 03 (FastCGI behind nginx, Node vs C#): the services and the front, for real.

* The manifests (pure, fast): every application answers ``GET /`` with the seed's 62-byte
  body as text/html; the FastCGI ones ask for the seed's 4 ports (``[run] ports = 4``) where
  the seed ran 4 processes, answer no HTTP (health ``tcp``); nginx-fastcgi is a front with
  the seed's ``keep-conn-off`` and the fair ``keep-conn-on`` variants; node-fastcgi is pinned
  to 1.3.3 by its lock file; AsyncFastCGI.NET is fetched at build time at commit 5a58529.
* The published numbers (``data/reference/03_fastcgi_nginx.csv``) are the seed's two ab
  tables and are self-consistent (ab's mean time per request = concurrency / req/s).
* Locally (marked ``integration``): every application and variant builds, starts pinned to
  one CPU and meets its contract on the wire, through nginx (both front variants) for the
  FastCGI variants and directly for the plain-HTTP ones; the bytes nginx really sends to an
  HTTP/1.1 and to an HTTP/1.0 client are asserted (no Content-Length: chunked, or the end of
  the connection); nginx listens on loopback only and forwards to every backend port; its
  access log counts every request; nothing is left running or listening.
* ab exactly as the seed ran it (``ab -c 20 -n N``, no ``-k``: HTTP/1.0) and benchlib's
  equivalent load (closed, 20 connections, N requests, ``keep_alive=False``, HTTP/1.0)
  against nginx + node-fastcgi, bounded to a few thousand requests.
* The same contracts in containers (marked ``docker``) for nginx, Node, Go and PHP-FPM.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchlib.analysis.reference import load_reference
from benchlib.runtime import ServiceHandle, StartOptions, contract, get_runtime, toolchains
from benchlib.runtime.base import handle_ports
from benchlib.runtime.local import free_port, port_in_use
from benchlib.runtime.manifest import ResolvedService, find_services_dir, load_manifest

SERVICES_DIR = find_services_dir()
STUDY = "03_fastcgi_nginx"
BODY = "<!DOCTYPE html><html><body><h1>Hello World!</h1></body></html>"
FRONT = "nginx-fastcgi"
FRONT_VARIANTS = ("keep-conn-off", "keep-conn-on")
#: application -> variant -> behind nginx? (FastCGI variants) and its number of ports
APPS: dict[str, dict[str, tuple[bool, int]]] = {
    "node-fastcgi": {"fastcgi": (True, 4), "http": (False, 1)},
    "go-fcgi": {"fcgi": (True, 1), "fcgi-4": (True, 4), "http": (False, 1)},
    "php-fpm-hello": {"fpm": (True, 1)},
    "dotnet-asyncfastcgi": {"fastcgi": (True, 4)},
}
#: the cases run on the wire: FastCGI variants once per front variant, HTTP variants directly
CASES = [(app, v, fv) for app, vs in APPS.items() for v, (fcgi, _) in vs.items()
         for fv in (FRONT_VARIANTS if fcgi else (None,))]
SERVER_CPUS = (1,) if (os.cpu_count() or 1) > 1 else (0,)
CONTENT_TYPES = {"node-fastcgi": "text/html", "go-fcgi": "text/html", "php-fpm-hello": "text/html; charset=UTF-8",
                 "dotnet-asyncfastcgi": "text/html; charset=utf-8"}


def _case_id(case: tuple[str, str, str | None]) -> str:
    app, variant, front = case
    return f"{app}-{variant}" + (f"-via-{front}" if front else "")


# -- the manifests (pure) ----------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(APPS))
def test_applications_declare_study03_and_the_seed_contract(name: str) -> None:
    m = load_manifest(SERVICES_DIR / name)
    assert STUDY in m.studies and m.role == "service" and m.requires == ()
    assert set(m.variants) == set(APPS[name])
    assert m.health_kind == "tcp"  # FastCGI answers no HTTP; the contract goes through the front
    for v in m.variants:
        r = m.resolve(v)
        assert r.port_env == "PORT" and r.run_env.get("HOST") == "{host}"
        assert r.ports == APPS[name][v][1]
        if r.build_command:  # build outputs go to the cache, never into the clone
            assert any("{build_dir}" in a for a in r.build_command)
        (hello,) = r.endpoints
        assert (hello.method, hello.path, hello.contract.status, hello.contract.body) == ("GET", "/", 200, BODY)
        assert len(BODY.encode()) == 62 and hello.contract.content_type == CONTENT_TYPES[name]


def test_nginx_is_a_front_with_the_seed_and_the_fair_variant() -> None:
    m = load_manifest(SERVICES_DIR / FRONT)
    assert m.role == "front" and m.variants == FRONT_VARIANTS and m.default_variant == "keep-conn-off"
    assert m.toolchains == ("nginx",) and m.health_kind == "tcp"
    off, on = m.resolve("keep-conn-off"), m.resolve("keep-conn-on")
    for r in (off, on):
        assert r.run_env["BACKEND_HOST"] == "{backend.host}" and r.run_env["BACKEND_PORTS"] == "{backend.ports}"
    assert off.run_env["KEEP_CONN"] == "off" and "UPSTREAM_KEEPALIVE" not in off.run_env
    assert on.run_env["KEEP_CONN"] == "on" and on.run_env["UPSTREAM_KEEPALIVE"] == "400"
    script = (m.directory / "launch.sh").read_text()
    for line in ("worker_processes $WORKER_PROCESSES;", "fastcgi_keep_conn $KEEP_CONN;",
                 "fastcgi_request_buffering off;", "include $FASTCGI_PARAMS;", "access_log $prefix/logs/access.log;",
                 "daemon off; master_process on;"):
        assert line in script
    assert '"${WORKER_PROCESSES:=auto}"' in script and '"${WORKER_CONNECTIONS:=768}"' in script


def test_node_is_pinned_to_the_seeds_node_fastcgi() -> None:
    import json

    d = SERVICES_DIR / "node-fastcgi"
    lock = json.loads((d / "package-lock.json").read_text())["packages"]
    assert json.loads((d / "package.json").read_text())["dependencies"] == {"node-fastcgi": "1.3.3"}
    assert {k: v["version"] for k, v in lock.items() if k} == {
        "node_modules/node-fastcgi": "1.3.3", "node_modules/fastcgi-stream": "1.0.0",
        "node_modules/bufferlist": "0.1.0"}
    index = (d / "index.js").read_text()
    assert "res.writeHead(200, { 'Content-Type': 'text/html' });" in index and "res.end(BODY);" in index
    assert "{ maxConns: 2000, maxReqs: 2000 }" in index


def test_php_and_dotnet_details() -> None:
    php = load_manifest(SERVICES_DIR / "php-fpm-hello").resolve()
    assert php.front_env == {"FASTCGI_PARAM_SCRIPT_FILENAME": "index.php"}  # relative to the pool's chdir
    script = (SERVICES_DIR / "php-fpm-hello" / "launch.sh").read_text()
    assert 'echo "pm = static"' in script and php.run_env["PM_MAX_CHILDREN"] == "4"
    assert (SERVICES_DIR / "php-fpm-hello" / "index.php").read_text().strip() == f"<?php echo '{BODY}';"
    dotnet = load_manifest(SERVICES_DIR / "dotnet-asyncfastcgi")
    build = (dotnet.directory / "build.sh").read_text()
    assert "5a58529afc3a197a011304e0048d6383efc3be2d" in build and "git clone" in build
    assert not (dotnet.directory / "lib").exists()  # nothing of AsyncFastCGI.NET is vendored
    main = (dotnet.directory / "main.cs").read_text()
    assert 'output.SetHeader("Content-Type", "text/html; charset=utf-8");' in main
    assert "client.SetMaxConcurrentRequests(256);" in main


def test_reference_numbers_are_the_seeds_two_tables() -> None:
    df = load_reference("03")
    assert len(df) == 6 and list(df["concurrency"]) == [20, 20, 20, 400, 400, 400]
    assert list(df["requests"]) == [20000] * 3 + [200000] * 3
    assert list(df["library"]) == ["AsyncFastCGI.NET", "NodeJS", "LB FastCGI"] * 2
    assert set(df["selection"]) == {"best of 10 (req/s)"}
    ok = df[df["status"] == "ok"]
    assert list(df["status"]) == ["ok"] * 5 + ["fails"] and df.iloc[5][["requests_per_s", "failed"]].isna().all()
    # ab: mean time per request = concurrency * 1000 / (req/s); across = 1000 / (req/s)
    assert ((ok["concurrency"] * 1000 / ok["requests_per_s"] - ok["time_per_request_ms"]).abs() < 6e-4).all()
    assert ((1000 / ok["requests_per_s"] - ok["time_per_request_across_ms"]).abs() < 6e-4).all()
    assert (ok["failed"] == 0).all() and list(ok["longest_ms"]) == [18, 13, 3040, 2044, 1062]
    assert dict(zip(df["library"], df["service"])) == {
        "AsyncFastCGI.NET": "dotnet-asyncfastcgi", "NodeJS": "node-fastcgi", "LB FastCGI": "none"}
    for service in set(df["service"]) - {"none"}:
        assert (SERVICES_DIR / service / "service.toml").is_file()
    # the plateau the seed's hypothesis is about: every ok row of the async libraries near 20k req/s
    assert ok[ok["library"] != "LB FastCGI"]["requests_per_s"].between(19000, 22000).all()


# -- real services ------------------------------------------------------------------------------

@contextlib.contextmanager
def serving(runtime: str, app: str, variant: str, front_variant: str | None, tmp_path: Path
            ) -> Iterator[tuple[ServiceHandle, ServiceHandle | None, ResolvedService]]:
    """Start ``app`` in ``variant`` (all its processes), then nginx-fastcgi before it when
    ``front_variant`` is given, as the runner does; stop both (the front first)."""
    manifest = load_manifest(SERVICES_DIR / app)
    front_manifest = load_manifest(SERVICES_DIR / FRONT)
    for m in (manifest, front_manifest) if front_variant else (manifest,):
        ok, why = toolchains.availability(m)
        if not ok and runtime == "local":
            pytest.skip(f"not run: {why}")
    rt = get_runtime(runtime)
    service = manifest.resolve(variant)
    t0 = time.monotonic()
    prepared = rt.prepare(service)
    print(f"\n{app} ({variant}, {runtime}): prepare {time.monotonic() - t0:.1f} s ({prepared.info.get('build')}, "
          f"build {prepared.info.get('build_s')} s)")
    with rt.start(prepared, StartOptions(port=free_port(), cpus=SERVER_CPUS, log_path=tmp_path / "app.log")) as app_h:
        front_h = None
        if front_variant is not None:
            fp = rt.prepare(front_manifest.resolve(front_variant))
            front_h = rt.start(fp, StartOptions(port=free_port(), cpus=SERVER_CPUS, log_path=tmp_path / "front.log",
                                                role="front", backend=app_h, env=dict(service.front_env)))
        try:
            yield app_h, front_h, service
        finally:
            if front_h is not None:
                front_h.stop()
    app_h.stop()


def _raw(host: str, port: int, version: str) -> bytes:
    """One ``GET /`` in HTTP/``version`` (``Connection: close``): everything the server sends."""
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(f"GET / HTTP/{version}\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


def _headers(response: bytes) -> dict[str, str]:
    head = response.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")[1:]
    return {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in head)}


def _assert_wire(app: str, behind_nginx: bool, h11: bytes, h10: bytes) -> None:
    """What a client really gets (``Connection: close`` requests): through nginx, no
    Content-Length (chunked to HTTP/1.1, the end of the connection to HTTP/1.0); directly,
    what the plain-HTTP server sends."""
    chunked_body = f"{len(BODY):x}\r\n{BODY}\r\n0\r\n\r\n".encode()
    for resp in (h11, h10):
        assert _headers(resp)["content-type"] == CONTENT_TYPES[app] and "date" in _headers(resp)
    if behind_nginx:
        for resp in (h11, h10):  # nginx answers HTTP/1.1 to both
            assert resp.startswith(b"HTTP/1.1 200 OK\r\n") and re.fullmatch(r"nginx/[\d.]+", _headers(resp)["server"])
        assert set(_headers(h11)) == {"server", "date", "content-type", "transfer-encoding", "connection"}
        assert _headers(h11)["transfer-encoding"] == "chunked" and h11.endswith(b"\r\n\r\n" + chunked_body)
        assert set(_headers(h10)) == {"server", "date", "content-type", "connection"}
        assert _headers(h10)["connection"] == "close" and h10.endswith(b"\r\n\r\n" + BODY.encode())
    elif app == "node-fastcgi":  # node:http, writeHead() without a length: chunked (HTTP/1.1), close (HTTP/1.0)
        assert set(_headers(h11)) == {"content-type", "date", "connection", "transfer-encoding"}
        assert h11.endswith(b"\r\n\r\n" + chunked_body)
        assert set(_headers(h10)) == {"content-type", "date", "connection"} and h10.endswith(b"\r\n\r\n" + BODY.encode())
    else:  # Go net/http: Content-Length 62
        for resp, version in ((h11, b"1.1"), (h10, b"1.0")):
            assert resp.startswith(b"HTTP/" + version + b" 200 OK\r\n")
            assert _headers(resp)["content-length"] == "62" and resp.endswith(b"\r\n\r\n" + BODY.encode())
            assert set(_headers(resp)) <= {"content-type", "date", "content-length", "connection"}


def _listening(pid_or_port: int) -> set[str]:
    out = subprocess.run(["ss", "-Hltn"], capture_output=True, text=True, check=True).stdout
    return {line.split()[3] for line in out.splitlines()}


@pytest.mark.integration
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_local_application_meets_its_contract_on_the_wire(case: tuple[str, str, str | None], tmp_path: Path) -> None:
    app, variant, front_variant = case
    behind_nginx, n_ports = APPS[app][variant]
    n = 20
    with serving("local", app, variant, front_variant, tmp_path) as (app_h, front_h, service):
        ports = handle_ports(app_h)
        assert len(ports) == n_ports == len(set(ports))
        listening = _listening(0)
        for p in ports:  # every process listens, on loopback only
            assert f"127.0.0.1:{p}" in listening and f"0.0.0.0:{p}" not in listening and f"*:{p}" not in listening
        target = front_h or app_h
        assert f"127.0.0.1:{target.port}" in listening and f"0.0.0.0:{target.port}" not in listening
        base = f"http://{target.host}:{target.port}"
        report = contract.verify(base, service.endpoint("hello"))
        assert report.ok and report.body == BODY.encode()
        h11, h10 = _raw(target.host, target.port, "1.1"), _raw(target.host, target.port, "1.0")
        print(h11.decode(errors="replace"))
        _assert_wire(app, behind_nginx, h11, h10)
        import httpx

        with httpx.Client(base_url=base, trust_env=False, timeout=30) as client:
            for _ in range(n):
                r = client.get("/")
                assert r.status_code == 200 and r.text == BODY
        assert app_h.alive() and (front_h is None or front_h.alive())
        all_ports = (*ports, target.port)
    for p in all_ports:  # stopped: nothing listens any more
        assert not port_in_use("127.0.0.1", p), p
    if front_h is not None:
        log = (tmp_path / "front.log").read_text()
        # nginx was given every backend port, with the variant's keep-conn settings
        for p in all_ports[:-1]:
            assert f"server 127.0.0.1:{p};" in log
        assert f"fastcgi_keep_conn {'on' if front_variant == 'keep-conn-on' else 'off'};" in log
        assert ("keepalive 400;" in log) == (front_variant == "keep-conn-on")
        # every request went through nginx: the contract check, two raw requests and n more
        assert re.search(rf"access log: {n + 3} lines", log), log[-2000:]
        assert "nginx exited with code 0" in log


@pytest.mark.integration
@pytest.mark.timeout(900)
@pytest.mark.skipif(not all(toolchains.which(t) for t in ("ab", "taskset")), reason="needs ab (apache2-utils)")
def test_ab_as_the_seed_and_benchlibs_equivalent_load_through_nginx(tmp_path: Path) -> None:
    """``ab -c 20 -n N URL`` (no -k, HTTP/1.0) and benchlib's closed 20-connection load of N
    requests without keep-alive in HTTP/1.0, both against nginx + node-fastcgi (keep-conn off):
    every request answered 200 with the 62-byte body, each on a new connection, all through nginx."""
    from benchlib.core.model import LoadSpec, Target
    from benchlib.core.schema import ERROR_NAMES, PHASE_CODES
    from benchlib.loadgen import run_load
    from benchlib.loadgen.peers.ab import run_ab

    n = 2000
    client = [0] if SERVER_CPUS != (0,) else None
    with serving("local", "node-fastcgi", "fastcgi", "keep-conn-off", tmp_path) as (app_h, front_h, service):
        assert front_h is not None
        url = f"http://{front_h.host}:{front_h.port}/"
        ab = run_ab(url, connections=20, requests=n, keep_alive=False, cpus=client)
        assert ab["command"][-7:] == ["ab", "-q", "-c", "20", "-n", str(n), url]
        assert "-k" not in ab["command"] and ab["http_version"] == "1.0" and ab["keep_alive"] is False
        assert (ab["requests"], ab["failed"], ab["non_2xx"], ab["keep_alive_requests"]) == (n, 0, 0, 0)
        assert ab["document_length_bytes"] == 62 and ab["html_transferred_bytes"] == 62 * n
        assert ab["concurrency"] == 20 and ab["requests_per_s"] > 0 and ab["cpu_s"] > 0
        # ab's own arithmetic: mean = concurrency * 1000 / (req/s), across = 1000 / (req/s)
        assert ab["latency_mean_ms"] == pytest.approx(20 * 1000 / ab["requests_per_s"], rel=2e-3, abs=2e-3)
        assert ab["latency_mean_across_ms"] == pytest.approx(1000 / ab["requests_per_s"], rel=2e-2, abs=2e-3)
        assert ab["longest_ms"] == ab["latency_percentiles_ms"]["100"] >= ab["latency_percentiles_ms"]["50"]

        spec = LoadSpec(model="closed", connections=20, requests=n, duration_s=None, warmup_s=0, keep_alive=False,
                        http_version="1.0")
        result = run_load(spec, Target(front_h.host, front_h.port), client_cpus=client)
        rows = result.rows
        measured = rows[rows["phase"] == PHASE_CODES["measure"]]
        assert len(measured) == n and result.meta["requests"]["warmup"] == 0
        assert (measured["error"] == ERROR_NAMES.index("none")).all() and (measured["status"] == 200).all()
        assert result.meta["status_counts"] == {"200": n}
        assert len(set(measured["conn"].tolist())) == n  # a new connection per request, as ab without -k
        assert result.meta["achieved_rps"] > 0 and result.meta["client_cpu"]["per_worker"][0] > 0
        assert app_h.alive() and front_h.alive()
    log = (tmp_path / "front.log").read_text()
    assert f"access log: {2 * n} lines" in log  # both loads went through nginx


# -- containers ----------------------------------------------------------------------------------

DOCKER_CASES = [("node-fastcgi", "fastcgi", "keep-conn-off"), ("node-fastcgi", "fastcgi", "keep-conn-on"),
                ("node-fastcgi", "http", None), ("go-fcgi", "fcgi-4", "keep-conn-off"), ("go-fcgi", "http", None),
                ("php-fpm-hello", "fpm", "keep-conn-off")]


@pytest.mark.docker
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("case", DOCKER_CASES, ids=[_case_id(c) for c in DOCKER_CASES])
def test_container_meets_its_contract_on_the_wire(case: tuple[str, str, str | None], tmp_path: Path) -> None:
    """nginx, Node, Go and PHP-FPM images (Debian packages and the registries only) meet the
    same contracts; a multi-process application runs all its processes in its one container."""
    app, variant, front_variant = case
    behind_nginx, n_ports = APPS[app][variant]
    with serving("docker", app, variant, front_variant, tmp_path) as (app_h, front_h, service):
        ports = handle_ports(app_h)
        assert len(ports) == n_ports
        target = front_h or app_h
        assert target.enforced["cpus"] == list(SERVER_CPUS)
        report = contract.verify(f"http://{target.host}:{target.port}", service.endpoint("hello"))
        assert report.ok and report.body == BODY.encode()
        _assert_wire(app, behind_nginx, _raw(target.host, target.port, "1.1"), _raw(target.host, target.port, "1.0"))
        if n_ports > 1:  # the launcher and one process per port, all in the application's container
            top = app_h.container.top()  # type: ignore[attr-defined]
            commands = [p[-1] for p in top["Processes"]]
            if app == "node-fastcgi":  # launch.js and `node index.js PORT` for each port
                assert sorted(c.split("/app/", 1)[1] for c in commands if "index.js" in c) == sorted(
                    f"index.js {p}" for p in ports), commands
            else:  # go-fcgi with SPLIT=1: the parent and one child per port (ports in their environment)
                assert commands.count("/usr/local/bin/server") == n_ports + 1, commands
        all_ports = (*ports, target.port)
    for p in all_ports:
        assert not port_in_use("127.0.0.1", p), p
    if front_h is not None:
        log = (tmp_path / "front.log").read_text()
        for p in all_ports[:-1]:
            assert f"server 127.0.0.1:{p};" in log
        assert "access log: 3 lines" in log and "nginx exited with code 0" in log
