"""Study 04 (Rust vs. Go: the benchmark): the logging servers, for real.

* The manifests (pure, fast): every service of the study answers ``GET /`` with the seed's
  38-byte body, binds ``$HOST``/``$PORT``, builds into the cache, and the Rust lock file pins
  the January 2024 versions.
* The published numbers (``data/reference/04_rust_vs_go_logging.csv``) are self-consistent.
* Every service and variant builds with its manifest's command (into ``$BENCHLIB_CACHE``),
  starts pinned to one CPU through the local runtime, listens on loopback only, meets its
  contract, sends exactly the headers and wire bytes recorded in its manifest, and writes
  its log lines, one per request (fastify: two), to the log the runtime captures.
* The same in containers (marked ``docker``): Go, Python and Node images build from
  ``debian:bookworm-slim`` with toolchains from the registries; the Rust image needs the
  official ``rust`` image (Docker Hub) and is skipped, with the reason, where it is missing.

The real-server parts are marked ``integration`` (or ``docker``). Cold Rust builds are costly (actix debug about
1-2 min, release 4-9 min on 2 busy cores); they land in the build cache, so later runs take
seconds.
"""

from __future__ import annotations

import os
import re
import socket
import time
import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from benchlib.analysis.reference import load_reference
from benchlib.core.errors import BuildError, ParameterError, RuntimeUnavailable
from benchlib.runtime import StartOptions, contract, get_runtime, toolchains
from benchlib.runtime.local import free_port
from benchlib.runtime.manifest import find_services_dir, load_manifest

SERVICES_DIR = find_services_dir()
STUDY = "04_rust_vs_go_logging"
BODY = "Hello, World! This is a cool web test!"
STUDY_SERVICES = {
    "rust-actix-logger": ("faithful", "fair"),
    "go-nethttp-logger": ("faithful", "fair"),
    "python-uvicorn-logger": ("fair",),
    "node-fastify-logger": ("fair",),
}
CASES = [(s, v) for s, vs in STUDY_SERVICES.items() for v in vs]
SERVER_CPUS = (1,) if (os.cpu_count() or 1) > 1 else (0,)

#: What each service really sends to ``GET / HTTP/1.1`` on a keep-alive connection, as
#: verified on the wire: the header names (lower-case, in order) and the response's size in
#: bytes (status line, headers, blank line, body; every Date value has the same length).
WIRE = {
    "rust-actix-logger": (["content-length", "date"], 114),
    "go-nethttp-logger": (["date", "content-length", "content-type"], 155),
    "python-uvicorn-logger": (["date", "server", "content-type", "content-length"], 172),
    "node-fastify-logger": (["content-type", "content-length", "date", "connection", "keep-alive"], 203),
}

#: One regular expression per log line a request produces, and how many lines it produces.
_FASTIFY_IN = re.compile(r'\{"level":30,.*"reqId":"req-\w+","req":\{"method":"GET","url":"/",.*"msg":"incoming request"\}')
_FASTIFY_DONE = re.compile(r'\{"level":30,.*"reqId":"req-\w+","res":\{"statusCode":200\},"responseTime":[\d.e-]+,'
                           r'"msg":"request completed"\}')
