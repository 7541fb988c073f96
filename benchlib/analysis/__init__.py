"""The analysis layer: what every study notebook computes from its stored runs.

A study is an entry of the registry (:mod:`~benchlib.analysis.studies.registry`), a module
(``benchlib/analysis/studies/<name>.py``: its parameters record, its design (arms, loads,
questions), the original's numbers beside ours and its conclusion's facts) and a notebook that
calls :func:`~benchlib.analysis.notebook.run_study` (``from benchlib import run_study``) and one
method per common section of the report; everything else comes from here (``docs/studies.md``
walks through adding a study):

* :mod:`~benchlib.analysis.notebook`: :func:`run_study` -> :class:`StudyRun` (the run, its
  answers, and the report's common sections: ``show_run``, ``show_contracts``,
  ``show_verdicts``, ``show_design``, ``show_provenance``...);

* :mod:`~benchlib.analysis.questions`: :class:`Contrast`, :class:`Family` (one question = one
  Holm family), :func:`run_family` -> :class:`Answer` (verdicts, with ``not run`` and ``no
  valid trial`` rows), :func:`planned_rows`, :func:`blocks_needed`, :func:`compare_valid`,
  :func:`decided_questions` (the runner's per-block look at which questions are decided, for
  the progress display);
* :mod:`~benchlib.analysis.verdicts`: verdict tables of comparisons and answers, the family's
  heading, verdicts in words, footnotes;
* :mod:`~benchlib.analysis.conclusion`: phrases of a conclusion from typed verdicts;
* :mod:`~benchlib.analysis.tables`: the run's status, contracts, repeats, limits, warm-up,
  client CPU, server CPU, log lines, measured minutes, percentile support;
* :mod:`~benchlib.analysis.hosts`: the load-hosts section of a run whose load came from
  several hosts (:func:`load_hosts_section`; empty on one machine);
* :mod:`~benchlib.analysis.peers`: a peer tool (wrk, k6, ab, hey, h2load...) beside benchlib;
* :mod:`~benchlib.analysis.run_info`: the design and provenance in Markdown;
* :mod:`~benchlib.analysis.pilot`: variance components of a stored run, the trials x duration
  planner, and the report's design section (:func:`design_section`: design run, MDE
  predicted from a pilot or an earlier run (:class:`PilotComponents`,
  :func:`components_from_run`) or from the run's own components, labelled as no prediction,
  and achieved MDE);
* :mod:`~benchlib.analysis.stopping`: sequential stopping of a study's questions
  (:func:`stopping_rule`: a notebook's ``sequential`` parameter -> the runner's ``until=`` rule
  and the :class:`~benchlib.stats.sequential.SequentialDesign` its analysis uses;
  :func:`open_questions`, :class:`StopWhenSettled`);
* :mod:`~benchlib.analysis.planned`: :class:`~benchlib.analysis.planned.StudyDesign` (what a
  study runs), :func:`~benchlib.analysis.planned.run_design` (the fixed design with its looks,
  or with a time budget a pilot, the plan within the budget for a target MDE, and futility at
  it), :func:`~benchlib.analysis.planned.run_planned`;
* :mod:`~benchlib.analysis.params`: a study's parameters record
  (:class:`~benchlib.analysis.params.StudyParameters`), parameter lists and numbers;
* :mod:`~benchlib.analysis.formats` and :mod:`~benchlib.analysis.display`: numbers, metric words,
  showing tables and text.

Every function that reads a run takes a :class:`benchlib.store.results.Run` (what the runner returns,
or :func:`benchlib.store.results.open_run` of a stored run).
"""

from __future__ import annotations

from benchlib.core.lazy import lazy_exports

#: public name -> the module that defines it (imported on first use: importing one module of
#: the package, e.g. ``benchlib.analysis.plots``, does not import the others)
_EXPORTS: dict[str, str] = {
    "Answer": "benchlib.analysis.questions",
    "Contrast": "benchlib.analysis.questions",
    "Family": "benchlib.analysis.questions",
    "LoadHostsSection": "benchlib.analysis.hosts",
    "PilotComponents": "benchlib.analysis.pilot",
    "SEQUENTIAL_CHOICES": "benchlib.analysis.stopping",
    "StopWhenSettled": "benchlib.analysis.stopping",
    "Stopping": "benchlib.analysis.stopping",
    "add_trial_metric": "benchlib.analysis.tables",
    "answer_table": "benchlib.analysis.verdicts",
    "answer_tables": "benchlib.analysis.verdicts",
    "blocks_needed": "benchlib.analysis.questions",
    "client_cpu_table": "benchlib.analysis.tables",
    "client_limited": "benchlib.analysis.tables",
    "compare_valid": "benchlib.analysis.questions",
    "components_from_run": "benchlib.analysis.pilot",
    "contracts_table": "benchlib.analysis.tables",
    "decided_questions": "benchlib.analysis.questions",
    "design_markdown": "benchlib.analysis.run_info",
    "design_section": "benchlib.analysis.pilot",
    "design_table": "benchlib.analysis.pilot",
    "family_markdown": "benchlib.analysis.verdicts",
    "footnotes_markdown": "benchlib.analysis.verdicts",
    "limits_table": "benchlib.analysis.tables",
    "load_hosts_section": "benchlib.analysis.hosts",
    "log_lines_table": "benchlib.analysis.tables",
    "measured_minutes": "benchlib.analysis.tables",
    "metric_words": "benchlib.analysis.display",
    "open_questions": "benchlib.analysis.stopping",
    "percentile_support": "benchlib.analysis.tables",
    "planned_rows": "benchlib.analysis.questions",
    "provenance_markdown": "benchlib.analysis.run_info",
    "repeats_table": "benchlib.analysis.tables",
    "responses_table": "benchlib.analysis.tables",
    "run_family": "benchlib.analysis.questions",
    "saturation_table": "benchlib.analysis.tables",
    "seed_stacks_markdown": "benchlib.analysis.run_info",
    "server_cpu_table": "benchlib.analysis.tables",
    "server_unsaturated": "benchlib.analysis.tables",
    "short_reasons": "benchlib.analysis.tables",
    "show": "benchlib.analysis.display",
    "status_table": "benchlib.analysis.tables",
    "stopping_rule": "benchlib.analysis.stopping",
    "table": "benchlib.analysis.display",
    "verdict_sentences": "benchlib.analysis.verdicts",
    "verdict_table": "benchlib.analysis.verdicts",
    "warmup_table": "benchlib.analysis.tables",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
