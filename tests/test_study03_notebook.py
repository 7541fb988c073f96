"""Study 03 (FastCGI behind nginx, Node vs C#): its notebook and its module.

* ``benchlib.analysis.studies.fastcgi_nginx`` (pure parts, fast): the arms and loads follow the
  parameters (ab's flags equal benchlib's load), the four families hold the rows they should,
  an arm answering 502s never reads "faster" (its rows read "no valid trial", its error rate
  "more errors"), the seed's best of 10 sits beside our best and median, and the plateau and
  the conclusion say what the numbers given say. The generic parts (max_error_rate, the
  responses and saturation tables, ab beside benchlib) are tested with the analysis layer.
* The notebook, executed by papermill with tiny parameters against the real services and
  nginx (marked ``notebook`` and ``integration``): every arm ran behind nginx or without it
  as named, met its contract, ab ran beside benchlib in every trial of its first blocks (and
  in no other) in alternating order with the seed's flags, node-fastcgi behind keep-conn-on answered 502s, the stored comparison
  tables hold the expected rows, and the HTML report shows this run's tables.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis.studies import fastcgi_nginx as study
from benchlib.core.design import cross_check_blocks
from benchlib.core.errors import ParameterError
from benchlib.stats.verdict import VerdictKind

# -- pure parts ----------------------------------------------------------------------------------


def test_arms_and_loads_follow_the_parameters() -> None:
    arms = {a.name: a for a in study.study_arms()}
    assert list(arms) == study.DEFAULT_ARMS.split(",")
    node = arms["node-nginx-off"]
    assert (node.service, node.variant, node.front, node.front_variant) == (
        "node-fastcgi", "fastcgi", "nginx-fastcgi", "keep-conn-off")
    assert arms["go-nginx-on"].front_variant == "keep-conn-on" and arms["go-http"].front is None
    assert [a.name for a in study.study_arms("go-http, go4-nginx-off,go-http")] == ["go4-nginx-off", "go-http"]
    with pytest.raises(ParameterError, match="unknown arm\\(s\\) \\['php-nginx-on'\\]; valid: node-nginx-off"):
        study.study_arms("php-nginx-on")

    c20, c400 = study.study_conditions(0.25, 0.025)
    assert (c20.name, c20.load.connections, c20.load.requests, c400.load.connections, c400.load.requests) == (
        "c20", 20, 5000, 400, 5000)
    for c in (c20, c400):  # ab exactly as the seed (no -k: HTTP/1.0, a new connection per request), same counts
        assert c.load.model == "closed" and not c.load.keep_alive and c.load.http_version == "1.0"
        assert dict(c.cross_check.options) == {"connections": c.load.connections, "requests": c.load.requests,
                                               "keep_alive": False} and c.cross_check.tool == "ab"
    (only,) = study.study_conditions(1.0, 0, ab=False)
    assert only.load.requests == 20_000 and only.cross_check is None  # the seed's full c20
    assert study.scaled_load("c400", 0.0001).requests == 400  # never fewer requests than connections (ab's rule)
    with pytest.raises(ParameterError, match="scale must be a positive number"):
        study.study_conditions(0, 0.1)
    # ab in the first blocks only by default; full: the seed's request counts, ab in every block
    assert study.run_scale(full=False, trials=10, scale=0.05, c400_scale=0.005, ab_blocks=4) == {
        "scale": 0.05, "c400_scale": 0.005, "ab_blocks": 4}
    assert study.run_scale(full=False, trials=4, scale=0.05, c400_scale=0.005, ab_blocks=4)["ab_blocks"] == "all"
    assert study.run_scale(full=True, trials=10, scale=0.05, c400_scale=0.005, ab_blocks=4) == {
        "scale": 1.0, "c400_scale": 1.0, "ab_blocks": "all"}
    with pytest.raises(ParameterError, match="ab_blocks must be a whole number >= 1"):
        study.run_scale(full=False, trials=10, scale=0.05, c400_scale=0.005, ab_blocks=0)
    c20, c400 = study.study_conditions(1.0, 1.0)
    assert c20.load.requests == 20_000 and c400.load.requests == 200_000
    assert c20.cross_check.tool == c400.cross_check.tool == "ab" and c20.cross_check.applies_to("go-http")
    with pytest.raises(ParameterError, match="unknown condition 'c9'; valid: c20, c400"):
        study.scaled_load("c9", 1.0)


def test_families_hold_the_rows_of_their_question() -> None:
    fams = {f.key: f for f in study.families(study.DEFAULT_ARMS.split(","), ["c20", "c400"])}
    assert list(fams) == ["seed", "fastcgi", "nginx", "keepconn"]
    pairs = {k: [(c.baseline, c.arm) for c in f.contrasts] for k, f in fams.items()}
    assert pairs == {"seed": [("node-nginx-off", "dotnet-nginx-off")],
                     "fastcgi": [("node-nginx-off", "go-nginx-off"), ("node-nginx-off", "php-nginx-off")],
                     "nginx": [("node-http", "node-nginx-off"), ("go-http", "go-nginx-off")],
                     "keepconn": [("go-nginx-off", "go-nginx-on"), ("node-nginx-off", "node-nginx-on")]}
    for f in fams.values():
        assert f.metrics == study.METRICS and f.conditions == ("c20", "c400")
        assert f.max_error_rate == study.MAX_ERROR_RATE
    assert list(fams["nginx"].questions) == ["node", "go"]
    lean = study.families(["node-nginx-off", "go-nginx-off", "go4-nginx-off"], ["c20"])
    assert [(f.key, [c.arm for c in f.contrasts]) for f in lean] == [("fastcgi", ["go-nginx-off", "go4-nginx-off"])]


def _summaries(arms: dict[str, tuple[float, float, float]], blocks: int = 10, seed: int = 2) -> pd.DataFrame:
    """Per-trial summaries with known effects: arm -> (goodput req/s, server CPU µs/request, error
    rate), 2% noise paired by block, both conditions; an error-bound arm's 502s come fast."""
    rng = np.random.default_rng(seed)
    rows = []
    for cond in ("c20", "c400"):
        for b in range(blocks):
            drift = rng.normal(0, 0.02)
            for pos, (arm, (rps, cpu, err)) in enumerate(arms.items()):
                tput = rps * math.exp(drift + rng.normal(0, 0.02))
                rows.append({"condition": cond, "arm": arm, "block": b, "position": pos, "seq": b * 20 + pos,
                             "valid": True, "status": "ok", "load_model": "closed", "error_rate": err,
                             "throughput_rps": tput, "goodput_rps": tput * (1 - err) + 1e-9,
                             "p50_ms": 20_000 / tput, "p99_ms": 60_000 / tput, "n": 5000,
                             "server_cpu_us_per_req": cpu * math.exp(rng.normal(0, 0.02))})
    return pd.DataFrame(rows)


