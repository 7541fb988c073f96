"""Study 05 (gRPC vs JSON, seed 004): the services, for real.

* The payloads (pure): the seed's four messages rebuilt from its definitions
  (``Shared/SmallRequest.cs``, ``HugeRequest.cs``, the server implementations: "SmallRequest",
  150 x 25 'a' and 150 x 123) have the seed's sizes (JSON 26 and 4,828 bytes, protobuf 14
  and 4,203), and every service folder holds exactly those bytes and the same
  ``payloads.proto``.
* The manifests (pure): each service offers the grpc variant's two methods and the json
  variant's two POST routes (and h2c where the framework speaks HTTP/2 without TLS), with
  contracts that are the seed's responses.
* Every service and variant builds with its manifest's command, starts pinned to one CPU
  through the local runtime, listens on loopback only and meets each contract of its variant
  on the wire (gRPC: grpc-status 0 and the decoded response equal to the expected message;
  JSON: the exact body), and rejects a request that is not the expected message.
* The same in containers (marked ``docker``). The .NET service needs the .NET SDK (locally)
  or mcr.microsoft.com (Docker): here it is "not run".

Real-server parts are marked ``integration`` (or ``docker``). Cold builds: Go about 30 s,
the Rust crate (tonic + axum, one build for both variants) about 3-5 min on 2 busy cores.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import httpx
import pytest

from benchlib.analysis.studies import grpc_json as study
from benchlib.core.errors import BuildError, ParameterError, ToolchainMissing
from benchlib.runtime import StartOptions, contract, get_runtime, toolchains
from benchlib.runtime.local import free_port
from benchlib.runtime.manifest import Endpoint, find_services_dir, load_manifest
from benchlib.runtime.protos import decode_to_dict, encode_json

SERVICES_DIR = find_services_dir()
SERVICES = {lang: study.LANGUAGES[lang] for lang in study.LANGUAGES}
PROTO = SERVICES_DIR / "go-grpc-json" / "payloads.proto"
SERVER_CPUS = (1,) if (os.cpu_count() or 1) > 1 else (0,)
HUGE = {"StringList": ["a" * 25] * 150, "IntList": [123] * 150}
#: The seed's messages (field names as in the .proto) and types.
MESSAGES = {"small-request": ("SmallRequest", {"Message": "SmallRequest"}),
            "small-response": ("SmallResponse", {"Message": "SmallResponse"}),
            "huge-request": ("HugeRequest", HUGE), "huge-response": ("HugeResponse", HUGE)}
#: JSON as the seed sent it: the client's requests PascalCase (Newtonsoft), the MVC server's responses camelCase.
JSON_BODIES = {"small-request": {"Message": "SmallRequest"}, "small-response": {"message": "SmallResponse"},
               "huge-request": HUGE, "huge-response": {"stringList": HUGE["StringList"], "intList": HUGE["IntList"]}}
SEED_SIZES = {"small-request.json": 26, "small-request.bin": 14, "huge-request.json": 4828, "huge-request.bin": 4203,
              "small-response.json": 27, "small-response.bin": 15, "huge-response.json": 4828,
              "huge-response.bin": 4203}
CASES = [(lang, v) for lang, svc in SERVICES.items() for v in load_manifest(SERVICES_DIR / svc).variants]


def _rebuilt(name: str) -> bytes:
    """The seed's message ``name`` (e.g. ``huge-request.bin``), rebuilt from its definition."""
    stem, kind = name.rsplit(".", 1)
    if kind == "json":
        return json.dumps(JSON_BODIES[stem], separators=(",", ":")).encode()
    mtype, value = MESSAGES[stem]
    return encode_json(PROTO, mtype, value)


def _endpoints_of(lang: str, variant: str) -> list[Endpoint]:
    """The endpoints the variant serves (the study's arms use the same mapping)."""
    eps = load_manifest(SERVICES_DIR / SERVICES[lang]).resolve(variant).endpoints
    protocols = {p for (lg, p), v in study.VARIANTS.items() if lg == lang and v == variant}
    by_protocol = {"grpc": "grpc", "json": "http1", "h2c": "h2c"}
    return [e for e in eps if e.protocol in {by_protocol[p] for p in protocols}]


