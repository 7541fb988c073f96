"""Base images without a registry (benchlib.runtime.docker.images): Dockerfile parsing, the apt mirror, and
bootstrap against the real engine (marked ``docker``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchlib.errors import BuildError, ParameterError
from benchlib.runtime.docker.images import apt_mirror, base_images, bootstrap_base_image, ensure_base_images

REPO = Path(__file__).resolve().parents[2]


def test_base_images_of_a_multi_stage_dockerfile() -> None:
    text = """\
# comment
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE} AS build
RUN echo \\
    continued
FROM --platform=linux/amd64 golang:1.22 AS tools
FROM build
FROM scratch
FROM ${BASE_IMAGE}
"""
    assert base_images(text) == ["debian:bookworm-slim", "golang:1.22"]
    assert base_images(text, {"BASE_IMAGE": "debian:trixie-slim"}) == ["debian:trixie-slim", "golang:1.22"]


@pytest.mark.parametrize("service", ["go-nethttp-hello", "python-aiohttp-hello"])
def test_quickstart_dockerfiles_start_from_debian_slim_and_need_no_buildkit(service: str) -> None:
    text = (REPO / "services" / service / "Dockerfile").read_text()
    assert base_images(text) == ["debian:bookworm-slim"]
    for buildkit_only in ("RUN --mount", "<<EOF", "# syntax="):
        assert buildkit_only not in text


def test_apt_mirror_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BENCHLIB_DEBIAN_MIRROR", "http://mirror.example/debian/")
    assert apt_mirror() == "http://mirror.example/debian"
    monkeypatch.delenv("BENCHLIB_DEBIAN_MIRROR")
    assert apt_mirror().startswith("http")


@pytest.mark.docker
def test_bootstrap_reports_present_image(docker_client: Any, base_image: str) -> None:
    result = bootstrap_base_image(client=docker_client)
    assert (result.action, result.image_id) == ("present", base_image)
    assert result.to_dict()["tag"] == "debian:bookworm-slim"


@pytest.mark.docker
def test_bootstrap_another_debian_tag_from_the_cached_tarball(docker_client: Any, base_image: str) -> None:
    tag = "debian:bookworm"
    if _has(docker_client, tag):
        pytest.skip(f"{tag} already exists in this engine; not touching it")
    try:
        result = bootstrap_base_image(tag, client=docker_client)
        assert result.action in ("imported", "debootstrapped", "pulled"), result
        image = docker_client.images.get(tag)
        assert image.id == result.image_id
        assert docker_client.containers.run(tag, ["cat", "/etc/debian_version"], remove=True,
                                            network_mode="host").decode().startswith("12.")
        if result.action != "pulled":
            assert "bookworm-security" in docker_client.containers.run(
                tag, ["cat", "/etc/apt/sources.list.d/debian.sources"], remove=True, network_mode="host").decode()
    finally:
        if _has(docker_client, tag):
            docker_client.images.remove(tag)


def _has(client: Any, ref: str) -> bool:
    import docker.errors

    try:
        client.images.get(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


@pytest.mark.docker
def test_missing_non_debian_image_is_refused_with_the_reason(docker_client: Any) -> None:
    ref = "benchlib-test/not-a-real-image:0"
    if _has(docker_client, ref):
        pytest.skip(f"{ref} exists")
    with pytest.raises(ParameterError, match="only Debian images"):
        bootstrap_base_image(ref, client=docker_client, pull=False)
    with pytest.raises(BuildError, match="benchlib images bootstrap"):
        ensure_base_images(docker_client, f"FROM {ref}\n", bootstrap=False)


# ------------------------------------------------------------- rust images from the host's toolchain

def test_rust_tag_and_missing_host_toolchain_names_the_install_command() -> None:
    from benchlib.runtime.docker.toolchain_images import RUST_TAG, host_rust_sysroot

    m = RUST_TAG.fullmatch("rust:1.95.0-slim-bookworm")
    assert m and m.group("version") == "1.95.0" and m.group("suite") == "bookworm"
    assert RUST_TAG.fullmatch("docker.io/library/rust:1.74.1-bookworm")
    assert not RUST_TAG.fullmatch("rust:latest") and not RUST_TAG.fullmatch("debian:bookworm-slim")
    with pytest.raises(ParameterError, match=r"rustup toolchain install 0\.0\.1"):
        host_rust_sysroot("0.0.1")


def test_rust_context_holds_the_sysroot_without_docs_and_the_ca(tmp_path: Path) -> None:
    import io
    import tarfile

    from benchlib.runtime.docker.toolchain_images import _context

    root = tmp_path / "sysroot"
    for rel in ("bin/rustc", "lib/librustc_driver.so", "share/doc/rust/README.md", "share/man/man1/rustc.1",
                "lib/rustlib/x86_64-unknown-linux-gnu/lib/libstd.rlib"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    ca = tmp_path / "ca.crt"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    buf = io.BytesIO()
    _context(root, "FROM debian:bookworm-slim\n", ca, buf)
    buf.seek(0)
    with tarfile.open(fileobj=buf) as tar:
        names = set(tar.getnames())
        assert tar.extractfile("extra-ca-certificates.crt").read().startswith(b"-----BEGIN")  # type: ignore[union-attr]
    assert {"Dockerfile", "rust/bin/rustc", "rust/lib/librustc_driver.so",
            "rust/lib/rustlib/x86_64-unknown-linux-gnu/lib/libstd.rlib"} <= names
    assert not any(n.startswith(("rust/share/doc", "rust/share/man")) for n in names)


@pytest.mark.docker
def test_rust_image_is_made_from_the_host_toolchain_and_compiles(docker_client: Any) -> None:
    import subprocess

    from benchlib.runtime.docker.toolchain_images import host_rust_sysroot

    out = subprocess.run(["rustc", "--version"], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        pytest.skip("no rustc on this host")
    version = out.stdout.split()[1]
    _, line = host_rust_sysroot(version)
    tag = f"rust:{version}-slim-bookworm"
    result = bootstrap_base_image(tag, client=docker_client)
    assert result.action in ("present", "pulled", "toolchain"), result
    labels = docker_client.images.get(tag).labels or {}
    if labels.get("benchlib.toolchain-source") == "host":  # not the official image
        assert labels["benchlib.rustc-version"] == line.replace('"', "'")
    # the toolchain runs and links a program in the image (gcc and libc6-dev present)
    logs = docker_client.containers.run(
        tag, ["sh", "-c", "cd /tmp && printf 'fn main(){println!(\"ok\")}' > m.rs && rustc -O m.rs && ./m"],
        remove=True, network_mode="host")
    assert logs.decode().strip() == "ok"
