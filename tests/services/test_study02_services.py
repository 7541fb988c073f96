"""Study 02 (Iris vs Kestrel, 1 KB random string): the services, for real.

* The manifests (pure, fast): every service of the study answers ``GET /api/values/5`` (a
  1,024-character string from the seed's 63-character alphabet, new per request) and
  ``GET /api/values/fixed`` (one string made at start), binds ``$HOST``/``$PORT`` and
  builds into the cache; Iris pins v12.0.0 and keeps the post's code; the Rust lock reuses
  study 04's pins; the two Go Dockerfiles are one file (their images share layers).
* The published numbers (``data/reference/02_iris_kestrel.csv``) are self-consistent.
* Every service and variant builds with its manifest's command, starts pinned to one CPU
  through the local runtime, listens on loopback only, meets both contracts (including
  "two consecutive bodies differ" / "are identical"), and sends exactly the headers and wire
  bytes recorded here; random bodies use all 63 characters and never repeat.
* The same in containers (marked ``docker``), one image per language. The Kestrel service
  needs the .NET SDK (locally) or mcr.microsoft.com (Docker): here it is "not run".

Real-server parts are marked ``integration`` (or ``docker``). Cold builds: Iris about 30-60 s
(modules from the proxy), actix release about 1.5-3 min on 2 busy cores; later runs take
seconds (build cache).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import time
import tomllib
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from benchlib.analysis.reference import load_reference
from benchlib.core.errors import BuildError, ParameterError, ToolchainMissing
from benchlib.runtime import StartOptions, contract, get_runtime, toolchains
from benchlib.runtime.contract import GO_TEXT_PLAIN, go_sniffed_type
from benchlib.runtime.local import free_port
from benchlib.runtime.manifest import find_services_dir, load_manifest

SERVICES_DIR = find_services_dir()
STUDY = "02_iris_vs_kestrel"
ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
BODY_RE = re.compile(r"[a-zA-Z0-9 ]{1024}")
STUDY_SERVICES = {
    "go-iris-random": ("faithful", "verbatim", "fair"),
    "dotnet-kestrel-random": ("faithful", "fair"),
    "go-nethttp-random": ("fair",),
    "rust-actix-random": ("fair",),
    "node-http-random": ("fair",),
    "python-uvicorn-random": ("fair",),
}
CASES = [(s, v) for s, vs in STUDY_SERVICES.items() for v in vs]
SERVER_CPUS = (1,) if (os.cpu_count() or 1) > 1 else (0,)

_GO_SNIFFED = ["date", "content-length", "content-type"]  # net/http sniffs the type after Date
_EXPLICIT = ["content-length", "content-type", "date"]
#: What each service really sends on an HTTP/1.1 keep-alive connection, as verified on the
#: wire: header names (lower-case, in order) and the response's size in bytes (status line,
#: headers, blank line, 1,024-byte body; every Date value has the same length). The same for
#: both endpoints. 1,143 = 17 + 37 (date) + 22 (content-length) + 41 (content-type) + 2 + 1,024.
WIRE: dict[tuple[str, str], tuple[list[str], int]] = {
    ("go-iris-random", "faithful"): (_GO_SNIFFED, 1143),
    ("go-iris-random", "verbatim"): (_GO_SNIFFED, 1143),
    ("go-iris-random", "fair"): (_EXPLICIT, 1143),
    ("go-nethttp-random", "fair"): (_EXPLICIT, 1143),
    ("rust-actix-random", "fair"): (_EXPLICIT, 1143),
    ("python-uvicorn-random", "fair"): (["date", "content-type", "content-length"], 1143),
    # + Connection: keep-alive (24) and Keep-Alive: timeout=5 (23)
    ("node-http-random", "fair"): (["content-type", "content-length", "date", "connection", "keep-alive"], 1190),
}

# The post's code (seed 001), as published: it must stay in our sources unchanged.
POST_GO_RANDOM_STRING = """func randomString(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = letterBytes[rand.Intn(len(letterBytes))]
	}
	return string(b)
}"""
POST_CS_RANDOM_STRING = """    static string RandomString(int length)
    {
        var random = new Random(DateTime.Now.Millisecond);
        var bytes = new char[length];
        for (var i = 0; i < length; i++)
        {
            bytes[i] = chars[random.Next(chars.Length)];
        }
        return new string(bytes);
    }"""
POST_CS_HANDLER = """            routeBuilder.MapGet("api/values/{id?}", context =>
            {
                var txt = RandomString(1024);
                return context.Response.WriteAsync(txt);
            });"""
SEED = Path("/work/shared/seeds/001_9e7a3e1f62b7b9a1.txt")


def _contains_code(text: str, snippet: str) -> bool:
    """``snippet`` occurs in ``text`` up to indentation and line breaks."""
    return " ".join(snippet.split()) in " ".join(text.split())


# -- the manifests and sources (pure) ----------------------------------------------------------

@pytest.mark.parametrize("name", sorted(STUDY_SERVICES))
def test_manifest_declares_study02_and_both_endpoints(name: str) -> None:
    m = load_manifest(SERVICES_DIR / name)
    assert STUDY in m.studies and m.requires == ()
    assert m.variants == STUDY_SERVICES[name] and m.default_variant == "fair"
    assert (m.health_kind, m.health_path, m.health_status) == ("http", "/api/values/5", 200)
    assert m.dockerfile == "Dockerfile" and (m.directory / "Dockerfile").is_file()
    for v in m.variants:
        r = m.resolve(v)
        assert r.port_env == "PORT" and r.run_env.get("HOST") == "{host}"
        if r.build_command:  # build outputs go to the cache, never into the clone
            assert any("{build_dir}" in a or "{cargo_target_dir}" in a for a in r.build_command)
        random_ep, fixed_ep = r.endpoints
        assert (random_ep.name, random_ep.method, random_ep.path) == ("random", "GET", "/api/values/5")
        assert (fixed_ep.name, fixed_ep.method, fixed_ep.path) == ("fixed", "GET", "/api/values/fixed")
        for ep in (random_ep, fixed_ep):
            c = ep.contract
            assert c.status == 200 and c.body_regex == BODY_RE.pattern and c.body is None
        assert fixed_ep.contract.varies is False
        if (name, v) == ("dotnet-kestrel-random", "faithful"):
            # the post's WriteAsync(string): no Content-Type, chunked; 1,000 possible strings
            assert random_ep.contract.content_type == fixed_ep.contract.content_type == ""
            assert random_ep.contract.varies is None and random_ep.contract.headers == ()
        else:
            assert random_ep.contract.varies is True
            for ep in (random_ep, fixed_ep):
                assert ep.contract.content_type == "text/plain; charset=utf-8"
                assert dict(ep.contract.headers) == {"content-length": "1024"}


def test_iris_variants_pins_and_the_posts_code() -> None:
    d = SERVICES_DIR / "go-iris-random"
    m = load_manifest(d)
    assert {v: m.resolve(v).run_env["APP_VARIANT"] for v in m.variants} == {
        "faithful": "faithful", "verbatim": "verbatim", "fair": "fair"}
    assert m.versions["iris"].startswith("v12.0.0") and m.resolve().docker_build_args == {
        "FRAMEWORK_VERSION": "iris v12.0.0"}
    gomod = (d / "go.mod").read_text()
    assert re.search(r"^\tgithub\.com/kataras/iris/v12 v12\.0\.0$", gomod, re.M)
    assert "github.com/kataras/iris/v12 v12.0.0 h1:" in (d / "go.sum").read_text()
    src = (d / "main.go").read_text()
    assert _contains_code(src, POST_GO_RANDOM_STRING)
    assert 'const letterBytes = "' + ALPHABET + '"' in src
    assert 'app.Get("/api/values/{id}", random)' in src and "txt := randomString(size)\n\t\t\tctx.WriteString(txt)" in src
    # Go 1.8's package-level generator, rebuilt: a mutex around a source seeded with 1
    assert "rand.New(&lockedSource{src: rand.NewSource(1).(rand.Source64)})" in src
    assert "r.lk.Lock()\n\tn = r.src.Int63()\n\tr.lk.Unlock()" in src
    assert "txt := randomStringGo18(size)\n\t\t\tctx.WriteString(txt)" in src
    assert "randv2.IntN(len(letterBytes))" in src  # fair: per-thread ChaCha8


def test_kestrel_keeps_the_posts_code() -> None:
    d = SERVICES_DIR / "dotnet-kestrel-random"
    src = (d / "Startup.cs").read_text()
    assert _contains_code(src, POST_CS_RANDOM_STRING) and _contains_code(src, POST_CS_HANDLER)
    assert f'const string chars = "{ALPHABET}";' in src
    assert "WebHost.CreateDefaultBuilder(args)" in src and "services.AddRouting()" in src
    assert "app.UseRouter(routes);" in src and "Random.Shared.Next(chars.Length)" in src
    assert "<TargetFramework>net8.0</TargetFramework>" in (d / "App.csproj").read_text()
    assert '"Default": "Error"' in (d / "appsettings.json").read_text()  # no per-request log


def test_sources_match_the_seed_when_it_is_beside_the_clone() -> None:
    if not SEED.is_file():
        pytest.skip(f"the seed file ({SEED}) is not beside the clone")
    seed = SEED.read_text()
    for snippet in (POST_GO_RANDOM_STRING, POST_CS_HANDLER, POST_CS_RANDOM_STRING):
        assert _contains_code(seed, snippet)
    assert f'letterBytes = "{ALPHABET}"' in seed and f'chars = "{ALPHABET}"' in seed


@pytest.mark.skipif(shutil.which("dotnet") is not None, reason="a .NET SDK is installed here: the service runs")
def test_kestrel_is_reported_unavailable_with_the_reason() -> None:
    m = load_manifest(SERVICES_DIR / "dotnet-kestrel-random")
    ok, why = toolchains.availability(m)
    assert not ok and "dotnet" in why and ".NET 8 SDK" in why
    with pytest.raises(ToolchainMissing) as err:
        get_runtime("local").prepare(m.resolve("faithful"))
    assert err.value.toolchain == "dotnet"


def test_rust_lock_reuses_study04s_pins() -> None:
    def versions(name: str) -> dict[str, str]:
        lock = tomllib.loads((SERVICES_DIR / name / "Cargo.lock").read_text())
        return {p["name"]: p["version"] for p in lock["package"]}

    ours, logger = versions("rust-actix-random"), versions("rust-actix-logger")
    assert ours.pop("rust_random") == "0.1.0"
    assert ours.items() <= logger.items()  # every crate at study 04's version, nothing new
    assert ours["actix-web"] == "4.4.1" and ours["rand"] == "0.8.5"
    deps = tomllib.loads((SERVICES_DIR / "rust-actix-random" / "Cargo.toml").read_text())["dependencies"]
    assert deps["actix-web"] == {"version": "4.4", "default-features": False, "features": ["macros"]}


def test_go_dockerfiles_are_one_file() -> None:
    """Byte-identical, so the engine builds the toolchain layers once for both images."""
    a = (SERVICES_DIR / "go-iris-random" / "Dockerfile").read_bytes()
    assert a == (SERVICES_DIR / "go-nethttp-random" / "Dockerfile").read_bytes()
    assert b"COPY go.mod go.su[m] ./" in a


def test_reference_numbers_are_self_consistent() -> None:
    df = load_reference("02").set_index("server")
    assert list(df.index) == ["Kestrel", "Iris"] and list(df["output"]) == [1, 2]
    assert set(df["source"]) == {"001_9e7a3e1f62b7b9a1.txt"} and set(df["cpu"]) == {"Intel Core i7-7700K"}
    assert (df["connections"] == 125).all() and (df["requests"] == 500_000).all()
    assert (df["http_2xx"] == df["requests"]).all()
    assert (df[["http_1xx", "http_3xx", "http_4xx", "http_5xx", "http_others"]] == 0).all().all()
    assert list(df["duration_s"]) == [5, 66] and list(df["duration_printed"]) == ["5s", "1m6s"]
    assert list(df["service"]) == ["dotnet-kestrel-random", "go-iris-random"]
    assert set(df["variant"]) == {"faithful"}
    # a closed loop obeys Little's law: connections = rate x mean latency (within 0.2 %)
    little = df["connections"] / (df["latency_avg_ms"] / 1e3)
    assert ((little / df["reqs_per_s_avg"] - 1).abs() < 2e-3).all()
    # the sampled mean rate is close to requests / (whole-second) duration
    assert ((df["requests"] / df["duration_s"] / df["reqs_per_s_avg"] - 1).abs() < 0.02).all()
    # bytes per request from the printed throughput (MiB/s) agree between the two servers
    per_request = df["throughput_mb_per_s"] * 2**20 / df["reqs_per_s_avg"]
    assert per_request.between(1100, 1250).all() and abs(per_request["Kestrel"] / per_request["Iris"] - 1) < 0.01
    # the post's "10+ times faster"
    assert df.loc["Kestrel", "reqs_per_s_avg"] / df.loc["Iris", "reqs_per_s_avg"] > 10
    assert (df["latency_avg_ms"] < df["latency_max_ms"]).all() and (df["reqs_per_s_avg"] < df["reqs_per_s_max"]).all()


# -- real servers ------------------------------------------------------------------------------

#: what a sniffing server (Go's net/http) labels a body of ALPHABET with: benchlib's contract
#: check accepts it for the endpoints whose manifest says ``content_type_sniffed = "go"``
_go_sniffed_type = go_sniffed_type
_TEXT_PLAIN = GO_TEXT_PLAIN


def test_go_sniffing_of_alphabet_bodies() -> None:
    assert _go_sniffed_type(b"BMx" + b"a" * 1021) == "image/bmp"
    assert _go_sniffed_type(b"RIFFabcdWAVE") == "audio/wave"
    assert _go_sniffed_type(b"x" * 34 + b"LP" + b"x" * 988) == "application/vnd.ms-fontobject"
    assert _go_sniffed_type(b"BM" + b"x" * 32 + b"LP") == "image/bmp"
    assert _go_sniffed_type(b"aBM") == _TEXT_PLAIN


def _exchange(host: str, port: int, paths: list[str]) -> list[tuple[bytes, list[str], bytes, int, str]]:
    """GET each path in turn on ONE keep-alive connection; per response: the status line,
    the header names (lower-case, in order), the body, the bytes on the wire and the
    Content-Type value."""
    out = []
    with socket.create_connection((host, port), timeout=10) as s:
        buf = b""
        for path in paths:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: benchlib-test\r\n\r\n".encode())
            while b"\r\n\r\n" not in buf:
                chunk = s.recv(65536)
                assert chunk, f"connection closed after {buf!r}"
                buf += chunk
            head, _, buf = buf.partition(b"\r\n\r\n")
            m = re.search(rb"(?im)^content-length:\s*(\d+)\r?$", head)
            assert m, f"no Content-Length in {head!r}"
            length = int(m.group(1))
            while len(buf) < length:
                chunk = s.recv(65536)
                assert chunk
                buf += chunk
            body, buf = buf[:length], buf[length:]
            lines = head.decode("latin-1").split("\r\n")
            ctype = next((line.split(":", 1)[1].strip() for line in lines[1:]
                          if line.lower().startswith("content-type:")), "")
            out.append((lines[0].encode(), [line.split(":", 1)[0].lower() for line in lines[1:]], body,
                        len(head) + 4 + length, ctype))
    return out


def _check_on_the_wire(name: str, variant: str, host: str, port: int) -> list[bytes]:
    """40 random and 5 fixed responses on one connection: exact headers and sizes, every
    random body new and of the alphabet, every fixed body the same. Returns the fixed body
    (once) and the random bodies."""
    names, size = WIRE[(name, variant)]
    responses = _exchange(host, port, ["/api/values/5"] * 40 + ["/api/values/fixed"] * 5)
    for status, headers, body, wire, ctype in responses:
        # a sniffing server names the type its body starts like (Go: "BM..." is image/bmp)
        want_type = _go_sniffed_type(body) if names is _GO_SNIFFED else _TEXT_PLAIN
        assert ctype.lower() == want_type, (ctype, body[:16])
        want = size - len(_TEXT_PLAIN) + len(want_type)
        assert status == b"HTTP/1.1 200 OK" and headers == names and wire == want, (status, headers, wire, ctype)
        assert BODY_RE.fullmatch(body.decode("ascii"))
    random_bodies = [r[2] for r in responses[:40]]
    fixed_bodies = {r[2] for r in responses[40:]}
    assert len(set(random_bodies)) == 40 and len(fixed_bodies) == 1
    assert fixed_bodies.isdisjoint(random_bodies)
    # 40,960 characters: each of the 63 is expected 650 times; all appear, none dominates
    counts = {c: 0 for c in ALPHABET}
    for b in random_bodies:
        for c in b.decode("ascii"):
            counts[c] += 1
    assert min(counts.values()) > 400 and max(counts.values()) < 900, counts
    return [fixed_bodies.pop(), *random_bodies]


@pytest.fixture(scope="module")
def clone_state(untracked_in_services: Callable[[Iterable[str]], set[str]]) -> set[str]:
    return untracked_in_services(STUDY_SERVICES)


@pytest.mark.integration
@pytest.mark.timeout(3600)
@pytest.mark.parametrize(("name", "variant"), CASES, ids=[f"{s}-{v}" for s, v in CASES])
def test_service_builds_and_meets_both_contracts_on_the_wire(
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
    with rt.start(prepared, StartOptions(port=free_port(), cpus=SERVER_CPUS, log_path=tmp_path / "service.log")) as h:
        assert h.enforced["cpus_read_back"] == list(SERVER_CPUS)
        # nothing listens beyond loopback: only the port we gave, on 127.0.0.1
        assert listening_addresses(h.proc.pid) == {f"127.0.0.1:{h.port}"}
        base = f"http://{h.host}:{h.port}"
        for endpoint in service.endpoints:  # raises ContractError listing the differences
            assert contract.verify(base, endpoint).ok
        fixed, *_ = _check_on_the_wire(name, variant, h.host, h.port)
        if variant == "faithful":
            # Go 1.8's package-level source is seeded with 1, so the string made first (the
            # fixed one) is always the same: Int63() = 5577006791947779410, Int31() = that
            # >> 32 = 1298498081, 1298498081 % 63 = 41 -> 'P', and so on
            assert fixed.startswith(b"PZD4n80AepGINMw1au4f")
        assert h.alive()


@pytest.mark.integration
def test_nothing_was_written_inside_the_clone(
        clone_state: set[str], untracked_in_services: Callable[[Iterable[str]], set[str]]) -> None:
    # runs after the service tests of this module (pytest keeps the file's order)
    assert untracked_in_services(STUDY_SERVICES) == clone_state


DOCKER_CASES = [("go-iris-random", "faithful"), ("go-nethttp-random", "fair"), ("rust-actix-random", "fair"),
                ("node-http-random", "fair"), ("python-uvicorn-random", "fair"), ("dotnet-kestrel-random", "fair")]


@pytest.mark.docker
@pytest.mark.integration
@pytest.mark.timeout(3600)
@pytest.mark.parametrize(("name", "variant"), DOCKER_CASES, ids=[s for s, _ in DOCKER_CASES])
def test_container_meets_both_contracts_on_the_wire(name: str, variant: str) -> None:
    """One image per language, from its Dockerfile on the locally made base images (Go:
    the toolchain from the module proxy; Rust: rust:1.95.0-slim-bookworm, made from the
    host's toolchain when it cannot be pulled; Node and Python: Debian's packages and PyPI).
    The .NET images come from mcr.microsoft.com only: "not run" where it is unreachable."""
    rt = get_runtime("docker")
    service = load_manifest(SERVICES_DIR / name).resolve(variant)
    t0 = time.monotonic()
    try:
        prepared = rt.prepare(service)
    except (ParameterError, BuildError) as exc:
        if name == "dotnet-kestrel-random" and "mcr.microsoft.com" in str(exc):
            pytest.skip(f"not run: {str(exc).splitlines()[0]}")
        raise
    print(f"\n{name} ({variant}): image {prepared.info.get('tag')} ready in {time.monotonic() - t0:.1f} s")
    with rt.start(prepared, StartOptions(port=free_port(), cpus=SERVER_CPUS)) as h:
        base = f"http://{h.host}:{h.port}"
        for endpoint in service.endpoints:
            assert contract.verify(base, endpoint).ok
        if (name, variant) in WIRE:
            _check_on_the_wire(name, variant, h.host, h.port)