# -- the payloads and manifests (pure) --------------------------------------------------------

def test_payloads_are_the_seeds_byte_for_byte() -> None:
    for name, size in SEED_SIZES.items():
        rebuilt = _rebuilt(name)
        assert len(rebuilt) == size, name
        for svc in SERVICES.values():
            assert (SERVICES_DIR / svc / "payloads" / name).read_bytes() == rebuilt, (svc, name)
    assert _rebuilt("small-request.json") == b'{"Message":"SmallRequest"}'
    # the protobuf sizes of the seed's notes: 150 x (1 + 1 + 25) + packed IntList (1 + 2 + 150)
    assert 150 * 27 + 1 + 2 + 150 == 4203
    assert study.payload_file("huge", "request.bin") == _rebuilt("huge-request.bin")


def test_every_service_has_the_seeds_proto() -> None:
    text = PROTO.read_bytes()
    for svc in SERVICES.values():
        assert (SERVICES_DIR / svc / "payloads.proto").read_bytes() == text
    body = text.decode()
    assert "package" not in body.replace("no package", "")
    for line in ("service SmallPayloadService { rpc SendSmallPayload (SmallRequest) returns (SmallResponse); }",
                 "message HugeRequest  { repeated string StringList = 1; repeated int32 IntList = 2; }"):
        assert line in body


@pytest.mark.parametrize(("lang", "variant"), CASES, ids=[f"{s}-{v}" for s, v in CASES])
def test_manifest_endpoints_carry_the_seeds_messages(lang: str, variant: str) -> None:
    m = load_manifest(SERVICES_DIR / SERVICES[lang])
    assert study.STUDY in m.studies and m.requires == () and m.health_kind == "tcp"
    assert m.dockerfile == "Dockerfile" and (m.directory / "Dockerfile").is_file()
    r = m.resolve(variant)
    assert r.port_env == "PORT" and r.run_env.get("HOST") == "{host}" and r.run_env["APP_VARIANT"] == variant
    if r.build_command:  # build outputs go to the cache, never into the clone
        assert any("{build_dir}" in a or "{cargo_target_dir}" in a for a in r.build_command)
    eps = _endpoints_of(lang, variant)
    assert eps, (lang, variant)
    for ep in eps:
        payload = ep.name.split("-")[0]
        if ep.protocol == "grpc":
            assert ep.path == {"small": "/SmallPayloadService/SendSmallPayload",
                               "huge": "/HugePayloadService/SendHugePayload"}[payload]
            assert ep.body == _rebuilt(f"{payload}-request.bin")
            c = ep.contract
            want = c.message if c.message is not None else encode_json(c.proto, c.message_type, c.message_json)
            assert want == _rebuilt(f"{payload}-response.bin")
        else:
            assert (ep.method, ep.path) == ("POST", f"/{payload}")
            assert ep.body == _rebuilt(f"{payload}-request.json")
            assert ep.contract.body == _rebuilt(f"{payload}-response.json").decode()
            assert ep.contract.content_type == "application/json"


def test_python_offers_no_h2c_and_says_why() -> None:
    assert ("python", "h2c") not in study.VARIANTS and "HTTP/1.1 only" in study.NOT_OFFERED[("python", "h2c")]
    assert not any(e.protocol == "h2c" for e in load_manifest(SERVICES_DIR / SERVICES["python"]).resolve().endpoints)


@pytest.mark.skipif(shutil.which("dotnet") is not None, reason="a .NET SDK is installed here: the service runs")
def test_dotnet_is_reported_unavailable_with_the_reason() -> None:
    m = load_manifest(SERVICES_DIR / SERVICES["dotnet"])
    ok, why = toolchains.availability(m)
    assert not ok and "dotnet" in why
    with pytest.raises(ToolchainMissing) as err:
        get_runtime("local").prepare(m.resolve("grpc"))
    assert err.value.toolchain == "dotnet"


# -- real servers ------------------------------------------------------------------------------

