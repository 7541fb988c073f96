"""Run against run (``benchlib compare``): refusals, the rows' decision rule (margin,
equivalence, Holm), the CI gate; and one real end-to-end comparison through the CLI."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis.runcompare import (
    RUN_LEVEL_NOTE,
    NotComparable,
    check_comparable,
    compare_runs,
    compare_summaries,
)
from benchlib.cli import main, percent
from benchlib.core.errors import ParameterError
from benchlib.core.model import Arm, Condition, Experiment, LoadSpec
from benchlib.stats.multiplicity import adjust
from benchlib.stats.verdict import VerdictKind
from benchlib.store.records.run import RunRecord
from benchlib.store.results import Run

# -- constructed runs (no store): comparability ---------------------------------------------------

LOAD = LoadSpec(connections=2, duration_s=1.0, warmup_s=0.2)


def _run(run_id: str, *, study: str = "s", arms: tuple[Arm, ...] | None = None, load: LoadSpec = LOAD,
         builds: dict[str, Any] | None = None, cpus: dict[str, Any] | None = None, trials: int = 5,
         packages: dict[str, str] | None = None, host: str = "vm", cross_check: Any = None) -> Run:
    arms = arms or (Arm("a", "go-nethttp-hello"), Arm("b", "python-aiohttp-hello"))
    exp = Experiment(study, arms, (Condition("main", load, cross_check=cross_check),), trials=trials)
    prov = {"hostname": host, "cpu_count": 2, "cpu_model": "cpu", "git": {"sha": "abc"}, "packages": packages or {},
            "collected_utc": "2026-12-03T10:00:00+00:00", "loadavg_at_start": [0.5, 0.5, 0.5]}
    return Run(study=study, run_id=run_id, path=Path("/nonexistent") / study / run_id, experiment=exp,
               arms=tuple(x.name for x in arms), conditions=("main",),
               record=RunRecord.from_json({"provenance": prov, "cpus": cpus or {"server": [1], "client": [0]},
                                           "builds": builds or {}}))


def test_comparable_runs_list_what_differs_without_refusing() -> None:
    a = _run("r1", builds={"go-nethttp-hello/fair": {"source_hash": "aaaa", "toolchains": {"go": "go1.26"}}})
    b = _run("r2", trials=8, host="other",
             builds={"go-nethttp-hello/fair": {"source_hash": "bbbb", "toolchains": {"go": "go1.26"}}})
    c = check_comparable(a, b)
    assert c.comparable and c.arms == ("a", "b") and c.conditions == ("main",)
    listed = {d.what: (d.a, d.b) for d in c.listed}
    assert listed["service source go-nethttp-hello/fair"] == ("aaaa", "bbbb")
    assert listed["trials per arm"] == ("5", "8") and "machine" in listed


def test_conditions_with_several_peer_cross_checks_compare_and_a_different_set_is_listed() -> None:
    from benchlib.core.model import CrossCheck

    two = (CrossCheck("ghz", arms=("a",)), CrossCheck("h2load", arms=("b",)))
    c = check_comparable(_run("r1", cross_check=two), _run("r2", cross_check=two))
    assert c.comparable and not any("cross-check" in d.what for d in c.listed)
    c = check_comparable(_run("r1", cross_check=two), _run("r2", cross_check=two[0]))
    assert c.comparable
    assert {d.what: (d.a, d.b) for d in c.listed}["condition main: peer cross-check"] == ("ghz, h2load", "ghz")


@pytest.mark.parametrize(("b_kw", "allow", "expected"), [
    ({"study": "t"}, (), "the runs are of different studies (A: s, B: t); compare two runs of one study"),
    ({"arms": (Arm("a", "go-nethttp-hello"), Arm("c", "python-aiohttp-hello"))}, (),
     "the runs' arms differ (only in A: b; only in B: c); compare those both have with --arms a"),
    ({"load": replace(LOAD, model="open", rate_rps=100.0)}, (),
     "condition main has another load in B (load model: closed in A, open in B); compare runs made with the same "
     "load"),
    ({"load": replace(LOAD, duration_s=2.0)}, (), "measured duration (s): 1.0 in A, 2.0 in B"),
    ({"arms": (Arm("a", "go-nethttp-hello", env=(("GOGC", "off"),)), Arm("b", "python-aiohttp-hello"))}, (),
     "arm a differs in environment (A: none, B: GOGC=off); pass --allow config if that is the change under test"),
    ({"arms": (Arm("a", "go-nethttp-hello", runtime="docker"), Arm("b", "python-aiohttp-hello"))}, ("config",),
     "arm a differs in runtime (A: none, B: docker); compare runs of the same arm, or the other arms: --arms b"),
    ({"builds": {"go-nethttp-hello/fair": {"toolchains": {"go": "go1.25"}}}}, (),
     "go-nethttp-hello/fair was built with another go (go1.26 in A, go1.25 in B); pass --allow toolchains"),
    ({"cpus": {"server": [1, 2], "client": [0]}}, (), "the server had 1 CPU(s) in A and 2 in B; pass --allow cpus"),
    ({"packages": {"aiohttp": "3.13"}}, (),
     "python-aiohttp-hello ran with another aiohttp (none in A, 3.13 in B); pass --allow toolchains"),
])
def test_runs_that_do_not_measure_the_same_thing_are_refused_in_one_line(b_kw: dict[str, Any], allow: tuple[str, ...],
                                                                         expected: str) -> None:
    a = _run("r1", builds={"go-nethttp-hello/fair": {"toolchains": {"go": "go1.26"}}})
    b_kw.setdefault("builds", {"go-nethttp-hello/fair": {"toolchains": {"go": "go1.26"}}})
    b = _run("r2", **b_kw)
    c = check_comparable(a, b, allow=allow)
    assert not c.comparable and expected in c.refusal and "\n" not in c.refusal
    with pytest.raises(NotComparable, match="^runs not comparable: "):
        compare_runs(a, b, allow=allow)  # refused before any summary is read


def test_a_named_change_under_test_is_allowed_and_listed() -> None:
    a = _run("r1")
    b = _run("r2", arms=(Arm("a", "go-nethttp-hello", env=(("GOGC", "off"),)), Arm("b", "python-aiohttp-hello")))
    c = check_comparable(a, b, allow=("config",))
    assert c.comparable and [d.text for d in c.listed if d.allowed] == ["arm a: environment (none in A, GOGC=off in B)"]


def test_arm_and_condition_choices_name_the_valid_ones() -> None:
    a, b = _run("r1"), _run("r2", arms=(Arm("a", "go-nethttp-hello"), Arm("c", "python-aiohttp-hello")))
    assert check_comparable(a, b, arms=["a"]).arms == ("a",)
    assert check_comparable(a, b, arms=["b"]).refusal == "arms b not in both runs; valid: a (--arms)"
    assert check_comparable(a, a).refusal.startswith("A and B are the same run (s/r1)")
    with pytest.raises(ParameterError, match="--allow everything: unknown; valid: config, toolchains, cpus"):
        check_comparable(a, b, allow=("everything",))


# -- the rows, from constructed summaries -----------------------------------------------------------

def _summaries(p50: list[float], rps: list[float] | None = None, *, arm: str = "a", valid: list[bool] | None = None) \
        -> pd.DataFrame:
    return pd.DataFrame({"condition": "main", "arm": arm, "valid": valid or [True] * len(p50), "p50_ms": p50,
                         "throughput_rps": rps or [1000.0] * len(p50)})


def _spread(centre: float, n: int = 10, rel: float = 0.004) -> list[float]:
    return list(centre * (1.0 + rel * np.linspace(-1.0, 1.0, n)))


def _rows(sa: pd.DataFrame, sb: pd.DataFrame, **kw: Any) -> dict[str, Any]:
    rows, _ = compare_summaries(sa, sb, arms=["a"], conditions=["main"], metrics=kw.pop("metrics", ["p50_ms"]), **kw)
    return {r.metric: r for r in rows}


def test_a_shift_within_the_margin_is_never_called_faster_or_slower() -> None:
    """Every B trial 2% slower, tightly: the two runs' trials differ for sure (p_shift at the
    floor), but 2% is within a 5% margin, which a run-level effect could be: equivalent. With
    no margin, the same data read slower."""
    sa, sb = _summaries(_spread(1.0)), _summaries(_spread(1.02))
    r = _rows(sa, sb, margin=0.05)["p50_ms"]
    assert r.p_shift < 1e-4 and r.verdict.kind is VerdictKind.EQUIVALENT and r.verdict.text == "equivalent (±5%)"
    assert not r.verdict.directional and r.verdict.p_raw == 1.0  # the estimate is inside the margin
    r0 = _rows(sa, sb, margin=0.0)["p50_ms"]
    assert r0.verdict.kind is VerdictKind.SLOWER and math.isclose(r0.verdict.estimate, 1.02, rel_tol=1e-3)


def test_a_change_beyond_the_margin_reads_slower_and_fails_the_gate_beyond_its_threshold() -> None:
    sa, sb = _summaries(_spread(1.0), rps=_spread(1000.0)), _summaries(_spread(1.2), rps=_spread(800.0))
    rows, _ = compare_summaries(sa, sb, arms=["a"], conditions=["main"], metrics=["p50_ms", "throughput_rps"],
                                margin=0.05)
    by = {r.metric: r for r in rows}
    assert by["p50_ms"].verdict.kind is VerdictKind.SLOWER and by["p50_ms"].verdict.ci_lo > 1.05
    assert by["throughput_rps"].verdict.kind is VerdictKind.SLOWER  # fewer req/s: worse
    assert by["p50_ms"].beyond(0.10) and by["throughput_rps"].beyond(0.10)  # 1.2 and 0.8 are beyond 10%
    assert not by["p50_ms"].beyond(0.25) and not by["throughput_rps"].beyond(0.30)
    faster, _ = compare_summaries(sb, sa, arms=["a"], conditions=["main"], metrics=["p50_ms"], margin=0.05)
    assert faster[0].verdict.kind is VerdictKind.FASTER and not faster[0].beyond(0.0)  # an improvement never fails


def test_undecided_rows_read_with_the_mde_including_the_margin() -> None:
    rng = np.random.default_rng(3)
    sa = _summaries(list(np.exp(rng.normal(0.0, 0.2, 6))))
    sb = _summaries(list(np.exp(rng.normal(0.0, 0.2, 6))))
    v = _rows(sa, sb, margin=0.05)["p50_ms"].verdict
    assert v.kind is VerdictKind.NO_DIFFERENCE and v.text.startswith("~ (MDE ")
    assert v.mde > 0.05  # a true change must clear the margin to be found


def test_holm_runs_over_the_whole_table() -> None:
    sa = pd.concat([_summaries(_spread(1.0), rps=_spread(1000.0)), _summaries(_spread(2.0), arm="b")])
    sb = pd.concat([_summaries(_spread(1.15), rps=_spread(990.0)), _summaries(_spread(2.6), arm="b")])
    rows, _ = compare_summaries(sa, sb, arms=["a", "b"], conditions=["main"], metrics=["p50_ms", "throughput_rps"],
                                margin=0.05)
    assert len(rows) == 4 and {r.verdict.family_size for r in rows} == {4}
    raw = np.array([r.verdict.p_raw for r in rows])
    assert np.allclose([r.verdict.p_adj for r in rows], adjust(raw, "holm"))
    assert {(r.arm, r.metric): r.verdict.kind.value for r in rows} == {
        ("a", "p50_ms"): "slower", ("a", "throughput_rps"): "equivalent", ("b", "p50_ms"): "slower",
        ("b", "throughput_rps"): "equivalent"}


def test_too_few_trials_arms_not_run_and_invalid_trials_are_said() -> None:
    few = _rows(_summaries([1.0, 1.1]), _summaries([1.5, 1.6]), margin=0.05)["p50_ms"].verdict
    assert few.kind is VerdictKind.INSUFFICIENT and few.need == 4
    rows, _ = compare_summaries(_summaries(_spread(1.0)), _summaries(_spread(1.0)), arms=["a"], conditions=["main"],
                                metrics=["p50_ms"], unavailable_b={"a": "no go toolchain"})
    assert rows[0].verdict.text == "not run: in B: no go toolchain"
    bad = _summaries(_spread(1.0, 4), valid=[False] * 4)
    rows, _ = compare_summaries(_summaries(_spread(1.0)), bad, arms=["a"], conditions=["main"], metrics=["p50_ms"])
    assert rows[0].verdict.text == "no valid trial: in B: 4 invalid"
    with pytest.raises(ParameterError, match="margin must be a relative change in"):
        compare_summaries(bad, bad, arms=["a"], conditions=["main"], margin=5.0)


def test_the_minimum_effect_p_value_is_the_exact_test_at_the_nearer_margin() -> None:
    from benchlib.stats.estimate import beyond_pvalue
    from benchlib.stats.exact import mann_whitney

    a, b = np.log(_spread(1.0, 8, 0.05)), np.log(_spread(1.2, 8, 0.05))
    p_at = lambda c: mann_whitney(a, b - c).pvalue  # noqa: E731
    eff = float(np.median(np.subtract.outer(b, a)))
    assert beyond_pvalue(p_at, eff, math.log(1.05)) == p_at(math.log(1.05)) < 0.01
    assert beyond_pvalue(p_at, eff, math.log(1.5)) == 1.0  # the estimate is inside: nothing beyond
    assert beyond_pvalue(p_at, -eff, 0.0) == p_at(0.0)


def test_percent_options_read_as_fractions() -> None:
    assert percent("5%") == 0.05 and percent("2.5") == 0.025
    with pytest.raises(Exception, match="not a percentage"):
        percent("five")


# -- the run-level variance from the history (issue 39, item 6) ------------------------------------

@dataclass(frozen=True)
class _Stored(Run):
    """A run whose trials' summaries are ``frame`` (no store: the comparison's logic only)."""

    frame: Any = None

    def summaries(self) -> pd.DataFrame:  # type: ignore[override]
        return self.frame


def _stored(base: Run, frame: pd.DataFrame) -> Run:
    """``base`` with the trials' summaries ``frame``."""
    return _Stored(**{f.name: getattr(base, f.name) for f in fields(Run)}, frame=frame)


