"""docs/statistics.md: its worked example prints exactly what the page shows."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "statistics.md"


def test_worked_example_matches_the_code():
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## A worked example"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    shown = re.search(r"<!-- example-output -->\n```text\n(.*?)```\n<!-- /example-output -->", section, re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(DOC), "exec"), {})
    assert out.getvalue().strip() == shown.strip()


def test_one_line_form_in_the_doc_is_current():
    import numpy as np

    from benchlib.stats import compare
    from benchlib.stats.simulate import simulate_summaries

    df = simulate_summaries(np.random.default_rng(2024), arms={"A": 1.0, "B": 0.92}, trials=10, n_req=5000,
                            phi=0.9, trial_sd=0.03, condition="2000rps", rate_rps=2000.0)
    df["load_model"] = "open"
    df["duration_s"] = 2.5
    line = compare(df, baseline="A", metrics=("p50_ms", "p90_ms", "p99_ms", "throughput_rps")).one_line(0)
    flat = " ".join(DOC.read_text(encoding="utf-8").split())
    assert line in flat
