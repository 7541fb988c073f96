"""Shared fixtures of the runtime tests.

Tests marked ``docker`` need a real Docker engine; ``tests/conftest.py`` skips them with the
reason when none answers.
"""

from __future__ import annotations

import os
from typing import Any

import pytest


@pytest.fixture(scope="session")
def docker_client() -> Any:
    """A connected ``docker.DockerClient`` (the engine of ``$DOCKER_HOST``)."""
    from benchlib.runtime.docker import connect, engine_unavailable_reason

    reason = engine_unavailable_reason()
    if reason is not None:
        pytest.skip(f"no Docker engine: {reason}")
    client = connect()
    yield client
    client.close()


@pytest.fixture(scope="session")
def base_image(docker_client: Any) -> str:
    """``debian:bookworm-slim`` in the engine: pulled, imported from the cached tarball, or
    created with debootstrap (the first run on a fresh machine: about a minute)."""
    from benchlib.runtime.docker.images import DEFAULT_BASE_IMAGE, bootstrap_base_image

    result = bootstrap_base_image(DEFAULT_BASE_IMAGE, client=docker_client)
    print(f"\nbase image: {result}")
    return result.image_id


@pytest.fixture(scope="session")
def docker_runtime(docker_client: Any, base_image: str) -> Any:
    """A DockerRuntime on the default engine, checked (so leftovers of dead runs are swept)."""
    from benchlib.runtime.docker import DockerRuntime

    rt = DockerRuntime()
    rt.check()
    return rt


@pytest.fixture(scope="session")
def prepared_services(docker_runtime: Any) -> dict[str, Any]:
    """Both quickstart services built (or their cached images reused), with build times."""
    import time

    from benchlib.runtime.manifest import get_manifest

    out = {}
    for name in ("go-nethttp-hello", "python-aiohttp-hello"):
        t0 = time.monotonic()
        prepared = docker_runtime.prepare(get_manifest(name).resolve())
        print(f"\n{name}: {'built' if prepared.built else 'cached'} in {time.monotonic() - t0:.1f} s "
              f"({prepared.info['tag']})")
        out[name] = prepared
    return out


@pytest.fixture()
def run_id(request: pytest.FixtureRequest) -> str:
    """A run id unique to the test (labels its containers), swept afterwards."""
    import re

    rid = "t" + re.sub(r"[^a-z0-9]+", "-", request.node.name.lower())[:40] + f"-{os.getpid()}"
    yield rid
    from benchlib.runtime.docker import engine_unavailable_reason

    if engine_unavailable_reason() is None:
        from benchlib.runtime.cleanup import sweep

        sweep(rid, include_cgroups=False)