def _trials(rng: np.random.Generator, run_sd: float, shift: float = 0.0, n: int = 10,
            trial_sd: float = 0.05) -> pd.DataFrame:
    """One run of arms a and b: ``n`` trials each, log p50 and log throughput with a trial SD
    ``trial_sd`` and, per row, a run effect of SD ``run_sd``; arm a's p50 ``exp(shift)`` slower
    and its throughput as much lower."""
    rows = []
    for arm in ("a", "b"):
        e50, erps = rng.normal(0.0, run_sd, 2)
        s = shift if arm == "a" else 0.0
        for k in range(n):
            rows.append({"condition": "main", "arm": arm, "block": k, "valid": True,
                         "p50_ms": float(np.exp(s + e50 + rng.normal(0.0, trial_sd))),
                         "throughput_rps": float(1000.0 * np.exp(-s + erps + rng.normal(0.0, trial_sd)))})
    return pd.DataFrame(rows)


def run_compare_rates(reps: int, *, run_sd: float, history: int, shift: float = 0.0, seed: int = 0) -> dict[str, float]:
    """Unchanged (``shift`` 0) or regressed runs compared through :func:`compare_runs`, 4 rows
    (arms a and b, p50 and throughput; 10 trials per run, trial SD 5%, a run effect of SD
    ``run_sd`` per row), with ``history`` runs of the study (run A among them; fewer than 3: none
    estimated). Returned: ``regression`` (share of comparisons with a row called slower: a false
    regression when ``shift`` is 0), ``any`` (a row faster or slower), ``found`` (share of arm a's
    two rows called slower), ``mde`` (median MDE of the "~" rows, relative)."""
    rng = np.random.default_rng(seed)
    base_a, base_b = _run("A"), _run("B")
    bases = [_run(f"h{i}") for i in range(max(0, history - 1))]
    reg = anyd = found = 0
    mdes: list[float] = []
    for _ in range(reps):
        a = _stored(base_a, _trials(rng, run_sd))
        b = _stored(base_b, _trials(rng, run_sd, shift))
        hist = [_stored(h, _trials(rng, run_sd)) for h in bases]
        c = compare_runs(a, b, metrics=("p50_ms", "throughput_rps"), history=hist)
        kinds = [r.verdict.kind for r in c.rows]
        reg += VerdictKind.SLOWER in kinds
        anyd += any(k.directional for k in kinds)
        found += sum(r.verdict.kind is VerdictKind.SLOWER for r in c.rows if r.arm == "a")
        mdes += [r.verdict.mde for r in c.rows if r.verdict.kind is VerdictKind.NO_DIFFERENCE]
    return {"regression": reg / reps, "any": anyd / reps, "found": found / (2 * reps),
            "mde": float(np.median(mdes)) if mdes else math.nan}


