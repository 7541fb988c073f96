"""The analysis layer: what every study notebook computes from its stored runs.

A study module (``benchlib/studies/<name>.py``) defines its arms, loads, questions, the
original's numbers and its conclusion's facts; everything else comes from here
(``docs/studies.md`` walks through adding a study):

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
* :mod:`~benchlib.analysis.planned`: :func:`~benchlib.analysis.planned.run_study` (the fixed
  design with its looks, or with a time budget a pilot, the plan within the budget for a target
  MDE, and futility at it), :func:`~benchlib.analysis.planned.run_planned`;
* :mod:`~benchlib.analysis.params`: parameter lists and numbers;
* :mod:`~benchlib.analysis.fmt` and :mod:`~benchlib.analysis.display`: numbers, metric words,
  showing tables and text.

Every function that reads a run takes a :class:`benchlib.results.Run` (what the runner returns,
or :func:`benchlib.results.open_run` of a stored run).
"""

from __future__ import annotations

from benchlib.analysis.display import metric_words, show, table
from benchlib.analysis.hosts import LoadHostsSection, load_hosts_section
from benchlib.analysis.pilot import PilotComponents, components_from_run, design_section, design_table
from benchlib.analysis.questions import (Answer, Contrast, Family, blocks_needed, compare_valid, decided_questions,
                                        planned_rows, run_family)
from benchlib.analysis.run_info import design_markdown, provenance_markdown, seed_stacks_markdown
from benchlib.analysis.stopping import (SEQUENTIAL_CHOICES, Stopping, StopWhenSettled, open_questions,
                                       stopping_rule)
from benchlib.analysis.tables import (
    add_trial_metric,
    client_cpu_table,
    client_limited,
    contracts_table,
    limits_table,
    log_lines_table,
    measured_minutes,
    percentile_support,
    repeats_table,
    server_cpu_table,
    server_unsaturated,
    short_reasons,
    status_table,
    warmup_table,
)
from benchlib.analysis.verdicts import (
    answer_table,
    answer_tables,
    family_markdown,
    footnotes_markdown,
    verdict_sentences,
    verdict_table,
)

__all__ = [
    "SEQUENTIAL_CHOICES", "Answer", "Contrast", "Family", "LoadHostsSection", "PilotComponents", "StopWhenSettled", "Stopping",
    "add_trial_metric", "answer_table", "answer_tables", "blocks_needed", "client_cpu_table", "client_limited",
    "compare_valid", "components_from_run",
    "contracts_table", "decided_questions", "design_markdown", "design_section", "seed_stacks_markdown", "design_table", "family_markdown",
    "footnotes_markdown", "limits_table", "load_hosts_section", "log_lines_table", "measured_minutes", "metric_words", "open_questions",
    "percentile_support", "planned_rows", "provenance_markdown", "repeats_table", "run_family", "server_cpu_table",
    "server_unsaturated", "short_reasons", "show", "status_table", "stopping_rule", "table", "verdict_sentences",
    "verdict_table", "warmup_table",
]
