"""bench/variance_sources.py's whole path on the quickstart's service, tiny (integration: serial)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pandas as pd
import pytest

from benchlib.store.results import open_run

ROOT = Path(__file__).resolve().parents[1]
SERVICES = ROOT / "services"


@pytest.fixture()
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    d = tmp_path / "services"
    d.mkdir()
    (d / "python-aiohttp-hello").symlink_to(SERVICES / "python-aiohttp-hello")
    monkeypatch.setenv("BENCHLIB_SERVICES", str(d))
    spec = importlib.util.spec_from_file_location("variance_sources_script", ROOT / "bench" / "variance_sources.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    monkeypatch.setitem(sys.modules, "variance_sources_script", mod)  # its dataclass looks itself up
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


@pytest.mark.integration
def test_the_grid_runs_fresh_and_kept_and_writes_the_table(script, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out, runs = tmp_path / "out", tmp_path / "runs"
    assert script.main(["--study", "00_quickstart", "--arms", "python-aiohttp", "--durations", "0.3",
                        "--warmups", "0.1", "--count", "300", "--max-trials", "3", "--budget-min", "5",
                        "--data", str(runs), "--out", str(out)]) == 0
    table = pd.read_csv(out / "variance_sources.csv")
    assert set(table["mode"]) == {"fresh", "kept"}
    assert set(table["condition"]) == {"d0.3-w0.1", "n300-w0.1"}
    p50 = table[table["metric"] == "p50_ms"]
    assert len(p50) == 4 and (p50["trials"] == 3).all()
    assert p50["restart_s"].map(math.isfinite).all() and p50["total_pct"].map(math.isfinite).all()
    md = (out / "variance_sources.md").read_text()
    assert "Load average (1 min)" in md and "| mode | condition |" in md
    # the kept run started one service per cell and stopped none between its trials; the fresh one did
    stored = {r.parameters.get("service_starts", "trial"): r for r in
              (open_run(p) for p in (runs / "variance-00_quickstart").iterdir())}
    assert set(stored) == {"trial", "cell"}
    assert all("kept running" in str(t.stop.get("detail")) for t in stored["cell"].trials)
    assert not any("kept running" in str(t.stop.get("detail")) for t in stored["trial"].trials)


def test_the_budget_drops_the_longest_trials_first(script) -> None:  # type: ignore[no-untyped-def]
    from benchlib.core.model import LoadSpec

    conds = script.grid(LoadSpec(connections=4), None, (0.5, 1, 2, 4, 8), (0.5, 3), 10_000)
    assert len(conds) == 11 and conds[-1].load.requests == 10_000
    kept, trials, notes = script.fit_budget(conds, 1, 4.0, max_trials=8, min_trials=3, startup_s=2, between_s=0.5,
                                            count_s=2)
    assert trials >= 3 and script.planned_minutes(kept, 1, trials, 2, 0.5, 2) <= 4.0
    assert notes and "8 s" in notes[0] and all(c.load.duration_s != 8 for c in kept)
    assert script.grid(LoadSpec(model="open", rate_rps=100), None, (1,), (0.5,), 10_000)[-1].load.requests is None
