"""Latency quantiles and their names, both ways (pure; the one home of the convention).

A quantile ``q`` is named ``p`` and its percentage without the point: 0.5 -> ``p50``,
0.99 -> ``p99``, 0.999 -> ``p999``, 0.9999 -> ``p9999``. A summary column adds its unit
(``p50_ms``); a peer tool's figure has none (``p50``). Every reader of those names (the
summaries, the comparison's notes, the planner, the peer reports and tables) goes through here.
"""

from __future__ import annotations

import re

__all__ = ["quantile_column", "quantile_key", "quantile_of"]

_QUANTILE = re.compile(r"^p(\d+)(?:_[a-z]+)?$")


def quantile_key(q: float) -> str:
    """The figure name of quantile ``q`` (no unit): 0.5 -> ``p50``, 0.999 -> ``p999``."""
    return "p" + f"{q * 100:.6g}".replace(".", "")


def quantile_column(q: float) -> str:
    """The summary column of latency quantile ``q`` (ms): 0.5 -> ``p50_ms``, 0.999 -> ``p999_ms``."""
    return quantile_key(q) + "_ms"


def quantile_of(name: str) -> float | None:
    """The quantile a figure or metric name stands for: ``p50`` and ``p50_ms`` -> 0.5,
    ``p999_us`` -> 0.999, ``p95`` -> 0.95; ``None`` for other names (``max``,
    ``throughput_rps``). The inverse of :func:`quantile_key` and :func:`quantile_column` for
    quantiles from 0.01 up."""
    m = _QUANTILE.match(name)
    if m is None:
        return None
    d = m.group(1)
    return int(d) / 10 ** len(d) if len(d) > 2 else int(d) / 100
