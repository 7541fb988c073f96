"""Helpers shared by the service tests, as fixtures (``--import-mode=importlib`` keeps test
modules from importing one another)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable

import pytest

from benchlib.runtime.manifest import find_services_dir


def _listening_addresses(pid: int) -> set[str]:
    out = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    return {line.split()[3] for line in out.splitlines() if f"pid={pid}," in line}


def _untracked_in_services(names: Iterable[str]) -> set[str]:
    out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--ignored", "--", *names],
                         cwd=find_services_dir(), capture_output=True, text=True, check=False)
    return {line for line in out.stdout.splitlines() if line.startswith(("??", "!!"))}


@pytest.fixture(scope="session")
def listening_addresses() -> Callable[[int], set[str]]:
    """A function: the local addresses (``host:port``) of every TCP socket a pid listens on (via ``ss``)."""
    return _listening_addresses


@pytest.fixture(scope="session")
def untracked_in_services() -> Callable[[Iterable[str]], set[str]]:
    """A function: the untracked and ignored files (``git status`` lines) in the named
    ``services/`` folders, to show that building and running wrote nothing into the clone."""
    return _untracked_in_services
