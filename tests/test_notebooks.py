"""Notebooks: statically well-formed, and the quickstart executed for real by papermill with
tiny parameters, asserting on the stored rows, the comparison table and the HTML report."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from benchlib.publish.execute import run_notebook
from benchlib.publish.notebooks import list_notebooks, notebook_parameters
from benchlib.store.records.run import RunRecord

NOTEBOOKS = list_notebooks(Path(__file__).resolve().parent.parent / "notebooks")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_committed_stripped_with_one_typed_parameters_cell(path: Path) -> None:
    nb = nbformat.read(str(path), as_version=4)
    from benchlib.publish import kernel

    assert nb.metadata.kernelspec.name == kernel.NAME, "the notebook names the kernel scripts/setup.sh registers"
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged 'parameters'"
    for c in nb.cells:
        if c.cell_type == "code":
            assert not c.get("outputs") and not c.get("execution_count"), "outputs must be stripped"
    params = notebook_parameters(path)
    assert params, "the parameters cell declares parameters"
    for name, p in params.items():
        assert p["inferred_type_name"] not in (None, "None"), f"{name} needs a type annotation"
        assert p["help"], f"{name} needs a help comment"
    for required in ("trials", "seed", "out_dir", "run_id", "progress"):
        assert required in params, f"every study notebook takes {required!r}"
    if not path.stem.startswith(("9", "10_ab")):  # 9x compare runtimes themselves; 10_ab's sides say theirs
        assert "runtime" in params, "study notebooks take 'runtime'"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_budget_and_cluster_parameters_are_off_by_default_and_say_what_they_take(path: Path) -> None:
    """Budget 0 (the fixed design) and cluster None (this machine) by default; ``run_study`` reads
    both with the others, as its study's record declares them (``tests/analysis/test_registry.py``),
    and sends them to the experiment, the stored parameters and the design section."""
    params = notebook_parameters(path)
    assert (params["budget_min"]["default"], params["target_mde"]["default"]) == ("0.0", "5.0")
    assert "minutes" in params["budget_min"]["help"] and "0: no budget" in params["budget_min"]["help"]
    assert "percent" in params["target_mde"]["help"]
    assert (params["cluster"]["default"], params["cluster"]["inferred_type_name"]) == ("None", "Optional[str]")
    assert "pip install 'benchlib[cluster]'" in params["cluster"]["help"] and "local:N" in params["cluster"]["help"]


@pytest.mark.notebook
@pytest.mark.integration
@pytest.mark.parametrize("runtime", ["local", pytest.param("docker", marks=pytest.mark.docker)])
def test_quickstart_runs_end_to_end_and_its_report_shows_this_runs_numbers(tmp_path: Path, runtime: str) -> None:
    from benchlib import stats
    from benchlib.store.runstore import RunStore

    runs = tmp_path / "runs"
    run = run_notebook("00_quickstart", {"runtime": runtime, "trials": 2, "duration_s": 0.5, "warmup_s": 0.1,
                                         "connections": 4, "out_dir": str(runs), "run_id": "nbtest", "seed": 3},
                       reports_dir=tmp_path / "reports")
    assert run.ok, run.error
    assert run.html is not None and run.html.exists()

    store = RunStore(runs / "00_quickstart" / "nbtest")
    trials = store.trials()
    assert len(trials) == 4 and {t.arm for t in trials} == {"go-nethttp", "python-aiohttp"}
    for t in trials:
        assert t.meta["status"] == "ok", t.meta.get("reason")
        rows = t.rows()
        assert (rows["phase"] == 1).sum() > 100 and (rows["error"] == 0).all()
        assert t.meta["contract"]["ok"] and t.meta["cpus"]["server"] != t.meta["cpus"]["client"]
        assert t.meta["runtime"] == runtime and t.meta["enforced"]["runtime"] == runtime
    run_json = json.loads((store.path / "run.json").read_text())
    assert run_json["provenance"]["cpu_model"] and run_json["provenance"]["git"]["sha"]
    assert run_json["notebook_parameters"]["trials"] == 2

    # the table in the report is the one computed from the stored trials of this run
    from benchlib.analysis import verdict_table
    from benchlib.store.results import open_run

    expected = stats.compare(open_run(store).summaries(), baseline="python-aiohttp",
                             metrics=("p50_ms", "p99_ms", "throughput_rps"), seed=3)
    page = run.html.read_text()
    cells = verdict_table(expected)["arm / baseline [95% CI]"].tolist()
    assert len(cells) == 3 and all(cell in page for cell in cells), cells
    assert "arm / baseline [95% CI]" in page and "Contract check" in page
    assert (store.path / "derived" / "comparison.json").exists()
    # one machine, no cluster: no load-hosts section (tests/cluster/test_cluster_notebook.py: with one)
    from benchlib.analysis.hosts import HEADING, load_hosts_section

    assert HEADING.lstrip("# ") not in page
    assert not load_hosts_section(open_run(store)) and open_run(store).parameters.get("cluster") is None
    nb = nbformat.read(str(run.executed), as_version=4)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors

    # the report is kept under its run, with the verdicts' JSON and the per-trial summaries; no raw rows
    kept = tmp_path / "reports" / "00_quickstart"
    assert run.kept is not None and run.kept.html == kept / "nbtest.html" and run.kept.runs == (kept / "nbtest",)
    assert (kept / "nbtest.html").read_text() == page and (kept / "nbtest.ipynb").is_file()
    assert (kept / "nbtest" / "derived" / "comparison.json").read_bytes() == \
        (store.path / "derived" / "comparison.json").read_bytes()
    assert len(pd.read_csv(kept / "nbtest" / "summaries.csv")) == 4 and not (kept / "nbtest" / "trials").exists()


def test_report_html_hides_code(tmp_path: Path) -> None:
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    from benchlib.publish.html_export import export_html

    nb = new_notebook(cells=[new_markdown_cell("# Title"), new_code_cell("secret_code_marker = 1\nprint('visible output')")])
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="visible output\n")]
    path = tmp_path / "x.ipynb"
    nbformat.write(nb, str(path))
    html = export_html(path).read_text()
    assert "visible output" in html and "secret_code_marker" not in html


def test_report_html_shows_the_lead_cells_right_after_the_title(tmp_path: Path) -> None:
    """The claim block runs after the run cell but reads first: cells tagged ``lead`` follow the
    title in the HTML, and every study notebook with claims (and the A/B gate) tags its block."""
    from nbformat.v4 import new_markdown_cell, new_notebook

    from benchlib.publish.html_export import LEAD_TAG, export_html

    nb = new_notebook(cells=[new_markdown_cell("# Title\n\nINTRO_TEXT"), new_markdown_cell("RUN_SECTION"),
                             new_markdown_cell("CLAIM_BLOCK", metadata={"tags": [LEAD_TAG]}),
                             new_markdown_cell("LATER_SECTION")])
    path = tmp_path / "x.ipynb"
    nbformat.write(nb, str(path))
    html = export_html(path).read_text()
    assert (html.index("Title") < html.index("CLAIM_BLOCK") < html.index("INTRO_TEXT") < html.index("RUN_SECTION")
            < html.index("LATER_SECTION"))  # the title's own cell is split after its heading
    for nb_path in sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb")):
        cells = nbformat.read(str(nb_path), as_version=4).cells
        lead = [c for c in cells if LEAD_TAG in c.metadata.get("tags", [])]
        if any("show_claims()" in c.source or "show_outcome(" in c.source for c in cells):
            assert len(lead) == 2 and lead[0].cell_type == "markdown", nb_path.name  # its heading, its table


@pytest.mark.notebook
@pytest.mark.integration
@pytest.mark.docker
def test_harness_overhead_notebook_compares_local_and_docker_arms(tmp_path: Path) -> None:
    from benchlib.store.runstore import RunStore

    runs = tmp_path / "runs"
    run = run_notebook("90_harness_overhead", {"trials": 2, "duration_s": 0.5, "warmup_s": 0.1, "connections": 4,
                                               "open_rate_rps": 0.0, "out_dir": str(runs), "run_id": "nb90"},
                       reports_dir=tmp_path / "reports")
    assert run.ok, run.error
    trials = RunStore(runs / "90_harness_overhead" / "nb90").trials()
    assert {t.arm for t in trials} == {"local", "docker-host", "docker-1cpu"}
    by_arm = {t.arm: t.meta for t in trials if t.block == 0}
    assert by_arm["local"]["runtime"] == "local" and by_arm["docker-1cpu"]["runtime"] == "docker"
    assert all(m["status"] == "ok" for m in by_arm.values()), {a: m.get("reason") for a, m in by_arm.items()}
    assert by_arm["docker-1cpu"]["enforced"]["cpu_quota"] == pytest.approx(1.0)
    page = run.html.read_text()
    assert "docker-1cpu" in page and "arm / baseline [95% CI]" in page
    assert "runtime: local (the default, arms docker-host, docker-1cpu on docker)" in page


@pytest.mark.notebook
@pytest.mark.integration
def test_report_without_a_docker_engine_skips_the_docker_arms_writes_the_report_and_says_why(tmp_path: Path) -> None:
    """`benchlib report` (what `make report` runs) with no engine reachable: 90_harness_overhead's
    Docker arms are not run, with one line saying why while it runs and one per arm in the
    closing summary (read from the run's run.json); the report is written; the status is 0.
    With ``--publish`` (as `make report`), the site is built from the same reports folder."""
    import os
    import subprocess
    import sys

    from benchlib.store.runstore import RunStore

    runs, reports = tmp_path / "runs", tmp_path / "reports"
    tiny = {"trials": 2, "duration_s": 0.5, "warmup_s": 0.1, "connections": 4, "open_rate_rps": 0.0,
            "out_dir": str(runs), "run_id": "nodocker"}
    args = [a for name, value in tiny.items() for a in ("-p", name, str(value))]
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent.sock"}
    out = subprocess.run([sys.executable, "-m", "benchlib.cli", "report", "90_harness_overhead", *args,
                          "--reports-dir", str(reports), "--publish"], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (reports / "90_harness_overhead.html").exists() and (reports / "index.html").exists()
    assert f"site: {reports / 'site' / 'index.html'} (" in out.stdout and (reports / "site" / "index.html").exists()
    unavailable = RunStore(runs / "90_harness_overhead" / "nodocker").read_run().unavailable
    assert set(unavailable) == {"docker-host", "docker-1cpu"}
    assert all("no Docker engine answers at unix:///nonexistent.sock" in why for why in unavailable.values())
    lines = out.stdout.splitlines()
    start = [line for line in lines if "trials planned" in line]
    assert len(start) == 1 and "; not run: docker-host, docker-1cpu (runtime 'docker' unavailable: " in start[0]
    summary = lines[next(i for i, line in enumerate(lines) if line.startswith("summary: ")):]
    assert summary[0] == "summary: 1 of 1 report(s) written"
    assert summary[1] == f"  90_harness_overhead: ok -> {reports / '90_harness_overhead.html'}"
    assert summary[2].startswith("  2 arm(s) not run")
    for arm in ("docker-host", "docker-1cpu"):
        assert f"    90_harness_overhead (run nodocker): {arm}: {unavailable[arm]}" in summary
    page = (reports / "90_harness_overhead.html").read_text()
    assert "not run: runtime &#x27;docker&#x27; unavailable" in page or "not run: runtime 'docker' unavailable" in page


def test_summary_names_each_report_and_each_arm_not_run_as_its_run_json_says(tmp_path: Path) -> None:
    from benchlib.publish.closing_summary import summary_lines
    from benchlib.publish.execute import NotebookRun
    from benchlib.store.runstore import RunStore

    store = RunStore.open("01_x", "r1", root=tmp_path / "runs")
    store.write_run(RunRecord.from_json({"unavailable": {"b": "no go toolchain (install Go)", "a": "build failed: boom"},
                                         "parameters": {"arms": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}}))
    ok = NotebookRun(tmp_path / "01_x.ipynb", tmp_path / "r" / "01_x.ipynb", tmp_path / "r" / "01_x.html", 60.0,
                     runs=(store.path,))
    bad = NotebookRun(tmp_path / "02_y.ipynb", tmp_path / "r" / "02_y.ipynb", None, 5.0, error="ValueError: x")
    assert summary_lines([ok, bad]) == [
        "summary: 1 of 2 report(s) written",
        f"  01_x: ok -> {tmp_path / 'r' / '01_x.html'}",
        "  02_y: FAILED: ValueError: x (no report)",
        '  2 arm(s) not run (the reports show them as "not run"):',
        "    01_x (run r1): a: build failed: boom",
        "    01_x (run r1): b: no go toolchain (install Go)",
    ]
    every = NotebookRun(tmp_path / "03_z.ipynb", tmp_path / "r" / "03_z.ipynb", tmp_path / "r" / "03_z.html", 1.0,
                        runs=(RunStore.open("03_z", "r2", root=tmp_path / "runs").path,))
    assert summary_lines([every])[-1] == "  every arm ran"
    # a failed run never reads "every arm ran"; its reason is one line (issue 36: Ray's 9-line error)
    lost = NotebookRun(tmp_path / "00_q.ipynb", tmp_path / "r" / "00_q.ipynb", tmp_path / "r" / "00_q.html", 1.0,
                       error="ActorDiedError: The actor died unexpectedly.\n\tclass_name: LoadHost\n\tpid: 7",
                       runs=(RunStore.open("00_q", "r3", root=tmp_path / "runs").path,))
    assert summary_lines([every, lost]) == [
        "summary: 2 of 2 report(s) written",
        f"  03_z: ok -> {tmp_path / 'r' / '03_z.html'}",
        "  00_q: FAILED: ActorDiedError: The actor died unexpectedly. (+2 more line(s) in the report)"
        f" -> {tmp_path / 'r' / '00_q.html'}",
    ]


def test_index_keeps_reports_of_earlier_invocations(tmp_path: Path) -> None:
    from benchlib.publish.execute import NotebookRun
    from benchlib.publish.index import write_index

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Study four\ntext")])
    nbformat.write(nb, str(tmp_path / "04_x.ipynb"))
    (tmp_path / "04_x.html").write_text("<html>earlier</html>")
    (tmp_path / "00_q.html").write_text("<html>now</html>")
    run = NotebookRun(tmp_path / "00_q.ipynb", tmp_path / "missing.ipynb", tmp_path / "00_q.html", 90.0)
    page = write_index([run], tmp_path).read_text()
    assert page.index('href="00_q.html"') < page.index('href="04_x.html"')  # sorted by notebook
    assert ">Study four</a>" in page and "an earlier invocation, " in page and "1.5 min" in page
    assert "index.html" not in page
    # running the other notebook later keeps the first one listed
    run4 = NotebookRun(tmp_path / "04_x.ipynb", tmp_path / "04_x.ipynb", tmp_path / "04_x.html", 60.0,
                       error="boom")
    page = write_index([run4], tmp_path).read_text()
    assert 'href="00_q.html"' in page and "failed: boom" in page
    # an earlier report whose executed notebook holds an error is listed as failed
    bad = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1/0")])
    bad.cells[0].outputs = [nbformat.v4.new_output("error", ename="ZeroDivisionError", evalue="x", traceback=[])]
    nbformat.write(bad, str(tmp_path / "00_q.ipynb"))
    page = write_index([run4], tmp_path).read_text()
    assert "failed (an earlier invocation, " in page
