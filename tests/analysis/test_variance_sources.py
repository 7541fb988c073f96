"""The variance-sources table on constructed windows and trial facts (pure)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis.variance_sources import table_markdown, variance_table, warmup_end
from benchlib.core.errors import ParameterError


def _windows(mode: str, between: float, within_sd: float, *, trials: int = 12, d: float = 2.0, seed: int = 0) -> list[dict]:
    """Windows of trials whose log p50 = level_b + noise; level_b ~ N(0, between^2), each of
    the k windows adds N(0, within_sd^2 * k) (so the whole trial's within SD is within_sd)."""
    rng = np.random.default_rng(seed)
    out = []
    for b in range(trials):
        level = math.log(10.0) + rng.normal(0, between)
        for k in (1, 2, 4, 8):
            xs = level + rng.normal(0, within_sd * math.sqrt(k), size=k)
            if k == 1:
                xs = np.array([level + rng.normal(0, within_sd)])
            for j, x in enumerate(xs):
                out.append({"mode": mode, "condition": "c", "arm": "a", "block": b, "valid": True, "kind": "split",
                            "k": k, "frac": 1 / k, "j": j, "window_s": d / k, "p50_ms": math.exp(x),
                            "throughput_rps": 1000.0})
    return out


def _facts(mode: str, wall: float, *, trials: int = 12, disturbed: int = 0, start: float = 1.0, end: float = 0.5) -> list[dict]:
    return [{"mode": mode, "condition": "c", "arm": "a", "block": b, "valid": True, "gap_s": wall, "warmup_s": 1.0,
             "requests": math.nan, "window_start_s": start, "warmup_end_s": end if b else 2.0, "client_cpu": 0.4,
             "disturbed": b < disturbed, "server_excess": 0.01 * b, "client_excess": 0.0, "steal": 0.0,
             "slowdown": 1.0, "server_slowdown": 1.0 + 0.05 * b, "run_id": f"r-{mode}"} for b in range(trials)]


def test_components_restart_cost_and_warmup():
    wins = pd.DataFrame(_windows("fresh", 0.10, 0.01) + _windows("kept", 0.0, 0.01, seed=1))
    facts = pd.DataFrame(_facts("fresh", 4.0, disturbed=2) + _facts("kept", 3.25))
    t = variance_table(wins, facts, metrics=("p50_ms",), blocks=10)
    assert list(t["mode"]) == ["fresh", "kept"]
    fresh, kept = t.iloc[0], t.iloc[1]
    # the between component dominates with fresh services and vanishes when they are kept
    assert 5.0 < fresh["between_pct"] < 20.0 and fresh["between_share_pct"] > 90.0
    assert kept["between_pct"] < fresh["between_pct"] / 3
    assert 0.5 < fresh["within_pct"] < 2.0
    assert fresh["restart_s"] == pytest.approx(0.75) and kept["restart_s"] == pytest.approx(0.75)
    assert fresh["after_warmup"] == "11/12"  # block 0's warm-up ends (2 s) after its window starts (1 s)
    assert fresh["disturbed"] == 2 and fresh["server_excess"] == pytest.approx(0.11)
    assert fresh["server_slowdown"] == pytest.approx(1.55)  # the worst trial's, the service CPU's canary
    assert fresh["mde_pct"] > kept["mde_pct"] > 0
    assert fresh["run_id"] == "r-fresh"
    md = table_markdown(t)
    assert md.splitlines()[0].startswith("| mode | condition | arm | metric |") and "11/12" in md


def test_mde_grows_with_the_components():
    facts = pd.DataFrame(_facts("fresh", 4.0))
    low = variance_table(pd.DataFrame(_windows("fresh", 0.02, 0.01)), facts, metrics=("p50_ms",))
    high = variance_table(pd.DataFrame(_windows("fresh", 0.2, 0.01)), facts, metrics=("p50_ms",))
    assert low.iloc[0]["mde_pct"] < high.iloc[0]["mde_pct"]
    assert math.isnan(low.iloc[0]["restart_s"])  # no kept run: no restart cost


def test_bad_input_is_named():
    with pytest.raises(ParameterError, match="mode"):
        variance_table(pd.DataFrame([{"condition": "c", "arm": "a", "block": 0}]), pd.DataFrame())
    with pytest.raises(ParameterError, match="blocks"):
        variance_table(pd.DataFrame(_windows("fresh", 0.1, 0.01)), pd.DataFrame(_facts("fresh", 1.0)), blocks=1)


def test_warmup_end_finds_a_slow_start():
    rng = np.random.default_rng(3)
    t = np.linspace(0, 4, 4000)
    lat = np.where(t < 0.8, math.log(3.0), math.log(1.0)) + rng.normal(0, 0.05, t.size)
    assert warmup_end(t, lat) == pytest.approx(0.8, abs=0.1)
    assert warmup_end(t, math.log(1.0) + rng.normal(0, 0.05, t.size)) == 0.0
    assert math.isnan(warmup_end(t[:10], lat[:10]))