LOG_LINES: dict[str, tuple[re.Pattern[str], ...]] = {
    # env_logger's default format around actix's default format
    # %a "%r" %s %b "%{Referer}i" "%{User-Agent}i" %T
    "rust-actix-logger": (re.compile(
        r'\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ INFO  actix_web::middleware::logger\] 127\.0\.0\.1 '
        r'"GET / HTTP/1\.1" 200 38 "-" "[^"]*" \d+\.\d{6}'),),
    # log.Printf("Request: %s %s, Duration: %s\n", ...) with the log package's default flags
    "go-nethttp-logger": (re.compile(
        r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d Request: GET /, Duration: [\d.]+(ns|µs|ms|s)"),),
    # uvicorn.access, default format, no colours when not a terminal
    "python-uvicorn-logger": (re.compile(r'INFO:     127\.0\.0\.1:\d+ - "GET / HTTP/1\.1" 200 OK'),),
    # fastify({logger: true}): pino JSON, an "incoming request" and a "request completed" line
    "node-fastify-logger": (_FASTIFY_IN, _FASTIFY_DONE),
}


# -- the manifests (pure) ----------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(STUDY_SERVICES))
def test_manifest_declares_study04_and_the_seed_contract(name: str) -> None:
    m = load_manifest(SERVICES_DIR / name)
    assert STUDY in m.studies and m.requires == ()
    assert m.variants == STUDY_SERVICES[name] and m.default_variant == "fair"
    assert (m.health_kind, m.health_path, m.health_status) == ("http", "/", 200)
    assert m.dockerfile == "Dockerfile" and (m.directory / "Dockerfile").is_file()
    for v in m.variants:
        r = m.resolve(v)
        assert r.port_env == "PORT" and r.run_env.get("HOST") == "{host}"
        if r.build_command:  # build outputs go to the cache, never into the clone
            assert any("{build_dir}" in a or "{cargo_target_dir}" in a for a in r.build_command)
        (hello,) = r.endpoints
        assert (hello.method, hello.path, hello.contract.status, hello.contract.body) == ("GET", "/", 200, BODY)
        assert dict(hello.contract.headers)["content-length"] == str(len(BODY.encode())) == "38"


def test_rust_variants_are_the_seeds_two_build_modes() -> None:
    m = load_manifest(SERVICES_DIR / "rust-actix-logger")
    faithful, fair = m.resolve("faithful"), m.resolve("fair")
    assert "--release" not in faithful.build_command and faithful.run_command[0] == "{cargo_target_dir}/debug/rust_server"
    assert "--release" in fair.build_command and fair.run_command[0] == "{cargo_target_dir}/release/rust_server"
    for r in (faithful, fair):
        assert "--locked" in r.build_command and "{cargo_target_dir}" in r.build_command
    # actix-web's HttpResponse::Ok().body(&str) sets no Content-Type: the contract says "absent"
    assert faithful.endpoints[0].contract.content_type == fair.endpoints[0].contract.content_type == ""


def test_go_variants_run_the_same_binary() -> None:
    m = load_manifest(SERVICES_DIR / "go-nethttp-logger")
    faithful, fair = m.resolve("faithful"), m.resolve("fair")
    assert faithful.build_command == fair.build_command and faithful.run_command == fair.run_command
    assert faithful.endpoints[0].contract.content_type == "text/plain; charset=utf-8"


def test_rust_lock_pins_the_january_2024_versions() -> None:
    d = SERVICES_DIR / "rust-actix-logger"
    lock = tomllib.loads((d / "Cargo.lock").read_text())
    versions = {p["name"]: p["version"] for p in lock["package"]}
    assert versions["actix-web"] == "4.4.1"
    assert versions["actix-server"] == "2.3.0" and versions["actix-rt"] == "2.9.0"
    assert versions["env_logger"] == "0.9.3"
    assert versions["time"] == "0.3.35"  # the one forced bump (0.3.31 fails on Rust >= 1.80)
    deps = tomllib.loads((d / "Cargo.toml").read_text())["dependencies"]
    assert deps == {"actix-web": "4.0", "actix-rt": "2.5", "env_logger": "0.9"}  # the seed's requirements
    m = load_manifest(d)
    assert m.versions["actix-web"].startswith("4.4.1") and m.versions["env_logger"] == "0.9.3"


def test_seed_source_details_are_kept() -> None:
    rust = (SERVICES_DIR / "rust-actix-logger" / "src" / "main.rs").read_text()
    assert 'env::set_var("RUST_LOG", "actix_web=info")' in rust and ".wrap(Logger::default())" in rust
    assert "env_logger::init()" in rust and ".workers(" not in rust
    assert f'HttpResponse::Ok().body("{BODY}")' in rust
    go = (SERVICES_DIR / "go-nethttp-logger" / "main.go").read_text()
    assert 'log.Printf("Request: %s %s, Duration: %s\\n", r.Method, r.URL.Path, duration)' in go
    assert f'fmt.Fprint(w, "{BODY}")' in go and "Handler: logRequest(mux)" in go
    assert "ReadTimeout" not in go and "GOMAXPROCS" not in go


def test_reference_numbers_are_self_consistent() -> None:
    df = load_reference("04")
    assert len(df) == 3 and list(df["output"]) == [1, 2, 3]
    assert set(df["source"]) == {"003_3713cf587d986c7b.txt"} and set(df["server_stated"]) == {"not stated"}
    assert list(df["port"]) == [8080, 8080, 8090]
    assert (df["threads"] == 2).all() and (df["connections"] == 100).all() and (df["duration_s"] == 30).all()
    # wrk's requests/s is requests / elapsed (elapsed printed to 10 ms)
    assert ((df["requests"] / df["elapsed_s"] / df["requests_per_s"] - 1).abs() < 2e-3).all()
    # bytes per response from the printed MB (2^20 bytes, 2 decimals), and transfer/s from it
    per_response = df["read_mb"] * 2**20 / df["requests"]
    assert ((per_response - df["bytes_per_response"]).abs() < 0.05).all()
    assert ((df["requests_per_s"] * df["bytes_per_response"] / 2**20 - df["transfer_mb_per_s"]).abs() < 0.006).all()
    # percentiles ordered, average below the maximum
    assert ((df["p50_ms"] <= df["p75_ms"]) & (df["p75_ms"] <= df["p90_ms"]) & (df["p90_ms"] <= df["p99_ms"])).all()
    assert (df["p99_ms"] < df["latency_max_ms"]).all()
    # the inference recorded in server_inferred rests on the wire sizes this module verifies
    for row in df.itertuples():
        service = row.server_inferred.split(" ")[0]
        assert WIRE[service][1] == row.bytes_per_response


# -- real servers ------------------------------------------------------------------------------

def _raw_get(host: str, port: int) -> tuple[bytes, bytes]:
    """One ``GET / HTTP/1.1`` on a fresh keep-alive connection: (head, body) exactly as sent."""
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: benchlib-test\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            assert chunk, f"connection closed after {data!r}"
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?im)^content-length:\s*(\d+)\r?$", head).group(1))
        while len(body) < length:
            chunk = s.recv(65536)
            assert chunk
            body += chunk
    return head + b"\r\n\r\n", body


def _assert_wire(name: str, head: bytes, body: bytes) -> None:
    """The response has exactly the header names (in order) and the size in :data:`WIRE`."""
    names, wire_bytes = WIRE[name]
    header_lines = head.decode("latin-1").split("\r\n")[1:-2]
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert [line.split(":", 1)[0].lower() for line in header_lines] == names
    assert body == BODY.encode() and len(head) + len(body) == wire_bytes


def _count_lines(text: str, patterns: tuple[re.Pattern[str], ...]) -> list[int]:
    lines = text.splitlines()
    return [sum(1 for line in lines if p.fullmatch(line)) for p in patterns]


def _settled_count(read: Callable[[], str], patterns: tuple[re.Pattern[str], ...],
                   timeout_s: float = 10.0) -> list[int]:
    """The per-pattern line counts in ``read()`` once they have not changed for 0.5 s."""
    deadline = time.monotonic() + timeout_s
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        now = _count_lines(read(), patterns)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= 0.5:
            return now
        time.sleep(0.1)
    raise AssertionError(f"the log kept growing for {timeout_s} s")


@pytest.fixture(scope="module")
def clone_state(untracked_in_services: Callable[[Iterable[str]], set[str]]) -> set[str]:
    return untracked_in_services(STUDY_SERVICES)


@pytest.mark.integration
@pytest.mark.timeout(3600)
@pytest.mark.parametrize(("name", "variant"), CASES, ids=[f"{s}-{v}" for s, v in CASES])
def test_service_builds_meets_its_contract_and_logs_every_request(
        clone_state: set[str], listening_addresses: Callable[[int], set[str]], name: str, variant: str,
        tmp_path: Path) -> None:
    manifest = load_manifest(SERVICES_DIR / name)
    ok, why = toolchains.availability(manifest)
    if not ok:
        pytest.skip(f"not run: {why}")
    rt = get_runtime("local")
    service = manifest.resolve(variant)
    t0 = time.monotonic()
    prepared = rt.prepare(service)
    print(f"\n{name} ({variant}): prepare {time.monotonic() - t0:.1f} s ({prepared.info.get('build')}; "
          f"last build took {prepared.info.get('build_s')} s)")
    log = tmp_path / "service.log"
    patterns = LOG_LINES[name]
    n = 25
    with rt.start(prepared, StartOptions(port=free_port(), cpus=SERVER_CPUS, log_sink="pipe", log_path=log)) as h:
        assert h.enforced["cpus_read_back"] == list(SERVER_CPUS)
        # nothing listens beyond loopback: only the port we gave, on 127.0.0.1
        assert listening_addresses(h.proc.pid) == {f"127.0.0.1:{h.port}"}
        base = f"http://{h.host}:{h.port}"
        report = contract.verify(base, service.endpoint("hello"))  # raises ContractError listing the differences
        assert report.ok and report.body == BODY.encode()
        head, body = _raw_get(h.host, h.port)
        print(head.decode() + body.decode())
        _assert_wire(name, head, body)
        if name == "rust-actix-logger":
            # actix's default worker count follows the CPU affinity: one worker on one CPU
            threads = [p.read_text().strip() for p in Path(f"/proc/{h.proc.pid}/task").glob("*/comm")]
            assert sum(t.startswith("actix-rt|system") for t in threads) == len(SERVER_CPUS), threads
        # the pipe sink's file is complete once the service stops; while it runs, the
        # handle's in-memory tail (the last 200 lines) shows what has arrived so far
        before = _settled_count(lambda: h.logs_tail(200), patterns)
        assert sum(before) <= 4 * len(patterns)  # health probe(s), contract check, raw request
        import httpx

        with httpx.Client(base_url=base, trust_env=False, timeout=30) as client:  # one keep-alive connection
            for _ in range(n):
                r = client.get("/")
                assert r.status_code == 200 and r.text == BODY
        assert h.alive()
    after = _count_lines(log.read_text(errors="replace"), patterns)
    assert [a - b for a, b in zip(after, before)] == [n] * len(patterns), log.read_text()[-3000:]


@pytest.mark.integration
@pytest.mark.skipif(not toolchains.availability(load_manifest(SERVICES_DIR / "go-nethttp-logger"))[0],
                    reason="needs the go toolchain")
@pytest.mark.parametrize("sink", ["file", "discard"])
def test_log_sinks_other_than_the_pipe(sink: str, tmp_path: Path) -> None:
    rt = get_runtime("local")
    prepared = rt.prepare(load_manifest(SERVICES_DIR / "go-nethttp-logger").resolve("fair"))
    log = tmp_path / "service.log"
    with rt.start(prepared, StartOptions(port=free_port(), cpus=SERVER_CPUS, log_sink=sink, log_path=log)) as h:
        import httpx

        with httpx.Client(base_url=f"http://{h.host}:{h.port}", trust_env=False, timeout=30) as client:
            for _ in range(10):
                assert client.get("/").text == BODY
    text = log.read_text() if log.exists() else ""
    (count,) = _count_lines(text, LOG_LINES["go-nethttp-logger"])
    if sink == "file":  # the service writes the file itself; health probe + 10
        assert count >= 10 and "Server is running on http://127.0.0.1:" in text
    else:
        assert count == 0


@pytest.mark.integration
def test_nothing_was_written_inside_the_clone(
        clone_state: set[str], untracked_in_services: Callable[[Iterable[str]], set[str]]) -> None:
    # runs after the service tests of this module (pytest keeps the file's order)
    assert untracked_in_services(STUDY_SERVICES) == clone_state



def _docker_unavailable() -> str | None:
    try:
        from benchlib.runtime.docker import connect

        connect(timeout_s=10).close()
    except (ImportError, RuntimeUnavailable) as exc:
        return str(exc)
    return None


@pytest.mark.docker
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", sorted(STUDY_SERVICES))
def test_container_meets_its_contract_and_logs_every_request(name: str, tmp_path: Path) -> None:
    reason = _docker_unavailable()
    if reason is not None:
        pytest.skip(f"no Docker engine: {reason}")
    rt = get_runtime("docker")
    service = load_manifest(SERVICES_DIR / name).resolve()
    t0 = time.monotonic()
    try:
        prepared = rt.prepare(service)
    except (ParameterError, BuildError) as exc:
        if name == "rust-actix-logger" and "cannot be pulled" in str(exc):
            pytest.skip(f"not run: {exc}")  # the official rust image (Docker Hub) is needed
        raise
    print(f"\n{name}: image {prepared.info.get('tag')} ready in {time.monotonic() - t0:.1f} s")
    log = tmp_path / "container.log"
    n = 25
    with rt.start(prepared, StartOptions(port=free_port(), cpus=SERVER_CPUS, log_path=log)) as h:
        base = f"http://{h.host}:{h.port}"
        assert contract.verify(base, service.endpoint("hello")).ok
        _assert_wire(name, *_raw_get(h.host, h.port))
        import httpx

        with httpx.Client(base_url=base, trust_env=False, timeout=30) as client:
            for _ in range(n):
                assert client.get("/").text == BODY
    # the container's log (stdout and stderr) is saved at stop: our n requests, the contract
    # check, the raw request and the health probe(s) that reached the server
    counts = _count_lines(log.read_text(errors="replace"), LOG_LINES[name])
    assert all(n + 3 <= c <= n + 8 for c in counts), (counts, log.read_text()[-2000:])
