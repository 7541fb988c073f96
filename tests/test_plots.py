"""Plots: DataFrames in, Axes out, units in labels, no plt.show()."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from benchlib.analysis import plots
from benchlib.core.errors import ParameterError
from benchlib.stats import compare, requests_frame, summarize_trial
from benchlib.stats.changepoint import detect_changes
from benchlib.stats.simulate import simulate_summaries, trial_latencies_ms, trial_rows


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def requests() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    frames = []
    for arm, f in (("A", 1.0), ("B", 1.3)):
        for block in range(2):
            rows = trial_rows(trial_latencies_ms(6000, rng, shift=f, phi=0.5), rate_rps=2000, warmup_requests=200)
            frames.append(requests_frame(rows, arm=arm, block=block))
    return pd.concat(frames, ignore_index=True)


@pytest.fixture(scope="module")
def summaries() -> pd.DataFrame:
    return simulate_summaries(np.random.default_rng(1), arms={"A": 1.0, "B": 1.1}, trials=6, trial_sd=0.03)


def test_ecdf(requests):
    ax = plots.ecdf(requests)
    assert ax.get_xscale() == "log"
    assert "ms" in ax.get_xlabel() and ax.get_ylabel() == "fraction of requests"
    lines = ax.get_lines()
    assert len(lines) == 2
    # the B curve lies to the right of the A curve at its median
    meds = []
    for line in lines:
        x, y = line.get_data()
        meds.append(np.interp(0.5, y, x))
    assert max(meds) / min(meds) == pytest.approx(1.3, rel=0.1)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["A", "B"]


def test_trial_strip(summaries):
    df = summaries.copy()
    df.loc[0, "valid"] = False
    fig, ax = plt.subplots()
    out = plots.trial_strip(df, metric="p50_ms", ax=ax)
    assert out is ax
    assert ax.get_ylabel() == "p50 latency (ms)"
    assert [t.get_text() for t in ax.get_xticklabels()] == list(dict.fromkeys(df["arm"]))
    from matplotlib.collections import PathCollection

    dots = sum(len(c.get_offsets()) for c in ax.collections if isinstance(c, PathCollection))
    assert dots == len(df)  # every trial drawn, the invalid one hollow
    df["server_cpu_us_per_req"] = 10.0
    _, ax2 = plt.subplots()
    assert plots.trial_strip(df, metric="server_cpu_us_per_req", ax=ax2).get_ylabel() == (
        "server CPU time per request (µs)")


def test_percentiles_stop_where_the_sample_does(requests):
    ax = plots.percentiles(requests)
    n_per_arm = (requests["arm"] == "A").sum()
    top = plots.nines(1 - 50 / n_per_arm)
    for line in ax.get_lines():
        x, _ = line.get_data()
        assert x.max() == pytest.approx(top)
    assert [t.get_text() for t in ax.get_xticklabels()][:3] == ["0%", "90%", "99%"]
    assert ax.get_yscale() == "log" and "ms" in ax.get_ylabel()


def test_shift_plot():
    rng = np.random.default_rng(2)
    records = []
    for arm, f in (("A", 1.0), ("B", 1.2)):
        for b in range(8):
            s = summarize_trial(trial_rows(trial_latencies_ms(3000, rng, shift=f, trial_sd=0.02), rate_rps=3000))
            records.append({"condition": "c", "arm": arm, "block": b, "position": 0, "seq": 0, "valid": True, **s})
    c = compare(pd.DataFrame(records), baseline="A", metrics=("p50_ms",), design="unpaired")
    ax = plots.shift_plot(c.shift)
    x, y = ax.get_lines()[0].get_data()
    assert list(x) == [10, 20, 30, 40, 50, 60, 70, 80, 90]
    assert np.all(np.abs(np.asarray(y) - 20) < 10)
    assert "%" in ax.get_ylabel()


def test_run_sequence_marks_change_points():
    rng = np.random.default_rng(3)
    lat = trial_latencies_ms(20000, rng, spike_rate=0)
    lat[:4000] *= 1.3
    frame = requests_frame(trial_rows(lat, rate_rps=2000, warmup_requests=500), measured_only=False)
    measured = frame[frame["phase"] == "measure"]
    cp = detect_changes(np.log(measured["latency_ms"].to_numpy()), measured["t_s"].to_numpy())
    ax = plots.run_sequence(frame, change_at_s=cp.at_s)
    assert ax.get_xlabel() == "time since trial start (s)" and "ms" in ax.get_ylabel()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "change point" in labels and "warm-up" in labels


def test_throughput_latency():
    rng = np.random.default_rng(4)
    frames = []
    for rate in (500, 1000, 2000):
        df = simulate_summaries(rng, arms={"A": 1.0, "B": 1.2}, trials=3, condition=f"r{rate}")
        df["offered_rps"] = rate
        df["throughput_rps"] = rate * 0.999
        frames.append(df)
    ax = plots.throughput_latency(pd.concat(frames, ignore_index=True))
    assert len(ax.get_lines()) == 2
    x, _ = ax.get_lines()[0].get_data()
    assert list(x) == pytest.approx([499.5, 999, 1998])
    assert "req/s" in ax.get_xlabel() and "ms" in ax.get_ylabel()
    # a quantile missing in every trial (trials too short for p99, or only such trials valid): a
    # linear axis, no "cannot be log-scaled" error when the figure is drawn
    none = pd.concat(frames, ignore_index=True).assign(p99_ms=np.nan)
    ax = plots.throughput_latency(none)
    ax.figure.canvas.draw()
    assert ax.get_yscale() == "linear" and "log" not in ax.get_ylabel()


def test_missing_columns_are_named():
    with pytest.raises(ParameterError, match="latency_ms"):
        plots.ecdf(pd.DataFrame({"x": [1.0]}))
    with pytest.raises(ParameterError, match="DataFrame"):
        plots.trial_strip([1, 2, 3])


def test_plots_never_show(monkeypatch, requests, summaries):
    def boom(*a, **k):
        raise AssertionError("plt.show() called")

    monkeypatch.setattr(plt, "show", boom)
    plots.ecdf(requests)
    plots.trial_strip(summaries)
    plots.percentiles(requests)
