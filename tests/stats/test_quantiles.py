"""Quantile names both ways: one convention for the summaries, the peers and the planner."""

from __future__ import annotations

import pytest

from benchlib.stats.quantiles import quantile_column, quantile_key, quantile_of
from benchlib.stats.summary import DECILES, QUANTILES


@pytest.mark.parametrize("q", [*QUANTILES, *DECILES, 0.01, 0.75, 0.95, 0.9999])
def test_names_and_quantiles_are_inverses(q: float) -> None:
    assert quantile_of(quantile_key(q)) == pytest.approx(q, abs=1e-12)
    assert quantile_of(quantile_column(q)) == pytest.approx(q, abs=1e-12)


def test_names() -> None:
    assert [quantile_key(q) for q in (0.5, 0.9, 0.99, 0.999)] == ["p50", "p90", "p99", "p999"]
    assert quantile_column(0.9999) == "p9999_ms"
    assert quantile_of("p50_us") == 0.5
    assert [quantile_of(n) for n in ("max", "throughput_rps", "d1_ms", "p50ms", "")] == [None] * 5