EFFECTS = {"node-nginx-off": (1_100.0, 900.0, 0.0), "go-nginx-off": (3_000.0, 300.0, 0.0),
           "php-nginx-off": (4_000.0, 190.0, 0.0), "node-http": (2_000.0, 450.0, 0.0),
           "go-http": (9_000.0, 60.0, 0.0), "node-nginx-on": (8_000.0, 45.0, 1.0),
           "go-nginx-on": (6_000.0, 130.0, 0.0)}


def _reference() -> pd.DataFrame:
    from benchlib.analysis.reference import load_reference

    return load_reference("03")


def test_an_arm_answering_502s_never_reads_faster_and_the_conclusion_says_what_was_measured() -> None:
    from benchlib.analysis import run_family

    s = _summaries(EFFECTS)
    unavailable = {"dotnet-nginx-off": "no dotnet toolchain"}
    answers = {f.key: run_family(s, f, unavailable=unavailable, seed=0)
               for f in study.families(study.DEFAULT_ARMS.split(","), ["c20", "c400"])}
    assert answers["seed"].comparison is None
    assert answers["seed"].verdict("dotnet-nginx-off", "goodput_rps", group="c20").kind is VerdictKind.NOT_RUN
    go = answers["fastcgi"].verdict("go-nginx-off", "goodput_rps", group="c20")
    assert go.kind is VerdictKind.FASTER and go.estimate == pytest.approx(3000 / 1100, rel=0.03)
    cost = answers["nginx"].verdict("go-nginx-off", "server_cpu_us_per_req", group="c400")
    assert cost.kind is VerdictKind.SLOWER and cost.word == "costlier" and cost.estimate == pytest.approx(5, rel=0.03)
    keep = answers["keepconn"]
    assert keep.verdict("go-nginx-on", "goodput_rps", group="c20").kind is VerdictKind.FASTER
    for metric in ("goodput_rps", "p50_ms", "p99_ms", "server_cpu_us_per_req"):  # 502s: never faster, never cheaper
        v = keep.verdict("node-nginx-on", metric, group="c20")
        assert v.kind is VerdictKind.NO_VALID_TRIAL and "node-nginx-on answered errors in 10 of 10 trials" in v.reason
    errors = keep.verdict("node-nginx-on", "error_rate", group="c20")
    assert errors.kind is VerdictKind.SLOWER and errors.word == "more errors" and errors.estimate == pytest.approx(1)
    for answer in answers.values():
        if answer.comparison is not None:
            t = answer.comparison.table
            assert (t["correction"] == "holm").all() and set(t["condition"]) == {"c20", "c400"}

    sat = pd.DataFrame([
        {"condition": "c20", "arm": "node-nginx-off", "benchlib req/s": 1100.0, "benchlib client CPU": 0.2,
         "server CPUs busy": 0.96, "server CPUs": 1, "front share of server CPU": 0.2, "front req/s at full CPU": 5500.0,
         "ab CPU": 0.2, "ab req/s per CPU-second": 9000.0, "near its CPU limit": "server"},
        {"condition": "c20", "arm": "php-nginx-off", "benchlib req/s": 4000.0, "benchlib client CPU": 0.4,
         "server CPUs busy": 0.85, "server CPUs": 1, "front share of server CPU": 0.5, "front req/s at full CPU": 10000.0,
         "ab CPU": 0.3, "ab req/s per CPU-second": 14000.0, "near its CPU limit": "server"},
        {"condition": "c20", "arm": "go-http", "benchlib req/s": 8000.0, "benchlib client CPU": 0.93,
         "server CPUs busy": 0.5, "server CPUs": 1, "front share of server CPU": math.nan,
         "front req/s at full CPU": math.nan, "ab CPU": 0.9, "ab req/s per CPU-second": 16000.0,
         "near its CPU limit": "benchlib client, ab"},
        {"condition": "c20", "arm": "node-nginx-on", "benchlib req/s": 8000.0, "benchlib client CPU": 0.5,
         "server CPUs busy": 0.4, "server CPUs": 1, "front share of server CPU": 0.6, "front req/s at full CPU": 20000.0,
         "ab CPU": 0.5, "ab req/s per CPU-second": 15000.0, "near its CPU limit": "none"}])
    responses = pd.DataFrame([{"condition": "c20", "arm": a, "error rate, median": 1.0 if a == "node-nginx-on" else 0.0}
                              for a in sat["arm"]])
    plateau = study.plateau_markdown(sat, responses)
    assert "near the limit: **server**: node-nginx-off (server 0.96 of 1 CPU, nginx 20% of it" in plateau
    assert "near the limit: **benchlib client, ab**: go-http" in plateau
    assert "node-nginx-on (answers were errors)" in plateau
    assert "benchlib's rates ran from 1,100 to 4,000 req/s, a factor 3.64: no common plateau" in plateau
    assert "could serve 5,500-10,000 req/s" in plateau and "at most 16,000 requests per CPU-second" in plateau

    by_arm = pd.DataFrame({"condition": ["c20", "c20"], "arm": ["go-http", "php-nginx-off"], "rps_ratio": [1.8, 1.1]})
    text = study.conclusion_markdown(answers, _reference(), sat, responses, by_arm)
    assert text.startswith("**The seed's question** (can AsyncFastCGI.NET match node-fastcgi behind nginx?): "
                           "AsyncFastCGI.NET behind nginx against node-fastcgi behind nginx: not compared (not run: "
                           "no dotnet toolchain). The seed's best-of-10 figures were 19,495 against 19,454 req/s at c=20")
    assert "- *c20*: go-nginx-off's goodput was 2.7" in text
    assert ("node-nginx-on against node-nginx-off: not compared (no valid trial: node-nginx-on answered errors"
            in text)
    assert "error rate differed from node-nginx-off's by +100.0 pp [+100.0, +100.0]" in text
    assert "**more errors**" in text
    assert "ran from 1.10 to 1.80" in text


