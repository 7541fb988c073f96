"""The study pages' generated blocks (``benchlib._project.studypages``) and what user-facing files may
carry (issue 24, items 2 and 4)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchlib._project import studypages
from benchlib.core.errors import ParameterError
from benchlib.stats.verdict import Verdict, VerdictKind

ROOT = Path(__file__).resolve().parents[1]


def test_committed_pages_agree_with_their_recorded_findings() -> None:
    assert studypages.check(ROOT) == [], "run `python -m benchlib._project.studypages sync`"
    pages = sorted((ROOT / "docs" / "studies").glob("*.md"))
    for p in pages:
        text = p.read_text(encoding="utf-8")
        assert studypages.BEGIN.search(text) and studypages.STACKS_BEGIN.search(text), p.name
        after_claims = text.find(studypages.CLAIMS_END) + len(studypages.CLAIMS_END)
        assert 0 < text.find("<!-- stacks:begin") - after_claims < 600, f"{p.name}: the seed's stacks follow the claims"
    for study, f in studypages.load(studypages.default_path(ROOT)).items():  # the reference runs' machine, in words
        assert "hypervisor steal" in f.disturbance and "stored trials beyond the disturbance bounds" in f.disturbance, study


def _run_folder(tmp: Path, loadavg: float, *, full: bool = False, run_id: str = "ref1") -> Path:
    folder = tmp / "runs" / "02_iris_vs_kestrel" / run_id
    (folder / "derived").mkdir(parents=True)
    rows = [Verdict(VerdictKind.NO_DIFFERENCE, arm="actix", baseline="iris-faithful", metric="throughput_rps",
                    effect="ratio", estimate=1.3, ci_lo=0.6, ci_hi=2.8, mde=0.59, labels={"condition": "random"}),
            Verdict.not_run("no dotnet toolchain", arm="kestrel-faithful", baseline="iris-faithful",
                            labels={"condition": "random"})]
    (folder / "derived" / "comparison-seed.json").write_text(json.dumps({"verdicts": [v.to_dict() for v in rows]}))
    (folder / "run.json").write_text(json.dumps({
        "study": "02_iris_vs_kestrel", "run_id": run_id, "notebook_parameters": {"full": full},
        "unavailable": {"kestrel-faithful-random": "no dotnet toolchain"},
        "parameters": {"arms": [{"name": "iris-faithful-random"}, {"name": "kestrel-faithful-random"},
                                {"name": "actix-random"}]},
        "provenance": {"collected_utc": "2026-12-04T06:00:00+00:00", "loadavg_at_start": [loadavg, 0.2, 0.1]}}))
    return folder


def test_a_recorded_run_becomes_the_pages_findings_in_its_kinds_words(tmp_path: Path) -> None:
    page = tmp_path / "docs" / "studies" / "02.md"
    page.parent.mkdir(parents=True)
    page.write_text("# Study 02\n\n<!-- stacks:begin study=02_iris_vs_kestrel -->\n<!-- stacks:end -->\n\n"
                    "<!-- findings:begin study=02_iris_vs_kestrel -->\nold\n<!-- findings:end -->\n")
    store = tmp_path / "data" / "findings.json"
    store.parent.mkdir()
    assert "No reference run is recorded" in studypages.page_block("02_iris_vs_kestrel", {})
    f = studypages.record(_run_folder(tmp_path, 0.12))
    studypages.save({f.study: f}, store)
    assert studypages.check(tmp_path, store) == [page]
    assert studypages.sync(tmp_path, store) == [page] and studypages.check(tmp_path, store) == []
    text = page.read_text()
    assert "Findings of run `ref1` (2026-12-04 06:00 UTC; 1-min load average before it: 0.12)." in text
    assert "not quiet" not in text
    assert "ran here: Iris (Go); did not run here: Kestrel (.NET) (no dotnet toolchain)" in text
    assert "actix against iris-faithful, requests per second: not decided at this design (MDE 59%" in text
    assert "kestrel-faithful against iris-faithful: not compared (not run: no dotnet toolchain)" in text
    busy = studypages.record(_run_folder(tmp_path / "b", 4.5))
    assert "was not quiet" in studypages.page_block(busy.study, {busy.study: busy})


def test_a_full_scale_run_fills_its_own_block_beside_the_default_runs(tmp_path: Path) -> None:
    page = tmp_path / "docs" / "studies" / "02.md"
    page.parent.mkdir(parents=True)
    page.write_text("# Study 02\n\n<!-- stacks:begin study=02_iris_vs_kestrel -->\n<!-- stacks:end -->\n\n"
                    "<!-- findings:begin study=02_iris_vs_kestrel -->\nold\n<!-- findings:end -->\n\nprose\n\n"
                    "<!-- findings:begin study=02_iris_vs_kestrel scale=full -->\nold\n<!-- findings:end -->\n")
    store = tmp_path / "data" / "findings.json"
    store.parent.mkdir()
    assert "No reference run at full scale (`-p full true`) is recorded" in studypages.page_block(
        "02_iris_vs_kestrel", {}, "full")
    d = studypages.record(_run_folder(tmp_path, 0.12))
    sweep = _run_folder(tmp_path, 0.25, full=True, run_id="big1-sweep")  # its second experiment, a companion run
    (sweep / "derived" / "comparison-seed.json").rename(sweep / "derived" / "comparison-sweep.json")
    _run_folder(tmp_path, 0.1, full=False, run_id="big1-other")  # another scale: not this run's companion
    f = studypages.record(_run_folder(tmp_path, 0.2, full=True, run_id="big1"))
    assert set(f.verdicts) == {"comparison-seed", "comparison-sweep"} and dict(f.parts) == {"big1-sweep": 0.25}
    assert (d.scale, d.key, f.scale, f.key) == ("default", "02_iris_vs_kestrel", "full", "02_iris_vs_kestrel:full")
    studypages.save({d.key: d, f.key: f}, store)
    assert set(studypages.load(store)) == {"02_iris_vs_kestrel", "02_iris_vs_kestrel:full"}
    assert studypages.sync(tmp_path, store) == [page] and studypages.check(tmp_path, store) == []
    text = page.read_text()
    default_block, full_block = text.split("prose")
    assert "Findings of run `ref1` (2026-12-04" in default_block and "big1" not in default_block
    assert "Findings of run `big1` at full scale (`-p full true`)" in full_block and "ref1" not in full_block
    assert "with its companion run `big1-sweep` (load average before it: 0.25)" in full_block
    assert "*comparison-sweep*:" in full_block and "big1-other" not in full_block
    assert "old" not in text and text.count("<!-- findings:end -->") == 2
    with pytest.raises(ParameterError, match="scale 'huge' is not one of default, full"):
        studypages.Finding(study="x", run_id="r", date="", loadavg=None, scale="huge")


def test_a_folder_without_a_run_or_verdicts_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ParameterError, match="no run.json"):
        studypages.record(tmp_path)
    (tmp_path / "run.json").write_text("{}")
    with pytest.raises(ParameterError, match="no derived/\\*.json with verdicts"):
        studypages.record(tmp_path)


# -- item 4: no machine paths, no development history in what a user reads ----------------------

FORBIDDEN = re.compile(r"/work/|/root/|/home/|/tmp/|/var/tmp|helpers'|other helpers|this session|the lead'?s|"
                       r"benchlib-bench\.lock")
#: absolute paths that are not this machine's: paths inside a service's container image
ALLOWED = ("/tmp/benchlib-ca/",)


def _user_facing() -> list[Path]:
    files = [ROOT / "README.md"]
    files += [p for p in (ROOT / "docs").rglob("*.md") if "dev" not in p.relative_to(ROOT / "docs").parts[:1]]
    files += sorted((ROOT / "notebooks").glob("*.ipynb")) + sorted((ROOT / "data" / "reference").glob("*.csv"))
    return files


def test_no_user_facing_file_carries_machine_paths_or_development_history() -> None:
    found = []
    for p in _user_facing():
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            for m in FORBIDDEN.finditer(line):
                if not any(line[m.start():].startswith(a) for a in ALLOWED):
                    found.append(f"{p.relative_to(ROOT)}:{n}: {m.group(0)!r}")
    assert not found, "move these to docs/dev/ (or the commit history):\n" + "\n".join(found)


def _claim_page(tmp: Path) -> tuple[Path, Path]:
    """Study 02's page with an empty claim block, a README with an empty claims table, and where
    the findings file goes: (page, findings file)."""
    page = tmp / "docs" / "studies" / "02_iris_vs_kestrel.md"
    page.parent.mkdir(parents=True)
    page.write_text("# Study 02\n\n<!-- claims:begin study=02_iris_vs_kestrel -->\n<!-- claims:end -->\n")
    (tmp / "README.md").write_text(f"# x\n\n{studypages.README_BEGIN}\n{studypages.README_END}\n")
    store = tmp / "data" / "findings.json"
    store.parent.mkdir()
    return page, store


def test_each_page_and_the_readme_open_with_the_claim_block_of_the_recorded_run(tmp_path: Path) -> None:
    from benchlib.analysis.claims import ClaimAnswer, save_claims
    from benchlib.analysis.studies.registry import study

    for p in sorted((ROOT / "docs" / "studies").glob("*.md")):
        text = p.read_text(encoding="utf-8")
        assert text.split("\n")[2].startswith("<!-- claims:begin study="), f"{p.name}: the claim block comes first"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.find(studypages.README_BEGIN) < readme.find("## Two commands")
    page, store = _claim_page(tmp_path)
    studypages.save({}, store)
    studypages.sync(tmp_path, store)
    assert "| not yet recorded |" in page.read_text() and "not yet recorded |" in (tmp_path / "README.md").read_text()
    folder = _run_folder(tmp_path, 0.12)
    kestrel, actix = study("02").claims
    save_claims([ClaimAnswer(kestrel, "not run", "kestrel-faithful-random: no dotnet toolchain"),
                 ClaimAnswer(actix, "smaller than claimed", ratio=2.1, lo=1.9, hi=2.3, family=1, n=10)], folder)
    f = studypages.record(folder)
    assert f.claims and f.machine.cpu_model == ""
    studypages.save({f.key: f}, store)
    assert set(studypages.check(tmp_path, store)) == {page, tmp_path / "README.md"}  # disagrees until synced
    studypages.sync(tmp_path, store)
    assert studypages.check(tmp_path, store) == []
    text = page.read_text()
    assert "Run `ref1` (2026-12-04 06:00 UTC, default scale; machine: CPU model not recorded" in text
    assert "2.10x [1.90, 2.30]" in text and "not run: kestrel-faithful-random: no dotnet toolchain" in text
    assert "| [02](docs/studies/02_iris_vs_kestrel.md) | actix-web / Iris" in (tmp_path / "README.md").read_text()
    page.write_text(page.read_text().replace("2.10x", "2.20x"))  # a hand edit of a figure
    assert studypages.check(tmp_path, store) == [page]


def test_another_report_beside_the_run_says_which_claim_rows_it_decided_alike(tmp_path: Path) -> None:
    from benchlib.analysis.claims import ClaimAnswer, save_claims
    from benchlib.analysis.studies.registry import study

    page, store = _claim_page(tmp_path)
    kestrel, actix = study("02").claims
    not_run = ClaimAnswer(kestrel, "not run", "kestrel-faithful-random: no dotnet toolchain")
    first, alike, other = (_run_folder(tmp_path, 0.1, run_id=r) for r in ("ref1", "ref2", "ref3"))
    save_claims([not_run, ClaimAnswer(actix, "smaller than claimed", ratio=2.1, lo=1.9, hi=2.3, family=1, n=10)], first)
    save_claims([not_run, ClaimAnswer(actix, "smaller than claimed", ratio=2.0, lo=1.8, hi=2.2, family=1, n=10)], alike)
    save_claims([not_run, ClaimAnswer(actix, "not decided", ratio=2.5, lo=1.5, hi=3.9, mde_vs_claim=0.4, family=1,
                                      n=10)], other)
    with pytest.raises(ParameterError, match="no default-scale run of 02_iris_vs_kestrel is recorded"):
        studypages.record_again(alike, {})
    f = studypages.record(first)
    with pytest.raises(ParameterError, match="is the recorded run of 02_iris_vs_kestrel itself"):
        studypages.record_again(first, {f.key: f})
    f = studypages.record_again(alike, {f.key: f})
    f = studypages.record_again(other, {f.key: f})
    f = studypages.record_again(alike, {f.key: f})  # again the same run: replaced, not added
    assert [r.run_id for r in f.again] == ["ref3", "ref2"]
    studypages.save({f.key: f}, store)
    assert studypages.load(store)[f.key] == f  # stored and read back whole
    studypages.sync(tmp_path, store)
    text = page.read_text()
    assert ("run `ref2` (2026-12-04 06:00 UTC; 1-min load average before it: 0.10): the same decided outcome on 1 "
            "of the 1 claim row(s) that ran in both.") in text
    assert ("run `ref3` (2026-12-04 06:00 UTC; 1-min load average before it: 0.10): the same decided outcome on 0 "
            "of the 1 claim row(s) that ran in both; the others read there actix: 2.50x [1.50, 3.90], ~ not decided "
            "at this design (MDE 40% against the claim).") in text
    cell = "alike in 1 of 2; the others read not decided in 1"
    assert f"| smaller than claimed | nearest |  | {cell} |" in text  # the claim table's own column
    assert f"smaller than claimed. Other default reports: {cell}." in text  # and its sentence
    readme = (tmp_path / "README.md").read_text()
    assert f"| smaller than claimed | {cell} |" in readme.replace("2.10x [1.90, 2.30]: ", "")
    assert "not run: kestrel-faithful-random: no dotnet toolchain | - |" in readme
    f2 = studypages.record(first)  # recorded anew: the reports beside the old record go
    assert f2.again == ()
