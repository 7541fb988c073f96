"""A peer load tool's report, normalized: one record for wrk, k6, ab, hey, h2load, bombardier, ghz
and the tools to come (pure).

Each ``benchlib.loadgen.peers.<tool>`` parses its tool's output into a dictionary of that tool's own
shape (wrk's ``latency_percentiles_ms``, k6's ``http_req_duration_ms``...), stored as a
trial's ``cross_check``. :func:`peer_report` turns any of them into a :class:`PeerReport` with
the adapter registered for the tool in :data:`ADAPTERS`; a new tool adds its parser in
``benchlib/loadgen/peers/`` and one adapter here. Latencies are in milliseconds;
the tool's own dictionary stays in ``raw``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from benchlib.core.errors import ParameterError
from benchlib.stats.quantiles import quantile_of
from benchlib.store.records._convert import as_float as _f

__all__ = ["ADAPTERS", "PEER_REPORT_VERSION", "PeerReport", "peer_report"]

#: Version of :class:`PeerReport` (1: Dec 2026).
PEER_REPORT_VERSION = 1


@dataclass(frozen=True)
class PeerReport:
    """What a peer tool reported for one run.

    Attributes
    ----------
    tool: the tool's name (``wrk``, ``k6``...).
    order: ``"before"`` or ``"after"`` benchlib's load in the same trial ("" outside a trial).
    failure: why the tool failed ("" when it ran); then the figures are NaN.
    requests: completed requests. dropped: requests the tool meant to send and did not
        (k6's dropped iterations), NaN when the tool does not say.
    duration_s: the tool's run time, s. requests_per_s: its rate.
    latency_ms: latency quantiles in ms, keyed by quantile (0.5, 0.95, 0.99...).
    min_ms, mean_ms, max_ms: as the tool reports them (NaN when it does not).
    errors: failed requests (transport errors and bad statuses), NaN when unknown;
        error_kinds: by the tool's own kinds.
    bytes_per_response: bytes read over requests (NaN when the tool does not say).
    cpu_fraction, cpu_s: the tool's own CPU use (share of one CPU; seconds).
    tool_version: the tool's version when recorded.
    raw: the stored dictionary, unchanged.
    """

    tool: str
    order: str = ""
    failure: str = ""
    requests: float = math.nan
    dropped: float = math.nan
    duration_s: float = math.nan
    requests_per_s: float = math.nan
    latency_ms: Mapping[float, float] = field(default_factory=dict)
    min_ms: float = math.nan
    mean_ms: float = math.nan
    max_ms: float = math.nan
    errors: float = math.nan
    error_kinds: Mapping[str, int] = field(default_factory=dict)
    bytes_per_response: float = math.nan
    cpu_fraction: float = math.nan
    cpu_s: float = math.nan
    tool_version: str = ""
    raw: Mapping[str, Any] = field(default_factory=dict)
    version: int = PEER_REPORT_VERSION

    @property
    def ok(self) -> bool:
        """The tool ran and reported."""
        return not self.failure

    def figure(self, key: str) -> float:
        """One figure by name: ``rps``, ``requests``, ``dropped``, ``errors``, ``cpu``,
        ``bytes``, ``min``, ``mean``, ``max`` or a quantile ``p50``, ``p95``, ``p999``... (ms);
        NaN when the tool does not report it."""
        simple = {"rps": self.requests_per_s, "requests": self.requests, "dropped": self.dropped,
                  "errors": self.errors, "cpu": self.cpu_fraction, "bytes": self.bytes_per_response,
                  "min": self.min_ms, "mean": self.mean_ms, "max": self.max_ms}
        if key in simple:
            return simple[key]
        q = quantile_of(key)
        if q is not None and key[1:].isdigit():
            return _f(self.latency_ms.get(round(q, 6)))
        raise ParameterError(f"unknown peer figure {key!r}; valid: {', '.join(simple)}, p<percentile>")


def _pct(d: Mapping[str, Any]) -> dict[float, float]:
    """``{"50": 1.2, "99.9": 3.4}`` (percent keys) as ``{0.5: 1.2, 0.999: 3.4}``."""
    out = {}
    for k, v in (d or {}).items():
        try:
            out[round(float(k) / 100, 6)] = float(v)
        except (TypeError, ValueError):
            continue
    return out


def _common(d: Mapping[str, Any]) -> dict[str, Any]:
    return {"cpu_fraction": _f(d.get("cpu_fraction")), "cpu_s": _f(d.get("cpu_s"))}


def _wrk(d: Mapping[str, Any]) -> dict[str, Any]:
    req = _f(d.get("requests"))
    errs = {str(k): int(v) for k, v in (d.get("errors") or {}).items()}
    return {"requests": req, "duration_s": _f(d.get("duration_s")), "requests_per_s": _f(d.get("requests_per_s")),
            "latency_ms": _pct(d.get("latency_percentiles_ms") or {}), "mean_ms": _f(d.get("latency_avg_ms")),
            "max_ms": _f(d.get("latency_max_ms")), "errors": float(sum(errs.values())) if errs else math.nan,
            "error_kinds": errs,
            "bytes_per_response": _f(d.get("bytes_read")) / req if req and d.get("bytes_read") else math.nan}


def _k6(d: Mapping[str, Any]) -> dict[str, Any]:
    trend = d.get("http_req_duration_ms") or {}
    lat = {round(float(k[2:-1]) / 100, 6): _f(v) for k, v in trend.items() if k.startswith("p(") and k.endswith(")")}
    if "med" in trend:  # k6's median (its p(50) may be interpolated differently)
        lat[0.5] = _f(trend["med"])
    reqs = _f(d.get("http_reqs"))
    failed = _f(d.get("http_req_failed_rate"))
    offered = d.get("offered") or {}
    return {"requests": reqs, "dropped": _f(d.get("dropped_iterations")),
            "duration_s": _f(offered.get("duration_s")), "requests_per_s": _f(d.get("http_reqs_per_s")),
            "latency_ms": lat, "min_ms": _f(trend.get("min")), "mean_ms": _f(trend.get("avg")),
            "max_ms": _f(trend.get("max")), "errors": round(failed * reqs) if failed == failed and reqs == reqs
            else math.nan, "tool_version": str(d.get("k6_version") or "")}


def _ab(d: Mapping[str, Any]) -> dict[str, Any]:
    failed, non2xx = d.get("failed"), d.get("non_2xx")
    return {"requests": _f(d.get("requests")), "duration_s": _f(d.get("duration_s")),
            "requests_per_s": _f(d.get("requests_per_s")), "latency_ms": _pct(d.get("latency_percentiles_ms") or {}),
            "mean_ms": _f(d.get("latency_mean_ms")), "max_ms": _f(d.get("longest_ms")),
            "errors": float((failed or 0) + (non2xx or 0)) if failed is not None else math.nan,
            "error_kinds": {"failed": int(failed or 0), "non_2xx": int(non2xx or 0)}}


def _hey(d: Mapping[str, Any]) -> dict[str, Any]:
    errs = {str(k): int(v) for k, v in (d.get("errors") or {}).items()}
    bad = sum(n for s, n in (d.get("status_counts") or {}).items() if not 100 <= int(s) < 400)
    return {"requests": _f(d.get("requests")), "duration_s": _f(d.get("duration_s")),
            "requests_per_s": _f(d.get("requests_per_s")), "latency_ms": _pct(d.get("latency_percentiles_ms") or {}),
            "min_ms": _f(d.get("latency_min_ms")), "mean_ms": _f(d.get("latency_avg_ms")),
            "max_ms": _f(d.get("latency_max_ms")), "errors": float(sum(errs.values()) + bad), "error_kinds": errs}


def _h2load(d: Mapping[str, Any]) -> dict[str, Any]:
    kinds = {k: int(d[k]) for k in ("failed", "errored", "timeout", "non_2xx") if d.get(k) is not None}
    # percentiles only from its per-request log (--log-file); its report has none
    return {"requests": _f(d.get("requests")), "duration_s": _f(d.get("duration_s")),
            "requests_per_s": _f(d.get("requests_per_s")), "latency_ms": _pct(d.get("latency_percentiles_ms") or {}),
            "min_ms": _f(d.get("latency_min_ms")), "mean_ms": _f(d.get("latency_avg_ms")),
            "max_ms": _f(d.get("latency_max_ms")),
            "errors": float(kinds.get("failed", 0) + kinds.get("errored", 0) + kinds.get("non_2xx", 0)) if kinds
            else math.nan, "error_kinds": kinds}


def _bombardier(d: Mapping[str, Any]) -> dict[str, Any]:
    req = _f(d.get("requests"))
    errs = {str(k): int(v) for k, v in (d.get("errors") or {}).items()}
    non2xx = d.get("non_2xx")  # every answer that is not 2xx, failed requests ("others") included
    return {"requests": req, "duration_s": _f(d.get("duration_s")), "requests_per_s": _f(d.get("requests_per_s")),
            "latency_ms": _pct(d.get("latency_percentiles_ms") or {}), "mean_ms": _f(d.get("latency_avg_ms")),
            "max_ms": _f(d.get("latency_max_ms")), "errors": _f(non2xx),
            "error_kinds": {**errs, "non_2xx": int(non2xx or 0)},
            "bytes_per_response": _f(d.get("bytes_read")) / req if req and d.get("bytes_read") else math.nan,
            "tool_version": str(d.get("bombardier_version") or "")}


def _ghz(d: Mapping[str, Any]) -> dict[str, Any]:
    errs = {str(k): int(v) for k, v in (d.get("errors") or {}).items()}
    non_ok = d.get("non_ok")  # every call whose gRPC status is not OK, transport failures included
    return {"requests": _f(d.get("requests")), "duration_s": _f(d.get("duration_s")),
            "requests_per_s": _f(d.get("requests_per_s")), "latency_ms": _pct(d.get("latency_percentiles_ms") or {}),
            "min_ms": _f(d.get("latency_min_ms")), "mean_ms": _f(d.get("latency_avg_ms")),
            "max_ms": _f(d.get("latency_max_ms")), "errors": _f(non_ok),
            "error_kinds": {**{k: int(v) for k, v in (d.get("status_counts") or {}).items() if k != "OK"}, **errs},
            "tool_version": str(d.get("ghz_version") or "")}


#: tool -> adapter from its parse result (``benchlib.loadgen.peers.<tool>``) to :class:`PeerReport` fields.
ADAPTERS: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
    "wrk": _wrk, "k6": _k6, "ab": _ab, "hey": _hey, "h2load": _h2load, "bombardier": _bombardier,
    "ghz": _ghz,
}


def peer_report(d: Mapping[str, Any], *, tool: str | None = None) -> PeerReport:
    """The normalized report of a stored cross-check or a ``benchlib.loadgen.peers`` parse result.

    Raises
    ------
    ParameterError  when the tool has no adapter (naming the tools that have one).
    """
    name = str(tool or d.get("tool") or "")
    if name not in ADAPTERS:
        raise ParameterError(f"no peer report adapter for tool {name!r}; valid: {', '.join(ADAPTERS)} "
                             "(add one to benchlib.store.records.peer.ADAPTERS)")
    order = str(d.get("order") or "")
    if d.get("error"):
        return PeerReport(name, order=order, failure=str(d["error"]), raw=dict(d))
    return PeerReport(name, order=order, raw=dict(d), **_common(d), **ADAPTERS[name](d))
