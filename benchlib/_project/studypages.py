"""The study pages' generated parts: which of the seed's stacks ran, and the findings of one
recorded reference run, written from that run's verdict data (never by hand).

``data/findings.json`` holds, per study and scale, the run a page's findings come from: its run id,
date, the 1-min load average just before it, the disturbance measure when the run recorded
one, which arms did not run and why, and every verdict of its ``derived/*.json`` (the verdict
tables the notebook stored). Nobody edits a page's findings by hand:

* ``python -m benchlib._project.studypages record <run folder>`` (a folder under ``data/runs`` or a
  kept report's ``reports/<study>/<run_id>/``) writes the study's entry for the run's scale
  (the notebook's ``full`` parameter: ``default`` or ``full``), with the verdicts of its companion
  runs ``<run_id>-<part>`` (a second experiment of the same notebook execution, e.g. study 04's sweep);
* ``python -m benchlib._project.studypages sync`` rewrites each page's two blocks: between
  ``<!-- stacks:begin study=<study> -->`` and ``<!-- stacks:end -->`` (its first lines) the
  seed's stacks, ran here / did not run (from the registry's ``seed_stacks`` and the default
  run's arms not run); between ``<!-- findings:begin study=<study> -->`` (or
  ``... study=<study> scale=full -->``) and ``<!-- findings:end -->`` the run's identity and
  one sentence per verdict by its kind's template
  (:func:`benchlib.analysis.conclusion.sentence`); a page without a recorded run says so;
* ``sync`` also writes each page's first block, between ``<!-- claims:begin study=<study> -->``
  and ``<!-- claims:end -->``: "The claim, re-run" as the recorded default run answered it
  (its ``derived/claims.json``: :mod:`benchlib.analysis.claims`), with the run's id, date,
  scale, machine (CPU model, cores, virtualisation) and load average; and README.md's table
  "What the re-runs found" (between ``<!-- claims-table:begin -->`` and
  ``<!-- claims-table:end -->``), one row per seed claim linking its page. A claim no recorded
  run answered reads "not yet recorded" (never a number typed by hand);
* ``python -m benchlib._project.studypages record --again <run folder>`` adds another default
  report of a study beside its recorded run (:class:`Repeat`: its id, date, load average and
  claim answers); the claim block then says, per such report, on how many claim rows that ran in
  both it decided the same outcome and how the others read there, and the README's table says
  it per claim row. Recording a study's run anew drops its repeats (they were beside the old one);
* ``check`` lists the pages (and README.md) that disagree with the file (``tests/test_studypages.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlib._project.measurements import replace_block, write_generated
from benchlib.analysis import conclusion as say
from benchlib.analysis.claims import ClaimAnswer, claims_markdown, load_claims, original_text
from benchlib.core.errors import ParameterError
from benchlib.store.derived import stored_verdict, stored_verdicts
from benchlib.store.records.run import Provenance

__all__ = ["Finding", "Machine", "NOT_RECORDED", "SCALES", "check", "claims_block", "key", "load", "main", "page_block",
           "readme_table", "record", "record_again", "Repeat", "save", "stacks_block", "sync"]

BEGIN = re.compile(r"<!-- findings:begin study=(\S+?)(?: scale=(\w+))? -->")
END = "<!-- findings:end -->"
STACKS_BEGIN = re.compile(r"<!-- stacks:begin study=(\S+) -->")
STACKS_END = "<!-- stacks:end -->"
CLAIMS_BEGIN = re.compile(r"<!-- claims:begin study=(\S+) -->")
CLAIMS_END = "<!-- claims:end -->"
README_BEGIN, README_END = "<!-- claims-table:begin -->", "<!-- claims-table:end -->"
#: what a claim row reads until a recorded run answers it
NOT_RECORDED = "not yet recorded"
#: a load average above this before the run: the page says the findings are not a quiet machine's
QUIET_LOAD = 0.3
#: the scales a finding can be recorded at (the notebooks' ``full`` parameter false / true)
SCALES = ("default", "full")


def _seed_stacks() -> dict[str, Mapping[str, Sequence[str]]]:
    """study id -> the seed's stacks -> its arms' name prefixes (the registry's ``seed_stacks``)."""
    from benchlib.analysis.studies.registry import STUDIES

    return {s.id: s.seed_stacks for s in STUDIES if s.seed_stacks}


@dataclass(frozen=True)
class Machine:
    """The machine a recorded run ran on: its CPU model, its CPU count (``cores``: logical CPUs,
    ``None`` when not recorded) and its virtualisation in words (``"not recorded"`` when the run
    did not say and it was recorded elsewhere)."""

    cpu_model: str = ""
    cores: int | None = None
    virtualisation: str = "not recorded"

    def words(self) -> str:
        """``Intel Xeon ..., 2 CPUs, virtual machine (hypervisor flag)``."""
        cores = f"{self.cores} CPUs" if self.cores else "CPUs not recorded"
        return f"{self.cpu_model or 'CPU model not recorded'}, {cores}, virtualisation: {self.virtualisation}"


def _virtualisation(raw: Mapping[str, Any], hostname: str) -> str:
    """The run's virtualisation in words: as its provenance recorded it, else read from this
    machine's ``/proc/cpuinfo`` (its ``hypervisor`` flag) when the run ran here (same
    hostname), else ``not recorded``."""
    import socket

    said = raw.get("virtualization") or raw.get("virtualisation")
    if said:
        return str(said)
    if not hostname or hostname != socket.gethostname():
        return "not recorded"
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return "not recorded"
    return "virtual machine (the CPU's hypervisor flag)" if " hypervisor" in flags else "none detected"


@dataclass(frozen=True)
class Repeat:
    """Another default report of a study, recorded beside its finding (:func:`record_again`) to
    show whether the claim answers reproduce.

    Attributes
    ----------
    run_id: its run. date: when it started (UTC, ``YYYY-MM-DD HH:MM``).
    loadavg: the 1-min load average just before it (``None`` when not recorded).
    claims: its claim answers as stored (``derived/claims.json``).
    commit: benchlib's commit it ran (7 hex digits, ``+`` when the checkout had changes; "" when
        not recorded).
    """

    run_id: str
    date: str
    loadavg: float | None
    claims: Sequence[Mapping[str, Any]] = ()
    commit: str = ""

    def answers(self) -> dict[str, ClaimAnswer]:
        """Its claim answers by claim key."""
        return {a.claim.key: a for a in map(ClaimAnswer.from_dict, self.claims)}


@dataclass(frozen=True)
class Finding:
    """One study's recorded reference run.

    Attributes
    ----------
    study, run_id: which run. date: when it started (UTC, ``YYYY-MM-DD HH:MM``).
    scale: ``default`` or ``full`` (the notebook's ``full`` parameter in that run).
    loadavg: the 1-min load average just before it (``None`` when not recorded).
    disturbance: the run's disturbance measure in words, when it recorded one ("" otherwise).
    arms: the arms the run had. unavailable: arm -> why it did not run.
    verdicts: family (the ``derived/*.json`` file's stem) -> its verdicts as stored (``Verdict.to_dict``).
    parts: the run's companion runs whose verdicts it includes (a study's second experiment in
    ``<run_id>-<part>``, e.g. study 04's ``-sweep``): their run id -> the 1-min load average
    just before each (``None`` when not recorded).
    machine: the machine it ran on (:class:`Machine`).
    claims: its claim answers as stored (``derived/claims.json``,
        :meth:`benchlib.analysis.claims.ClaimAnswer.to_dict`); empty before claims were stored.
    again: other default reports of the study recorded beside it (:class:`Repeat`), oldest first.
    commit: benchlib's commit the run ran (as :attr:`Repeat.commit`).
    """

    study: str
    run_id: str
    date: str
    loadavg: float | None
    disturbance: str = ""
    arms: tuple[str, ...] = ()
    unavailable: Mapping[str, str] = field(default_factory=dict)
    verdicts: Mapping[str, Sequence[Mapping[str, Any]]] = field(default_factory=dict)
    scale: str = "default"
    parts: Mapping[str, float | None] = field(default_factory=dict)
    machine: Machine = field(default_factory=Machine)
    claims: Sequence[Mapping[str, Any]] = ()
    again: tuple[Repeat, ...] = ()
    commit: str = ""

    def __post_init__(self) -> None:
        if self.scale not in SCALES:
            raise ParameterError(f"finding of {self.study}: scale {self.scale!r} is not one of {', '.join(SCALES)}")

    @property
    def key(self) -> str:
        """Its key in the file: the study for the default scale, ``<study>:full`` for the full scale."""
        return key(self.study, self.scale)


def key(study: str, scale: str = "default") -> str:
    """The file's key of a study's finding at ``scale``."""
    return study if scale == "default" else f"{study}:{scale}"


def default_path(root: Path | None = None) -> Path:
    """``data/findings.json`` of the project."""
    from benchlib.publish.notebooks import project_root

    return (root or project_root()) / "data" / "findings.json"


def load(path: str | Path) -> dict[str, Finding]:
    """The recorded runs by :attr:`Finding.key` (none when the file does not exist)."""
    p = Path(path)
    if not p.exists():
        return {}
    doc = json.loads(p.read_text(encoding="utf-8"))
    return {k: Finding(**{**v, "arms": tuple(v.get("arms", ())), "machine": Machine(**v.get("machine", {})),
                          "claims": tuple(v.get("claims", ())),
                          "again": tuple(Repeat(**{**r, "claims": tuple(r.get("claims", ()))})
                                         for r in v.get("again", ()))})
            for k, v in doc.get("findings", {}).items()}


def save(findings: Mapping[str, Finding], path: str | Path) -> Path:
    """Write the file (sorted, stable)."""
    doc = {"about": "The run each study page's findings come from; written by "
                    "`python -m benchlib._project.studypages record` "
                    "(see its docstring).",
           "findings": {k: dataclasses.asdict(findings[k]) for k in sorted(findings)}}
    p = Path(path)
    p.write_text(json.dumps(doc, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    return p


def _date(prov: Provenance) -> str:
    """When the run started: ``YYYY-MM-DD HH:MM`` (UTC)."""
    return prov.collected_utc[:16].replace("T", " ")


def _commit(prov: Provenance) -> str:
    """``c09a4cb`` (``+`` after it when the checkout had changes), "" when not a checkout."""
    sha = prov.git_sha or ""
    return f"{sha[:7]}{'+' if prov.git_dirty else ''}" if sha else ""


def record(run_folder: str | Path) -> Finding:
    """The finding of one stored run folder: :func:`stored_verdicts` with the run's identity,
    load average and disturbance measure (one notebook execution, one finding)."""
    folder = Path(run_folder)
    got = stored_verdicts(folder)
    run = got.run
    disturbance = _disturbance_words(folder)
    prov = run.provenance
    machine = Machine(prov.cpu_model, prov.cpu_count, _virtualisation(prov.raw, prov.hostname))
    claims = tuple(a.to_dict() for a in load_claims(folder))
    return Finding(study=got.study, run_id=got.run_id, machine=machine, claims=claims, commit=_commit(prov),
                   date=_date(prov),
                   loadavg=run.provenance.loadavg_1min, disturbance=disturbance,
                   arms=run.arm_names(), unavailable=dict(run.unavailable), verdicts=got.verdicts, scale=got.scale,
                   parts=got.parts)


def record_again(run_folder: str | Path, findings: Mapping[str, Finding]) -> Finding:
    """The study's finding with the run in ``run_folder`` added as another report of it
    (:class:`Repeat`; a repeat of the same run id is replaced).

    Raises
    ------
    ParameterError  no finding of the run's study at its scale is recorded, or the folder is
        that finding's own run.
    """
    folder = Path(run_folder)
    got = stored_verdicts(folder)
    f = findings.get(key(got.study, got.scale))
    if f is None:
        raise ParameterError(f"{folder}: no {got.scale}-scale run of {got.study} is recorded to add it beside; "
                             "record one first (`python -m benchlib._project.studypages record <run folder>`)")
    if got.run_id == f.run_id:
        raise ParameterError(f"{folder}: run {got.run_id} is the recorded run of {got.study} itself; "
                             "--again takes another report's run")
    prov = got.run.provenance
    r = Repeat(got.run_id, _date(prov), prov.loadavg_1min,
               tuple(a.to_dict() for a in load_claims(folder)), _commit(prov))
    return dataclasses.replace(f, again=(*(x for x in f.again if x.run_id != r.run_id), r))


def _disturbance_words(folder: Path) -> str:
    """The run's disturbance measure in words (other processes' share of the pinned CPUs and
    hypervisor steal over its stored trials, :func:`benchlib.analysis.disturbed.machine_during_trials`);
    "" for a kept report's folder without its trials or a run from before the measure."""
    from benchlib.analysis.disturbed import machine_during_trials
    from benchlib.core.errors import BenchlibError
    from benchlib.store.results import open_run

    try:
        run = open_run(folder)
    except (BenchlibError, OSError, ValueError):
        return ""
    if not run.trials or all(t.disturbance is None for t in run.trials):
        return ""
    return machine_during_trials(run).removeprefix("- ")


def _stacks_line(study: str, f: Finding | None) -> str:
    stacks = _seed_stacks().get(study, {})
    if not stacks:
        return ""
    if f is None:
        return (f"**The seed's stacks**: {', '.join(stacks)}. Which of them ran is stated here once a reference run "
                "is recorded; .NET has not run on the machines this project was measured on (no .NET SDK), so its "
                "arms read \"not run\".")
    ran, missing = [], []
    for label, prefixes in stacks.items():
        arms = [a for a in f.arms if a.startswith(tuple(prefixes))]
        if any(a not in f.unavailable for a in arms):
            ran.append(label)
            continue
        gone = sorted({f.unavailable[a] for a in arms})
        missing.append(f"{label} ({'; '.join(gone) if gone else 'not selected in this run'})")
    return (f"**The seed's stacks in run `{f.run_id}`**: ran here: {', '.join(ran) or 'none'}; did not run here: "
            f"{', '.join(missing) or 'none'}.")


def stacks_block(study: str, findings: Mapping[str, Finding]) -> str:
    """The page's first lines: which of the seed's stacks ran in the recorded run, which did not."""
    return _stacks_line(study, findings.get(study)) or "_This study has no seed's stacks to name._"


def page_block(study: str, findings: Mapping[str, Finding], scale: str = "default") -> str:
    """The page's findings block at ``scale``: the run's identity and one sentence per verdict,
    each by its kind's template."""
    f = findings.get(key(study, scale))
    lines: list[str] = []
    if f is None:
        at = " at full scale (`-p full true`)" if scale == "full" else ""
        lines += [f"_No reference run{at} is recorded for this page yet: the findings are written here from a run's "
                  "verdict data (`python -m benchlib._project.studypages record <run folder>`, then `sync`)._"]
        return "\n".join(lines)
    def load_txt(x: float | None) -> str:
        return f"{x:.2f}" if x is not None else "not recorded"

    loads = [f.loadavg, *f.parts.values()]
    quiet = all(x is not None and x < QUIET_LOAD for x in loads)
    at = " at full scale (`-p full true`)" if f.scale == "full" else ""
    with_parts = "".join(f"; with its companion run `{r}` (load average before it: {load_txt(x)})"
                         for r, x in f.parts.items())
    lines += [f"Findings of run `{f.run_id}`{at} ({f.date} UTC; 1-min load average before it: "
              f"{load_txt(f.loadavg)}{with_parts}"
              + (f"; disturbance: {f.disturbance}" if f.disturbance else "") + ")."
              + ("" if quiet else f" The machine was not quiet (load average {QUIET_LOAD} or more, or not recorded): "
                 "the verdicts below may say less than a quiet run would."), ""]
    for family, rows in f.verdicts.items():
        lines.append(f"*{family}*:")
        for d in rows:
            v = stored_verdict(d)
            cond = v.labels.get("condition")
            lines.append(f"- {f'*{cond}*: ' if cond not in (None, '', 'main') else ''}"
                         f"{say.sentence(v, v.arm, v.baseline)}")
        lines.append("")
    return "\n".join(lines).rstrip()


def _load_txt(x: float | None) -> str:
    return f"{x:.2f}" if x is not None else "not recorded"


def _study_claims(study: str) -> tuple[Any, ...]:
    from benchlib.analysis.studies.registry import study as find_study

    return find_study(study).claims


def _answers(study: str, f: Finding | None) -> list[ClaimAnswer]:
    """The recorded run's claim answers, or each registry claim reading ``not yet recorded``."""
    if f is not None and f.claims:
        return [ClaimAnswer.from_dict(d) for d in f.claims]
    return [ClaimAnswer(c, NOT_RECORDED) for c in _study_claims(study)]


def claims_block(study: str, findings: Mapping[str, Finding]) -> str:
    """The page's first block, "The claim, re-run": the recorded default run's identity (run
    id, date, scale, machine, load average) and its claim answers (:func:`claims_markdown`);
    before a run with stored claims is recorded, every claim row reads ``not yet recorded``."""
    f = findings.get(key(study))
    head = "### The claim, re-run\n\n"
    if f is None or not f.claims:
        why = ("no reference run is recorded for this page yet" if f is None else
               f"the recorded run `{f.run_id}` predates stored claim answers")
        rows = ["| claim | original | re-run |", "|---|---|---|"]
        rows += [f"| {c.label} ({c.variant}) | {original_text(c)} | {NOT_RECORDED} |" for c in _study_claims(study)]
        return head + (f"_Not yet recorded: {why}. The rows are filled from a default run's `derived/claims.json` "
                       "(`python -m benchlib._project.studypages record <run folder>`, then `sync`)._\n\n"
                       + "\n".join(rows))
    ident = (f"Run `{f.run_id}` ({f.date} UTC, {f.scale} scale{_commit_txt(f.commit)}; machine: "
             f"{f.machine.words()}; 1-min load average before it: {_load_txt(f.loadavg)}).")
    answers = _answers(study, f)
    pairs = _pairs_by_row(f)
    again = {a.claim.key: _again_cell(pairs.get(a.claim.key, [])) for a in answers} if f.again else None
    return head + ident + "\n\n" + claims_markdown(answers, again) + _again_markdown(f)


def _commit_txt(commit: str) -> str:
    return f", commit {commit}" if commit else ""


def _both_ran(answers: Sequence[ClaimAnswer], r: Repeat) -> list[tuple[ClaimAnswer, ClaimAnswer]]:
    """The claim rows that ran in the finding's run (``answers``) and in the repeat: (here, there)."""
    there = r.answers()
    return [(a, there[a.claim.key]) for a in answers if a.ran and a.claim.key in there and there[a.claim.key].ran]


def _pairs_by_row(f: Finding | None) -> dict[str, list[tuple[ClaimAnswer, ClaimAnswer]]]:
    """Claim key -> its (here, there) pairs over every repeat beside ``f`` in which both ran."""
    out: dict[str, list[tuple[ClaimAnswer, ClaimAnswer]]] = {}
    if f is None:
        return out
    answers = _answers(f.study, f)
    for r in f.again:
        for here, there in _both_ran(answers, r):
            out.setdefault(here.claim.key, []).append((here, there))
    return out


def _alike(here: ClaimAnswer, there: ClaimAnswer) -> bool:
    """Both decided, on the same outcome."""
    return here.decided and there.decided and here.outcome == there.outcome


def _again_markdown(f: Finding) -> str:
    """One paragraph per other report recorded beside the run (:class:`Repeat`): on how many
    claim rows that ran in both it decided the same outcome, and how the others read there."""
    out = []
    answers = _answers(f.study, f)
    for r in f.again:
        pairs = _both_ran(answers, r)
        same = sum(_alike(a, b) for a, b in pairs)
        differ = [f"{a.claim.key}: {b.ratio_text()}, {b.outcome_text()}" for a, b in pairs if not _alike(a, b)]
        out.append(f"- Another default report, run `{r.run_id}` ({r.date} UTC{_commit_txt(r.commit)}; 1-min load "
                   "average before it: "
                   f"{_load_txt(r.loadavg)}): the same decided outcome on {same} of the {len(pairs)} claim row(s) "
                   "that ran in both" + (f"; the others read there {'; '.join(differ)}." if differ else "."))
    if not out:
        return ""
    return ("\n\n**The same claims in other default reports** (a row reproduces when both reports decide the "
            "same outcome):\n\n" + "\n".join(out))


def _again_cell(pairs: Sequence[tuple[ClaimAnswer, ClaimAnswer]]) -> str:
    """The "other default reports" cell of a claim row (its page's table and README's): in how
    many other recorded reports it was decided alike, and what the others read; ``-`` for none."""
    if not pairs:
        return "-"
    same = sum(_alike(x, y) for x, y in pairs)
    if same == len(pairs):
        return f"alike in {same} of {len(pairs)}"
    there = Counter(y.outcome for x, y in pairs if not _alike(x, y))
    return (f"alike in {same} of {len(pairs)}; the others read "
            + ", ".join(f"{outcome} in {n}" for outcome, n in sorted(there.items(), key=lambda kv: -kv[1])))


def _outcome_cell(a: ClaimAnswer) -> str:
    return NOT_RECORDED if a.outcome == NOT_RECORDED else f"{a.ratio_text()}: {a.outcome_text()}"


def readme_table(findings: Mapping[str, Finding], root: Path) -> str:
    """README's "What the re-runs found": one row per seed claim (its faithful and nearest
    rows; the fair variants are on each page), linking its page (under ``root``), from the
    recorded default runs."""
    from benchlib.analysis.studies.registry import STUDIES

    rows = ["| study | claim | the original | re-run (default scale) | other default reports |",
            "|---|---|---|---|---|"]
    for s in STUDIES:
        if not s.claims:
            continue
        page = next(iter(sorted((root / "docs" / "studies").glob(f"{s.id[:2]}_*.md"))), None)
        link = f"[{s.id[:2]}]({page.relative_to(root).as_posix()})" if page else s.id[:2]
        f = findings.get(key(s.id))
        pairs = _pairs_by_row(f)
        for a in _answers(s.id, f):
            if a.claim.variant == "fair":
                continue
            c = a.claim
            number = "parity" if c.parity else f"{c.claimed:.2f}x"
            cell = _again_cell(pairs.get(c.key, []))
            rows.append(f"| {link} | {c.label} ({c.variant}) | {number} | {_outcome_cell(a)} | {cell} |")
    return "\n".join(rows) + _reproduced_sentence(findings)


def _reproduced_sentence(findings: Mapping[str, Finding]) -> str:
    """After README's table: of every claim row that ran (fair variants included) with another
    report recorded beside it, how many were decided alike in all of them, and which were not."""
    from benchlib.analysis.studies.registry import STUDIES

    total, alike, not_alike = 0, 0, []
    for s in STUDIES:
        for pairs in _pairs_by_row(findings.get(key(s.id))).values():
            total += 1
            if all(_alike(x, y) for x, y in pairs):
                alike += 1
            else:
                c = pairs[0][0].claim
                not_alike.append(f"study {s.id[:2]}'s {c.label} ({c.variant})")
    if not total:
        return ""
    return (f"\n\nOf the {total} claim rows that ran (the fair variants included) and were run again in another "
            f"default report, {alike} were decided alike in every report"
            + (f"; not reproduced: {'; '.join(not_alike)}. Each page has every report's reading." if not_alike else "."))


def _targets(root: Path, findings: Mapping[str, Finding]) -> list[tuple[Path, str]]:
    out = []
    for page in sorted((root / "docs" / "studies").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        ms, n, c = list(BEGIN.finditer(text)), STACKS_BEGIN.search(text), CLAIMS_BEGIN.search(text)
        for m in ms:
            text = replace_block(text, m.group(0), END, page_block(m.group(1), findings, m.group(2) or "default"))
        if n:
            text = replace_block(text, n.group(0), STACKS_END, stacks_block(n.group(1), findings))
        if c:
            text = replace_block(text, c.group(0), CLAIMS_END, claims_block(c.group(1), findings))
        if ms or n or c:
            out.append((page, text))
    readme = root / "README.md"
    if readme.exists() and README_BEGIN in (text := readme.read_text(encoding="utf-8")):
        out.append((readme, replace_block(text, README_BEGIN, README_END, readme_table(findings, root))))
    return out


def sync(root: str | Path | None = None, path: str | Path | None = None) -> list[Path]:
    """Rewrite every page's block from the file; the pages changed."""
    from benchlib.publish.notebooks import project_root

    r = Path(root) if root else project_root()
    return write_generated(_targets(r, load(path or default_path(r))))


def check(root: str | Path | None = None, path: str | Path | None = None) -> list[Path]:
    """The pages whose block disagrees with the file (empty: all agree)."""
    from benchlib.publish.notebooks import project_root

    r = Path(root) if root else project_root()
    return [p for p, text in _targets(r, load(path or default_path(r))) if p.read_text(encoding="utf-8") != text]


def main(argv: Sequence[str] | None = None) -> int:
    """``record <run folder>...``, ``sync`` or ``check``."""
    ap = argparse.ArgumentParser(prog="python -m benchlib._project.studypages", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="record run folders' verdicts as their studies' findings")
    rec.add_argument("folders", nargs="+")
    rec.add_argument("--again", action="store_true",
                     help="add the folders as other default reports beside their studies' recorded runs")
    sub.add_parser("sync", help="rewrite the study pages' findings blocks")
    sub.add_parser("check", help="list the pages that disagree with data/findings.json")
    a = ap.parse_args(argv)
    path = default_path()
    if a.cmd == "record":
        found = load(path)
        for folder in a.folders:
            if a.again:
                f = record_again(folder, found)
                found[f.key] = f
                print(f"recorded run {f.again[-1].run_id} beside {f.study}'s run {f.run_id}")
                continue
            f = record(folder)
            found[f.key] = f
            print(f"recorded {f.study} ({f.scale} scale): run {f.run_id}, load average {f.loadavg}")
        save(found, path)
        return 0
    if a.cmd == "sync":
        for p in sync():
            print(f"rewrote {p}")
        return 0
    bad = check()
    for p in bad:
        print(f"{p}: its findings block disagrees with {path}; run `python -m benchlib._project.studypages sync`",
              file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