def _check_variant(lang: str, variant: str, host: str, port: int) -> None:
    """Each endpoint of the variant meets its contract; gRPC responses decode to the seed's
    message; a request that is not the expected message is refused."""
    base = f"http://{host}:{port}"
    for ep in _endpoints_of(lang, variant):
        report = contract.verify(base, ep)  # raises ContractError listing the differences
        assert report.ok
        payload = ep.name.split("-")[0]
        mtype, value = MESSAGES[f"{payload}-response"]
        if ep.protocol == "grpc":
            assert decode_to_dict(PROTO, mtype, report.body) == value
            assert report.status == 0
        else:
            assert json.loads(report.body) == JSON_BODIES[f"{payload}-response"]
            h2 = ep.protocol == "h2c"
            with httpx.Client(http1=not h2, http2=h2, trust_env=False, timeout=10) as client:
                bad = client.post(base + ep.path, content=b'{"Message":', headers={"content-type": "application/json"})
                assert 400 <= bad.status_code < 500 and bad.http_version == ("HTTP/2" if h2 else "HTTP/1.1")


@pytest.fixture(scope="module")
def clone_state(untracked_in_services: Callable[[Iterable[str]], set[str]]) -> set[str]:
    return untracked_in_services(SERVICES.values())


@pytest.mark.integration
@pytest.mark.timeout(3600)
@pytest.mark.parametrize(("lang", "variant"), CASES, ids=[f"{s}-{v}" for s, v in CASES])
def test_service_builds_and_meets_its_contracts_on_the_wire(
        clone_state: set[str], listening_addresses: Callable[[int], set[str]], lang: str, variant: str,
        tmp_path: Path) -> None:
    manifest = load_manifest(SERVICES_DIR / SERVICES[lang])
    ok, why = toolchains.availability(manifest)
    if not ok:
        pytest.skip(f"not run: {why}")
    rt = get_runtime("local")
    t0 = time.monotonic()
    prepared = rt.prepare(manifest.resolve(variant))
    print(f"\n{lang} ({variant}): prepare {time.monotonic() - t0:.1f} s ({prepared.info.get('build')}; "
          f"last build took {prepared.info.get('build_s')} s)")
    with rt.start(prepared, StartOptions(port=free_port(), cpus=SERVER_CPUS, log_path=tmp_path / "service.log")) as h:
        assert h.enforced["cpus_read_back"] == list(SERVER_CPUS)
        # grpcio binds 127.0.0.1 through a dual-stack socket: shown as its v4-mapped address
        seen = {a.replace("[::ffff:127.0.0.1]", "127.0.0.1") for a in listening_addresses(h.proc.pid)}
        assert seen == {f"127.0.0.1:{h.port}"}
        _check_variant(lang, variant, h.host, h.port)
        assert h.alive()


@pytest.mark.integration
def test_nothing_was_written_inside_the_clone(
        clone_state: set[str], untracked_in_services: Callable[[Iterable[str]], set[str]]) -> None:
    # runs after the service tests of this module (pytest keeps the file's order)
    assert untracked_in_services(SERVICES.values()) == clone_state


DOCKER_CASES = [c for c in CASES]


@pytest.mark.docker
@pytest.mark.integration
@pytest.mark.timeout(3600)
@pytest.mark.parametrize(("lang", "variant"), DOCKER_CASES, ids=[f"{s}-{v}" for s, v in DOCKER_CASES])
def test_container_meets_its_contracts_on_the_wire(lang: str, variant: str) -> None:
    """One image per service variant from its Dockerfile on the locally made base images (the
    two variants of a service share every layer). The .NET images come from
    mcr.microsoft.com only: "not run" where it is unreachable."""
    rt = get_runtime("docker")
    service = load_manifest(SERVICES_DIR / SERVICES[lang]).resolve(variant)
    t0 = time.monotonic()
    try:
        prepared = rt.prepare(service)
    except (ParameterError, BuildError) as exc:
        if lang == "dotnet" and "mcr.microsoft.com" in str(exc):
            pytest.skip(f"not run: {str(exc).splitlines()[0]}")
        raise
    print(f"\n{lang} ({variant}): image {prepared.info.get('tag')} ready in {time.monotonic() - t0:.1f} s")
    with rt.start(prepared, StartOptions(port=free_port(), cpus=SERVER_CPUS)) as h:
        _check_variant(lang, variant, h.host, h.port)
