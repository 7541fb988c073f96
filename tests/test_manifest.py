"""Service manifests: every shipped manifest validates; bad ones name file, field and expectation."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchlib.core.errors import ManifestError, ParameterError
from benchlib.runtime.manifest import get_manifest, list_services, load_manifest

SERVICES = Path(__file__).resolve().parent.parent / "services"

GOOD = """
schema = 1
name = "svc"
language = "go"
framework = "net/http"
toolchains = ["go"]
[run]
command = ["{build_dir}/server"]
port_env = "PORT"
[variants.fair]
[variants.faithful]
run = { command = ["{build_dir}/other"] }
[[endpoints]]
name = "hello"
path = "/"
[endpoints.contract]
status = 200
body = "hi"
[endpoints.contract_by_variant.faithful]
body = "HI"
"""


def _write(tmp_path: Path, text: str, name: str = "svc") -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "service.toml").write_text(text)
    return d / "service.toml"


def test_every_shipped_manifest_validates_and_resolves_every_variant() -> None:
    services = list_services(SERVICES)
    assert {"go-nethttp-hello", "python-aiohttp-hello"} <= set(services)
    for m in services.values():
        for v in m.variants:
            r = m.resolve(v)
            assert r.run_command, m.name


def test_variants_that_build_alike_share_the_first_ones_build() -> None:
    assert [get_manifest("go-fcgi").resolve(v).build_variant for v in ("fcgi", "fcgi-4", "http")] == ["fcgi"] * 3
    assert [get_manifest("rust-tonic-axum").resolve(v).build_variant for v in ("grpc", "json")] == ["grpc"] * 2
    # a debug and a release cargo build are two builds
    assert [get_manifest("rust-actix-logger").resolve(v).build_variant for v in ("faithful", "fair")] == [
        "faithful", "fair"]


def test_variants_override_run_and_contract(tmp_path: Path) -> None:
    m = load_manifest(_write(tmp_path, GOOD))
    assert m.default_variant == "fair"
    assert m.resolve("fair").run_command == ("{build_dir}/server",)
    faithful = m.resolve("faithful")
    assert faithful.run_command == ("{build_dir}/other",)
    assert faithful.endpoint().contract.body == "HI" and m.resolve().endpoint("hello").contract.body == "hi"
    assert faithful.endpoint().contract.varies is None
    with pytest.raises(ParameterError, match="valid: fair, faithful"):
        m.resolve("debug")
    with pytest.raises(ParameterError, match="valid: hello"):
        m.resolve().endpoint("bye")


def test_varies_is_read_per_variant(tmp_path: Path) -> None:
    m = load_manifest(_write(tmp_path, GOOD.replace('body = "HI"', 'body = "HI"\nvaries = true')))
    assert m.resolve("faithful").endpoint().contract.varies is True
    assert m.resolve("fair").endpoint().contract.varies is None


@pytest.mark.parametrize("change,field", [
    (("[run]\ncommand = [\"{build_dir}/server\"]", "[run]\ncommand = \"./server --port 1\""), "run.command"),
    (('toolchains = ["go"]', 'toolchains = ["gcc"]'), "toolchains"),
    (('name = "svc"', 'name = "other"'), "name"),
    (("status = 200", "status = 2000"), "endpoints[0].contract.status"),
    (("status = 200", "status = 200\nvaries = \"yes\""), "endpoints[0].contract.varies"),
    (('path = "/"', 'path = "hello"'), "endpoints[0].path"),
    (("schema = 1", "schema = 1\nbogus = 3"), "bogus"),
    (("[variants.fair]", "[variants.fair]\nimage = 'x'"), "variants.fair.image"),
    (("[endpoints.contract_by_variant.faithful]", "[endpoints.contract_by_variant.debug]"),
     "endpoints[0].contract_by_variant.debug"),
])
def test_bad_manifests_name_the_file_and_field(tmp_path: Path, change: tuple[str, str], field: str) -> None:
    path = _write(tmp_path, GOOD.replace(*change))
    with pytest.raises(ManifestError) as err:
        load_manifest(path)
    assert str(path) in str(err.value) and repr(field) in str(err.value) and "expected" in str(err.value)


def test_invalid_toml_and_missing_file_are_reported(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="not valid TOML"):
        load_manifest(_write(tmp_path, "name = "))
    with pytest.raises(ManifestError, match="no such manifest"):
        load_manifest(tmp_path / "nothing" / "service.toml")


def test_unknown_service_lists_the_valid_ones() -> None:
    with pytest.raises(ParameterError, match="valid: .*go-nethttp-hello"):
        get_manifest("no-such-service", SERVICES)


@pytest.mark.parametrize("name", ["../evil", "..", ".", "services/x", "/etc", "-x", ".hidden", ""])
def test_a_service_name_is_a_plain_folder_name_never_a_path(tmp_path: Path, name: str) -> None:
    # a manifest outside services/ that a path could reach
    outside = _write(tmp_path, GOOD.replace('name = "svc"', 'name = "evil"'), name="evil")
    (tmp_path / "services").mkdir()
    with pytest.raises(ParameterError, match="must match .*a plain folder name"):
        get_manifest(name, tmp_path / "services")
    assert outside.exists()


def test_requires_names_services_not_paths(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="'requires'.*folder names"):
        load_manifest(_write(tmp_path, GOOD.replace("[run]", 'requires = ["../evil"]\n[run]')))


GRPC_GOOD = """
schema = 1
name = "svc"
language = "go"
framework = "grpc-go"
toolchains = ["go"]
[run]
command = ["{build_dir}/server"]
port_env = "PORT"
[health]
kind = "grpc"
[[endpoints]]
name = "small"
protocol = "grpc"
path = "/SmallPayloadService/SendSmallPayload"
proto = "payloads.proto"
request_json = { Message = "SmallRequest" }
request_type = "SmallRequest"
[endpoints.contract]
grpc_status = 0
response_json = { Message = "SmallResponse" }
response_type = "SmallResponse"
varies = false
"""


def _write_grpc(tmp_path: Path, text: str) -> Path:
    from benchlib.loadgen.grpcgo import PROTO

    path = _write(tmp_path, text)
    (path.parent / "payloads.proto").write_text(PROTO.read_text())
    return path


def test_a_grpc_endpoint_builds_its_message_from_json_via_the_proto(tmp_path: Path) -> None:
    m = load_manifest(_write_grpc(tmp_path, GRPC_GOOD))
    ep = m.resolve().endpoint("small")
    assert (ep.protocol, ep.method, ep.path) == ("grpc", "POST", "/SmallPayloadService/SendSmallPayload")
    assert ep.body == b"\x0a\x0cSmallRequest" and ep.proto is not None and ep.proto.name == "payloads.proto"
    c = ep.contract
    assert (c.grpc_status, c.message_json, c.message_type, c.varies) == (0, {"Message": "SmallResponse"},
                                                                       "SmallResponse", False)
    assert m.health_kind == "grpc"


@pytest.mark.parametrize("change,field", [
    (('protocol = "grpc"', 'protocol = "http2"'), "endpoints[0].protocol"),
    (('path = "/SmallPayloadService/SendSmallPayload"', 'path = "/small"'), "endpoints[0].path"),
    (('protocol = "grpc"', 'protocol = "grpc"\nmethod = "GET"'), "endpoints[0].method"),
    (('protocol = "grpc"', 'protocol = "grpc"\nbody = "x"'), "endpoints[0].body"),
    (('proto = "payloads.proto"', 'proto = "missing.proto"'), "endpoints[0].proto"),
    (('proto = "payloads.proto"', 'proto = "../payloads.proto"'), "endpoints[0].proto"),
    (('request_type = "SmallRequest"', 'request_type = "NoSuchRequest"'), "endpoints[0].request_json"),
    (('request_json = { Message = "SmallRequest" }', 'request_json = { Nope = 1 }'), "endpoints[0].request_json"),
    (("grpc_status = 0", "grpc_status = 99"), "endpoints[0].contract.grpc_status"),
    (("grpc_status = 0", "grpc_status = 0\nstatus = 200"), "endpoints[0].contract.status"),
    (('response_type = "SmallResponse"', 'response_type = "Nope"'), "endpoints[0].contract.response_type"),
    (('response_type = "SmallResponse"', ''), "endpoints[0].contract.response_type"),
    (("varies = false", 'varies = "no"'), "endpoints[0].contract.varies"),
])
def test_bad_grpc_manifests_name_the_file_and_field(tmp_path: Path, change: tuple[str, str], field: str) -> None:
    assert change[0] in GRPC_GOOD
    path = _write_grpc(tmp_path, GRPC_GOOD.replace(*change))
    with pytest.raises(ManifestError) as err:
        load_manifest(path)
    text = str(err.value)
    assert str(path) in text and repr(field) in text and "expected" in text and "\n" not in text, text


def test_grpc_contract_keys_on_an_http_endpoint_say_they_need_protocol_grpc(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace('body = "hi"', 'body = "hi"\ngrpc_status = 0'))
    with pytest.raises(ManifestError, match='need protocol = "grpc"'):
        load_manifest(path)


# -- python_packages: what {python} must import (benchlib's [services] extra) --------------------

def test_python_packages_are_checked_where_the_service_would_run(tmp_path: Path) -> None:
    from benchlib.core.errors import PythonPackageMissing
    from benchlib.run.testing import write_manifest
    from benchlib.runtime import toolchains
    from benchlib.runtime.local import LocalRuntime

    ok = load_manifest(write_manifest(tmp_path, "has-json", toolchains=["python"]))
    assert ok.python_packages == ()
    path = write_manifest(tmp_path, "needs-pkg", toolchains=["python"]) / "service.toml"
    path.write_text(path.read_text().replace('toolchains = ["python"]',
                                             'toolchains = ["python"]\npython_packages = ["json", "no_such_pkg_x"]'))
    m = load_manifest(path)
    assert m.python_packages == ("json", "no_such_pkg_x") and toolchains.missing_python_packages(m) == ["no_such_pkg_x"]
    available, why = toolchains.availability(m)
    assert not available and why.startswith("no Python package 'no_such_pkg_x'") and "benchlib[services]" in why
    with pytest.raises(PythonPackageMissing) as err:
        LocalRuntime().prepare(m.resolve())
    assert err.value.missing == "no Python package 'no_such_pkg_x'" and "benchlib[services]" in str(err.value)
    assert "'needs-pkg'" in str(err.value)


@pytest.mark.parametrize("line,expected", [
    ('python_packages = "aiohttp"', "a list of Python import names"),
    ('python_packages = ["not-an-import-name"]', "a list of Python import names"),
])
def test_bad_python_packages_are_refused(tmp_path: Path, line: str, expected: str) -> None:
    path = _write(tmp_path, GOOD.replace('toolchains = ["go"]', 'toolchains = ["go", "python"]\n' + line))
    with pytest.raises(ManifestError, match=expected):
        load_manifest(path)
    path.write_text(GOOD.replace('toolchains = ["go"]', 'toolchains = ["go"]\npython_packages = ["json"]'))
    with pytest.raises(ManifestError, match="'python_packages'.*include \"python\""):
        load_manifest(path)


def test_every_python_service_declares_the_packages_it_imports() -> None:
    """The services' Python files import nothing from benchlib's [services] extra that their
    manifest's python_packages does not name (so a missing one is "not run", not a crash)."""
    import ast
    import tomllib

    extra = {n.split(">")[0].split("=")[0].strip() for n in tomllib.loads(
        (SERVICES.parent / "pyproject.toml").read_text())["project"]["optional-dependencies"]["services"]}
    for d in sorted(p for p in SERVICES.iterdir() if (p / "service.toml").exists()):
        declared = set(load_manifest(d).python_packages)
        imported = set()
        for py in d.glob("*.py"):
            for node in ast.walk(ast.parse(py.read_text())):
                if isinstance(node, ast.Import):
                    imported |= {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    imported.add(node.module.split(".")[0])
        used = imported & extra
        if any(d.glob("*.py")) and "{python}" in (d / "service.toml").read_text():
            assert used <= declared, f"{d.name}: imports {sorted(used - declared)} without declaring them"
