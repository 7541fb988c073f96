"""Toolchain base images without a registry: ``rust:<version>-slim-<suite>`` from the host's Rust.

The Rust services' Dockerfiles build in the official ``rust:<version>-slim-<suite>`` image.
Where no registry answers and no package registry serves Rust toolchains, benchlib makes an
image under that same tag from the host's own toolchain of exactly that version:

* ``debian:<suite>-slim`` (:func:`benchlib.runtime.docker.images.bootstrap_base_image` creates
  it first if missing),
* ``ca-certificates gcc libc6-dev`` from the Debian mirror (what the official slim image adds
  for linking), plus the build CA bundle when one is configured,
* the toolchain's sysroot (``rustc +<version> --print sysroot``, its ``share/doc`` left out:
  about 600 MB instead of 1.4 GB) in ``/usr/local/rust``, on ``PATH``, with
  ``CARGO_HOME=/usr/local/cargo`` as in the official image.

The image is labelled ``benchlib.toolchain-source=host`` with the host's ``rustc --version``,
so provenance can tell it from the official one. A host without that exact version gets a
:class:`~benchlib.core.errors.ParameterError` naming the command that installs it.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from benchlib.core.errors import BuildError, ParameterError
from benchlib.runtime.docker.connection import find_image

__all__ = ["RUST_TAG", "create_rust_image", "host_rust_sysroot"]

RUST_TAG = re.compile(r"(?:docker\.io/)?(?:library/)?rust:(?P<version>\d+\.\d+\.\d+)(?:-slim)?-(?P<suite>[a-z]+)")

_LEFT_OUT = ("share/doc", "share/man", "share/zsh")

_DOCKERFILE = """\
# Made by benchlib (benchlib.runtime.docker.toolchain_images) from the host's Rust {version} toolchain,
# standing in for the official rust:{version}-slim-{suite} image where no registry answers.
FROM debian:{suite}-slim
COPY Dockerfile extra-ca-certificates.cr[t] /tmp/benchlib-ca/
RUN apt-get update \\
 && apt-get install -y --no-install-recommends ca-certificates gcc libc6-dev \\
 && rm -rf /var/lib/apt/lists/* \\
 && if [ -f /tmp/benchlib-ca/extra-ca-certificates.crt ]; then \\
        cat /tmp/benchlib-ca/extra-ca-certificates.crt >> /etc/ssl/certs/ca-certificates.crt; fi \\
 && rm -rf /tmp/benchlib-ca
COPY rust /usr/local/rust
ENV CARGO_HOME=/usr/local/cargo RUST_VERSION={version} \\
    PATH=/usr/local/cargo/bin:/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN mkdir -p /usr/local/cargo/bin && rustc --version && cargo --version
LABEL benchlib.toolchain-source="host" benchlib.rustc-version="{rustc}"
"""


def host_rust_sysroot(version: str) -> tuple[Path, str]:
    """The sysroot of the host's Rust toolchain ``version`` (e.g. ``"1.95.0"``) and its
    ``rustc --version`` line. Tries ``rustc +<version>`` (rustup), then the ``rustc`` on PATH.

    Raises :class:`ParameterError` when no such toolchain is installed."""
    env = {**os.environ, "RUSTUP_AUTO_INSTALL": "0", "RUST_BACKTRACE": "0"}
    seen = []
    for cmd in (["rustc", f"+{version}"], ["rustc"]):
        try:
            ver = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=30, env=env)
            root = subprocess.run([*cmd, "--print", "sysroot"], capture_output=True, text=True, timeout=30, env=env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            seen.append(f"{' '.join(cmd)}: {exc}")
            continue
        line = ver.stdout.strip()
        if ver.returncode == 0 and root.returncode == 0 and line.startswith(f"rustc {version} "):
            return Path(root.stdout.strip()), line
        err = [ln.strip() for ln in ver.stderr.splitlines() if "error" in ln.lower()] or ver.stderr.strip().splitlines()
        seen.append(f"{' '.join(cmd)}: {line or (err or ['no output'])[0]}")
    raise ParameterError(f"no host Rust toolchain {version} to make the image from ({'; '.join(seen)}); "
                         f"install it with `rustup toolchain install {version} --profile minimal`")


def _context(sysroot: Path, dockerfile: str, ca: Path | None, out: Any) -> None:
    """Write the build context (a tar) to the file object ``out``."""
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name, text in (("Dockerfile", dockerfile), *((("extra-ca-certificates.crt", ca.read_text()),) if ca else ())):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))

        def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
            rel = info.name.split("/", 1)[1] if "/" in info.name else ""
            if any(rel == p or rel.startswith(p + "/") for p in _LEFT_OUT):
                return None
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            return info

        tar.add(str(sysroot), arcname="rust", filter=keep)


def create_rust_image(client: Any, tag: str, *, ca: Path | None = None, timeout_s: float = 1800.0) -> tuple[str, str]:
    """Create the image ``tag`` (``rust:<version>-slim-<suite>``) from the host's toolchain.

    The engine must have ``debian:<suite>-slim`` (:func:`benchlib.runtime.docker.images.bootstrap_base_image`
    makes it before it calls this).

    Parameters
    ----------
    client: a ``docker.DockerClient``.
    tag: the image reference; must match :data:`RUST_TAG`.
    ca: extra CA bundle appended to the image's bundle (builds behind a TLS-inspecting proxy).
    timeout_s: bound on the build, in seconds.

    Returns (image id, one line saying what was done).

    Raises
    ------
    ParameterError: ``tag`` is not a rust image tag, or the host lacks that toolchain.
    BuildError: the build failed (the output's tail attached).
    """
    m = RUST_TAG.fullmatch(tag)
    if not m:
        raise ParameterError(f"{tag!r} is not a rust:<version>-slim-<suite> image tag (e.g. rust:1.95.0-slim-bookworm)")
    version, suite = m.group("version"), m.group("suite")
    sysroot, rustc = host_rust_sysroot(version)
    dockerfile = _DOCKERFILE.format(version=version, suite=suite, rustc=rustc.replace('"', "'"))
    repo, _, label = tag.rpartition(":")
    t0 = time.monotonic()
    lines: list[str] = []
    error = None
    with tempfile.TemporaryFile() as ctx:
        _context(sysroot, dockerfile, ca, ctx)
        ctx.seek(0)
        try:
            for chunk in client.api.build(fileobj=ctx, custom_context=True, tag=f"{repo}:{label}", rm=True,
                                          forcerm=True, pull=False, decode=True, network_mode="host",
                                          timeout=timeout_s):
                if "stream" in chunk:
                    lines.append(chunk["stream"])
                if "error" in chunk:
                    error = chunk["error"].strip()
        except Exception as exc:  # noqa: BLE001 - APIError, transport errors, timeouts
            error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    image_id = find_image(client, tag) if error is None else None
    if image_id is None:
        tail = "\n".join("".join(lines).strip().splitlines()[-30:])
        raise BuildError(f"building {tag} from the host's {rustc} failed: {error or 'no image produced'}\n{tail}")
    return image_id, f"made from the host's {rustc} ({sysroot}) in {time.monotonic() - t0:.1f} s"
