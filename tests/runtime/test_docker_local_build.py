"""An image whose program is the local build's (``[docker.local_build]``,
:mod:`benchlib.runtime.docker.local_build`): the manifests agree with their Dockerfiles, the
generated Dockerfile keeps the last stage, the image runs the very binary the local runtime
built, and ``BENCHLIB_IMAGE_FROM_LOCAL_BUILD=0`` (or another toolchain) compiles in the image
as before. Under ``-m slow``: every such service's image compiled by its own Dockerfile."""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
from pathlib import Path
from typing import Any

import pytest

from benchlib.core.errors import BuildError, ManifestError
from benchlib.run.testing import write_manifest
from benchlib.runtime.docker import local_build
from benchlib.runtime.manifest import get_manifest, list_services, load_manifest

REPO = Path(__file__).resolve().parents[2]
WITH_LOCAL_BUILD = sorted((name, v) for name in list_services() for v in get_manifest(name).variants
                          if get_manifest(name).resolve(v).docker_local_build is not None)


def test_the_compiled_services_take_their_image_program_from_the_local_build() -> None:
    names = {name for name, _ in WITH_LOCAL_BUILD}
    assert {n for n in names if n.startswith("rust-")} == {"rust-actix-logger", "rust-actix-random",
                                                           "rust-rocket-mongo", "rust-tonic-axum"}
    assert {n for n in names if n.startswith("go-")} == {"go-fcgi", "go-gin-mongo", "go-grpc-json", "go-iris-random",
                                                        "go-nethttp-hello", "go-nethttp-logger", "go-nethttp-random"}
    assert ("canned-grpc-json", "canned") in WITH_LOCAL_BUILD
    assert ("ferretdb", "sqlite") in WITH_LOCAL_BUILD and ("ferretdb", "mongo-official") not in WITH_LOCAL_BUILD


@pytest.mark.parametrize("name, variant", WITH_LOCAL_BUILD)
def test_the_manifest_names_exactly_the_files_the_last_stage_copies(name: str, variant: str) -> None:
    service = get_manifest(name).resolve(variant)
    spec = service.docker_local_build
    assert spec is not None
    text = (service.manifest.directory / "Dockerfile").read_text()
    last = text[[m.start() for m in re.finditer(r"(?m)^FROM ", text)][-1]:]
    copied = set(re.findall(r"COPY --from=build /out/(\S+) ", last))
    assert copied == set(spec.out), f"{name}: the last stage copies {sorted(copied)}, the manifest names {sorted(spec.out)}"
    pinned = local_build.arg_value(text, spec.toolchain_arg, service.docker_build_args)
    assert pinned is not None and local_build.version_number(pinned)
    # the local build's profile is the image's: a dev (debug) image takes the debug binary
    profile = service.docker_build_args.get("CARGO_PROFILE")
    if profile is not None:
        assert f"/{'debug' if profile == 'dev' else 'release'}/" in str(spec.out["server"])


def test_the_generated_dockerfile_is_the_files_and_the_last_stage_as_written() -> None:
    text = (REPO / "services" / "rust-rocket-mongo" / "Dockerfile").read_text()
    got = local_build.generated_dockerfile(text)
    last = text[[m.start() for m in re.finditer(r"(?m)^FROM ", text)][-1]:]
    assert got.endswith(last if last.endswith("\n") else last + "\n")
    lines = got.splitlines()
    assert lines[1:3] == ["ARG RUST_IMAGE=rust:1.95.0-slim-bookworm", "ARG BASE_IMAGE=debian:bookworm-slim"]
    assert lines[3:5] == ["FROM scratch AS build", f"COPY {local_build.STAGE_DIR}/ /out/"]
    assert "cargo build" not in got and "RUST_IMAGE}" not in got  # nothing compiles, no Rust image needed
    with pytest.raises(BuildError, match="FROM ... AS build"):
        local_build.generated_dockerfile("FROM debian:bookworm-slim\nRUN true\n")


