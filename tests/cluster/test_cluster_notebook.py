"""The quickstart notebook run for real through papermill with ``cluster="local:2"`` (one local
Ray cluster of two load nodes, started and stopped by the run) at the smallest scale: its
report shows the load-hosts section, filled from the stored run, and its verdict rows (the
same notebook on this machine alone, without that section: ``tests/test_notebooks.py``).
Every node shares this machine's CPUs: this checks what the notebook and the report do with
the hosts, not speed."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("ray")

from benchlib.analysis.hosts import HEADING, load_hosts_section
from benchlib.publish.execute import run_notebook
from benchlib.store.results import open_run

pytestmark = [pytest.mark.cluster, pytest.mark.notebook, pytest.mark.integration]

#: The smallest quickstart: 2 blocks (the fewest a paired comparison takes) of 1 s trials.
TINY = {"runtime": "local", "trials": 2, "duration_s": 1.0, "warmup_s": 0.3, "connections": 4, "seed": 3}
METRICS = ("p50_ms", "p99_ms", "throughput_rps")


def _errors(executed: Path) -> list[str]:
    nb = nbformat.read(str(executed), as_version=4)
    return [f"{o.get('ename')}: {o.get('evalue')}" for c in nb.cells if c.cell_type == "code"
            for o in c.get("outputs", []) if o.output_type == "error"]


def _verdict_cells(run_dir: Path) -> list[str]:
    """The verdict table's ratio cells, computed again from the stored run."""
    from benchlib import stats
    from benchlib.analysis import verdict_table

    expected = stats.compare(open_run(run_dir).summaries(), baseline="python-aiohttp", metrics=METRICS, seed=3)
    return [str(c) for c in verdict_table(expected)["arm / baseline [95% CI]"].tolist()]


def test_the_quickstart_on_a_local_cluster_reports_each_host(tmp_path: Path) -> None:
    runs, reports = tmp_path / "runs", tmp_path / "reports"
    nb = run_notebook("00_quickstart", {**TINY, "cluster": "local:2", "out_dir": str(runs), "run_id": "hosts2"},
                      reports_dir=reports)
    assert nb.ok, nb.error
    assert nb.html is not None and not _errors(nb.executed)
    page = nb.html.read_text()

    clustered = open_run(runs / "00_quickstart" / "hosts2")
    assert clustered.parameters["cluster"] == "local:2" and clustered.notebook_parameters["cluster"] == "local:2"
    assert clustered.require_experiment().cluster == "local:2"
    assert len(clustered.trials) == 4 and {t.arm for t in clustered.trials} == {"go-nethttp", "python-aiohttp"}
    for t in clustered.trials:  # every trial's rows came from both hosts, each host's counted
        assert t.status in ("ok", "invalid"), t.reason  # invalid: a host that could not keep up (busy machine)
        assert set(t.hosts().tolist()) == {0, 1}
        assert [h["rows"] for h in t.load.extra["cluster"]["hosts"]] == \
            [int((t.hosts() == h).sum()) for h in (0, 1)]  # type: ignore[union-attr]

    # the section, from the stored run: two hosts on two Ray nodes, a row per trial and host
    section = load_hosts_section(clustered)
    table = section.table
    assert len(table) == 8 and sorted(table["host"].unique().tolist()) == [0, 1]
    assert table.groupby(["arm", "block"])["host"].nunique().eq(2).all() and table["rows"].gt(0).all()
    assert table["node"].nunique() == 2 and table["foreign CPU"].between(0, 1).all()
    assert table["start skew, ms"].notna().all() and table["round trip, ms"].gt(0).all()
    assert HEADING.lstrip("# ") in page and "4 trial(s) sent their load from 2 hosts" in page
    assert all(node in page for node in table["node"].unique())

    # the verdict rows, computed again from the stored run
    cells = _verdict_cells(runs / "00_quickstart" / "hosts2")
    assert len(cells) == len(METRICS) and all(cell in page for cell in cells), cells
    assert json.loads((runs / "00_quickstart" / "hosts2" / "derived" / "comparison.json").read_text())
