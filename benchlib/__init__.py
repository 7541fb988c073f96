"""benchlib: reproducible, statistically rigorous web-service benchmarks as Jupyter notebooks.

The public surface is listed in ``__all__``: what a study notebook calls (:func:`run_study`
and what it returns, :func:`show`, :func:`table`, :func:`load_reference`; a study's own
helpers and the report's other tables are in :mod:`benchlib.analysis`), the experiment's model
for running one of your own (:class:`Experiment` of :class:`Arm` x :class:`Condition`,
:func:`run_experiment`), and stored runs (:func:`open_run` -> :class:`Run`). Names are imported
lazily, so ``import benchlib`` is fast and works on a machine with no Docker engine.
"""

from __future__ import annotations

from benchlib.core.lazy import lazy_exports
from benchlib.core.version import VERSION as __version__  # noqa: F401 - in __all__ below

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    "Arm": "benchlib.core.model",
    "BenchlibError": "benchlib.core.errors",
    "Condition": "benchlib.core.model",
    "CrossCheck": "benchlib.core.model",
    "Experiment": "benchlib.core.model",
    "Limits": "benchlib.core.model",
    "LoadSpec": "benchlib.core.model",
    "Run": "benchlib.store.results",
    "Stage": "benchlib.core.model",
    "StudyRun": "benchlib.analysis.notebook",
    "Target": "benchlib.core.model",
    "UserError": "benchlib.core.errors",
    "load_manifest": "benchlib.runtime.manifest",
    "load_reference": "benchlib.analysis.reference",
    "open_run": "benchlib.store.results",
    "run_experiment": "benchlib.run.runner",
    "run_study": "benchlib.analysis.notebook",
    "show": "benchlib.analysis.display",
    "table": "benchlib.analysis.display",
}

__all__ = sorted([*_EXPORTS, "__version__"])

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
