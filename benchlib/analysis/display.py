"""Showing tables and text in a notebook, and the words for metrics: one place for display.

* :func:`show` renders a Markdown string or a table in a notebook (prints elsewhere);
* :func:`table` styles a DataFrame for a report (no index, numbers through
  :func:`benchlib.analysis.formats.num`, missing values blank or ``–``, cells never cut);
* :func:`metric_words` names a summary metric in words (``median latency (p50)``), for any
  metric: known ones from :data:`METRIC_WORDS`, quantile columns in any unit (``p99_us`` ->
  ``p99 latency``), others by their name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from benchlib.analysis.formats import num

__all__ = ["METRIC_WORDS", "metric_words", "show", "table"]

#: Words for the summary metrics a report names (extend it for a study's own metrics).
METRIC_WORDS: dict[str, str] = {
    "p50_ms": "median latency (p50)", "p90_ms": "p90 latency", "p99_ms": "p99 latency", "p999_ms": "p99.9 latency",
    "mean_ms": "mean latency", "throughput_rps": "throughput", "goodput_rps": "goodput (successful responses/s)",
    "error_rate": "error rate",
    "service_p50_ms": "median service time",
    "server_cpu_us_per_req": "server CPU time per request", "front_cpu_us_per_req": "front CPU time per request",
    "server_cpu_frac": "server CPU use (CPUs)",
}

_QUANTILE = re.compile(r"^p(\d+)_(ms|us|s)$")


def metric_words(metric: str, words: Mapping[str, str] | None = None) -> str:
    """A metric in words: ``words`` first, then :data:`METRIC_WORDS`, then quantile columns of
    any unit (``p50_us`` -> ``median latency (p50)``, ``p95_ms`` -> ``p95 latency``), else the name."""
    for table_ in (words or {}, METRIC_WORDS):
        if metric in table_:
            return table_[metric]
    m = _QUANTILE.match(metric)
    if m:
        digits = m.group(1)
        label = digits[:2] + ("." + digits[2:] if len(digits) > 2 else "")
        return "median latency (p50)" if label == "50" else f"p{label} latency"
    return metric


def show(obj: Any) -> None:
    """Render a Markdown string or a DataFrame (or Styler) in a notebook; print it elsewhere.
    An empty string shows nothing."""
    if isinstance(obj, str) and not obj:
        return
    try:
        from IPython.display import Markdown, display
    except ImportError:  # pragma: no cover - IPython comes with ipykernel
        print(obj)
        return
    if isinstance(obj, str):
        display(Markdown(obj))
    else:
        display(obj)


def table(df: Any) -> Any:
    """``df`` for display in a report: no index column, floats through
    :func:`~benchlib.analysis.formats.num` (3 significant digits, thousands separated, missing as
    ``–``), missing non-numbers blank, cells never truncated."""
    floats = [c for c in df.columns if df[c].dtype.kind == "f"]
    others = [c for c in df.columns if c not in floats]
    return (df.style.hide(axis="index").format(num, subset=floats)
            .format(lambda v: "" if v is None or (isinstance(v, float) and v != v) else v, subset=others))