def test_the_seeds_best_of_10_sits_beside_our_best_and_median() -> None:
    beside = pd.DataFrame([{"condition": "c20", "arm": "node-nginx-off", "block": b, "status": "ok", "peer_error": None,
                            "peer_rps": rps, "peer_mean": 20_000 / rps, "peer_max": 30.0 + b, "peer_errors": 0}
                           for b, rps in enumerate([1500.0, 1700.0, 1600.0, 1650.0, 1550.0, 2000.0])])
    summaries = _summaries(EFFECTS, blocks=6)
    summaries["mean_ms"], summaries["max_ms"] = 10.0, 40.0
    table = study.original_vs_ours(_reference(), beside, summaries, unavailable={"dotnet-nginx-off": "no .NET SDK"},
                                   scales={"c20": 0.25})
    rows = table[(table["concurrency"] == 20) & (table["library"] == "NodeJS")].set_index("source")
    assert list(rows.index) == ["seed: ab -c 20 -n 20,000, best of 10", "ours: ab -c 20 -n 5,000, best of 6 trials",
                                "ours: ab -c 20 -n 5,000, median [CI]",
                                "ours: benchlib, the same load, median [CI]"]
    assert rows.loc["seed: ab -c 20 -n 20,000, best of 10", "req/s"] == "19,454"
    assert rows.loc["ours: ab -c 20 -n 5,000, best of 6 trials", "req/s"] == "2,000"
    assert rows.loc["ours: ab -c 20 -n 5,000, best of 6 trials", "longest (ms)"] == "35"
    assert rows.loc["ours: ab -c 20 -n 5,000, median [CI]", "req/s"] == "1,625 [1,500, 2,000] (96.9% CI)"
    dotnet = table[(table["library"] == "AsyncFastCGI.NET") & (table["concurrency"] == 20)]
    assert list(dotnet["req/s"]) == ["19,495", "not run: no .NET SDK"]
    assert "not reproduced: LB FastCGI" in " ".join(table.loc[table["library"] == "LB FastCGI", "req/s"])
    assert "not run: c400 left out of this run" in set(table.loc[table["concurrency"] == 400, "req/s"])
    words = study.best_of_n_markdown(beside)
    assert "ab's best trial was +23.1% to +23.1% above its median trial" in words  # 2000 / 1625
    assert "ab did not run" in study.best_of_n_markdown(beside.iloc[0:0])


