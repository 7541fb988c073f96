"""Progress of a long run (pure): counts, time left from the trials' measured times, the
per-block line with the questions decided so far, and the CLI's time left over every study."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from benchlib.analysis import Family, decided_questions
from benchlib.core.design import PlannedTrial
from benchlib.publish.report import _overall_left, last_duration_s
from benchlib.run.events import BlockDone, Event, Note, PlanSlot, Progress, RunDone, RunStarted, TrialEvent
from benchlib.run.progress import Estimate, ProgressLine, format_duration, format_event, make_progress, parse_line


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _start(plan: list[tuple[str, str, bool]], blocks: int) -> RunStarted:
    return RunStarted("s", "r", len(plan), blocks, tuple(PlanSlot(*p) for p in plan))


def _trial(kind: str = "trial", *, seq: int = 0, total: int = 4, block: int = 0, arm: str = "a", **outcome: object
           ) -> TrialEvent:
    return TrialEvent.of(kind, "s", total, PlannedTrial(seq, "c", block, 0, arm), **outcome)  # type: ignore[arg-type]


def test_time_left_comes_from_each_kind_of_trial_measured_so_far() -> None:
    clock = Clock()
    est = Estimate(now=clock)
    plan = [("c", "a", True), ("c", "b", False), ("c", "a", False), ("c", "b", False)]
    ev = est.update(_start(plan, 2))
    assert ev.left_s is None and ev.trials_done == 0 and ev.blocks_planned == 2 and ev.kind == "start"
    clock.t = 110.0
    ev = est.update(_trial(status="ok", seconds=10.0))  # a with its peer tool: 10 s
    assert ev.elapsed_s == 10.0 and ev.trials_done == 1
    assert ev.left_s == pytest.approx(30.0)  # nothing else timed yet: the overall mean for each
    ev = est.update(_trial(seq=1, arm="b", status="ok", seconds=4.0))  # b: 4 s
    # a without its peer: a's mean (10), then b: 4
    assert ev.left_s == pytest.approx(14.0)
    ev = est.update(BlockDone("s", 4, 0))
    assert ev.blocks_done == 1
    assert est.update(_trial("skip", seq=2, block=1)).trials_done == 3  # stored before: done, no time
    assert est.update(_trial(seq=3, block=1, arm="b", status="ok", seconds=5.0)).left_s == 0.0
    assert est.update(RunDone("s", "r", 3, 1)).left_s == 0.0


def _timed(event: Event, *, trials_done: int = 4) -> Progress:
    return Progress(event, trials_done=trials_done, blocks_planned=4, elapsed_s=75.0, left_s=200.0)


def test_lines_say_counts_time_and_decided_questions() -> None:
    line = format_event(_timed(BlockDone("s", 8, 1, ("seed: 2/6 rows",))))
    assert line == "[s] block 2/4 done (4/8 trials; 75 s elapsed, ~3.3 min left); decided so far: seed: 2/6 rows"
    assert format_event(_timed(BlockDone("s", 8, 1, ()))).endswith("no question decided yet")
    assert "decided" not in format_event(_timed(BlockDone("s", 8, 1, None)))
    trial = format_event(_timed(_trial(seq=3, total=8, block=1, status="ok", achieved_rps=1000.0)))
    assert trial == "[s] trial 4/8 c/a b1: 1,000 req/s [75 s elapsed, ~3.3 min left]"
    assert format_event(_trial(seq=3, total=8, status="failed", reason="boom")) == "[s] trial 4/8 c/a b0: failed (boom)"
    assert format_event(_trial("settled", total=8)).endswith("not run, its questions are settled (sequential stopping)")
    assert format_event(Note("s", "settle: quiet")) == "[s] settle: quiet"
    assert [format_duration(x) for x in (None, 42, 600, 3900)] == ["?", "42 s", "10.0 min", "1 h 05 min"]


def test_the_start_line_names_the_arms_not_run_with_why_in_one_line() -> None:
    line = format_event(RunStarted("s", "r", 2, 2, unavailable={
        "d1": "runtime 'docker' unavailable: none", "d2": "runtime 'docker' unavailable: none", "g": "no go toolchain"}))
    assert line == ("[s] run r: 2 trials planned in 2 blocks; not run: d1, d2 (runtime 'docker' unavailable: none); "
                    "not run: g (no go toolchain)")
    assert format_event(RunStarted("s", "r", 2, 0)) == "[s] run r: 2 trials planned"


def test_the_kernel_writes_json_lines_the_cli_reads_back(tmp_path, monkeypatch) -> None:
    path = tmp_path / "progress.log"
    monkeypatch.setenv("BENCHLIB_PROGRESS_FILE", str(path))
    show = make_progress(True)
    show(_start([("c", "a", False)], 1))
    show(_trial(total=1, status="ok", seconds=2.0))
    lines = [parse_line(x) for x in path.read_text().splitlines()]
    assert [x.text.split(":")[0] for x in lines] == ["[s] run r", "[s] trial 1/1 c/a b0"]
    assert [(x.kind, x.study) for x in lines] == [("start", "s"), ("trial", "s")]
    assert lines[1].left_s == 0.0 and lines[0].left_s is None
    assert parse_line("a plain line") == ProgressLine("a plain line")
    assert parse_line(ProgressLine("t", "note", "s", 3.5).to_json()) == ProgressLine("t", "note", "s", 3.5)


def test_a_callback_gets_each_event_with_its_counts() -> None:
    seen: list[Progress] = []
    show = make_progress(seen.append)
    show(_start([("c", "a", False)], 1))
    show(Note("s", "a line", undone=0))
    assert [p.kind for p in seen] == ["start", "note"] and isinstance(seen[1].event, Note)
    assert make_progress(False)(Note("s", "nothing shown")) is None


def test_the_cli_adds_the_later_studies_last_times(tmp_path) -> None:
    assert _overall_left(2, 5, 60.0, [120.0, None, 60.0]) == " | study 2/5, ~4.0 min left in all + 1 study never run here"
    assert _overall_left(5, 5, 30.0, []) == " | study 5/5, ~30 s left in all"
    assert _overall_left(1, 2, None, [10.0]) == " | study 1/2"
    nb = tmp_path / "x.ipynb"
    nb.write_text(json.dumps({"metadata": {"papermill": {"duration": 312.5}}}))
    assert last_duration_s(nb) == 312.5 and last_duration_s(tmp_path / "none.ipynb") is None


def test_decided_questions_name_the_questions_whose_rows_are_decided() -> None:
    rows = []
    for b in range(10):  # b is 2x a's p50 in every block, c the same as a (within noise)
        for arm, p50 in (("a", 1.0 + 0.01 * b), ("b", 2.0 + 0.02 * b), ("c", 1.0 + 0.01 * ((b * 7) % 5 - 2))):
            rows.append({"condition": "main", "arm": arm, "block": b, "valid": True, "status": "ok", "p50_ms": p50})
    fam = Family.against("vs-a", "a", ["b", "c"], conditions=["main"], metrics=["p50_ms"], title="against a")
    words = decided_questions([fam])(pd.DataFrame(rows))
    assert words == ["against a: 2/2 rows (all; uncorrected)"]  # b slower, c equivalent (within the ±2% margin)
    slow_c = pd.DataFrame(rows).assign(p50_ms=lambda d: d["p50_ms"] * (1 + 0.3 * (d["arm"] == "c") * (d["block"] % 2)))
    assert decided_questions([fam])(slow_c) == ["against a: 1/2 rows (uncorrected)"]  # c: half its blocks 30% slower
    assert decided_questions([fam])(pd.DataFrame(rows[:6])) == []  # 2 blocks decide nothing
    assert decided_questions([fam])(pd.DataFrame()) == []


def test_a_sequential_run_s_progress_says_what_the_stopping_rule_says() -> None:
    """Issue 19, item 9: during a sequential run the progress line said "decided" from a fixed
    analysis after every block (an invitation to stop by hand that the stopping rule does
    not make: looking after every block is not corrected for). With the run's design the
    hook now says what the rule says: nothing before its first look (9 of 12 blocks), then
    what was settled at the last look; without one, the fixed figures say "uncorrected".
    Parent commit: at 7 blocks the hook said "against a: 2/2 rows (all)"."""
    from benchlib.stats.sequential import SequentialDesign

    rows = [{"condition": "main", "arm": arm, "block": b, "valid": True, "status": "ok", "p50_ms": p50}
            for b in range(12)
            for arm, p50 in (("a", 1.0 + 0.01 * b), ("b", 2.0 + 0.02 * b), ("c", 1.0 + 0.01 * ((b * 7) % 5 - 2)))]
    df = pd.DataFrame(rows)
    fam = Family.against("vs-a", "a", ["b", "c"], conditions=["main"], metrics=["p50_ms"], title="against a")
    design = SequentialDesign.every(12, step=2, n_comparisons=2)
    assert design.looks == (9, 11, 12)
    seq, fixed = decided_questions([fam], sequential=design), decided_questions([fam])
    assert fixed(df[df["block"] < 7]) == ["against a: 2/2 rows (all; uncorrected)"]
    assert seq(df[df["block"] < 7]) == ["no sequential look yet (the first after 9 blocks)"]
    at9 = ["against a: 2/2 rows (all) settled at the sequential look after 9 blocks"]
    assert seq(df[df["block"] < 9]) == at9
    assert seq(df[df["block"] < 10]) == at9  # between looks the last look stands
    line = format_event(Progress(BlockDone("s", 30, 6, tuple(seq(df[df["block"] < 7]))), trials_done=21,
                                 blocks_planned=12, elapsed_s=75.0, left_s=200.0))
    assert line.endswith("; decided so far: no sequential look yet (the first after 9 blocks)"), line
