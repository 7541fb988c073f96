"""Runtimes that build, start and stop services under test, picked by name.

``get_runtime("local")`` (the default) runs services as local processes;
``get_runtime("docker")`` runs them as containers through the Docker SDK. The interface is
in :mod:`benchlib.runtime.base`.
"""

from __future__ import annotations

from typing import Any

from benchlib.core.errors import ParameterError
from benchlib.runtime.base import Prepared, Runtime, ServiceHandle, StartOptions, StopInfo

__all__ = ["RUNTIMES", "Prepared", "Runtime", "ServiceHandle", "StartOptions", "StopInfo", "get_runtime"]

#: Runtime names and the classes implementing them (imported lazily: docker is optional).
RUNTIMES: dict[str, str] = {
    "local": "benchlib.runtime.local:LocalRuntime",
    "docker": "benchlib.runtime.docker:DockerRuntime",
}


def get_runtime(name: str = "local", **options: Any) -> Runtime:
    """The runtime called ``name`` (``"local"`` or ``"docker"``), constructed with ``options``.

    Raises
    ------
    ParameterError
        for an unknown name, listing the valid ones.
    """
    import importlib

    if not isinstance(name, str) or name not in RUNTIMES:
        raise ParameterError(f"unknown runtime {name!r}; valid: {', '.join(RUNTIMES)}")
    module_name, cls_name = RUNTIMES[name].split(":")
    cls = getattr(importlib.import_module(module_name), cls_name)
    runtime: Runtime = cls(**options)
    return runtime
