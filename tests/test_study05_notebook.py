"""Study 05 (gRPC vs JSON, seed 004): its notebook and its helper module.

* Pure parts, on synthetic per-trial summaries with known effects: the arms follow the
  parameters (languages, protocols, payloads; no h2c arm for Python), the conditions the
  concurrency list, each family holds the rows it should (``not run`` rows for .NET), and the
  conclusion states the effects and whether the seed's 4.4x lies in our interval.
* The notebook, executed by papermill with tiny parameters against the real services
  (marked ``notebook`` and ``integration``; about 1-2 minutes with warm builds): every arm
  ran and met its contract, the comparison tables are stored, the .NET arms are "not run",
  ghz and h2load ran beside Go's gRPC and JSON arms, the client-cost tables are shown.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from benchlib.analysis import family_markdown, run_family
from benchlib.analysis.reference import load_reference
from benchlib.analysis.studies import grpc_json as study
from benchlib.core.errors import ParameterError
from benchlib.stats.verdict import VerdictKind

# -- pure parts --------------------------------------------------------------------------------


def test_arms_follow_the_parameters() -> None:
    default = {a.name: a for a in study.study_arms()}
    assert len(default) == 16 and list(default)[:4] == ["go-grpc-small", "go-grpc-huge", "go-json-small",
                                                        "go-json-huge"]
    a = default["rust-json-huge"]
    assert (a.service, a.variant, a.endpoint) == ("rust-tonic-axum", "json", "huge-json")
    assert (default["dotnet-grpc-small"].service, default["python-grpc-small"].endpoint) == (
        "dotnet-grpc-json", "small-grpc")
    h2c = [a.name for a in study.study_arms("python,go,dotnet", "h2c", "small")]
    assert h2c == ["go-h2c-small", "dotnet-h2c-small"]  # uvicorn has no HTTP/2; canonical order
    assert {a.variant for a in study.study_arms("dotnet", "h2c")} == {"json-h2c"}
    with pytest.raises(ParameterError, match="valid: go, rust, python, dotnet"):
        study.study_arms("java")
    assert study.split_arm("python-h2c-huge") == ("python", "h2c", "huge")
    with pytest.raises(ParameterError, match="not a study 05 arm name"):
        study.split_arm("go-grpc")


def test_conditions_are_the_concurrency_list() -> None:
    conds = study.study_conditions("16,1", 2.0, 0.5)
    assert [c.name for c in conds] == ["c1", "c16"]
    assert [(c.load.connections, c.load.streams, c.load.protocol, c.load.duration_s) for c in conds] == [
        (1, 1, "http1", 2.0), (16, 1, "http1", 2.0)]
    assert all(c.cross_check is None for c in conds)
    assert study.ghz_arms("") == () and study.ghz_arms("go,python", "small") == ("go-grpc-small", "python-grpc-small")
    with_ghz = study.study_conditions("16", 2.0, 0.5, ghz=study.ghz_arms("go"))
    check = with_ghz[0].cross_check
    assert check is not None and check.tool == "ghz" and check.arms == ("go-grpc-small", "go-grpc-huge")
    assert dict(check.options) == {"connections": 16, "concurrency": 16, "duration_s": 2.0}
    with pytest.raises(ParameterError, match="valid: 1, 16, 64"):
        study.study_conditions("8", 1.0, 0.5)
    with pytest.raises(ParameterError, match="ghz calls gRPC methods only; not gRPC arms: go-json-small"):
        study.study_conditions("1", 1.0, 0.5, ghz=("go-json-small",))
    # h2load beside the JSON over HTTP/1.1 arms, ghz beside the gRPC ones, in one condition
    both = study.study_conditions("1", 0.8, 0.3, ghz=study.ghz_arms("go", "small"),
                                  h2load=study.h2load_arms("go,rust", "small"))[0]
    assert [(c.tool, c.arms) for c in both.cross_checks] == [("ghz", ("go-grpc-small",)),
                                                             ("h2load", ("go-json-small", "rust-json-small"))]
    assert dict(both.cross_check_of("rust-json-small").options) == {"connections": 1, "threads": 1, "duration_s": 0.8}
    assert study.h2load_arms("") == () and both.cross_check_of("go-h2c-small") is None
    with pytest.raises(ParameterError, match="h2load stands beside the JSON over HTTP/1.1 arms only; not such "
                                             "arms: go-h2c-small"):
        study.study_conditions("1", 1.0, 0.5, h2load=("go-h2c-small",))


def _summaries(latency_us: dict[str, float], conditions: tuple[str, ...] = ("c1", "c16"), blocks: int = 10,
               seed: int = 1) -> pd.DataFrame:
    """Per-trial summaries with known median latencies (µs) per arm at c1; at N callers the
    throughput is N / latency; server CPU per call is half the latency; 1% trial noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for cond in conditions:
        n = int(cond[1:])
        for b in range(blocks):
            drift = rng.normal(0, 0.02)
            for pos, (arm, us) in enumerate(latency_us.items()):
                lat = us * math.exp(drift + rng.normal(0, 0.01))
                rows.append({"condition": cond, "arm": arm, "block": b, "position": pos, "seq": b * 100 + pos,
                             "valid": True, "load_model": "closed", "offered_rps": None, "p50_ms": lat / 1e3,
                             "p99_ms": 3 * lat / 1e3, "mean_ms": 1.1 * lat / 1e3, "throughput_rps": n * 1e6 / lat,
                             "server_cpu_us_per_req": lat / 2})
    return study.with_microseconds(pd.DataFrame(rows))