def test_limits_found_come_from_the_run_s_records() -> None:
    from benchlib.store.records import TrialRecord
    from benchlib.store.results import Run

    def trial(arm: str, block: int, *, client: float, statuses: dict[str, int], ab: dict[str, int] | None) -> Any:
        meta = {"condition": "c20", "arm": arm, "block": block, "seq": block, "status": "ok", "runtime": "local",
                "load": {"requests": {"measure": 1000}, "status_counts": statuses,
                         "client_cpu": {"per_cpu": {"0": client}}}}
        if ab is not None:
            meta["cross_check"] = {"tool": "ab", "requests": 1000, "requests_per_s": 900.0, "order": "after", **ab}
        return TrialRecord.from_meta(meta)

    trials = [trial("node-nginx-on", b, client=0.3, statuses={"502": 1000},
                    ab={"failed": 10, "non_2xx": 990} if b < 2 else None) for b in range(4)]
    trials += [trial("go-http", b, client=0.85, statuses={"200": 1000}, ab={"failed": 0, "non_2xx": 0} if b < 2 else None)
               for b in range(4)]
    run = Run(study.STUDY, "r", Path("."), tuple(trials), unavailable={"dotnet-nginx-off": "no dotnet toolchain"},
              arms=("node-nginx-on", "go-http"), conditions=("c20",))
    responses = pd.DataFrame([{"condition": "c20", "arm": "node-nginx-on", "HTTP statuses": "502: 4,000", "trials": 4,
                               "error rate, median": 1.0},
                              {"condition": "c20", "arm": "go-http", "HTTP statuses": "200: 4,000", "trials": 4,
                               "error rate, median": 0.0}])
    text = study.limits_markdown(run, responses, {"c20": 1000})
    assert "- **not run**: dotnet-nginx-off: no dotnet toolchain" in text
    assert "- **answered errors**: node-nginx-on (c20): 502: 4,000 over 4 trials (median error rate 100%)" in text
    assert "go-http (c20)" not in text
    assert "counted 20 of this run's 2,000 error answers to ab; the other 1,980 were only" in text
    assert "- **client near its CPU limit** (c20): go-http: benchlib's rate there is a lower bound" in text
    assert "- **ab ran in 2 of 4 blocks** (blocks 0, 1)" in text
    assert "- **c20**: 1,000 measured requests per trial (50.0 per connection; the seed: 1,000); too few for p99_ms" in text
    assert "p90_ms" not in text