def test_the_history_widens_the_interval_and_the_mde_and_says_on_how_many_runs() -> None:
    """Issue 39, item 6: the "~" rows printed one MDE (13.9%) whatever the run-level SD, and the
    intervals left it out. With three runs of the study on the machine the run-level variance is
    estimated and counted; with fewer the MDE is a lower bound and the rate is said unknown."""
    rng = np.random.default_rng(5)
    a, b = _stored(_run("A"), _trials(rng, 0.05)), _stored(_run("B"), _trials(rng, 0.05))
    hist = [_stored(_run(f"h{i}"), _trials(rng, 0.05)) for i in range(4)]
    alone = compare_runs(a, b, history=[], metrics=("p50_ms", "throughput_rps"))
    counted = compare_runs(a, b, history=hist, metrics=("p50_ms", "throughput_rps"))
    assert alone.history == () and "false-regression rate is unknown" in alone.run_level_note
    assert counted.history == ("A", "h0", "h1", "h2", "h3") and "estimated from 5 runs" in counted.run_level_note
    for r0, r1 in zip(alone.rows, counted.rows, strict=True):
        assert r0.run_level is None and r1.run_level is not None and r1.run_level.runs == 5
        assert r1.verdict.ci_hi / r1.verdict.ci_lo > r0.verdict.ci_hi / r0.verdict.ci_lo  # wider
        if r0.verdict.kind is VerdictKind.NO_DIFFERENCE:
            assert r0.verdict.mde_is_lower_bound and "MDE ≥ " in r0.verdict.text
    assert any(r.verdict.mde > 0.15 for r in counted.rows if r.verdict.kind is VerdictKind.NO_DIFFERENCE)
    assert "Student-t across the runs with the run-level variance of 5 runs" in counted.to_text()
    data = json.loads(counted.to_json())
    assert data["history"] == ["A", "h0", "h1", "h2", "h3"] and data["rows"][0]["run_level"]["runs"] == 5