LATENCY = {"go-grpc-small": 100.0, "go-json-small": 440.0, "go-grpc-huge": 200.0, "go-json-huge": 300.0,
           "python-grpc-small": 400.0, "python-json-small": 300.0, "python-grpc-huge": 500.0,
           "python-json-huge": 600.0}


def test_families_hold_their_rows_and_not_run_arms() -> None:
    names = [a.name for a in study.study_arms("go,python,dotnet")]
    fams = {f.key: f for f in study.families(names, ["c1", "c16"])}
    assert list(fams) == ["faithful", "fair", "payload"]
    assert {(c.group, c.baseline, c.arm, *c.labels) for c in fams["faithful"].rows()} >= {
        ("go small", "go-json-small", "go-grpc-small", "json", "grpc"),
        ("dotnet huge", "dotnet-json-huge", "dotnet-grpc-huge", "json", "grpc")}
    assert len(fams["faithful"].rows()) == 6 and fams["faithful"].metrics == ("p50_us",)
    assert {c.condition for c in fams["fair"].rows()} == {"c16"} and len(fams["fair"].rows()) == 6
    assert {c.group for c in fams["payload"].rows()} == {f"{lang} {p}" for lang in ("go", "python", "dotnet")
                                                       for p in ("grpc", "json")}
    with_h2c = {f.key: f for f in study.families([a.name for a in study.study_arms(protocols="grpc,json,h2c")],
                                                  ["c1", "c16", "c64"])}
    assert {c.group for c in with_h2c["h2c"].rows()} == {f"{lang} {p} {c}" for lang in ("go", "rust", "dotnet")
                                                        for p in study.PAYLOADS for c in ("c1", "c16", "c64")}
    s = _summaries(LATENCY)
    unavailable = {a: "no dotnet toolchain" for a in names if a.startswith("dotnet")}
    answers = {k: run_family(s, f, unavailable=unavailable) for k, f in fams.items()}
    t = answers["faithful"].comparison.table
    assert len(t) == 4 and (t["family_size"] == 4).all() and (t["correction"] == "holm").all()
    v = answers["faithful"].verdict("grpc", "p50_us", group="go small")
    assert v.estimate == pytest.approx(100 / 440, rel=0.03) and v.kind is VerdictKind.FASTER
    slow = answers["faithful"].verdict("grpc", "p50_us", group="python small")
    assert slow.kind is VerdictKind.SLOWER
    gone = answers["faithful"].verdict("grpc", "p50_us", group="dotnet small")
    assert gone.kind is VerdictKind.NOT_RUN and gone.reason == "no dotnet toolchain"
    fair = answers["fair"].verdict("grpc", "throughput_rps", group="go small c16")
    assert fair.estimate == pytest.approx(4.4, rel=0.03) and fair.kind is VerdictKind.FASTER
    assert "Holm-adjusted over these 12 rows" in family_markdown(answers["fair"])
    huge = answers["payload"].verdict("huge", "p50_us", group="go json")
    assert huge.estimate == pytest.approx(300 / 440, rel=0.03)

    text = study.conclusion_markdown(answers, ["go", "python", "dotnet"])
    assert "**go, small**: a JSON call took **4.4" in text and "the seed's 4.4× lies inside our interval" in text
    assert "verdict **faster**: gRPC answered sooner than JSON" in text
    assert "verdict **slower**: gRPC answered later than JSON" in text
    assert "**go, huge**: a JSON call took **1.5" in text and "the seed's 3.5× is above our interval" in text
    assert "**python, small**: a JSON call took **0.75" in text
    assert "**dotnet, small**: gRPC against JSON: not compared (not run: no dotnet toolchain)" in text
    assert "**go small c16**: gRPC's calls per second was 4.4" in text and "**The payload size**" in text


