"""What each summary metric means for a comparison: which direction is better, whether it is
compared as a ratio (log scale) or a difference, its unit and the words of its verdicts (pure).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from benchlib.core.errors import ParameterError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RATE_METRICS", "MetricInfo", "metric_info", "with_microseconds"]


@dataclass(frozen=True)
class MetricInfo:
    """How one metric is compared.

    Attributes
    ----------
    name:
        Column name.
    better:
        ``"lower"`` or ``"higher"``.
    scale:
        ``"log"`` (effect = ratio arm/baseline) or ``"linear"`` (effect = difference).
    unit:
        Unit shown in reports (``ms``, ``req/s``, ``%``).
    good, bad:
        Verdict words for a change in the better / worse direction.
    """

    name: str
    better: str
    scale: str
    unit: str
    good: str
    bad: str

    @property
    def label(self) -> str:
        """Short label for tables (``p50``, ``throughput``, ``errors``)."""
        n = self.name
        for suffix in ("_ms", "_us", "_rps", "_s"):
            if n.endswith(suffix):
                n = n[: -len(suffix)]
        return {"error_rate": "errors"}.get(n, n)

    def is_good(self, log_or_diff: float) -> bool:
        """Whether an effect (log ratio or difference, arm minus baseline) is an improvement."""
        return log_or_diff < 0 if self.better == "lower" else log_or_diff > 0


#: the failure-rate columns (a difference in percentage points, not a ratio)
RATE_METRICS: frozenset[str] = frozenset({"error_rate", "timeout_rate"})


def metric_info(name: str, better: Mapping[str, str] | None = None) -> MetricInfo:
    """The :class:`MetricInfo` of a summary column.

    Known: ``*_ms``, ``*_us`` and ``*_s`` (latency: lower is better, ratio), ``*_us_per_req`` (a
    cost per request in µs, such as server CPU time: lower is better, ratio), ``*_rps`` (throughput:
    higher is better, ratio), ``error_rate`` (lower is better, difference in percentage
    points). Other columns need an entry in ``better`` (``{"cpu_pct": "lower"}``).

    Raises
    ------
    ParameterError
        For a column whose direction is unknown, or a direction other than lower/higher.
    """
    override = (better or {}).get(name)
    if override is not None and override not in ("lower", "higher"):
        raise ParameterError(f"better[{name!r}]={override!r}; choose 'lower' or 'higher'")
    if name in RATE_METRICS:
        return MetricInfo(name, override or "lower", "linear", "%", "fewer errors", "more errors")
    if name.endswith("_rps"):
        return MetricInfo(name, override or "higher", "log", "req/s", "faster", "slower")
    if name.endswith("_ms"):
        return MetricInfo(name, override or "lower", "log", "ms", "faster", "slower")
    if name.endswith("_us_per_req"):  # a cost per request (server CPU time)
        return MetricInfo(name, override or "lower", "log", "µs", "cheaper", "costlier")
    if name.endswith("_us"):
        return MetricInfo(name, override or "lower", "log", "µs", "faster", "slower")
    if name.endswith("_s"):
        return MetricInfo(name, override or "lower", "log", "s", "faster", "slower")
    if override is not None:
        return MetricInfo(name, override, "log", "", "better", "worse")
    raise ParameterError(
        f"metric {name!r}: unknown direction; known metrics end in _ms, _us, _s (lower is better), _rps "
        "(higher is better) or are error_rate; for others pass better={name: 'lower' or 'higher'}"
    )


def with_microseconds(summaries: pd.DataFrame, metrics: Iterable[str]) -> pd.DataFrame:
    """``summaries`` with each ``<x>_us`` of ``metrics`` it lacks added from its ``<x>_ms``
    column (x 1000: a study that reports in a seed's microseconds; ratios do not change with
    the unit). Other metrics, and ``_us`` columns already there, are left alone; a copy is
    returned when anything was added."""
    add = {m: summaries[f"{m[:-3]}_ms"] * 1e3 for m in dict.fromkeys(metrics)
           if m.endswith("_us") and m not in summaries.columns and f"{m[:-3]}_ms" in summaries.columns}
    return summaries.assign(**add) if add else summaries