def test_with_the_history_a_run_level_sd_of_5pct_no_longer_reads_as_regressions() -> None:
    """Unchanged runs with a run-level SD of 5%: without the run-level variance a quarter of the
    comparisons called some row a regression (R = 1,000: 0.246; the audit's design: 0.12); counted
    from 3 runs, within the level (R = 1,000: 0.024)."""
    from benchlib.stats.validation import band

    without = run_compare_rates(100, run_sd=0.05, history=0, seed=11)
    counted = run_compare_rates(100, run_sd=0.05, history=3, seed=11)
    assert without["regression"] >= 0.12 and counted["regression"] <= band(0.05, 100)[1], (without, counted)


# -- real runs: two unchanged, one planted; through the CLI -----------------------------------------

@pytest.mark.integration
def test_real_runs_compare_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two tiny runs of the unchanged service and one with a large planted slowdown (2 ms of
    busy work per request, several times its latency), compared through ``benchlib compare``
    on the mean latency (a trial of a few dozen requests has no p50: fewer than 50 answers).
    The unchanged pair's assertion is on the decision rule (a row whose interval meets the
    margin is never faster or slower), so it holds on a busy machine too."""
    from benchlib.run.runner import run_experiment

    spec = LoadSpec(connections=1, duration_s=0.3, warmup_s=0.1, timeout_s=5.0)

    def run(run_id: str, env: tuple[tuple[str, str], ...] = ()) -> None:
        # one service start per run (service_starts="cell"): the comparison reads trials, not restarts
        exp = Experiment("t-compare", (Arm("aiohttp", "python-aiohttp-hello", env=env),), (Condition("main", spec),),
                         trials=4, seed=1, between_trials_s=0, service_starts="cell")
        run_experiment(exp, run_id=run_id, out_dir=tmp_path, progress=False)

    run("a1")
    run("a2")
    run("slow", (("EXTRA_WORK_US", "2000"),))
    root = str(tmp_path)

    assert main(["compare", "a1", "a2", "--runs-dir", root, "--metrics", "mean_ms", "--margin", "90", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["run_level_note"].startswith(RUN_LEVEL_NOTE.format(margin="90%")) and data["margin"] == 0.9
    assert "false-regression rate is unknown" in data["run_level_note"]  # a1 alone: slow is another arm config
    (row,) = data["rows"]
    v = row["verdict"]
    lo_m, hi_m = 1 / 1.9, 1.9
    meets_margin = v["ci_lo"] is None or not (v["ci_lo"] > hi_m or v["ci_hi"] < lo_m)
    assert v["kind"] in ("equivalent", "no_difference", "insufficient", "faster", "slower")
    if meets_margin:
        assert v["kind"] in ("equivalent", "no_difference", "insufficient"), v["text"]

    assert main(["compare", "a2", "slow", "--runs-dir", root, "--metrics", "mean_ms"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("benchlib: error: runs not comparable: arm aiohttp differs in environment (A: none, B: "
                   "EXTRA_WORK_US=2000); pass --allow config if that is the change under test")

    assert main(["compare", "a2", "slow", "--runs-dir", root, "--metrics", "mean_ms", "--allow", "config"]) == 0
    text = capsys.readouterr().out
    assert "B = slow against A = a2" in text and "Run-level effects are not sampled" in text
    assert "arm aiohttp: environment (none in A, EXTRA_WORK_US=2000 in B) [allowed]" in text
    assert " slower" in text.splitlines()[7]

    status = main(["compare", "a2", "slow", "--runs-dir", root, "--metrics", "mean_ms", "--allow", "config",
                   "--fail-on-regression", "10%", "--only-significant"])
    out = capsys.readouterr()
    assert status == 1 and "regression beyond 10%: main/aiohttp mean_ms" in out.err
