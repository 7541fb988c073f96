"""Shared test set-up: tests marked ``docker`` are skipped, with the reason and the command
that starts an engine, when no Docker engine answers; every other test runs as usual."""

from __future__ import annotations

import functools

import pytest


@functools.lru_cache(maxsize=1)
def docker_unavailable_reason() -> str | None:
    """``None`` when a Docker engine answers, else why not (cached for the session)."""
    from benchlib.runtime.docker import engine_unavailable_reason

    reason = engine_unavailable_reason()
    if reason is None:
        return None
    return f"{reason} (the docker-marked tests need an engine: `sudo scripts/docker-engine.sh start`)"


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("docker") is not None:
        reason = docker_unavailable_reason()
        if reason is not None:
            pytest.skip(f"no Docker engine: {reason}")