def test_original_vs_ours_sets_the_seeds_ratios_beside_ours() -> None:
    ref = load_reference("05")
    assert list(ref["mean_us"]) == [138.7, 277.9, 613.5, 964.1] and list(ref["request_bytes"]) == [14, 4203, 26, 4828]
    table = study.original_vs_ours(ref, _summaries(LATENCY, ("c1",), blocks=3))
    seed = table[table["source"].str.startswith("seed")].set_index(["payload", "protocol"])
    assert seed.loc[("small", "json"), "JSON / gRPC (means)"] == pytest.approx(613.5 / 138.7)
    assert seed.loc[("huge", "grpc"), "JSON / gRPC (means)"] == pytest.approx(964.1 / 277.9)
    ours = table[table["source"].str.startswith("ours")]
    assert list(ours["language"])[:4] == ["go"] * 4 and list(ours["protocol"])[:2] == ["grpc", "json"]
    go_small = ours[(ours["language"] == "go") & (ours["payload"] == "small")]
    assert go_small["JSON / gRPC (means)"].iloc[0] == pytest.approx(4.4, rel=0.03)
    assert (go_small["mean (µs)"] > go_small["median (µs)"]).all()


# -- the notebook, for real --------------------------------------------------------------------

SMALL = {"trials": 2, "duration_s": 0.3, "warmup_s": 0.1, "languages": "go,python,dotnet", "protocols": "grpc,json",
         "payloads": "small,huge", "concurrency": "1,16", "ghz_languages": "go", "h2load_languages": "go",
         "client_cost": True, "seed": 5, "run_id": "nbtest", "progress": False, "sequential": "yes"}


@pytest.mark.notebook
@pytest.mark.integration
def test_notebook_runs_end_to_end_with_every_arm_and_its_tables(tmp_path: Path, executed_notebook: Any) -> None:
    from benchlib.store.runstore import RunStore

    runs = tmp_path / "runs"
    run = executed_notebook("05_grpc_vs_json", SMALL)  # ran cleanly: no error, no warning

    store = RunStore(runs / study.STUDY / "nbtest")
    trials = store.trials()
    ran = {a.name: a for a in study.study_arms("go,python", SMALL["protocols"], SMALL["payloads"])
           + study.client_cost_arms(SMALL["protocols"], SMALL["payloads"])}
    assert {t.arm for t in trials} == set(ran) and len(trials) == 2 * 2 * len(ran)
    for t in trials:
        assert t.meta["status"] in ("ok", "invalid"), (t.arm, t.meta.get("reason"))
        assert t.meta["contract"]["ok"], (t.arm, t.meta["contract"])
        assert t.meta["endpoint"]["protocol"] == ("grpc" if "-grpc-" in t.arm else "http1")
        assert t.meta["cpus"]["server"] != t.meta["cpus"]["client"]
        assert (t.rows()["phase"] == 1).sum() > 10
    derived = store.path / "derived"
    rows = json.loads((derived / "comparison-faithful.json").read_text())["rows"]
    assert {r["condition"] for r in rows} <= {f"{lang} {p}" for lang in ("go", "python") for p in study.PAYLOADS}
    assert {r["metric"] for r in rows} == {"p50_us"} and {r["arm"] for r in rows} == {"grpc"}
    assert (derived / "comparison-fair.json").is_file() and (derived / "comparison-payload.json").is_file()
    # sequential="yes": the run and its analysis use one design (2 blocks: its one look is the last)
    assert json.loads((derived / "comparison-faithful.json").read_text())["params"]["sequential"]["looks"] == [2]
    # ghz ran beside benchlib on Go's gRPC arms, h2load on Go's JSON arms (the seed's POST
    # body, all answered 2xx), on the same instance, first in odd blocks
    for t in trials:
        x = t.meta.get("cross_check")
        if t.arm in ("go-grpc-small", "go-grpc-huge", "go-json-small", "go-json-huge"):
            assert x and not x.get("error"), (t.arm, x)
            assert x["tool"] == ("ghz" if "-grpc-" in t.arm else "h2load")
            assert x["order"] == ("before" if t.block % 2 else "after") and x["requests_per_s"] > 0
            if x["tool"] == "ghz":
                assert x["concurrency"] == x["connections"] == int(t.condition[1:])
            else:
                assert (x["method"], x["body_bytes"]) == ("POST", len(study.payload_file(t.arm.split("-")[2],
                                                                                         "request.json")))
                assert x["non_2xx"] == 0 and x["latency_percentiles_ms"]["50"] > 0
        else:
            assert not x, t.arm
    assert run.html is not None
    page = run.html.read_text()
    assert "ghz did not run" not in page and "h2load did not run" not in page
    # the client's cost per path and the ratios with it taken out, from this run
    assert "client CPU per call (µs)" in page and "gRPC / JSON, client CPU taken out" in page
    assert "canned path taken out (bound)" in page
    assert "dotnet-grpc-small" in page and "not run: no dotnet toolchain" in page
    assert "SendSmallRequestToServer" in page and "JSON / gRPC (means)" in page
    assert "Sequential stopping" in page and "sequential=yes" in page and "): on: " in page
    assert "stopping saved nothing" in page
