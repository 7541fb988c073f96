"""The analysis layer's small parts: parameter lists, number formats, metric words (pure)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis import formats as fmt
from benchlib.analysis import params
from benchlib.analysis.display import metric_words, table
from benchlib.core.errors import ParameterError


def test_choices_keep_the_given_order_drop_repeats_and_blanks() -> None:
    assert params.choices(" pipe, discard,pipe ,", ("pipe", "file", "discard"), "log sink(s)") == ("pipe", "discard")
    assert params.choices(["file"], ("pipe", "file", "discard"), "log sink(s)") == ("file",)
    assert params.choices("fair, faithful", ("faithful", "fair"), "variant(s)", canonical=True) == ("faithful", "fair")


@pytest.mark.parametrize("text, match", [
    ("pipe,tty", r"unknown log sink\(s\) \['tty'\]; valid: pipe, file, discard"),
    (" , ", r"no log sink\(s\) given; valid: pipe, file, discard"),
    ([], r"no log sink\(s\) given"),
])
def test_choices_name_the_valid_ones_in_one_line(text: object, match: str) -> None:
    with pytest.raises(ParameterError, match=match):
        params.choices(text, ("pipe", "file", "discard"), "log sink(s)")  # type: ignore[arg-type]


def test_positive_refuses_what_is_not_a_positive_finite_number() -> None:
    assert params.positive("scale", 2) == 2.0
    for bad in (0, -1.0, math.nan, math.inf, "1", True, None):
        with pytest.raises(ParameterError, match=r"scale must be a positive number \(1.0 = the seed's size\)"):
            params.positive("scale", bad, "1.0 = the seed's size")


def test_numbers_print_one_way() -> None:
    assert [fmt.num(v) for v in (0.3741, 46.23, 724.33, 1234.5, math.nan, None, math.inf, 7, "x")] == [
        "0.374", "46.2", "724", "1,234", "–", "–", "∞", "7", "x"]
    assert fmt.num(np.float64(0.5)) == "0.5"
    assert fmt.median_ci(0.509, 0.475, 2.23) == "0.509 [0.475, 2.23]"
    assert fmt.median_ci(0.5) == "0.5" and fmt.median_ci(math.nan, 1, 2) == "–"
    assert fmt.ratio_ci(3.1312, 0.0, math.inf) == "3.13× [0.00, ∞]"
    assert fmt.inverse_ci(2.0, 1.6, 2.5) == "0.50× [0.40, 0.62]"
    assert fmt.inverse_ci(0.0, 0.0, 1.0) == "∞× [1.00, ∞]"
    assert (fmt.signed_pct(1.234), fmt.signed_pct(0.9), fmt.signed_pct(math.nan)) == ("+23.4%", "-10.0%", "–")
    assert fmt.fixed(math.nan) == "–" and fmt.fixed(-math.inf) == "−∞" and fmt.fixed(1.0, 3) == "1.000"


def test_metric_words_cover_any_unit_and_a_study_s_own_metrics() -> None:
    assert metric_words("p50_ms") == "median latency (p50)" and metric_words("throughput_rps") == "throughput"
    assert metric_words("p50_us") == "median latency (p50)" and metric_words("p999_us") == "p99.9 latency"
    assert metric_words("p95_ms") == "p95 latency"
    assert metric_words("server_cpu_ms") == "server_cpu_ms"
    assert metric_words("server_cpu_ms", {"server_cpu_ms": "server CPU time per request"}) == (
        "server CPU time per request")


def test_table_formats_numbers_and_hides_missing_values() -> None:
    df = pd.DataFrame({"arm": ["a", None], "x": [1234.5, math.nan], "n": [1, 2]})
    html = table(df).to_html()
    assert "1,234" in html and "–" in html and "None" not in html and "nan" not in html.lower().replace("nanosec", "")