def test_the_pinned_version_is_read_from_build_args_or_the_arg_default() -> None:
    text = "ARG BASE=x\nFROM x AS build\nARG GO_VERSION=1.26.8\nFROM x\nARG GO_VERSION=1.26.8\n"
    assert local_build.arg_value(text, "GO_VERSION", {}) == "1.26.8"
    assert local_build.arg_value(text, "GO_VERSION", {"GO_VERSION": "1.25.1"}) == "1.25.1"
    assert local_build.arg_value(text, "NOPE", {}) is None
    assert local_build.version_number("rust:1.95.0-slim-bookworm") == "1.95.0"
    assert local_build.version_number("go version go1.26.8 linux/amd64") == "1.26.8"


def test_a_bad_local_build_table_is_refused_naming_the_field(tmp_path: Path) -> None:
    d = write_manifest(tmp_path, "svc", extra='[docker.local_build]\ntoolchain_arg = "GO_VERSION"\nout = { "a/b" = "x" }\n')
    with pytest.raises(ManifestError, match=r"docker\.local_build\.out.*file names without '/'"):
        load_manifest(d)  # refused as the manifest is read
    d = write_manifest(tmp_path, "svc2", extra='[docker.local_build]\nout = { server = "x" }\n')
    with pytest.raises(ManifestError, match=r"docker\.local_build.*a table with toolchain_arg and out"):
        load_manifest(d).resolve()


def test_another_toolchain_or_the_setting_keeps_the_dockerfiles_build(monkeypatch: pytest.MonkeyPatch) -> None:
    service = get_manifest("go-nethttp-hello").resolve()
    text = (service.manifest.directory / "Dockerfile").read_text()
    plan, why = local_build.plan(service, text, {"GO_VERSION": "1.21.0"})
    assert plan is None and "is not the one the Dockerfile pins (GO_VERSION=1.21.0)" in why
    monkeypatch.setenv("BENCHLIB_IMAGE_FROM_LOCAL_BUILD", "0")
    assert local_build.plan(service, text, {}) == (None, "BENCHLIB_IMAGE_FROM_LOCAL_BUILD=0")


def _file_in_image(client: Any, image: str, path: str) -> bytes:
    container = client.containers.create(image)
    try:
        stream, _ = container.get_archive(path)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.getmembers()[0]
            f = tar.extractfile(member)
            assert f is not None
            return f.read()
    finally:
        container.remove(force=True)


@pytest.mark.docker
@pytest.mark.integration
def test_the_image_runs_the_binary_the_local_runtime_built(docker_runtime: Any, docker_client: Any) -> None:
    from benchlib.runtime.local import LocalRuntime

    service = get_manifest("go-nethttp-hello").resolve()
    local = LocalRuntime().prepare(service)
    assert local.build_dir is not None
    binary = (local.build_dir / "server").read_bytes()
    prepared = docker_runtime.prepare(service)
    used = prepared.info["from_local_build"]
    assert used["used"] and used["sha256"]["server"] == hashlib.sha256(binary).hexdigest()
    assert used["toolchains"]["go"].startswith("go version go1.26.8") and used["pinned"] == {"GO_VERSION": "1.26.8"}
    assert _file_in_image(docker_client, prepared.image, "/usr/local/bin/server") == binary
    image = docker_client.images.get(prepared.image)
    assert image.labels["benchlib.from_local_build"] == "1" and image.labels["benchlib.version.go"] == "1.26.8"
    assert image.attrs["Config"]["User"] == "65534:65534"  # the last stage as written


@pytest.mark.docker
@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("name, variant", WITH_LOCAL_BUILD)
def test_the_dockerfiles_own_build_stage_still_builds(name: str, variant: str, docker_runtime: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHLIB_IMAGE_FROM_LOCAL_BUILD", "0")
    prepared = docker_runtime.prepare(get_manifest(name).resolve(variant))
    assert prepared.info["from_local_build"] == {"used": False, "why": "BENCHLIB_IMAGE_FROM_LOCAL_BUILD=0"}
