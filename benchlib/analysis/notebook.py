"""What a study notebook calls: :func:`run_study`, and one call per common section of its report.

A study notebook is its ``parameters`` cell (papermill and ``benchlib run -p`` set it), then::

    from benchlib import run_study

    study = run_study("04_rust_vs_go_logging", globals())  # its parameters, read once and checked
    study.show_claims()      # the seed's claims, re-run and tested at their own size (first)
    study.show_run()         # which of the seed's stacks ran, the design, the minutes it took
    study.show_contracts()   # what each instance answered, the trials per arm, the load hosts
    study.show_verdicts()    # one table per question, each stored as derived/comparison*.json
    study.show_design()      # blocks x seconds, the MDE predicted and achieved, the looks
    study.show_provenance()  # the parameters, the commands that rebuild and re-measure, the machine

with the study's own tables, plots and conclusion between them (its module's functions, on
``study.run``, ``study.summaries`` and ``study.answers``). :func:`run_study` finds the study in
the registry (:mod:`benchlib.analysis.studies.registry`), reads its parameters record from the
notebook's namespace (:meth:`benchlib.analysis.params.StudyParameters.read`: one line naming a
parameter whose value does not fit, and the valid values), builds its design (the module's
``design``) and runs it (:func:`benchlib.analysis.planned.run_design`: the fixed design, or a
pilot and a plan within ``budget_min``), storing the parameters with the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from benchlib.analysis.display import show, table
from benchlib.analysis.params import StudyParameters
from benchlib.analysis.planned import PlannedRun, StudyDesign, run_design, side_by_side
from benchlib.analysis.questions import Answer, blocks_needed, run_family
from benchlib.analysis.stopping import Stopping
from benchlib.analysis.studies.registry import Study
from benchlib.analysis.studies.registry import study as find_study
from benchlib.core.model import Experiment
from benchlib.store.results import Run

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["StudyRun", "run_study"]

P = TypeVar("P", bound=StudyParameters)
D = TypeVar("D", bound=StudyDesign)


@dataclass
class StudyRun(Generic[P, D]):
    """A study's run with what its report needs: what :func:`run_study` returns.

    Attributes
    ----------
    study: the registry's entry.
    parameters: the study's parameters record as the run used them (the design's values
        filled in; ``parameters.trials`` is what was asked: with a budget the plan's blocks
        are ``experiment.trials``).
    design: what the study's module built from them (its experiment and questions, and the
        facts its own tables need).
    run: the stored run (its trials, summaries, provenance).
    stopping: its sequential stopping (``stopping.design`` for the analysis; off: ``None``).
    planned: with a budget, the pilot and the plan (``None`` without).
    part: ``""`` for the study's run; the name of a second experiment of the study (study
        04's ``sweep``), stored as ``<run_id>-<part>``.
    """

    study: Study
    parameters: P
    design: D
    run: Run
    stopping: Stopping
    planned: PlannedRun | None = None
    part: str = ""

    # -- what the report reads -------------------------------------------------------------

    @property
    def experiment(self) -> Experiment:
        """The experiment that ran (with a budget: the planned blocks and seconds)."""
        return self.run.require_experiment()

    @cached_property
    def summaries(self) -> pd.DataFrame:
        """One row per trial (:meth:`Run.summaries`), as the analysis reads them (the
        design's ``prepare``, e.g. latencies in µs)."""
        s = self.run.summaries()
        return self.design.prepare(s) if self.design.prepare is not None else s

    @property
    def unavailable(self) -> dict[str, str]:
        """Arm -> why it did not run, as the verdict rows say it (the design's ``reasons``)."""
        why = dict(self.run.unavailable)
        return self.design.reasons(why) if self.design.reasons is not None else why

    @cached_property
    def answers(self) -> dict[str, Answer]:
        """Each question's answer (:func:`~benchlib.analysis.questions.run_family` with the
        run's sequential design), by family key; each is stored in the run folder as it is
        computed (every row, those not compared too): ``derived/comparison.json`` for a
        study of one table, else ``derived/comparison-<key>.json``."""
        out: dict[str, Answer] = {}
        for fam in self.design.families:
            answer = run_family(self.summaries, fam, unavailable=self.unavailable, seed=self.parameters.seed,
                                sequential=self.stopping.design)
            name = "comparison.json" if self.design.one_table else f"comparison-{fam.key}.json"
            answer.to_json(Path(self.run.store.path) / "derived" / name)
            out[fam.key] = answer
        return out

    def answer(self, key: str | None = None) -> Answer:
        """The answer to the question ``key`` (default: the study's only question)."""
        if key is None and len(self.answers) == 1:
            return next(iter(self.answers.values()))
        if key not in self.answers:
            from benchlib.core.errors import ParameterError

            raise ParameterError(f"unknown question {key!r}; valid: {', '.join(self.answers)}")
        return self.answers[key]

    # -- the report's sections, one call each ------------------------------------------------

    def show_claims(self) -> None:
        """The report's first section, "The claim, re-run": one row per claim of the study's
        entry (the original's number, the re-run's ratio [interval], the outcome at the claim's
        own size, the variant, what did not run and why), then one sentence per claim, all from
        this run's data (:func:`~benchlib.analysis.claims.answer_claims_of_run`); the answers are
        stored as ``derived/claims.json``. A study without claims (or a second experiment)
        shows nothing."""
        from benchlib.analysis.claims import answer_claims_of_run, claims_markdown, save_claims

        if self.part or not self.study.claims:
            return
        answers = answer_claims_of_run(self.study.claims, self.summaries,
                                       arms=[a.name for a in self.experiment.arms], unavailable=self.unavailable)
        save_claims(answers, Path(self.run.store.path))
        show(claims_markdown(answers))

    def show_run(self, *notes: str) -> None:
        """The report's first lines: which of the seed's stacks ran (the study's run, when its
        entry names them), how it was measured (arms, load, design, CPUs, where stored), the
        ``notes`` (one Markdown line each) and the minutes its trials took."""
        from benchlib.analysis.run_info import design_markdown, seed_stacks_markdown
        from benchlib.analysis.tables import measured_minutes

        if not self.part and self.study.seed_stacks:
            show(seed_stacks_markdown(self.run, self.study.seed_stacks))
        show(design_markdown(self.run))
        show("\n".join([*(n for n in notes if n), f"- this {self.part or 'run'} took "
                        f"**{measured_minutes(self.run):.1f} min** (first trial start to last trial end)"]))

    def show_blocks_needed(self) -> None:
        """Per question, its rows (the percentiles its trials support: the design's
        ``requests``) and the fewest blocks with which its exact paired tests can reach
        p < 0.05 after Holm over them (:func:`~benchlib.analysis.questions.blocks_needed`),
        and whether this run has them."""
        blocks = self.experiment.trials
        need = {f.key: blocks_needed(f, self.design.requests or {}, self.run.unavailable) for f in self.design.families}
        words = [f"`{k}` {rows} rows, at least {n} blocks" if rows else f"`{k}` no row (its arms did not run)"
                 for k, (rows, n) in need.items()]
        enough = all(blocks >= n for rows, n in need.values() if rows)
        show("Rows per question and the blocks they need: with b paired blocks the smallest p-value an exact "
             "signed-rank test can give is 2/2^b, and Holm needs it below 0.05 / rows: " + "; ".join(words)
             + f". This run has **{blocks} blocks**: " + ("enough for every question." if enough else
                                                          "NOT enough for every question: those rows read "
                                                          "insufficient trials."))

    def show_contracts(self, *, repeats: bool = False) -> None:
        """What each fresh instance answered to the contract check (no Content-Type reads
        ``(none)``), the trials per arm and their status, the load hosts (only when a trial's
        load came from several hosts) and, with ``repeats``, the trials run again because the
        load generator's guard invalidated them."""
        from benchlib.analysis.hosts import load_hosts_section
        from benchlib.analysis.tables import contracts_table, repeats_table, status_table

        show(table(contracts_table(self.run).fillna({"content_type": "(none)"})))
        show(table(status_table(self.run)))
        load_hosts_section(self.run).show()
        if repeats:
            again = repeats_table(self.run)
            show("No trial had to be repeated." if not len(again) else
                 "**Trials repeated** because the load generator's guard invalidated them (the attempts set aside "
                 "stay in the run folder):")
            if len(again):
                show(table(again))

    def show_client_cpu(self, condition: str | None = None) -> list[str]:
        """benchlib's client CPU per arm (:func:`~benchlib.analysis.tables.client_cpu_table`)
        and the arms whose client was near its limit in most trials (their rates are lower
        bounds), which it returns."""
        from benchlib.analysis.tables import client_cpu_table, client_limited

        client = client_cpu_table(self.run, condition=condition)
        show(table(client))
        limited = client_limited(client)
        show("Client CPU near its limit in most trials (rates are lower bounds): "
             + (", ".join(f"**{a}**" for a in limited) or "none"))
        return limited

    def show_verdicts(self) -> None:
        """Each question's verdict table (:attr:`answers`): its heading, question and what its
        Holm correction covers (a study of one table: what was left out, and why nothing was
        compared when nothing was), the table (rows not compared say why; with the design's
        ``group_headings`` one table per group under its heading, rows of metrics no trial
        supported named below them) and its footnotes."""
        from benchlib.analysis.verdicts import answer_table, answer_tables, family_markdown, footnotes_markdown

        headings = self.design.group_headings
        for answer in self.answers.values():
            if not self.design.one_table:
                show(family_markdown(answer))
            else:
                if answer.notes:
                    show("**Left out of the comparison**: " + "; ".join(answer.notes))
                if answer.comparison is None:
                    s = self.summaries
                    ran = sorted(set(s[s["valid"].astype(bool)]["arm"])) if len(s) else []
                    show("**No contrast could be computed**: no contrast has valid trials of both its arms (arms "
                         f"with valid trials: {', '.join(ran) or 'none'}; see the status table above).")
            if headings is None:
                rows = answer_table(answer, group_column="condition" if self.design.one_table else "group")
                if len(rows):
                    show(table(rows))
            else:
                for group, rows in answer_tables(answer, drop_omitted=True).items():
                    show(f"### {headings.get(group, group)}")
                    show(table(rows))
                cmp = answer.comparison
                omitted = cmp.table[cmp.table["verdict_kind"] == "omitted"] if cmp is not None else ()
                if len(omitted):
                    show("Not compared for want of requests per trial: " + "; ".join(
                        f"{headings.get(str(g), str(g))} {', '.join(sorted({str(m).rsplit('_', 1)[0] for m in rows['metric']}))}"
                        for g, rows in omitted.groupby("condition", sort=False)) + ".")
            show(footnotes_markdown(answer.comparison))

    def show_design(self) -> None:
        """The design section (:func:`~benchlib.analysis.pilot.design_section`): blocks x
        measured seconds, the MDE predicted from the variance components and the MDE achieved,
        sequential stopping (on or off and why, its looks, what it saved) and, with a budget,
        the pilot and the plan."""
        from benchlib.analysis.pilot import design_section

        show(design_section(self.run, list(self.answers.values()), stopping=self.stopping, planned=self.planned))

    def show_conclusion(self) -> None:
        """Every question's verdicts in words, one sentence per row by its verdict kind's
        template (:func:`~benchlib.analysis.verdicts.verdict_sentences`); a study with more to
        say builds its conclusion in its module."""
        from benchlib.analysis.verdicts import verdict_sentences

        for answer in self.answers.values():
            show(verdict_sentences(answer.comparison))

    def show_provenance(self, *notes: str) -> None:
        """The parameters with the commands that rebuild this report and measure it again, the
        machine and software (:func:`~benchlib.analysis.run_info.provenance_markdown`), then
        ``notes`` (one Markdown line each)."""
        from benchlib.analysis.run_info import provenance_markdown

        show(provenance_markdown(self.run))
        show("\n".join(n for n in notes if n))

    # -- a second experiment -------------------------------------------------------------

    def run_part(self, part: str, design: StudyDesign) -> StudyRun[P, StudyDesign]:
        """A second experiment of the study (study 04's open-model ``sweep``, built from this
        run's results), with the same parameters and its fixed design, stored as
        ``<run_id>-<part>`` (resumed with this run)."""
        return _run(self.study, self.parameters, design, part=part, run_id=f"{self.run.run_id}-{part}")


def _run(entry: Study, parameters: P, design: D, *, part: str = "", run_id: str | None = None) -> StudyRun[P, D]:
    """Run ``design`` with ``parameters`` (:func:`~benchlib.analysis.planned.run_design`)."""
    budget_min, target_mde = parameters.budget_target if not part else (None, None)
    sequential = design.sequential if design.sequential is not None else ("no" if budget_min is None else "yes")
    experiment = side_by_side(design.experiment, parameters.side_by_side)
    done = run_design(experiment, design.families, sequential=sequential, full=parameters.full,
                      requests=design.requests, prepare=design.prepare, compare_kwargs={"seed": parameters.seed},
                      budget_min=budget_min, target_mde=target_mde, run_id=run_id or parameters.run_id or None,
                      out_dir=parameters.out_dir or None, progress=parameters.progress,
                      notebook_parameters=parameters.asked(), **({"cpus": design.cpus} if design.cpus else {}))
    return StudyRun(entry, parameters, design, done.run, done.stopping, done.planned, part)


def run_study(study: str | Study, namespace: Mapping[str, Any] | None = None, /,
              **parameters: Any) -> StudyRun[Any, Any]:
    """Run a study and return what its report needs.

    Parameters
    ----------
    study: its id (``"04_rust_vs_go_logging"``, or ``"04"``) or its registry entry.
    namespace: where its parameters are read from: the notebook's ``globals()`` (its
        ``parameters`` cell, and papermill's injected cell after it); a parameter it lacks
        keeps the record's default.
    parameters: parameters given by name, over ``namespace`` (from a script).

    Raises
    ------
    ParameterError  an unknown study or parameter, or a value that does not fit (one line
        naming it and the valid values), before anything is built or run.
    """
    entry = study if isinstance(study, Study) else find_study(study)
    chosen = entry.parameters.read(namespace, **parameters)
    return _run(entry, chosen, entry.design(chosen))
