"""HdrHistogram export and the wrk-shaped report, from a real trial."""

from __future__ import annotations

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from benchlib.core.model import LoadSpec
from benchlib.core.schema import ROW_DTYPE
from benchlib.loadgen import run_load
from benchlib.loadgen.export import (
    format_time_us,
    latency_us,
    to_hdr_histogram,
    write_hgrm,
    write_hlog,
    wrk_latency_table,
)
from benchlib.loadgen.peers.wrk import parse_wrk


@pytest.fixture(scope="module")
def trial(hello_target):
    return run_load(LoadSpec(connections=4, duration_s=1.2, warmup_s=0.2), hello_target)


def test_hdr_histogram_matches_the_rows(trial):
    us = latency_us(trial)
    h = to_hdr_histogram(trial)
    assert h.get_total_count() == len(us) == trial.meta["requests"]["measure"]
    ranked = np.sort(us)
    for q in (50, 90, 99):
        # HdrHistogram's rank is round-half-up(q n), not numpy's inverted-CDF ceil(q n): the
        # two differ by one row when the fraction is below 1/2, and a sparse tail (this
        # machine's mood) can put microseconds between neighbouring rows; compare at its rank
        k = max(int(q * len(us) / 100 + 0.5), 1)
        assert h.get_value_at_percentile(q) == pytest.approx(ranked[k - 1], rel=0.002, abs=1)
    again = HdrHistogram.decode(h.encode())
    assert again.get_total_count() == h.get_total_count()


def test_hgrm_and_hlog_files(trial, tmp_path):
    hgrm = write_hgrm(trial, tmp_path / "t.hgrm").read_text()
    assert "Percentile" in hgrm and "#[Max" in hgrm
    path = write_hlog(trial, tmp_path / "t.hlog", interval_s=0.5, phase=None)
    text = path.read_text()
    assert "#[StartTime: " in text and "[Histogram log format version" in text
    reader = HistogramLogReader(str(path), HdrHistogram(1, 3_600_000_000, 3))
    total, n = 0, 0
    while (h := reader.get_next_interval_histogram()) is not None:
        total += h.get_total_count()
        n += 1
    reader.close()
    assert total == len(trial.rows) and n == 3  # 1.4 s of completions in 0.5 s intervals
    assert reader.get_start_time_sec() > 1e9


def test_wrk_shaped_table_parses_as_wrk(trial):
    text = wrk_latency_table(trial)
    parsed = parse_wrk(text.replace("  Latency Distribution (from the intended send time)", "  Latency Distribution"))
    us = latency_us(trial)
    assert parsed["requests"] == trial.meta["requests"]["measure"]
    assert parsed["latency_percentiles_ms"]["50"] == pytest.approx(np.percentile(us, 50, method="inverted_cdf") / 1e3, rel=0.01)
    assert parsed["latency_max_ms"] == pytest.approx(us.max() / 1e3, rel=0.01)
    assert parsed["requests_per_s"] == pytest.approx(len(us) / 1.2, rel=0.001)


def test_format_time_and_bad_input():
    assert format_time_us(281) == "281.00us" and format_time_us(3800) == "3.80ms" and format_time_us(1.2e6) == "1.20s"
    with pytest.raises(TypeError):
        latency_us([1, 2, 3])
    with pytest.raises(ValueError, match="valid"):
        latency_us(np.zeros(1, ROW_DTYPE), phase="cooldown")
