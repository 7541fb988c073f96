"""Base images without a registry: find, pull or create the images the Dockerfiles start from.

The service Dockerfiles start ``FROM debian:bookworm-slim``. A user with Docker Hub gets it
by ``docker pull``; a machine without any registry (such as ours) creates it locally:

1. the image is already in the engine: nothing to do;
2. ``docker pull`` works: pulled;
3. else, for Debian tags (``debian:<suite>`` / ``debian:<suite>-slim``): a root file system
   made by ``debootstrap --variant=minbase <suite>`` from the Debian mirror apt is configured
   with, packed as a tarball and imported with ``docker import``;
4. for ``rust:<version>-slim-<suite>``: made from the Debian image and the host's Rust
   toolchain of exactly that version (:mod:`benchlib.runtime.docker.toolchain_images`).

The tarball and debootstrap's package cache live outside the clone, in
``$BENCHLIB_CACHE/images/`` (default ``~/.cache/benchlib/images/``), so a fresh engine (or a
second one) gets the image in seconds the next time.

The CLI exposes :func:`bootstrap_base_image` as ``benchlib images bootstrap``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib.core import settings
from benchlib.core.buildcache import cache_root, record_build
from benchlib.core.errors import BuildError, ParameterError, RuntimeUnavailable
from benchlib.runtime.docker.connection import find_image, shared_client
from benchlib.runtime.docker.context import detect_ca_bundle
from benchlib.runtime.docker.toolchain_images import RUST_TAG, create_rust_image, host_rust_sysroot

__all__ = [
    "BootstrapResult",
    "DEFAULT_BASE_IMAGE",
    "apt_mirror",
    "base_images",
    "bootstrap_base_image",
    "ensure_base_images",
]

DEFAULT_BASE_IMAGE = "debian:bookworm-slim"
_DEBIAN_TAG = re.compile(r"(?:docker\.io/)?(?:library/)?debian:(?P<suite>[a-z]+)(?:-slim)?")
_DEFAULT_MIRROR = "http://deb.debian.org/debian"


@dataclass(frozen=True)
class BootstrapResult:
    """What :func:`bootstrap_base_image` did.

    Attributes
    ----------
    tag: the image reference, e.g. ``debian:bookworm-slim``.
    image_id: the engine's image id (``sha256:...``).
    action: ``present`` (already there), ``pulled``, ``imported`` (from the cached tarball),
        ``debootstrapped`` (tarball created now, then imported) or ``toolchain`` (a
        ``rust:`` image made from the host's toolchain, see :mod:`benchlib.runtime.docker.toolchain_images`).
    seconds: wall time of the call in seconds.
    detail: one human line (why the pull failed, where the tarball is, the mirror used).
    """

    tag: str
    image_id: str
    action: str
    seconds: float
    detail: str = ""

    def __str__(self) -> str:
        line = f"{self.tag}: {self.action} ({self.image_id[:19]}, {self.seconds:.1f} s)"
        return f"{line}; {self.detail}" if self.detail else line

    def to_dict(self) -> dict[str, Any]:
        return {"tag": self.tag, "image_id": self.image_id, "action": self.action,
                "seconds": round(self.seconds, 3), "detail": self.detail}


def base_images(dockerfile_text: str, build_args: dict[str, str] | None = None) -> list[str]:
    """The external images a Dockerfile starts from (``FROM`` lines), in order.

    Build stages named with ``AS`` and ``scratch`` are not external images; ``${ARG}``
    references are substituted from ``build_args`` and the ``ARG`` defaults before the first
    ``FROM``.

    Examples
    --------
    >>> base_images("FROM debian:bookworm-slim AS build\\nRUN true\\nFROM build\\n")
    ['debian:bookworm-slim']
    """
    args: dict[str, str] = {}
    stages: set[str] = set()
    out: list[str] = []
    seen_from = False
    for raw in _logical_lines(dockerfile_text):
        parts = raw.split()
        if not parts:
            continue
        keyword = parts[0].upper()
        if keyword == "ARG" and not seen_from and len(parts) > 1:
            name, _, default = parts[1].partition("=")
            args[name] = default.strip("\"'")
        elif keyword == "FROM":
            seen_from = True
            rest = [p for p in parts[1:] if not p.startswith("--")]
            if not rest:
                continue
            ref = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?",
                         lambda m: {**args, **(build_args or {})}.get(m.group(1), ""), rest[0])
            if len(rest) >= 3 and rest[1].upper() == "AS":
                stages.add(rest[2].lower())
            if ref.lower() in stages or ref == "scratch" or ref in out:
                continue
            out.append(ref)
    return out


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    buf = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            buf += stripped[:-1] + " "
            continue
        lines.append(buf + stripped)
        buf = ""
    if buf:
        lines.append(buf)
    return lines


def apt_mirror() -> str:
    """The Debian mirror apt on this machine uses (``URIs:`` of a deb822 source or a
    ``deb`` line in ``sources.list``), else ``http://deb.debian.org/debian``.

    ``$BENCHLIB_DEBIAN_MIRROR`` overrides it.
    """
    mirror = settings.DEBIAN_MIRROR.get()
    if mirror is not None:
        return mirror
    candidates = sorted(Path("/etc/apt/sources.list.d").glob("*.sources")) + [Path("/etc/apt/sources.list")]
    candidates += sorted(Path("/etc/apt/sources.list.d").glob("*.list"))
    for path in candidates:
        try:
            text = path.read_text()
        except OSError:
            continue
        for m in re.finditer(r"^\s*URIs:\s*(\S+)|^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)", text, re.M):
            uri = (m.group(1) or m.group(2)).rstrip("/")
            if uri.endswith("/debian") and "security" not in uri:
                return uri
    return _DEFAULT_MIRROR


def _try_pull(client: Any, ref: str) -> tuple[str | None, str]:
    import docker.errors

    repo, _, tag = ref.rpartition(":") if ":" in ref.split("/")[-1] else (ref, "", "latest")
    try:
        image = client.images.pull(repo, tag=tag or "latest")
        return str(image.id), ""
    except (docker.errors.APIError, docker.errors.DockerException, OSError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return None, reason[:300]


def _client(client: Any | None) -> Any:
    if client is not None:
        return client
    return shared_client()


def bootstrap_base_image(
    tag: str = DEFAULT_BASE_IMAGE,
    *,
    client: Any | None = None,
    pull: bool = True,
    force: bool = False,
    mirror: str | None = None,
    cache_dir: Path | None = None,
    timeout_s: float = 1800.0,
) -> BootstrapResult:
    """Make sure the base image ``tag`` exists in the Docker engine; create it if need be.

    In order: already present (unless ``force``); ``docker pull`` (when ``pull``); import of
    the cached root-file-system tarball; ``debootstrap --variant=minbase <suite>`` (about a
    minute; needs root and the ``debootstrap`` package) then import. The imported image
    mirrors the official one where it matters: apt sources for ``<suite>``,
    ``<suite>-updates`` and ``<suite>-security``, ``CMD ["bash"]``.

    Parameters
    ----------
    tag: the image reference; ``debian:<suite>[-slim]`` and ``rust:<version>-slim-<suite>``
        can be created locally.
    client: a ``docker.DockerClient`` (default: from the environment, ``DOCKER_HOST``).
    pull: try ``docker pull`` first.
    force: re-create it even if the engine has it (the cached tarball is reused).
    mirror: Debian mirror URL (default: :func:`apt_mirror`).
    cache_dir: where the tarball and package cache go (default ``$BENCHLIB_CACHE/images``).
    timeout_s: bound on debootstrap's run time in seconds.

    Returns
    -------
    BootstrapResult
        ``str(result)`` is one line to print, e.g.
        ``debian:bookworm-slim: debootstrapped (sha256:1a2b..., 64.2 s); ...``.

    Raises
    ------
    ParameterError: ``tag`` is not a Debian image and cannot be pulled.
    RuntimeUnavailable: no engine answers, or debootstrap is missing / not root.
    BuildError: debootstrap or the import failed (its output's tail attached).
    """
    t0 = time.monotonic()
    client = _client(client)
    if not force:
        existing = find_image(client, tag)
        if existing:
            return BootstrapResult(tag, existing, "present", time.monotonic() - t0, "already in the engine")
    pull_reason = "pull not attempted"
    if pull and not force:
        pulled, pull_reason = _try_pull(client, tag)
        if pulled:
            return BootstrapResult(tag, pulled, "pulled", time.monotonic() - t0, "from the registry")
    rust = RUST_TAG.fullmatch(tag)
    if rust:
        # the host's toolchain first (a missing one is said at once), then the Debian image of
        # the same suite (created if need be), then the image made of both
        try:
            host_rust_sysroot(rust.group("version"))
            bootstrap_base_image(f"debian:{rust.group('suite')}-slim", client=client, mirror=mirror,
                                 cache_dir=cache_dir, timeout_s=timeout_s)
            image_id, how = create_rust_image(client, tag, ca=detect_ca_bundle("auto"), timeout_s=timeout_s)
        except ParameterError as exc:
            raise ParameterError(f"base image {tag!r} is missing and cannot be pulled ({pull_reason}), "
                                 f"and cannot be made here: {exc}") from exc
        return BootstrapResult(tag, image_id, "toolchain", time.monotonic() - t0, f"{how}; pull: {pull_reason}")
    m = _DEBIAN_TAG.fullmatch(tag)
    if not m:
        raise ParameterError(
            f"base image {tag!r} is missing and cannot be pulled ({pull_reason}); only Debian images "
            f"(debian:<suite>[-slim], e.g. {DEFAULT_BASE_IMAGE}) can be created locally with debootstrap, "
            "and rust:<version>-slim-<suite> from the host's Rust toolchain of that version"
        )
    suite = m.group("suite")
    mirror = (mirror or apt_mirror()).rstrip("/")
    cache = Path(cache_dir) if cache_dir else cache_root() / "images"
    cache.mkdir(parents=True, exist_ok=True)
    arch = _dpkg_arch()
    tarball = cache / f"debian-{suite}-minbase-{arch}.tar"
    action = "imported"
    if not tarball.is_file():
        _debootstrap(suite, mirror, tarball, cache / "debs", timeout_s)
        action = "debootstrapped"
    image_id = _import(client, tarball, tag)
    detail = f"{'created with debootstrap from ' + mirror if action == 'debootstrapped' else 'from cached tarball'} " \
             f"({tarball}); pull: {pull_reason}"
    return BootstrapResult(tag, image_id, action, time.monotonic() - t0, detail)


def _dpkg_arch() -> str:
    try:
        return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)


_SOURCES = """\
Types: deb
URIs: {mirror}
Suites: {suite} {suite}-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: {security}
Suites: {suite}-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def _debootstrap(suite: str, mirror: str, tarball: Path, debs: Path, timeout_s: float) -> None:
    exe = shutil.which("debootstrap") or ("/usr/sbin/debootstrap" if Path("/usr/sbin/debootstrap").exists() else None)
    if exe is None:
        raise RuntimeUnavailable(
            "debootstrap is not installed, so the base image cannot be created locally; "
            "install it (Debian: apt-get install debootstrap) or make a registry reachable for docker pull"
        )
    if os.geteuid() != 0:
        raise RuntimeUnavailable("debootstrap needs root to create the base image; run `sudo benchlib images bootstrap`")
    debs.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="benchlib-rootfs-", dir=tarball.parent) as tmp:
        rootfs = Path(tmp) / "rootfs"
        cmd = [exe, "--variant=minbase", f"--cache-dir={debs}", suite, str(rootfs), mirror]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            err = BuildError(f"debootstrap did not finish within {timeout_s:.0f} s: {' '.join(cmd)}")
            err.add_note(_tail(str(exc.stdout or "") + str(exc.stderr or "")))
            raise err from None
        if proc.returncode != 0:
            log = proc.stdout + proc.stderr
            debootstrap_log = rootfs / "debootstrap" / "debootstrap.log"
            if debootstrap_log.is_file():
                log += "\n" + debootstrap_log.read_text(errors="replace")
            err = BuildError(f"debootstrap failed (exit {proc.returncode}): {' '.join(cmd)}")
            err.add_note(_tail(log))
            raise err
        security = mirror[: -len("/debian")] + "/debian-security" if mirror.endswith("/debian") \
            else "http://deb.debian.org/debian-security"
        (rootfs / "etc/apt/sources.list").unlink(missing_ok=True)
        (rootfs / "etc/apt/sources.list.d").mkdir(parents=True, exist_ok=True)
        (rootfs / "etc/apt/sources.list.d/debian.sources").write_text(
            _SOURCES.format(mirror=mirror, suite=suite, security=security))
        # Like the official image: no package lists or .debs in the image.
        for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for p in (rootfs / sub).glob("*"):
                if p.is_file():
                    p.unlink()
        part = tarball.with_suffix(".tar.part")
        with tarfile.open(part, "w") as tf:
            for entry in sorted(rootfs.iterdir()):
                tf.add(entry, arcname=entry.name)
        part.replace(tarball)


def _import(client: Any, tarball: Path, tag: str) -> str:
    repo, _, version = tag.rpartition(":")
    try:
        client.api.import_image_from_file(str(tarball), repository=repo, tag=version,
                                          changes=['CMD ["bash"]'])
    except Exception as exc:  # docker.errors.APIError and transport errors
        raise BuildError(f"docker import of {tarball} as {tag} failed: {exc}") from exc
    image_id = find_image(client, tag)
    if image_id is None:
        raise BuildError(f"docker import of {tarball} reported success but {tag} is not in the engine")
    return image_id


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def ensure_base_images(client: Any, dockerfile_text: str, build_args: dict[str, str] | None = None, *,
                       bootstrap: bool = True) -> list[BootstrapResult]:
    """Make every external ``FROM`` image of a Dockerfile available (see
    :func:`bootstrap_base_image`); with ``bootstrap=False`` a missing image that cannot be
    pulled raises :class:`~benchlib.core.errors.BuildError` with the command that creates it."""
    results = []
    for ref in base_images(dockerfile_text, build_args):
        if find_image(client, ref):
            continue
        if not bootstrap:
            pulled, reason = _try_pull(client, ref)
            if pulled:
                results.append(BootstrapResult(ref, pulled, "pulled", 0.0))
                continue
            raise BuildError(
                f"base image {ref!r} is not in the engine and cannot be pulled ({reason}); "
                f"create it with `benchlib images bootstrap --tag {ref}` (debootstrap) or make a registry reachable"
            )
        result = bootstrap_base_image(ref, client=client)
        record_build("base-image", ref, "docker", result.seconds, cached=False, detail=result.action)
        results.append(result)
    return results
