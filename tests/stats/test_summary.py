"""Per-trial summaries from the per-request rows."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from benchlib.core.errors import ParameterError
from benchlib.core.schema import ERROR_CODES, ERROR_NAMES, PHASE_NAMES, ROW_DTYPE
from benchlib.stats import quantile_column, required_requests, summarize_trial, summary
from benchlib.stats.simulate import trial_latencies_ms, trial_rows


def test_quantile_column_names():
    assert [quantile_column(q) for q in (0.5, 0.9, 0.99, 0.999, 0.75, 0.9999)] == [
        "p50_ms", "p90_ms", "p99_ms", "p999_ms", "p75_ms", "p9999_ms"]
    assert required_requests(0.99) == 5000 and required_requests(0.999) == 50000


def test_summary_of_a_known_trial():
    rng = np.random.default_rng(0)
    lat = rng.lognormal(np.log(5), 0.3, 6000)
    rows = trial_rows(lat, rate_rps=1000, warmup_requests=500, warmup_ms=100.0)
    s = summarize_trial(rows)
    assert s["n"] == 6000 and s["n_ok"] == 6000 and s["error_rate"] == 0
    # latencies are rounded to integer ns in the rows
    ref = np.quantile(np.round(lat * 1e6) / 1e6, [0.5, 0.9, 0.99])
    assert [s["p50_ms"], s["p90_ms"], s["p99_ms"]] == pytest.approx(ref)
    assert math.isnan(s["p999_ms"]) and s["omitted"] == "p999_ms"  # 6,000 < 50,000
    assert s["mean_ms"] == pytest.approx(lat.mean(), rel=1e-6)
    assert s["max_ms"] == pytest.approx(lat.max(), rel=1e-6)
    assert s["service_p50_ms"] == pytest.approx(s["p50_ms"] - 0.01, abs=1e-6)
    # achieved rate: requests over the span of send times (plus one interval)
    assert s["throughput_rps"] == pytest.approx(6000 / s["duration_s"])
    assert s["throughput_rps"] == pytest.approx(1000.0)
    assert s["quantile_method"] == "linear"
    assert s["steady"] is True and s["change_point"] is False
    assert s["mvalue"] < 2.8
    assert abs(s["lag1_autocorr"]) < 0.1 and s["n_eff"] == pytest.approx(6000, rel=0.2)


def test_warmup_is_excluded():
    lat = np.full(2000, 3.0)
    rows = trial_rows(lat, warmup_requests=1000, warmup_ms=500.0)
    s = summarize_trial(rows)
    assert s["n"] == 2000 and s["p50_ms"] == 3.0 and s["max_ms"] == 3.0


def test_duration_from_the_caller():
    s = summarize_trial(trial_rows(np.full(3000, 2.0), rate_rps=1000), duration_s=3.0)
    assert s["throughput_rps"] == 1000.0 and s["duration_s"] == 3.0


def test_errors_count_in_error_rate_not_in_latency():
    lat = np.full(1000, 2.0)
    lat[:100] = 1000.0  # the failed ones (timeouts) were slow
    err = np.zeros(1000, dtype=np.uint8)
    err[:100] = ERROR_CODES["timeout"]
    rows = trial_rows(lat, errors=err)
    rows["status"][100:110] = 503  # HTTP errors count too
    s = summarize_trial(rows)
    assert s["n"] == 1000 and s["n_ok"] == 890
    assert s["n_transport_errors"] == 100 and s["n_http_errors"] == 10
    assert s["error_rate"] == pytest.approx(0.11)
    assert s["max_ms"] == 2.0  # latency over successful responses only
    assert s["throughput_rps"] == pytest.approx(1000 / s["duration_s"])
    assert s["goodput_rps"] == pytest.approx(890 / s["duration_s"])


def test_dataframe_with_string_codes_gives_the_same_summary():
    rng = np.random.default_rng(1)
    rows = trial_rows(rng.lognormal(1, 0.4, 3000), warmup_requests=100)
    frame = pd.DataFrame(rows)
    frame["error"] = pd.Categorical(np.asarray(ERROR_NAMES)[rows["error"]])
    frame["phase"] = np.asarray(PHASE_NAMES, dtype=object)[rows["phase"]]
    frame = frame.sample(frac=1.0, random_state=3)  # order does not matter
    a, b = summarize_trial(rows), summarize_trial(frame)
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], float) and math.isnan(a[k]):
            assert math.isnan(b[k])
        else:
            assert a[k] == b[k], k


def test_harrell_davis_below_1000_requests():
    rng = np.random.default_rng(2)
    lat = rng.lognormal(1, 0.3, 400)
    s = summarize_trial(trial_rows(lat), quantiles=(0.5, 0.8))
    assert s["quantile_method"] == "harrell-davis"
    x = (np.round(lat * 1e6) / 1e6)
    assert s["p50_ms"] == pytest.approx(float(stats.quantile(x, 0.5, method="harrell-davis")))
    assert s["p80_ms"] == pytest.approx(float(stats.quantile(x, 0.8, method="harrell-davis")))


def test_tail_rule_omits_unsupported_quantiles():
    s = summarize_trial(trial_rows(np.full(4999, 1.0)))
    assert math.isnan(s["p99_ms"]) and s["omitted"] == "p99_ms,p999_ms"
    s = summarize_trial(trial_rows(np.full(5000, 1.0)))
    assert s["p99_ms"] == 1.0 and s["omitted"] == "p999_ms"


def test_level_shift_is_flagged_as_not_steady():
    rng = np.random.default_rng(4)
    lat = trial_latencies_ms(20000, rng, phi=0.5, spike_rate=0.0)
    lat[: 4000] *= 1.3  # 30% slower during the first 20%
    s = summarize_trial(trial_rows(lat, rate_rps=2000))
    assert s["change_point"] is True and s["steady"] is False
    assert s["change_pct"] == pytest.approx(-23, abs=6)  # back down by 1/1.3
    assert s["change_at_s"] == pytest.approx(2.0, abs=0.3)


def test_bad_input_is_refused_clearly():
    rows = trial_rows(np.full(100, 1.0))
    frame = pd.DataFrame(rows)
    frame["error"] = "nonsense"
    with pytest.raises(ParameterError, match="none, connect, reset, timeout, protocol"):
        summarize_trial(frame)
    with pytest.raises(ParameterError, match="lack column"):
        summarize_trial(frame.drop(columns=["t_done_ns"]))
    warm = trial_rows(np.full(10, 1.0), warmup_requests=10)[:10]
    with pytest.raises(ParameterError, match="no rows in the measured phase"):
        summarize_trial(warm)
    with pytest.raises(ParameterError, match="between 0 and 1"):
        summarize_trial(rows, quantiles=(50,))
    bad = rows.copy()
    bad["t_done_ns"][3] = bad["t_intended_ns"][3] - 5
    with pytest.raises(ParameterError, match="before they were due"):
        summarize_trial(bad)
    with pytest.raises(ParameterError, match="ROW_DTYPE"):
        summarize_trial([1, 2, 3])
    assert ROW_DTYPE.names is not None


def test_block_bootstrap_standard_errors():
    rng = np.random.default_rng(5)
    lat = trial_latencies_ms(20000, rng, phi=0.9)
    s = summarize_trial(trial_rows(lat), block_bootstrap=100, seed=1)
    assert s["block_len"] > 5  # autocorrelation detected
    assert 0 < s["p50_ms_lse"] < 0.1 and 0 < s["mean_ms_lse"] < 0.1
    assert "p999_ms_lse" not in s  # omitted quantile


def test_doctests():
    assert doctest.testmod(summary).failed == 0
