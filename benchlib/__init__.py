"""benchlib: reproducible, statistically rigorous web-service benchmarks as Jupyter notebooks.

The public surface is listed in ``__all__``; names are imported lazily, so ``import
benchlib`` is fast and works on a machine with no Docker engine.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "Arm": "benchlib.model",
    "BenchlibError": "benchlib.errors",
    "Limits": "benchlib.model",
    "LoadSpec": "benchlib.model",
    "Run": "benchlib.results",
    "Stage": "benchlib.model",
    "Target": "benchlib.model",
    "UserError": "benchlib.errors",
    "load_manifest": "benchlib.manifest",
    "open_run": "benchlib.results",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'benchlib' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
