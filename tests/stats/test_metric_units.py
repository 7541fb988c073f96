"""``stats.metrics.with_microseconds``: a study's microsecond columns from the stored milliseconds (pure)."""

from __future__ import annotations

import pandas as pd

from benchlib.stats.metrics import with_microseconds


def test_the_missing_microsecond_columns_are_added_from_milliseconds_and_nothing_else() -> None:
    s = pd.DataFrame({"p50_ms": [0.17, 0.2], "p99_ms": [1.0, 2.0], "throughput_rps": [10.0, 11.0]})
    out = with_microseconds(s, ("p50_us", "throughput_rps", "p50_us", "p999_us"))
    assert list(out.columns) == ["p50_ms", "p99_ms", "throughput_rps", "p50_us"]  # p999_ms absent: not made up
    assert out["p50_us"].tolist() == [170.0, 200.0] and "p50_us" not in s.columns  # the input is not changed


def test_columns_already_there_are_kept_and_nothing_to_add_returns_the_same_frame() -> None:
    s = pd.DataFrame({"p50_ms": [1.0], "p50_us": [999.0]})
    assert with_microseconds(s, ("p50_us",)) is s and with_microseconds(s, ("p50_ms",)) is s
