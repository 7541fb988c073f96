"""benchlib: reproducible, statistically rigorous web-service benchmarks as Jupyter notebooks.

The public surface is listed in ``__all__``; names are imported lazily, so ``import
benchlib`` is fast and works on a machine with no Docker engine.
"""

from __future__ import annotations

from benchlib.core.lazy import lazy_exports
from benchlib.core.version import VERSION as __version__

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "Arm": "benchlib.core.model",
    "BenchlibError": "benchlib.core.errors",
    "Limits": "benchlib.core.model",
    "LoadSpec": "benchlib.core.model",
    "Run": "benchlib.store.results",
    "Stage": "benchlib.core.model",
    "Target": "benchlib.core.model",
    "UserError": "benchlib.core.errors",
    "load_manifest": "benchlib.runtime.manifest",
    "open_run": "benchlib.store.results",
}

__all__ = sorted([*_EXPORTS, "__version__"])

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
