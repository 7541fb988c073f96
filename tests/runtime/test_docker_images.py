"""Base images without a registry (benchlib.runtime.docker.images): Dockerfile parsing, the apt mirror, and
bootstrap against the real engine (marked ``docker``); the Go Dockerfiles' shared toolchain layers."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from benchlib.core.errors import BuildError, ParameterError
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


def _go_dockerfiles() -> dict[str, str]:
    """The services' Dockerfiles that fetch the Go toolchain, by service."""
    texts = {p.parent.name: p.read_text() for p in sorted((REPO / "services").glob("*/Dockerfile"))}
    return {name: text for name, text in texts.items() if "golang.org/toolchain" in text}


def _up_to_the_toolchain(text: str) -> str:
    end = "/usr/local/go/bin/go version\n"
    return text[text.index("ARG BASE_IMAGE="):text.index(end) + len(end)]


def test_go_dockerfiles_are_identical_up_to_the_toolchain() -> None:
    """Every Go Dockerfile's text from its first instruction through the toolchain fetch is
    the same byte for byte, and its build stage takes nothing of the service's own files
    before that (only the certs stage's bundle), so the engine fetches the toolchain once."""
    files = _go_dockerfiles()
    assert {"go-nethttp-hello", "go-gin-mongo", "ferretdb", "go-grpc-json"} <= set(files)
    shared = {name: _up_to_the_toolchain(text) for name, text in files.items()}
    assert [n for n, t in shared.items() if t != shared["go-nethttp-hello"]] == []
    build_stage = shared["go-nethttp-hello"].split(" AS build\n", 1)[1]
    assert [ln for ln in build_stage.splitlines() if ln.startswith(("COPY", "ADD"))] == [
        "COPY --from=certs /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt"]


def test_dockerfiles_that_install_the_same_debian_packages_share_that_layer() -> None:
    """Two Dockerfiles whose first stage runs the same ``apt-get install`` reach it through the
    same instructions (no service's ``ARG`` before it: an ``ARG`` in scope is part of a
    ``RUN``'s cache key), so the engine installs each set of packages once per machine."""
    from benchlib.runtime.docker.images import _logical_lines

    by_install: dict[str, dict[str, tuple[str, ...]]] = {}
    for path in sorted((REPO / "services").glob("*/Dockerfile")):
        lines = _logical_lines(path.read_text())
        first_from = next(i for i, ln in enumerate(lines) if ln.startswith("FROM "))
        apt = next((i for i, ln in enumerate(lines) if "apt-get install" in ln), None)
        if apt is None:
            continue
        by_install.setdefault(lines[apt], {})[path.parent.name] = tuple(lines[first_from:apt])
    python = by_install[next(k for k in by_install if "python3-venv" in k)]
    assert len(python) >= 5, python
    for install, services in by_install.items():
        assert len(set(services.values())) == 1, (install, services)


@pytest.mark.docker
@pytest.mark.timeout(1800)
def test_the_second_go_image_reuses_the_toolchain_layer(docker_client: Any, base_image: str) -> None:
    """The build stages of two Go services, with the context benchlib sends (the extra CA
    bundle included when one is configured): the second reuses every layer up to the
    toolchain (the engine's cache), though its Dockerfile and files differ."""
    from docker.utils.build import create_archive

    from benchlib.runtime.docker.context import CA_FILE_NAME, _context_files, detect_ca_bundle

    ca = detect_ca_bundle("auto")
    steps: dict[str, list[str]] = {}
    for name in ("go-nethttp-hello", "go-nethttp-random"):
        directory = REPO / "services" / name
        out: list[str] = []
        with tempfile.TemporaryFile() as ctx:
            create_archive(str(directory), files=_context_files(directory, "Dockerfile"), fileobj=ctx,
                           extra_files=[(CA_FILE_NAME, ca.read_text())] if ca else [])
            for chunk in docker_client.api.build(fileobj=ctx, custom_context=True, target="build", rm=True,
                                                 forcerm=True, pull=False, decode=True, network_mode="host"):
                out.append(chunk.get("stream", ""))
                assert "error" not in chunk, chunk["error"]
        steps[name] = "".join(out).split("Step ")[1:]
    toolchain = [s for s in steps["go-nethttp-random"] if "RUN set -e; arch=" in s.splitlines()[0]]
    assert len(toolchain) == 1 and "Using cache" in toolchain[0], toolchain


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
