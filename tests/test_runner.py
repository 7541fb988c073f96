"""The runner against real services on 127.0.0.1: blocked plan executed and stored, resume,
arms that cannot run kept with the reason, a service dying mid-trial recorded as a failure,
and the peer cross-check recorded beside benchlib's numbers."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import numpy as np
import pytest

from benchlib.errors import ParameterError
from benchlib.model import Arm, Condition, CrossCheck, Experiment, LoadSpec
from benchlib.notebook import status_table
from benchlib.runner import run_experiment

pytestmark = pytest.mark.integration
SERVICES = Path(__file__).resolve().parent.parent / "services"
TINY = LoadSpec(connections=2, duration_s=0.6, warmup_s=0.2)


@pytest.fixture()
def services(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "services"
    d.mkdir()
    (d / "python-aiohttp-hello").symlink_to(SERVICES / "python-aiohttp-hello")
    for name, toolchains, command in [
        ("needs-dotnet", '["dotnet"]', '["dotnet", "run"]'),
        ("dies-soon", '["python"]', '["{python}", "{service_dir}/server.py"]'),
    ]:
        (d / name).mkdir()
        (d / name / "service.toml").write_text(textwrap.dedent(f"""
            name = "{name}"
            language = "python"
            framework = "test"
            toolchains = {toolchains}
            [run]
            command = {command}
            port_env = "PORT"
            [[endpoints]]
            name = "hello"
            path = "/"
            [endpoints.contract]
            status = 200
        """))
    (d / "dies-soon" / "server.py").write_text(textwrap.dedent("""
        import os, threading, http.server
        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def do_GET(self):
                self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers()
                self.wfile.write(b"ok")
            def log_message(self, *a): pass
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H)
        threading.Timer(0.5, lambda: os._exit(7)).start()
        srv.serve_forever()
    """))
    monkeypatch.setenv("BENCHLIB_SERVICES", str(d))
    return d


def test_plan_runs_in_blocks_is_stored_and_resumes(services: Path, tmp_path: Path) -> None:
    exp = Experiment("t-runner", (Arm("a", "python-aiohttp-hello"), Arm("b", "python-aiohttp-hello")),
                     (Condition("main", TINY),), trials=2, seed=5, between_trials_s=0)
    res = run_experiment(exp, run_id="r1", out_dir=tmp_path / "runs", progress=False)
    trials = res.trials()
    assert res.ran == 4 and [t.meta["seq"] for t in trials] == [0, 1, 2, 3]
    assert all(t.meta["status"] == "ok" for t in trials)
    run = res.store.read_run()
    assert [p["arm"] for p in run["plan"]] == [t.arm for t in trials] and run["status"] == "complete"
    summaries = res.summaries()
    assert len(summaries) == 4 and (summaries["n"] > 0).all() and summaries["valid"].all()

    again = run_experiment(exp, run_id="r1", out_dir=tmp_path / "runs", progress=False)
    assert again.ran == 0 and again.skipped == 4
    with pytest.raises(ParameterError, match="different parameters"):
        run_experiment(Experiment("t-runner", exp.arms, exp.conditions, trials=3, seed=5), run_id="r1",
                       out_dir=tmp_path / "runs", progress=False)


def test_unrunnable_arm_is_kept_with_its_reason_and_a_dying_service_is_a_recorded_failure(
        services: Path, tmp_path: Path) -> None:
    exp = Experiment("t-runner2", (Arm("ok", "python-aiohttp-hello"), Arm("dotnet", "needs-dotnet"),
                                   Arm("dies", "dies-soon")),
                     (Condition("main", LoadSpec(connections=2, duration_s=1.5, warmup_s=0.1, timeout_s=1)),),
                     trials=1, seed=1, between_trials_s=0)
    if shutil.which("dotnet"):
        pytest.skip("dotnet is installed here")
    res = run_experiment(exp, out_dir=tmp_path / "runs", progress=False)
    assert "dotnet" in res.unavailable and "install the .NET 8 SDK" in res.unavailable["dotnet"]
    by_arm = {t.arm: t for t in res.trials()}
    assert set(by_arm) == {"ok", "dies"}
    assert by_arm["ok"].meta["status"] == "ok"
    dies = by_arm["dies"].meta
    assert dies["status"] == "failed" and ("died" in dies["reason"] or "ServiceStartError" in dies["reason"])
    table = status_table(res)
    assert "not run: no dotnet toolchain" in " ".join(table["reasons"])


@pytest.mark.skipif(shutil.which("wrk") is None, reason="needs wrk (apt-get install wrk)")
def test_cross_check_runs_wrk_on_the_same_instance_alternating_order(services: Path, tmp_path: Path) -> None:
    check = CrossCheck("wrk", (("threads", 1), ("connections", 2), ("duration_s", 1)))
    exp = Experiment("t-runner3", (Arm("a", "python-aiohttp-hello"),), (Condition("main", TINY, cross_check=check),),
                     trials=2, seed=1, between_trials_s=0)
    res = run_experiment(exp, out_dir=tmp_path / "runs", progress=False)
    orders = [t.meta["cross_check"]["order"] for t in res.trials()]
    assert orders == ["after", "before"]
    s = res.summaries()
    assert (s["xcheck_tool"] == "wrk").all() and (s["xcheck_rps"] > 0).all() and (s["xcheck_p50_ms"] > 0).all()


@pytest.mark.skipif(shutil.which("wrk") is None, reason="needs wrk (apt-get install wrk)")
def test_the_peer_runs_in_the_chosen_blocks_and_the_progress_counts_blocks_and_time(services: Path,
                                                                                    tmp_path: Path) -> None:
    from benchlib.analysis import Family, decided_questions
    from benchlib.analysis.peers import peer_beside, peer_summary

    check = CrossCheck("wrk", (("threads", 1), ("connections", 2), ("duration_s", 1)), arms=("a",))
    exp = Experiment("t-runner6", (Arm("a", "python-aiohttp-hello"), Arm("b", "python-aiohttp-hello")),
                     (Condition("main", TINY, cross_check=check),), trials=4, seed=1, between_trials_s=0,
                     cross_check_blocks=2)
    events: list[dict] = []
    looked: list[int] = []

    def decided(summaries):  # the hook sees the trials stored so far, once per block
        looked.append(len(summaries))
        return decided_questions([Family.against("ab", "a", ["b"], conditions=["main"], metrics=["p50_ms"])])(summaries)

    res = run_experiment(exp, out_dir=tmp_path / "runs", progress=events.append, decided=decided)
    peer = {t.block: t.meta["cross_check"]["order"] for t in res.trials() if t.meta.get("cross_check")}
    assert peer == {0: "after", 3: "before"}  # 2 of 4 blocks, first and last, the order alternating
    assert all(t.arm == "a" for t in res.trials() if t.meta.get("cross_check"))
    assert looked == [2, 4, 6, 8]
    blocks = [e for e in events if e["event"] == "block"]
    assert [(e["block"], e["blocks_done"], e["trials_done"]) for e in blocks] == [(0, 1, 2), (1, 2, 4), (2, 3, 6),
                                                                                 (3, 4, 8)]
    assert all(isinstance(e["decided"], list) for e in blocks)
    trials = [e for e in events if e["event"] == "trial"]
    assert all(e["seconds"] > 0 and e["left_s"] >= 0 for e in trials) and trials[-1]["left_s"] == 0
    assert events[0]["plan"] == [(p["condition"], p["arm"], p["block"] in (0, 3) and p["arm"] == "a")
                                 for p in (t.meta for t in sorted(res.trials(), key=lambda t: t.meta["seq"]))]
    summary = peer_summary(peer_beside(res, summaries=res.summaries()))
    assert list(summary["peer_blocks"]) == ["2 of 4"]
    assert res.store.read_run()["parameters"]["cross_check_blocks"] == 2


def test_an_invalid_trial_is_repeated_in_place_and_its_attempts_are_kept(services: Path, tmp_path: Path) -> None:
    # far more arrivals than one client CPU can dispatch on time: the guard marks the trial invalid
    flood = LoadSpec(model="open", rate_rps=300_000, connections=256, duration_s=0.3, warmup_s=0, timeout_s=20)
    exp = Experiment("t-runner4", (Arm("a", "python-aiohttp-hello"),), (Condition("main", flood),), trials=1,
                     seed=1, between_trials_s=0, repeat_invalid=1)
    res = run_experiment(exp, run_id="r4", out_dir=tmp_path / "runs", progress=False)
    (trial,) = res.trials()
    attempts = trial.meta.get("previous_attempts", [])
    if not attempts:
        pytest.skip("this machine dispatched 300,000 arrivals/s on time: no invalid trial to repeat")
    assert res.ran == 1 and trial.meta["status"] in ("ok", "invalid")
    assert len(attempts) == 1 and attempts[0]["status"] == "invalid"
    assert "sent late" in attempts[0]["reason"] or "busy" in attempts[0]["reason"], attempts[0]["reason"]
    folder = res.store.path / "trials" / "main" / "a"
    assert [p.name for p in folder.glob("b000.failed-*.parquet")] == ["b000.failed-1.parquet"]
    assert res.store.read_run()["parameters"]["repeat_invalid"] == 1
    with pytest.raises(ParameterError, match="repeat_invalid"):
        Experiment("x", exp.arms, exp.conditions, repeat_invalid=-1)
    # the default adds nothing to the stored parameters (runs stored before the option still resume)
    from benchlib.runner import experiment_parameters

    assert "repeat_invalid" not in experiment_parameters(Experiment("x", exp.arms, exp.conditions))


def test_a_load_generator_failure_stores_what_was_measured(services: Path, tmp_path: Path) -> None:
    """One of two load workers is killed mid-trial: the trial is stored as failed, with the
    reason and the other worker's rows (it was lost whole, before)."""
    from tests.loadgen.test_failure import kill_a_worker_in_traffic

    spec = LoadSpec(connections=4, duration_s=2.0, warmup_s=0.2, workers=2)
    exp = Experiment("t-runner5", (Arm("a", "python-aiohttp-hello"),), (Condition("main", spec),), trials=1,
                     seed=1, between_trials_s=0)
    state: dict = {}
    watcher = kill_a_worker_in_traffic(0.5, state)
    res = run_experiment(exp, out_dir=tmp_path / "runs", progress=False)
    watcher.join()
    assert "killed" in state
    (trial,) = res.trials()
    meta = trial.meta
    assert meta["status"] == "failed" and "LoadGenError" in meta["reason"] and "died" in meta["reason"]
    rows = trial.rows()
    assert len(rows) > 100 and len(np.unique(rows["worker"])) == 1
    assert meta["load"]["failed"] is True and meta["load"]["requests"]["total"] == len(rows)
    summaries = res.summaries()
    assert len(summaries) == 1 and not summaries["valid"].iloc[0] and summaries["n"].iloc[0] > 0


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_resume_reads_everything_before_it_writes_and_refuses_what_it_cannot_trust(
        services: Path, tmp_path: Path) -> None:
    from benchlib.errors import StorageError

    exp = Experiment("t-resume", (Arm("a", "python-aiohttp-hello"),), (Condition("main", TINY),), trials=2,
                     between_trials_s=0)
    res = run_experiment(exp, run_id="r5", out_dir=tmp_path / "runs", progress=False)
    first = res.trials()[0].path

    # a damaged trial file: named, and nothing in the run folder changes (run.json included)
    import struct

    data = bytearray(first.read_bytes())
    end = len(data) - 8 - struct.unpack("<I", data[-8:-4])[0]  # before the footer
    for i in range((4 + end) // 2, (4 + end) // 2 + 64):
        data[i] ^= 0x5A
    first.write_bytes(bytes(data))
    before = _snapshot(res.store.path)
    with pytest.raises(StorageError, match="unreadable trial file") as err:
        run_experiment(exp, run_id="r5", out_dir=tmp_path / "runs", progress=False)
    assert str(first) in str(err.value)
    assert _snapshot(res.store.path) == before

    # run.json deleted: its provenance cannot be invented anew
    first.unlink()
    (res.store.path / "run.json").unlink()
    before = _snapshot(res.store.path)
    with pytest.raises(StorageError, match="no run.json .*cannot be resumed: start a new run"):
        run_experiment(exp, run_id="r5", out_dir=tmp_path / "runs", progress=False)
    assert _snapshot(res.store.path) == before and not (res.store.path / "run.json").exists()


def test_names_that_would_leave_the_run_folder_are_refused(services: Path, tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="run id '..' must match"):
        run_experiment(Experiment("t-names", (Arm("a", "python-aiohttp-hello"),), (Condition("main", TINY),),
                                  trials=1), run_id="..", out_dir=tmp_path / "runs", progress=False)
    with pytest.raises(ParameterError, match=r"service \(a folder under services/\) '\.\./python-aiohttp-hello' must"):
        Arm("a", "../python-aiohttp-hello")
    assert not (tmp_path / "runs").exists()
