"""benchlib's load generator: open and closed models on a raw uvloop protocol engine.

Public contract (see ``docs/architecture.md`` and ``docs/loadgen.md``)::

    from benchlib.loadgen import run_load, validate, LoadResult
    result = run_load(spec, target, client_cpus=[0], seed=0, on_progress=None)
    result.rows   # benchlib.core.schema.ROW_DTYPE, all workers merged, sorted by t_intended_ns
    result.meta   # JSON-able dict: offered/achieved rate, errors, lag, client CPU, valid, ...
"""

from __future__ import annotations

from benchlib.loadgen.launch import LoadResult, run_load
from benchlib.loadgen.preflight import validate

__all__ = ["LoadResult", "run_load", "validate"]