# -- the notebook, for real ------------------------------------------------------------------------

SMALL = {"trials": 3, "ab_blocks": 2, "scale": 0.02, "c400_scale": 0.002, "warmup_s": 0.1, "seed": 5,
         "run_id": "nbtest"}


@pytest.mark.notebook
@pytest.mark.integration
@pytest.mark.timeout(1800)
def test_notebook_runs_end_to_end_behind_nginx_with_ab_beside_benchlib(tmp_path: Path,
                                                                       executed_notebook: Any) -> None:
    from benchlib.analysis import run_family, verdict_table
    from benchlib.runtime import toolchains
    from benchlib.runtime.manifest import get_manifest
    from benchlib.store.results import open_run
    from benchlib.store.runstore import RunStore

    for name in ("node-fastcgi", "go-fcgi", "php-fpm-hello", "nginx-fastcgi"):
        ok, why = toolchains.availability(get_manifest(name))
        if not ok:
            pytest.skip(f"not run: {why}")
    if not toolchains.which("ab"):
        pytest.skip("not run: no ab (apache2-utils)")
    runs = tmp_path / "runs"
    run = executed_notebook("03_fastcgi_nginx", SMALL)  # ran cleanly: no error, no warning

    store = RunStore(runs / study.STUDY / "nbtest")
    trials = store.trials()
    arms = {a.name: a for a in study.study_arms()}
    ran = set(arms) - {"dotnet-nginx-off"} if not toolchains.which("dotnet") else set(arms)
    assert {t.arm for t in trials} == ran and len(trials) == 3 * 2 * len(ran)  # 3 blocks x c20, c400
    run_json = json.loads((store.path / "run.json").read_text())
    if "dotnet-nginx-off" not in ran:
        assert run_json["unavailable"]["dotnet-nginx-off"].startswith("no dotnet toolchain")
    ab_blocks = cross_check_blocks(SMALL["trials"], SMALL["ab_blocks"])  # (0, 2): first and last
    for t in trials:
        m, arm = t.meta, arms[t.arm]
        assert m["status"] in ("ok", "invalid"), (t.arm, m.get("reason"))
        assert m["contract"]["ok"], (t.arm, m["contract"])
        load = m["load"]["loadspec"]
        c, n = (20, 400) if t.condition == "c20" else (400, 400)  # 20,000 x 0.02 and 200,000 x 0.002
        assert (load["connections"], load["requests"], load["keep_alive"], load["http_version"]) == (c, n, False, "1.0")
        assert m["load"]["requests"]["measure"] == n
        if arm.front is None:  # plain HTTP: loaded directly, nothing in front
            assert "front" not in m and m["contract"]["url"].startswith("http://127.0.0.1:")
        else:  # behind nginx: the variant asked for, on the server's CPUs, the contract and the load through it
            assert (m["front"]["service"], m["front"]["variant"]) == ("nginx-fastcgi", arm.front_variant)
            assert m["front"]["enforced"]["cpus"] == m["enforced"]["cpus"] == m["cpus"]["server"]
            assert m["contract"]["url"] == f"http://127.0.0.1:{m['front']['port']}/"
        assert len(m.get("ports", [0])) == (4 if arm.variant == "fastcgi" else 1)
        statuses = m["load"]["status_counts"]
        if t.block not in ab_blocks:  # ab in ab_blocks blocks spread over the run only
            assert "cross_check" not in m, (t.arm, t.block)
            assert t.arm == "node-nginx-on" or statuses == {"200": n}, (t.arm, statuses)
            continue
        # ab ran exactly as the seed, on the same instance, first in odd blocks and second in even ones
        x = m["cross_check"]
        if x.get("error"):  # ab without -r, as the seed ran it, gives up at a connection reset: that
            # happens only where nginx finds no live backend (node-fastcgi with kept connections)
            assert t.arm == "node-nginx-on" and "apr_socket_recv" in x["error"], (t.arm, x["error"])
            continue
        assert x["command"][-7:-1] == ["ab", "-q", "-c", str(c), "-n", str(n)] and "-k" not in x["command"]
        assert x["order"] == ("before" if ab_blocks.index(t.block) % 2 else "after") and x["requests"] == n
        if t.arm == "node-nginx-on":  # node-fastcgi 1.3.3 closes kept backend connections: nginx answers 502
            # (to the tool that runs once nginx has marked the backends failed, or to both)
            assert statuses.get("502", 0) + x["non_2xx"] > 0, (statuses, x["non_2xx"])
        else:
            assert statuses == {"200": n} and x["non_2xx"] == 0 and x["failed"] == 0, (t.arm, statuses, x["failed"])

    # the comparison tables stored with the run hold the expected rows
    summaries = open_run(store).summaries()
    derived = store.path / "derived"
    fams = {f.key: f for f in study.families(list(arms), ["c20", "c400"])}
    stored = {k: json.loads((derived / f"comparison-{k}.json").read_text())["rows"]
              for k in ("fastcgi", "nginx", "keepconn")}
    # a pair is compared where both arms have a valid trial in the same block; the guard may
    # invalidate a closed loop of new connections whose client CPU was saturated (an idle
    # machine's fast server), and then the pair reads "no valid trial", never a verdict
    valid = summaries[summaries["valid"].astype(bool)]
    cells = {(r.arm, r.condition, r.block) for r in valid.itertuples()}

    def pairable(arm: str, base: str) -> bool:
        return any((arm, c, b) in cells and (base, c, b) in cells for c in ("c20", "c400")
                   for b in range(SMALL["trials"]))

    unavailable = json.loads((store.path / "run.json").read_text())["unavailable"]
    for key, pairs in (("fastcgi", {("go-nginx-off", "node-nginx-off"), ("php-nginx-off", "node-nginx-off")}),
                       ("nginx", {("node-nginx-off", "node-http"), ("go-nginx-off", "go-http")})):
        assert {(r["arm"], r["baseline"]) for r in stored[key]} == {p for p in pairs if pairable(*p)}, key
        answer = run_family(summaries, fams[key], unavailable=unavailable, seed=SMALL["seed"])
        for arm, _base in pairs - {p for p in pairs if pairable(*p)}:
            # explained, not decided: no valid pair, or (go-http on a slow minute) the client set the rate
            assert answer.verdict(arm, "goodput_rps", group="c20").kind in (
                VerdictKind.NO_VALID_TRIAL, VerdictKind.CLIENT_BOUND), (key, arm)
    keep = {(r["arm"], r["metric"], r["condition"]): r for r in stored["keepconn"]}
    assert not keep or {r["metric"] for r in stored["keepconn"]} == set(study.METRICS)
    assert not (derived / "comparison-seed.json").exists() or "dotnet-nginx-off" in ran
    bad = summaries[(summaries["arm"] == "node-nginx-on") & (summaries["error_rate"] > study.MAX_ERROR_RATE)]
    for cond in set(bad["condition"]):  # its 502s never read faster, cheaper or slower
        if len(bad[bad["condition"] == cond]) == 3:
            assert keep[("node-nginx-on", "goodput_rps", cond)]["verdict"].startswith("no valid trial: node-nginx-on "
                                                                                      "answered errors")

    # the report shows the tables computed from this run's stored trials
    page = run.html.read_text()
    for heading in ("The original numbers", "Contract check", "1. The seed", "2. FastCGI implementations",
                    "3. What nginx and FastCGI cost", "4. fastcgi_keep_conn on against off", "The plateau",
                    "ab beside benchlib", "best of 10", "Limits found", "ab ran in 2 of 3 blocks", "Conclusion", "Provenance",
                    "502: "):
        assert heading in page, heading
    for key in ("fastcgi", "nginx", "keepconn"):
        cells = verdict_table(run_family(summaries, fams[key], unavailable=json.loads(
            (store.path / "run.json").read_text())["unavailable"], seed=SMALL["seed"]).comparison)
        assert all(cell in page for cell in cells["arm / baseline [95% CI]"]), key
    assert "19,454" in page and "ab -c 20 -n 400, best of 2 trials" in page
    # sequential stopping: auto is off at 3 blocks (a 20-row question's only look is the last), said with why;
    # the analysis is the fixed one
    assert "Sequential stopping" in page and "sequential=auto" in page and "): off: " in page and "one look" in page
    assert "sequential" not in json.loads((derived / "comparison-fastcgi.json").read_text())["params"]
