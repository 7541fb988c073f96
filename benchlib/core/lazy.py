"""Lazy package exports (PEP 562): a package's public names, imported on first use.

``import benchlib`` and ``import benchlib.analysis.plots`` stay light (no pandas, no Docker
SDK, nothing of the I/O layers) while ``from benchlib import run_study`` still works::

    __getattr__, __dir__ = lazy_exports(__name__, {"Arm": "benchlib.core.model", ...})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``: ``exports`` maps each public name to
    the module that defines it; the value is imported on first access and cached in the
    package's namespace."""
    names = dict(exports)

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(names)

    return __getattr__, __dir__
