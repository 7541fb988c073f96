"""Fixtures for the load generator's tests: real servers on 127.0.0.1."""

from __future__ import annotations

import os

import pytest

from benchlib.core.model import Target
from benchlib.loadgen.testservers import serve


def server_cpus() -> list[int] | None:
    """Pin test servers to CPU 1 and clients to CPU 0 when the machine has two CPUs."""
    cpus = sorted(os.sched_getaffinity(0))
    return [cpus[-1]] if len(cpus) > 1 else None


def client_cpus() -> list[int] | None:
    cpus = sorted(os.sched_getaffinity(0))
    return [cpus[0]] if len(cpus) > 1 else None


@pytest.fixture(scope="module")
def hello_target() -> Target:
    with serve("hello", cpus=server_cpus()) as (host, port):
        yield Target(host, port)
