"""The explain-the-ratio arithmetic of :mod:`benchlib.analysis.client_cost` (pure, on
numbers with known answers)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from benchlib.analysis.client_cost import ClientPair, client_cost_table, ratio_table, ratio_without_client


def test_ratio_without_client_takes_each_paths_cost_out() -> None:
    # gRPC 100 µs, JSON 200 µs; the client costs 20 on gRPC and 40 on JSON
    r = ratio_without_client(100.0, 200.0, 20.0, 40.0, 30.0, 50.0)
    assert r.ratio == 0.5
    assert r.without_client == pytest.approx(80 / 160)
    assert r.without_path == pytest.approx(70 / 150)
    assert r.client_share == pytest.approx((20 - 40) / (100 - 200))  # 0.2 of the 100 µs gap is the client's
    # the client costs more on the faster path: taking it out widens the gap
    wider = ratio_without_client(100.0, 200.0, 50.0, 40.0)
    assert wider.without_client == pytest.approx(50 / 160) and wider.without_client < wider.ratio
    assert wider.client_share == pytest.approx(-0.1)
    # all of the difference is the client's
    assert ratio_without_client(100.0, 150.0, 10.0, 60.0).without_client == pytest.approx(1.0)
    assert ratio_without_client(100.0, 150.0, 10.0, 60.0).client_share == pytest.approx(1.0)


def test_what_cannot_be_computed_is_nan_and_bad_latencies_are_refused() -> None:
    r = ratio_without_client(100.0, 100.0, 10.0, 20.0)
    assert r.ratio == 1.0 and math.isnan(r.client_share)  # no difference to explain
    assert math.isnan(r.without_path)  # the canned path not measured
    assert math.isnan(ratio_without_client(100.0, 200.0, 120.0, 40.0).without_client)  # cost above the latency
    with pytest.raises(ValueError, match="l_b must be a latency above 0"):
        ratio_without_client(100.0, 0.0, 1.0, 1.0)


def _trials(blocks: int = 8) -> pd.DataFrame:
    rows = []
    for b in range(blocks):
        j = 1 + 0.01 * (b % 3)  # a little noise, the same in every arm of a block
        for arm, p50, client in (("go-grpc-small", 100, 30), ("go-json-small", 200, 20),
                                 ("canned-grpc-small", 40, 30), ("canned-json-small", 30, 20)):
            rows.append({"condition": "c1", "arm": arm, "block": b, "p50_us": p50 * j, "client_us": client * j})
    return pd.DataFrame(rows)


def test_ratio_table_summarizes_the_blocks() -> None:
    pair = ClientPair("go small", "go-grpc-small", "go-json-small", "canned-grpc-small", "canned-json-small")
    t = ratio_table(_trials(), [pair], "c1", label="gRPC / JSON").iloc[0]
    assert t["group"] == "go small" and t["blocks"] == 8
    assert t["gRPC / JSON"] == pytest.approx(0.5, abs=1e-3)
    assert t["gRPC / JSON, client CPU taken out"] == pytest.approx(70 / 180, abs=1e-3)
    assert t["gRPC / JSON, canned path taken out (bound)"] == pytest.approx(60 / 170, abs=1e-3)
    assert t["client's share of the latency difference"] == pytest.approx(-0.1, abs=1e-3)
    lo, hi = (float(x) for x in t["gRPC / JSON: 95% interval"].strip("[]").split(","))
    assert lo <= 0.5 <= hi
    # a block without one of the four arms is left out
    short = ratio_table(_trials()[lambda d: ~((d["block"] == 0) & (d["arm"] == "canned-json-small"))], [pair], "c1")
    assert short.iloc[0]["blocks"] == 7
    # a block whose median is NaN (its summary left it out) is left out too
    nan = _trials().assign(p50_us=lambda d: d["p50_us"].where((d["block"] != 1) | (d["arm"] != "go-grpc-small")))
    assert ratio_table(nan, [pair], "c1").iloc[0]["blocks"] == 7
    # too few blocks for an interval says so
    assert ratio_table(_trials(2), [pair], "c1").iloc[0]["a / b: 95% interval"] == "too few trials"


def test_client_cost_table_per_path() -> None:
    t = client_cost_table(_trials(), {"canned-grpc-small": "gRPC, small", "canned-json-small": "JSON, small"})
    assert list(t["path"]) == ["gRPC, small", "JSON, small"] and list(t["trials"]) == [8, 8]
    assert t.iloc[0]["client CPU per call (µs)"] == pytest.approx(30.3, abs=0.1)
    assert t.iloc[1]["latency against the canned server (µs)"] == pytest.approx(30.3, abs=0.1)
    assert t.iloc[0]["its 95% interval"].startswith("[")
