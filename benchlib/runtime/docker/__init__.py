"""The Docker runtime: services under test as containers, through the Docker SDK (docker-py).

:class:`DockerRuntime` (:mod:`~benchlib.runtime.docker.docker_runtime`: build, run, health,
limits read back; its docstring says how) stands on the package's other modules:
``connection`` (the engine connection, owner labels), ``handle`` (a running container),
``context`` (build context, CA bundle), ``images`` (base images without a registry),
``local_build`` (an image from the local runtime's build), ``toolchain_images`` (``rust:``
images from the host's toolchain) and ``leftovers`` (the label sweep of leftover containers).
"""

from __future__ import annotations

from benchlib.runtime.docker.connection import (
    check_endpoint_security,
    connect,
    engine_unavailable_reason,
    iter_benchlib_containers,
    owner_alive,
    owner_label,
    shared_client,
)
from benchlib.runtime.docker.context import CA_FILE_NAME, detect_ca_bundle
from benchlib.runtime.docker.docker_runtime import SEED_LIMITS, DockerRuntime
from benchlib.runtime.docker.handle import DockerHandle

__all__ = [
    "CA_FILE_NAME",
    "SEED_LIMITS",
    "DockerHandle",
    "DockerRuntime",
    "check_endpoint_security",
    "connect",
    "detect_ca_bundle",
    "engine_unavailable_reason",
    "iter_benchlib_containers",
    "owner_alive",
    "owner_label",
    "shared_client",
]
