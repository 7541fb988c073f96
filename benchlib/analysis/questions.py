"""Questions as comparison families: one :class:`Family` = one ``compare`` call = one Holm family.

A study asks its questions as families of :class:`Contrast` rows (an arm against a baseline,
in a group): every arm against one baseline (:meth:`Family.against`), arms relabelled per
group (:meth:`Family.grouped`: "the same server at each log sink"), or explicit pairs with
different baselines in one family (study 01: language, implementation and the original's
code, over both endpoints). :func:`run_family` compares what can be compared and says what
cannot: every contrast whose arm did not run or has no valid trial comes back as a typed
``not run`` / ``no valid trial`` :class:`~benchlib.stats.verdict.Verdict`, so every table
and every conclusion keeps it (:class:`Answer`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlib.core.errors import ParameterError
from benchlib.stats.sequential import LookStatus, SequentialDesign
from benchlib.stats.verdict import Verdict
from benchlib.store.results import Run

__all__ = ["Answer", "Contrast", "Family", "blocks_needed", "compare_valid", "decided_questions", "planned_rows",
           "run_family", "sequential_look"]


@dataclass(frozen=True)
class Contrast:
    """One comparison of a family: ``arm`` against ``baseline`` (stored arm names).

    Attributes
    ----------
    baseline, arm: stored arm names.
    condition: the stored condition their trials come from (``None``: each of the family's
        ``conditions``).
    group: the row's group in the family's tables (default: the condition).
    baseline_label, arm_label: the names the two arms carry in this family's tables
        (default: their stored names), e.g. ``"pipe"`` and ``"discard"`` in "per server".
    question: the sub-question the row answers (a key of :attr:`Family.questions`).
    """

    baseline: str
    arm: str
    condition: str | None = None
    group: str | None = None
    baseline_label: str | None = None
    arm_label: str | None = None
    question: str = ""

    @property
    def labels(self) -> tuple[str, str]:
        """(baseline label, arm label)."""
        return self.baseline_label or self.baseline, self.arm_label or self.arm


@dataclass(frozen=True)
class Family:
    """One question (or several answered together): contrasts compared in one Holm family.

    Attributes
    ----------
    key: short name (file names, lookups). title, text: heading and question for the report.
    contrasts: the rows' pairs, in table order.
    metrics: summary columns compared (any unit: ``p50_ms``, ``p99_us``, ``throughput_rps``...).
    conditions: what ``Contrast.condition=None`` expands to.
    questions: sub-question key -> its words, in table order (a "question" column).
    better: directions of metrics ``compare`` cannot infer (``{"cpu_per_req": "lower"}``).
    max_error_rate: a trial whose ``error_rate`` is above this counts in the family's
        ``error_rate`` rows only: its rates, latencies and CPU costs are those of error answers
        (a proxy's 502s come back fast and cheap), not of the work asked for. A row left with no
        such value reads ``no valid trial: ...`` (never faster or slower); ``None``: no limit.
    """

    key: str
    contrasts: tuple[Contrast, ...]
    metrics: tuple[str, ...]
    title: str = ""
    text: str = ""
    conditions: tuple[str, ...] = ()
    questions: Mapping[str, str] = field(default_factory=dict)
    better: Mapping[str, str] | None = None
    max_error_rate: float | None = None

    def __post_init__(self) -> None:
        m = self.max_error_rate
        if m is not None and (isinstance(m, bool) or not isinstance(m, (int, float)) or not 0 <= m < 1):
            raise ParameterError(f"family {self.key!r}: max_error_rate must be a fraction in [0, 1) or None, "
                                 f"got {m!r}")

    @classmethod
    def against(cls, key: str, baseline: str, arms: Sequence[str], *, conditions: Sequence[str],
                metrics: Sequence[str], title: str = "", text: str = "") -> Family:
        """Every arm of ``arms`` against ``baseline``, in each condition."""
        return cls(key, tuple(Contrast(baseline, a) for a in arms if a != baseline), tuple(metrics), title, text,
                   tuple(conditions))

    @classmethod
    def grouped(cls, key: str, *, baseline: str, groups: Mapping[str, Mapping[str, str]],
                metrics: Sequence[str], condition: str | None = None, title: str = "", text: str = "") -> Family:
        """Groups of relabelled arms, each against the arm labelled ``baseline`` in it.

        ``groups``: group -> {stored arm: its label in this family}; ``condition``: the
        stored condition of every group (``None``: each group's name is its condition)."""
        out = []
        for group, mapping in groups.items():
            base = [a for a, lbl in mapping.items() if lbl == baseline]
            if len(base) != 1:
                raise ParameterError(f"family {key!r}, group {group!r}: exactly one arm must be labelled "
                                     f"{baseline!r}; the group holds {dict(mapping)}")
            out += [Contrast(base[0], a, condition if condition is not None else group, group, baseline, lbl)
                    for a, lbl in mapping.items() if a != base[0]]
        return cls(key, tuple(out), tuple(metrics), title, text)

    def rows(self) -> list[Contrast]:
        """The contrasts with condition and group filled in (``condition=None`` expanded)."""
        out = []
        for c in self.contrasts:
            for cond in ([c.condition] if c.condition is not None else self.conditions):
                out.append(Contrast(c.baseline, c.arm, cond, c.group or cond, *c.labels, c.question))
        return out

    def runnable(self, unavailable: Mapping[str, str]) -> list[Contrast]:
        """The contrasts whose two arms could both run."""
        return [c for c in self.contrasts if c.baseline not in unavailable and c.arm not in unavailable]

    @property
    def baseline(self) -> str | None:
        """The one baseline label of every row, or ``None`` when the rows have several."""
        labels = {c.labels[0] for c in self.contrasts}
        return labels.pop() if len(labels) == 1 else None

    @property
    def arms(self) -> list[str]:
        """Every stored arm the family uses."""
        return list(dict.fromkeys(a for c in self.contrasts for a in (c.baseline, c.arm)))


@dataclass
class Answer:
    """A family and what :func:`run_family` found.

    Attributes
    ----------
    family: the question. comparison: ``compare``'s result (``None`` when nothing could be compared).
    notes: what was left out and why, in words.
    missing: one ``not run`` or ``no valid trial`` verdict per row that could not be compared
        (``metric="all"``, ``labels={"condition": group}``).
    absent: (group, arm label) -> ``not run`` or ``no valid trial``, for each arm of a group
        without valid trials there.
    errored: (group, arm label) -> (trials above the family's ``max_error_rate``, valid trials,
        their median error rate), for each arm with such trials there.
    """

    family: Family
    comparison: Any | None
    notes: list[str] = field(default_factory=list)
    missing: list[Verdict] = field(default_factory=list)
    absent: dict[tuple[str, str], str] = field(default_factory=dict)
    errored: dict[tuple[str, str], tuple[int, int, float]] = field(default_factory=dict)

    def verdict(self, arm: str, metric: str, *, group: str | None = None, baseline: str | None = None) -> Verdict | None:
        """The verdict of ``arm`` (its label in this family) on ``metric`` in ``group``: the
        comparison's, else the ``not run`` / ``no valid trial`` one; ``None`` when the family
        has no such row."""
        if self.comparison is not None:
            labels = {"condition": group} if group is not None else {}
            found: Verdict | None = self.comparison.verdict(arm, metric, baseline=baseline, **labels)
            if found is not None:
                return found
        for v in self.missing:
            if v.arm == arm and (group is None or v.labels.get("condition") == group) and (
                    baseline is None or v.baseline == baseline):
                return v
        return None

    def to_dict(self) -> dict[str, Any] | None:
        """The family's verdict table as stored: the comparison's document
        (``Comparison.to_dict``) with every row it did not compare (:attr:`missing`: not run,
        no valid trial, client-bound) added to its ``verdicts`` (its ``rows`` stay the compared
        ones), so a stored run's verdicts list every row of the family; ``None`` when nothing
        was compared."""
        from benchlib.stats.comparison import jsonable

        if self.comparison is None:
            return None
        doc: dict[str, Any] = self.comparison.to_dict()
        doc["verdicts"] = list(doc.get("verdicts") or []) + [v.to_dict() for v in self.missing]
        return dict(jsonable(doc))

    def to_json(self, path: str | Path) -> Path | None:
        """Write :meth:`to_dict` to ``path`` (sorted keys; the notebooks'
        ``derived/comparison-<family>.json``); nothing when nothing was compared."""
        import json

        doc = self.to_dict()
        if doc is None:
            return None
        out = Path(path)
        out.write_text(json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False) + "\n",
                       encoding="utf-8")
        return out

    def question_of(self, group: str, baseline: str, arm: str) -> str:
        """The sub-question's words for a row (labels), "" when the family has none."""
        for c in self.family.rows():
            if (c.group, *c.labels) == (group, baseline, arm):
                return str(self.family.questions.get(c.question, c.question))
        return ""


def _statuses(data: Any, group: str, label: str) -> str:
    rows = data[(data["condition"] == group) & (data["arm"] == label)]
    if not len(rows) or "status" not in rows.columns:
        return "no trial stored"
    counts = rows["status"].astype(str).value_counts()
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def _family_data(summaries: Any, rows: Sequence[Contrast]) -> Any:
    """The trials of every group (relabelled, ``condition`` = the group), in the summaries' order."""
    import pandas as pd

    groups: dict[str, tuple[str, dict[str, str]]] = {}
    for c in rows:
        cond, mapping = groups.setdefault(str(c.group), (str(c.condition), {}))
        if cond != c.condition:
            raise ParameterError(f"group {c.group!r} takes trials from conditions {cond!r} and {c.condition!r}")
        for stored, label in zip((c.baseline, c.arm), c.labels, strict=True):
            if mapping.setdefault(stored, label) != label:
                raise ParameterError(f"arm {stored!r} has two labels in group {c.group!r}: "
                                     f"{mapping[stored]!r} and {label!r}")
    parts = []
    for group, (cond, mapping) in groups.items():
        g = summaries[(summaries["condition"] == cond) & summaries["arm"].isin(list(mapping))].copy()
        g["arm"] = g["arm"].map(mapping)
        g["condition"] = group
        parts.append(g)
    return pd.concat(parts, ignore_index=True) if parts else summaries.iloc[0:0].copy()


def _error_bound(data: Any, family: Family) -> tuple[Any, dict[tuple[str, str], tuple[int, int, float]]]:
    """``data`` with every metric but ``error_rate`` blanked (NaN) in the valid trials whose
    error rate is above ``family.max_error_rate``; and, per (group, arm label) with such
    trials, (how many, valid trials, their median error rate)."""
    limit = family.max_error_rate
    if limit is None or "error_rate" not in data.columns or not len(data):
        return data, {}
    valid = data["valid"].astype(bool) if "valid" in data.columns else data["arm"].notna()
    hit = valid & (data["error_rate"].astype(float) > limit)
    if not hit.any():
        return data, {}
    data = data.copy()
    data.loc[hit, [m for m in family.metrics if m != "error_rate" and m in data.columns]] = math.nan
    out = {}
    for (group, label), g in data[valid].groupby(["condition", "arm"], sort=False):
        n = int(hit[g.index].sum())
        if n:
            out[(str(group), str(label))] = (n, len(g), float(g.loc[hit[g.index], "error_rate"].median()))
    return data, out


def _errored_verdicts(comparison: Any, errored: Mapping[tuple[str, str], tuple[int, int, float]],
                      limit: float) -> Any:
    """``comparison`` with each row left without values by error-bound trials given a typed
    ``no valid trial`` verdict naming them (its table's verdict columns too)."""
    import dataclasses

    from benchlib.stats.verdict import VerdictKind, render

    table = comparison.table.copy()
    verdicts = []
    for v in comparison.verdicts:
        group = str(v.labels.get("condition"))
        hits = [(lbl, errored[(group, lbl)]) for lbl in (v.baseline, v.arm) if (group, lbl) in errored]
        if v.kind is VerdictKind.OMITTED and hits:
            why = "; ".join(f"{lbl} answered errors in {n} of {total} trials (median error rate {rate:.0%}, above "
                            f"{limit:.0%}): its {v.metric} is that of error answers" for lbl, (n, total, rate) in hits)
            new = Verdict.no_valid_trial(why, arm=v.arm, baseline=v.baseline, metric=v.metric, labels=v.labels)
            at = ((table["condition"] == group) & (table["arm"] == v.arm) & (table["baseline"] == v.baseline)
                  & (table["metric"] == v.metric))
            table.loc[at, ["verdict", "verdict_kind"]] = (render(new), new.kind.value)
            v = new
        verdicts.append(v)
    return dataclasses.replace(comparison, table=table, verdicts=verdicts)


@dataclass(frozen=True)
class ClientBound:
    """An arm whose rate benchlib's client set (:func:`_client_bound`): the evidence in words,
    and its figure: ``trials`` (with a client CPU measure, or invalidated for the client's
    CPU) and ``at_limit`` (of them, at :data:`~benchlib.analysis.tables.CLIENT_NEAR_LIMIT` or
    more, or invalidated for it)."""

    evidence: str
    trials: int
    at_limit: int


def _client_bound(data: Any) -> dict[tuple[str, str], ClientBound]:
    """(group, arm label) -> the evidence, for each arm whose rate benchlib's client set there:
    at the client's limit (busiest client CPU at :data:`~benchlib.analysis.tables.CLIENT_NEAR_LIMIT`
    or more, or invalidated by the guard for the client's CPU) in half of its trials or more,
    valid or not (:func:`benchlib.analysis.tables.near_client_limit`; one trial invalid for the
    client's CPU is not enough: issue 39, item 3). The evidence names its busiest client CPU
    (share of one CPU, range over trials), the trials at the limit and those the guard
    invalidated for it, and its median rate (req/s), a lower bound of what the server can serve.
    Empty without the ``client_cpu`` column (summaries stored before it)."""
    import numpy as np

    from benchlib.analysis.tables import CLIENT_NEAR_LIMIT, invalid_for_client_cpu, near_client_limit

    if "client_cpu" not in data.columns:
        return {}
    out: dict[tuple[str, str], ClientBound] = {}
    for (group, label), g in data.groupby(["condition", "arm"], sort=False):
        cpus = [float(c) for c in g["client_cpu"] if c is not None and c == c]
        status = list(g["status"].astype(str)) if "status" in g.columns else ["ok"] * len(g)
        reasons = list(g["reason"]) if "reason" in g.columns else [None] * len(g)
        invalid = [st == "invalid" and invalid_for_client_cpu(r) for st, r in zip(status, reasons, strict=True)]
        bad = sum(invalid)
        near = sum(1 for c in cpus if c >= CLIENT_NEAR_LIMIT)
        measured = [c for c in g["client_cpu"]]
        trials = sum(1 for c, inv in zip(measured, invalid, strict=True) if inv or (c is not None and c == c))
        at_limit = sum(1 for c, inv in zip(measured, invalid, strict=True)
                       if inv or (c is not None and c == c and float(c) >= CLIENT_NEAR_LIMIT))
        if not near_client_limit(trials, at_limit, 0):
            continue
        rate = ""
        if "throughput_rps" in g.columns:
            rates = [float(x) for x in g["throughput_rps"] if x is not None and x == x]
            if rates:
                rate = (f"; its rate, {float(np.median(rates)):,.0f} req/s (median of {len(rates)} trials), is a lower "
                        "bound of the server's")
        lo, hi = (f"{min(cpus):.0%}", f"{max(cpus):.0%}") if cpus else ("?", "?")
        cpu = f"{lo}-{hi}" if lo != hi else hi
        out[(str(group), str(label))] = ClientBound(
            f"{label}'s client CPU was {cpu} busy in {len(cpus)} trials ({near} at {CLIENT_NEAR_LIMIT:.0%} or more, "
            f"{bad} invalid for it){rate}", trials, at_limit)
    return out


def _client_bound_verdicts(comparison: Any, missing: list[Verdict], bound: Mapping[tuple[str, str], ClientBound]
                           ) -> tuple[Any, list[Verdict]]:
    """``comparison`` and ``missing`` with each row that is neither decided nor equivalent ("~",
    "insufficient", "no valid trial", "not decidable within the budget") and has a client-bound
    arm (:func:`_client_bound`) given a ``client-bound`` verdict with that arm's evidence (the comparison's table
    too). Decided rows
    keep their verdicts: the notebooks' client CPU tables qualify them."""
    import dataclasses

    from benchlib.stats.verdict import VerdictKind, render

    open_kinds = (VerdictKind.NO_DIFFERENCE, VerdictKind.INSUFFICIENT, VerdictKind.NO_VALID_TRIAL,
                  VerdictKind.UNDECIDABLE)

    def relabel(v: Verdict) -> Verdict:
        group = str(v.labels.get("condition"))
        why = [bound[(group, lbl)] for lbl in (v.baseline, v.arm) if (group, lbl) in bound]
        if not why or v.kind not in open_kinds:
            return v
        most = max(why, key=lambda b: b.at_limit / b.trials if b.trials else 0.0)  # the figure the census checks
        return Verdict.client_bound("; ".join(b.evidence for b in why), of=v, trials=most.trials,
                                    at_limit=most.at_limit)

    missing = [relabel(v) for v in missing]
    if comparison is None:
        return comparison, missing
    table = comparison.table.copy()
    verdicts = []
    for v in comparison.verdicts:
        new = relabel(v)
        if new is not v:
            at = ((table["condition"] == str(v.labels.get("condition"))) & (table["arm"] == v.arm)
                  & (table["baseline"] == v.baseline) & (table["metric"] == v.metric))
            table.loc[at, ["verdict", "verdict_kind"]] = (render(new), new.kind.value)
        verdicts.append(new)
    return dataclasses.replace(comparison, table=table, verdicts=verdicts), missing


def run_family(summaries: Any, family: Family, *, unavailable: Mapping[str, str] | None = None, seed: int = 0,
               **compare_kwargs: Any) -> Answer:
    """Compare the family's rows that have valid trials of both arms (one ``compare`` call,
    one Holm family over every group), and account for the others.

    A group none of whose arms has a valid trial, a group whose rows all lack one side, and
    each arm without valid trials there ("not run: why" when it could not run) are named in
    ``notes``; each row not compared gets a typed verdict in ``missing``. With
    ``family.max_error_rate``, trials answered mostly with errors count in the ``error_rate``
    rows only (named in ``notes``; a row they leave empty reads ``no valid trial``). A row left
    undecided ("~", "insufficient", "no valid trial") in which an arm's rate was set by
    benchlib's client (:func:`benchlib.analysis.tables.near_client_limit`) reads
    ``client-bound`` with the arm's measured client CPU and its rate as a lower bound.
    ``compare_kwargs`` go to :func:`benchlib.stats.compare` (design, correction, margin...)."""
    from benchlib.stats import compare

    unavailable = dict(unavailable or {})
    rows = family.rows()
    data, errored = _error_bound(_family_data(summaries, rows), family)
    valid = data[data["valid"].astype(bool)] if "valid" in data.columns else data
    notes: list[str] = []
    missing: list[Verdict] = []
    absent: dict[tuple[str, str], str] = {}
    keep: list[str] = []
    empty: list[str] = []
    for group in dict.fromkeys(str(c.group) for c in rows):
        here = [c for c in rows if c.group == group]
        stored = {lbl: a for c in here for a, lbl in zip((c.baseline, c.arm), c.labels, strict=True)}
        have = set(valid.loc[valid["condition"] == group, "arm"])
        absent.update({(group, lbl): "not run" if a in unavailable else "no valid trial"
                       for lbl, a in stored.items() if lbl not in have})
        for c in here:
            lacking = [(a, lbl) for a, lbl in zip((c.baseline, c.arm), c.labels, strict=True) if lbl not in have]
            if not lacking:
                continue
            gone = [a for a in (c.baseline, c.arm) if a in unavailable]
            kw: dict[str, Any] = dict(arm=c.labels[1], baseline=c.labels[0], labels={"condition": group})
            missing.append(Verdict.not_run(unavailable[gone[0]], **kw) if gone else Verdict.no_valid_trial(
                ", ".join(f"{a} ({_statuses(data, group, lbl)})" for a, lbl in lacking), **kw))
        if not have and not any(a in unavailable for a in stored.values()):
            empty.append(group)
            continue
        notes += [f"{a} ({group}): " + (f"not run: {unavailable[a]}" if a in unavailable else "no valid trial")
                  for lbl, a in stored.items() if lbl not in have]
        if any(all(lbl in have for lbl in c.labels) for c in here):
            keep.append(group)
        else:
            notes.append(f"group {group!r} not compared: its baseline or every other arm has no valid trial")
    if empty:
        notes.insert(0, f"no valid trial in group(s) {', '.join(empty)} (see the status table for the reasons)")
    notes += [f"{lbl} ({group}): {n} of {total} valid trials answered errors (median error rate {rate:.0%}, above "
              f"{family.max_error_rate:.0%}): they count in the error rate only" for (group, lbl), (n, total, rate)
              in errored.items()]
    bound = _client_bound(data)
    if not keep:
        _, missing = _client_bound_verdicts(None, missing, bound)
        return Answer(family, None, notes, missing, absent, errored)
    metrics = tuple(m for m in family.metrics if m in data.columns)
    how: dict[str, Any] = {"baseline": family.baseline} if family.baseline is not None else {"contrasts": list(
        dict.fromkeys(c.labels for c in rows if c.baseline not in unavailable and c.arm not in unavailable))}
    comparison = compare(data[data["condition"].isin(keep)], metrics=metrics, by=("condition",), seed=seed,
                         better=family.better, **how, **compare_kwargs)
    if errored:
        comparison = _errored_verdicts(comparison, errored, float(family.max_error_rate or 0))
    if bound:
        comparison, missing = _client_bound_verdicts(comparison, missing, bound)
    return Answer(family, comparison, notes, missing, absent, errored)


def sequential_look(family: Family, summaries: Any, design: SequentialDesign, *,
                    unavailable: Mapping[str, str] | None = None, **compare_kwargs: Any) -> tuple[Answer, LookStatus | None]:
    """A question at a sequential look, as the runner's stopping rule reads it: the family
    compared with ``sequential=design`` on the summaries so far, and whether it may stop
    (:func:`benchlib.stats.sequential.status`; ``None`` when nothing could be compared yet).
    The stopping rule (:class:`benchlib.analysis.stopping.StopWhenSettled`) and the progress
    lines (:func:`decided_questions`) both read it, so they cannot disagree."""
    from benchlib.stats.sequential import status

    answer = run_family(summaries, family, unavailable=unavailable, sequential=design, shift=False, **compare_kwargs)
    return answer, (status(answer.comparison) if answer.comparison is not None else None)


def planned_rows(family: Family, requests: Mapping[str, float], unavailable: Mapping[str, str] | None = None) -> int:
    """Rows the family will have: each runnable row times the metrics its condition's trials
    support (``requests``: successful requests per trial, by condition; a quantile needs 50
    beyond it)."""
    from benchlib.stats import required_requests
    from benchlib.stats.quantiles import quantile_of

    total = 0
    for c in Family(family.key, tuple(family.runnable(unavailable or {})), family.metrics,
                    conditions=family.conditions).rows():
        for m in family.metrics:
            q = quantile_of(m)
            total += q is None or requests.get(str(c.condition), 0) >= required_requests(q)
    return total


def blocks_needed(family: Family, requests: Mapping[str, float], unavailable: Mapping[str, str] | None = None, *,
                  alpha: float = 0.05) -> tuple[int, int]:
    """(rows the family will have, :func:`planned_rows`; the fewest blocks at which its exact
    paired tests can reach ``alpha`` after Holm over those rows, :func:`benchlib.stats.min_trials`)."""
    from benchlib.stats import min_trials

    rows = planned_rows(family, requests, unavailable)
    return rows, min_trials(alpha=alpha, n_comparisons=max(rows, 1), paired=True)


def compare_valid(run: Run, summaries: Any, *, baseline: str | None = None, **kwargs: Any) -> Any:
    """Every arm of ``run`` against ``baseline`` (default: the experiment's),
    in each condition, as one family (:func:`run_family`); what could not be compared is shown.
    Returns the :class:`~benchlib.stats.Comparison`, or ``None`` when nothing could be.

    ``kwargs`` go to ``compare`` (metrics, seed, correction, ...)."""
    from benchlib.analysis.display import show
    from benchlib.stats.compare import DEFAULT_METRICS

    base = baseline or run.baseline
    metrics = tuple(kwargs.pop("metrics", DEFAULT_METRICS))
    fam = Family.against("all", base, list(run.arms), conditions=list(run.conditions), metrics=metrics)
    answer = run_family(summaries, fam, unavailable=run.unavailable, **kwargs)
    if answer.notes:
        show("**Left out of the comparison**: " + "; ".join(answer.notes))
    return answer.comparison



#: verdict kinds that decide a row (a direction, or equivalence within the margin)
_DECIDING = ("faster", "slower", "equivalent")


def decided_questions(families: Sequence[Family], *, sequential: SequentialDesign | None = None,
                      unavailable: Mapping[str, str] | None = None, seed: int = 0, **compare_kwargs: Any) -> Any:
    """The runner's ``decided`` hook for ``families``: a function of the summaries so far
    returning, per question with decided rows (each family, or each of its sub-questions),
    its count of decided rows, in words for the progress line of each block.

    Without ``sequential`` it is a fixed analysis of the blocks so far, repeated after every
    block, which no correction covers (looking after every block and stopping when a row
    reads decided inflates the error rate): ``"<question>: k/n rows (uncorrected)"`` (``k``
    rows faster, slower or equivalent of the ``n`` compared; ``(all; uncorrected)`` when
    every row is). With ``sequential`` (the run's
    :class:`~benchlib.stats.sequential.SequentialDesign`, ``stopping.design``) it says what
    the stopping rule says, read from the same look (:func:`sequential_look`): at a planned
    look, ``"<question>: k/n rows settled at the sequential look after b blocks"`` (``k`` rows
    settled as :func:`benchlib.stats.sequential.settled` has it: decided, equivalent, or with a
    target "not decidable within the budget", said in brackets; ``(all)`` exactly when the rule
    stops the question), ``"none settled at the sequential look after b blocks"``; between
    looks, the last look's words; before the first, ``"no sequential look yet (the first after
    b blocks)"``. For the progress display only: the report's verdicts come from the analysis
    of the run."""
    from benchlib.stats.sequential import blocks_run, settled

    fams = tuple(families)

    def fixed_counts(summaries: Any) -> dict[str, list[int]]:
        counts: dict[str, list[int]] = {}
        for fam in fams:
            answer = run_family(summaries, fam, unavailable=unavailable, seed=seed, **compare_kwargs)
            if answer.comparison is None:
                continue
            for v in answer.comparison.verdicts:
                if v.kind.value in ("not_run", "no_valid_trial", "omitted"):
                    continue
                q = answer.question_of(str(v.labels.get("condition")), v.baseline, v.arm) if fam.questions else ""
                c = counts.setdefault(q or fam.title or fam.key, [0, 0])
                c[0] += v.kind.value in _DECIDING
                c[1] += 1
        return counts

    def look_counts(summaries: Any, design: SequentialDesign) -> dict[str, list[int]]:
        counts: dict[str, list[int]] = {}  # question -> [settled, rows, of them not decidable within the budget]
        for fam in fams:
            answer, _ = sequential_look(fam, summaries, design, unavailable=unavailable, seed=seed, **compare_kwargs)
            if answer.comparison is None:
                continue
            for v in answer.comparison.verdicts:
                if v.kind.without_figures:  # as the stopping rule: such a row is neither open nor settled
                    continue
                q = answer.question_of(str(v.labels.get("condition")), v.baseline, v.arm) if fam.questions else ""
                c = counts.setdefault(q or fam.title or fam.key, [0, 0, 0])
                c[0] += settled(v, require_practical=design.require_practical)
                c[1] += 1
                c[2] += v.kind.value == "undecidable"
        return counts

    def decided(summaries: Any) -> list[str]:
        if summaries is None or not len(summaries):
            return []
        if sequential is None:
            return [f"{q}: {k}/{n} rows " + ("(all; uncorrected)" if k == n else "(uncorrected)")
                    for q, (k, n) in fixed_counts(summaries).items() if k]
        done = [n for n in sequential.looks if n <= blocks_run([summaries])]
        if not done:
            return [f"no sequential look yet (the first after {sequential.looks[0]} blocks)"]
        look = done[-1]  # between looks, the last look stands (as the stopping rule has it)
        at = f"settled at the sequential look after {look} blocks"
        words = [f"{q}: {k}/{n} rows " + ("(all) " if k == n else "") + at
                 + (f" ({u} not decidable within the budget)" if u else "")
                 for q, (k, n, u) in look_counts(summaries[summaries["block"] < look], sequential).items() if k]
        return words or [f"none {at}"]

    return decided
