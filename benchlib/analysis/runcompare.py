"""One run against another: ``benchlib compare RUN_A RUN_B`` and the site's comparison section.

Two stored runs of one study (a service before and after a change, the same study on two
machines) are compared per condition, arm and metric: the ratio of B to A (the unpaired
Hodges-Lehmann shift of the log per-trial values, with its exact Moses interval), tested with
the exact Mann-Whitney test across the two runs' trials, Holm over the whole table, and a typed
:class:`~benchlib.stats.verdict.Verdict` per row (decided by
:func:`~benchlib.stats.verdict.decide`, the one place verdicts are decided).

**What such a comparison cannot see.** The trials of one run share that run's conditions
(the machine that day, what else ran on it, its thermal state, the build): these run-level
effects move every trial of a run together, and the trials of one run do not sample them.
The interval counts only the variation between the trials within each run, so a difference
between two runs may be a run-level effect as well as the change. The practical margin
(``margin``, ``--margin``) is how much of such an effect the user accepts as noise: a row is
called faster or slower only when its difference lies beyond the margin (the minimum-effect
test, :func:`benchlib.stats.estimate.beyond_pvalue`, Holm-adjusted), equivalent when the
equivalence test (TOST at the margin, Holm-adjusted) puts it inside, and "~ (MDE x%)"
otherwise, where the MDE is the true change the design finds with 80% power, margin included.
Every comparison says so (:data:`RUN_LEVEL_NOTE`, in the text and the data).

**The run-level variance, where the history has it.** With at least
:data:`~benchlib.stats.runlevel.MIN_RUNS` runs of the study on run A's machine (run A and the
comparable runs stored beside it, run B left out: :func:`run_history`), each row's run-level
variance is estimated from them (:func:`benchlib.stats.runlevel.run_level`) and the row's
interval, tests and MDE count it (:func:`benchlib.stats.runlevel.across_runs`: Student-t on
``2 tau^2`` plus the two runs' own trial variance); the comparison says on how many runs it
rests. With fewer, the false-regression rate is unknown (it grows with the run-level variance
the trials do not sample), and the MDEs are lower bounds ("MDE ≥ x%"); the note says so.

**Refusals.** Runs that do not measure the same thing are refused with one line naming what
differs and the valid choices (:class:`NotComparable`, :func:`check_comparable`): another
study, other arms or conditions (``arms=``/``conditions=``: the ones both runs have), an arm
defined otherwise (service, endpoint, runtime, limits, front), another load (model, rate,
connections, duration...), runtime, limits or dependency mode; and, unless the user names them
as the change under test (``allow=``): an arm's configuration (variant, environment, log
sink), its services' toolchain or package versions, the CPUs given to server and client.
Differences that are expected between two runs (the services' source, the machine, benchlib's
commit, the number of trials, the seed) are listed, not refused.
"""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from benchlib.analysis.tables import TrialMedian, median_of_trials
from benchlib.core.errors import ParameterError, UserError
from benchlib.stats.compare import DEFAULT_METRICS
from benchlib.stats.comparison import jsonable
from benchlib.stats.estimate import estimate
from benchlib.stats.fmt import fmt_centre, fmt_p, fmt_pct, fmt_ratio
from benchlib.stats.metrics import MetricInfo, metric_info
from benchlib.stats.multiplicity import adjust, best_case_adjusted
from benchlib.stats.power import mde_shift, min_trials, planning_alpha
from benchlib.stats.runlevel import MIN_RUNS, RunLevel, across_runs, across_runs_mde, run_level
from benchlib.stats.verdict import Verdict, VerdictKind, decide

if TYPE_CHECKING:
    import pandas as pd

    from benchlib.store.records.run import Build
    from benchlib.store.results import Run

__all__ = ["ALLOW", "DEFAULT_MARGIN", "RUN_LEVEL_NOTE", "Comparability", "Difference", "NotComparable",
           "RunComparison", "RunComparisonRow", "RunFacts", "check_comparable", "compare_runs", "compare_summaries",
           "run_history"]

#: The default practical margin (relative): differences between two runs within ±5% are not
#: attributed to the change. Run-level effects of a few percent are common on one machine from
#: one day to the next; the user sets the margin their question needs (``--margin``).
DEFAULT_MARGIN = 0.05

#: Differences a user may name as the change under test (``allow=``, ``--allow``).
ALLOW: dict[str, str] = {
    "config": "an arm's variant, environment or log sink",
    "toolchains": "the services' toolchain or package versions",
    "cpus": "the CPUs given to the server and the client",
}

#: What every run-against-run comparison states (text and data).
RUN_LEVEL_NOTE = (
    "Run-level effects are not sampled: the interval counts the variation between the trials of each run, "
    "not between runs, so what moves a whole run (the machine that day, other load, its thermal state, the "
    "build) can look like a change. Only a difference beyond the margin (±{margin}) is called faster or "
    "slower; repeat both runs, interleaved, to learn how large run-level effects are here."
)
#: What a comparison adds when the history cannot estimate the run-level variance.
UNKNOWN_RATE_NOTE = (
    "The false-regression rate is unknown: {runs} run(s) of this study on this machine besides B, {need} "
    "needed to estimate the run-level variance; the MDEs leave it out and are lower bounds."
)
#: What a comparison says when the history estimates the run-level variance.
ESTIMATED_NOTE = (
    "Run-level variance estimated from {runs} runs of this study on this machine ({ids}; B left out): the "
    "intervals, tests and MDEs count it (Student-t on twice the run-level variance plus the two runs' own); only "
    "a difference beyond the margin (±{margin}) is called faster or slower."
)

_CORRECTION = "holm"
_LOAD_WORDS = {"model": "load model", "rate_rps": "offered rate (req/s)", "connections": "connections",
               "duration_s": "measured duration (s)", "warmup_s": "warm-up (s)", "requests": "requests"}


class NotComparable(UserError):
    """Two runs that do not measure the same thing; the message is one line naming what
    differs and the valid choices.

    Attributes
    ----------
    differences: every difference found (:class:`Difference`), those that refuse and the others.
    """

    def __init__(self, message: str, differences: Sequence[Difference] = ()) -> None:
        super().__init__(message)
        self.differences = tuple(differences)


@dataclass(frozen=True)
class Difference:
    """One way two runs differ.

    Attributes
    ----------
    what: what differs, in words (``"service source go-nethttp-hello"``, ``"machine"``).
    a, b: its value in run A and in run B, as text.
    refuses: whether it makes the runs not comparable (unless ``allowed``).
    allow: the :data:`ALLOW` key that accepts it as the change under test ("" when none can).
    allowed: the user named it as the change under test.
    """

    what: str
    a: str
    b: str
    refuses: bool = False
    allow: str = ""
    allowed: bool = False

    @property
    def text(self) -> str:
        """``what (A in A, B in B)``."""
        return f"{self.what} ({self.a} in A, {self.b} in B)"


@dataclass(frozen=True)
class Comparability:
    """What :func:`check_comparable` found.

    Attributes
    ----------
    arms, conditions: what is compared (present in both runs, in run A's order).
    differences: every difference found.
    refusal: the one-line reason the runs are not comparable ("" when they are).
    """

    arms: tuple[str, ...]
    conditions: tuple[str, ...]
    differences: tuple[Difference, ...] = ()
    refusal: str = ""

    @property
    def comparable(self) -> bool:
        return not self.refusal

    @property
    def listed(self) -> tuple[Difference, ...]:
        """The differences a comparison lists (those that do not refuse, and those allowed)."""
        return tuple(d for d in self.differences if not d.refuses or d.allowed)


@dataclass(frozen=True)
class RunFacts:
    """A run as a comparison's header shows it.

    Attributes
    ----------
    study, run_id: which run.
    started_utc: when its provenance was collected (ISO 8601; "" if not recorded).
    commit: benchlib's git commit (12 hex digits, ``+`` when modified; "" if unknown).
    machine: host name, CPUs and model.
    loadavg: the 1-minute load average at its start (NaN if not recorded).
    trials: valid trials per (condition, arm) (``"condition/arm"`` -> count).
    """

    study: str
    run_id: str
    started_utc: str = ""
    commit: str = ""
    machine: str = ""
    loadavg: float = math.nan
    trials: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, run: Run, summaries: pd.DataFrame | None = None) -> RunFacts:
        prov = run.provenance
        cpus = prov.cpu_count
        machine = ", ".join(str(x) for x in (prov.hostname, f"{cpus} CPUs" if cpus else None, prov.cpu_model) if x)
        load = prov.loadavg_1min
        counts: dict[str, int] = {}
        if summaries is not None and len(summaries):
            ok = summaries[summaries["valid"].astype(bool)] if "valid" in summaries.columns else summaries
            for (c, a), g in ok.groupby(["condition", "arm"], sort=False):
                counts[f"{c}/{a}"] = int(len(g))
        return cls(run.study, run.run_id, prov.collected_utc, prov.commit, machine,
                   load if load is not None else math.nan, counts)

    @property
    def line(self) -> str:
        """``qs1  2026-12-03 19:47 UTC  benchlib cfc6e28  vm, 2 CPUs  load 0.75``."""
        when = self.started_utc.replace("T", " ")[:16] + " UTC" if self.started_utc else "start not recorded"
        bits = [self.run_id, when, f"benchlib {self.commit[:7]}" if self.commit else "", self.machine,
                f"load {self.loadavg:.2f}" if math.isfinite(self.loadavg) else ""]
        return "  ".join(b for b in bits if b)


@dataclass(frozen=True)
class RunComparisonRow:
    """One row: a metric of one arm in one condition, run B against run A.

    Attributes
    ----------
    condition, arm, metric: which row.
    a, b: the median of the run's valid trials with its order-statistic interval
        (:class:`~benchlib.analysis.tables.TrialMedian`; NaN when none).
    verdict: the row's :class:`~benchlib.stats.verdict.Verdict`: ``arm`` and ``baseline`` are the
        arm (B's and A's), ``labels`` ``{"condition": ...}``; ``estimate``/``ci_lo``/``ci_hi`` the
        ratio B/A (ratio metrics) or the difference B - A; ``p_raw``/``p_adj`` the minimum-effect
        test's p-values at the margin (Holm over the table); ``p_tost``/``p_tost_adj`` the
        equivalence test's.
    p_shift: the exact Mann-Whitney p-value of "no shift at all" between the two runs' trials
        (unadjusted; for reading only: a shift within the margin may be a run-level effect); with
        the run-level variance, the Student-t one counting it.
    run_level: the row's run-level variance from the history
        (:class:`~benchlib.stats.runlevel.RunLevel`; ``None`` when not estimated: the verdict's
        MDE is then a lower bound).
    """

    condition: str
    arm: str
    metric: str
    a: TrialMedian
    b: TrialMedian
    verdict: Verdict
    p_shift: float = math.nan
    run_level: RunLevel | None = None

    @property
    def regression(self) -> bool:
        """A decided change in the metric's bad direction (slower, costlier, more errors)."""
        return self.verdict.kind is VerdictKind.SLOWER

    def beyond(self, threshold: float) -> bool:
        """A regression whose whole interval lies beyond ``threshold`` (relative, 0.05 = 5%) in
        the bad direction (ratio metrics only)."""
        v = self.verdict
        if not self.regression or v.effect != "ratio":
            return False
        return v.ci_lo > 1.0 + threshold if v.better == "lower" else v.ci_hi < 1.0 / (1.0 + threshold)

    def to_dict(self) -> dict[str, Any]:
        def centre(m: TrialMedian) -> dict[str, Any]:
            return {"median": m.median, "lo": m.lo, "hi": m.hi, "level": m.level, "n": m.n}

        lv = self.run_level
        return {"condition": self.condition, "arm": self.arm, "metric": self.metric, "a": centre(self.a),
                "b": centre(self.b), "p_shift": self.p_shift, "verdict": self.verdict.to_dict(),
                "run_level": None if lv is None else {"runs": lv.runs, "sd": lv.sd, "within_sd": math.sqrt(lv.within)}}


@dataclass(frozen=True)
class RunComparison:
    """Run B against run A: the rows, the design and what the comparison cannot see.

    Attributes
    ----------
    a, b: the two runs (:class:`RunFacts`).
    rows: one per condition, arm and metric, in run A's order.
    margin: the practical margin (relative).
    alpha, confidence, power: level, intervals' nominal confidence, power the MDE is quoted at.
    correction: ``"holm"``, over every tested row of the table.
    differences: how the runs differ that the comparison accepted (listed, not refused).
    run_level_note: :data:`RUN_LEVEL_NOTE` with the margin, and what the history gave: the
        run-level variance estimated from how many runs, or the false-regression rate unknown.
    notes: further notes (invalid trials left out, ties...).
    history: the runs the run-level variance was estimated from (run ids, A's first; fewer than
        :data:`~benchlib.stats.runlevel.MIN_RUNS`: not estimated).
    """

    a: RunFacts
    b: RunFacts
    rows: tuple[RunComparisonRow, ...]
    margin: float
    alpha: float = 0.05
    confidence: float = 0.95
    power: float = 0.8
    correction: str = _CORRECTION
    differences: tuple[Difference, ...] = ()
    run_level_note: str = ""
    notes: tuple[str, ...] = ()
    history: tuple[str, ...] = ()

    @property
    def verdicts(self) -> tuple[Verdict, ...]:
        return tuple(r.verdict for r in self.rows)

    @property
    def family_size(self) -> int:
        return max((r.verdict.family_size for r in self.rows), default=0)

    def regressions(self, threshold: float = 0.0) -> tuple[RunComparisonRow, ...]:
        """Rows decided slower (in the metric's bad direction) whose interval lies wholly beyond
        ``threshold`` (relative; the CI gate of ``--fail-on-regression``)."""
        return tuple(r for r in self.rows if r.beyond(threshold))

    def to_dict(self) -> dict[str, Any]:
        """Plain data (NaN as ``None`` once through :func:`~benchlib.stats.comparison.jsonable`)."""
        def facts(f: RunFacts) -> dict[str, Any]:
            return {"study": f.study, "run_id": f.run_id, "started_utc": f.started_utc, "commit": f.commit,
                    "machine": f.machine, "loadavg": f.loadavg, "trials": dict(f.trials)}

        return {"a": facts(self.a), "b": facts(self.b), "margin": self.margin, "alpha": self.alpha,
                "confidence": self.confidence, "power": self.power, "correction": self.correction,
                "family_size": self.family_size, "test": "exact Mann-Whitney across the two runs' trials (unpaired)",
                "effect": "ratio B/A: exp of the Hodges-Lehmann shift of the log per-trial values, exact Moses "
                          "interval",
                "decision": "faster/slower: beyond the margin (minimum-effect test, Holm); equivalent: TOST at the "
                            "margin (Holm); ~ otherwise, with the MDE (margin included)",
                "run_level_note": self.run_level_note, "history": list(self.history),
                "differences": [{"what": d.what, "a": d.a, "b": d.b, "allowed": d.allowed} for d in self.differences],
                "notes": list(self.notes), "rows": [r.to_dict() for r in self.rows]}

    def to_json(self) -> str:
        """Strict JSON text (sorted keys)."""
        doc = jsonable(self.to_dict())
        return json.dumps(doc, sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False) + "\n"

    def to_text(self, *, only_significant: bool = False) -> str:
        """The terminal table (like ``pyperf compare_to``): a header with both runs, the design
        and what differs, one line per row (``only_significant``: only rows decided faster or
        slower), the run-level note and the notes."""
        head = [f"{self.a.study}: B = {self.b.run_id} against A = {self.a.run_id} (ratio B/A)",
                f"  A  {self.a.line}", f"  B  {self.b.line}"]
        if self.differences:
            head.append("  differs: " + "; ".join(d.text + (" [allowed]" if d.allowed else "")
                                                  for d in self.differences))
        how = ("Student-t across the runs with the run-level variance of "
               f"{len(self.history)} runs" if any(r.run_level is not None for r in self.rows)
               else "exact Mann-Whitney across the runs' trials")
        head.append(f"  {how}, α={self.alpha:g}, Holm over {self.family_size} "
                    f"rows, {100 * self.confidence:g}% intervals, margin ±{100 * self.margin:g}%")
        shown = [r for r in self.rows if r.verdict.directional] if only_significant else list(self.rows)
        cells = [("condition", "arm", "metric", "A", "B", "B/A [CI]", "change", "p (Holm)", "verdict")]
        for r in shown:
            v = r.verdict
            info_unit = v.unit
            ratio = v.effect == "ratio"
            eff = (fmt_ratio(v.estimate, v.ci_lo, v.ci_hi) if ratio else
                   (f"{_signed(v.estimate, v.unit)} [{_signed(v.ci_lo, v.unit)}, {_signed(v.ci_hi, v.unit)}]"
                    if math.isfinite(v.estimate) else "–"))
            cells.append((r.condition, r.arm, _label(r.metric), _centre_text(r.a, info_unit),
                          _centre_text(r.b, info_unit), eff, fmt_pct(v.pct_change, signed=True) if ratio else "",
                          fmt_p(v.p_adj), v.text))
        widths = [max(len(c[i]) for c in cells) for i in range(len(cells[0]))]
        table = ["  ".join(c[i].ljust(widths[i]) for i in range(len(c))).rstrip() for c in cells]
        out = [*head, "", *(table if shown else [])]
        if only_significant and len(shown) < len(self.rows):
            out.append(f"({len(self.rows) - len(shown)} of {len(self.rows)} rows not decided faster or slower "
                       "are hidden)" if shown else f"no row decided faster or slower ({len(self.rows)} rows hidden)")
        out += ["", *textwrap.wrap(self.run_level_note, 100)]
        out += [f"Note: {n}" for n in self.notes]
        return "\n".join(out) + "\n"


def _label(metric: str) -> str:
    return metric_info(metric, {metric: "lower"}).label


def _signed(x: float, unit: str) -> str:
    if not math.isfinite(x):
        return "–"
    return f"{100 * x:+.2g} pp" if unit == "%" else f"{x:+.3g}"


def _centre_text(m: TrialMedian, unit: str) -> str:
    if not math.isfinite(m.median):
        return "–"
    if unit == "%":
        pm = max(m.hi - m.median, m.median - m.lo) if math.isfinite(m.lo) else math.inf
    else:
        pm = 100.0 * max(m.hi / m.median - 1.0, 1.0 - m.lo / m.median) if math.isfinite(m.lo) and m.median > 0 \
            else math.inf
    return fmt_centre(m.median, pm, unit)


# -- comparability ------------------------------------------------------------------------------

def _txt(v: Any) -> str:
    if v is None or v == () or v == []:
        return "none"
    if isinstance(v, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in v):
        return ", ".join(f"{k}={x}" for k, x in v)
    return str(v)


def _pick(what: str, asked: Sequence[str] | None, in_a: Sequence[str], in_b: Sequence[str], option: str) -> \
        tuple[tuple[str, ...], str]:
    """The names compared (in A's order) and a refusal ("" if none)."""
    both = [x for x in in_a if x in in_b]
    if asked is not None:
        asked = list(dict.fromkeys(str(x) for x in asked))
        bad = [x for x in asked if x not in both]
        if bad:
            return (), (f"{what} {', '.join(bad)} not in both runs; valid: {', '.join(both) or 'none'} "
                        f"({option})")
        return tuple(x for x in both if x in asked), ""
    if set(in_a) != set(in_b):
        only_a = [x for x in in_a if x not in in_b]
        only_b = [x for x in in_b if x not in in_a]
        bits = ([f"only in A: {', '.join(only_a)}"] if only_a else []) + (
            [f"only in B: {', '.join(only_b)}"] if only_b else [])
        if not both:
            return (), f"the runs have no {what} in common ({'; '.join(bits)})"
        return (), (f"the runs' {what} differ ({'; '.join(bits)}); compare those both have with "
                    f"{option} {','.join(both)}")
    return tuple(both), ""


def _arm_fields(arm: Any) -> dict[str, tuple[Any, str]]:
    """An arm's fields, each with the :data:`ALLOW` key that accepts a change ("" refuses)."""
    lim = arm.limits
    return {"service": (arm.service, ""), "endpoint": (arm.endpoint, ""), "runtime": (arm.runtime, ""),
            "limits": (None if lim is None else (lim.cpus, lim.memory_mb), ""), "front": (arm.front, ""),
            "front variant": (arm.front_variant, ""), "variant": (arm.variant, "config"),
            "environment": (tuple(arm.env), "config"), "log sink": (arm.log_sink, "config")}


def _load_fields(cond: Any) -> dict[str, Any]:
    from dataclasses import asdict

    d = asdict(cond.load)
    d["endpoint"] = cond.endpoint
    return d


def _builds_of(run: Run, services: set[str]) -> dict[str, Build]:
    """run.json's builds of these services (key ``[runtime:]service/variant``)."""
    return {key: b for key, b in run.record.builds.items() if key.split(":")[-1].split("/")[0] in services}


def _packages_of(service: str) -> tuple[str, ...]:
    """The Python packages a service imports (its manifest's ``python_packages``; () if unknown)."""
    from benchlib.core.errors import BenchlibError
    from benchlib.runtime.manifest import get_manifest

    try:
        return tuple(get_manifest(service).python_packages)
    except (BenchlibError, OSError):
        return ()


def check_comparable(a: Run, b: Run, *, arms: Sequence[str] | None = None, conditions: Sequence[str] | None = None,
                     allow: Sequence[str] = ()) -> Comparability:
    """Whether run B can be compared with run A, what is compared and how they differ.

    Parameters
    ----------
    a, b: the two runs.
    arms, conditions: compare only these (each must be in both runs); default: all, and then
        both runs must have the same ones.
    allow: differences named as the change under test (keys of :data:`ALLOW`).

    Returns
    -------
    Comparability
        With ``refusal`` the first reason they are not comparable, as one line naming what
        differs and the valid choices ("" when they are).

    Raises
    ------
    ParameterError  an ``allow`` key that is not one of :data:`ALLOW`.
    """
    bad = [x for x in allow if x not in ALLOW]
    if bad:
        raise ParameterError(f"--allow {', '.join(bad)}: unknown; valid: {', '.join(ALLOW)} "
                             f"({'; '.join(f'{k}: {v}' for k, v in ALLOW.items())})")
    allowed = set(allow)
    diffs: list[Difference] = []

    def refuse(reason: str, *, arms_: Sequence[str] = (), conds: Sequence[str] = ()) -> Comparability:
        return Comparability(tuple(arms_), tuple(conds), tuple(diffs), reason)

    if a.path.resolve() == b.path.resolve():
        return refuse(f"A and B are the same run ({a.study}/{a.run_id}); name two different runs of the study")
    if a.study != b.study:
        diffs.append(Difference("study", a.study, b.study, refuses=True))
        return refuse(f"the runs are of different studies (A: {a.study}, B: {b.study}); compare two runs of one "
                      "study")
    ea, eb = a.experiment, b.experiment
    if ea is None or eb is None:
        which = "A" if ea is None else "B"
        return refuse(f"run {which} ({(a if ea is None else b).run_id}) has no experiment in its run.json (a folder "
                      "written by hand); compare runs the runner stored")
    arm_names, why = _pick("arms", arms, a.arms, b.arms, "--arms")
    if why:
        return refuse(why)
    cond_names, why = _pick("conditions", conditions, a.conditions, b.conditions, "--conditions")
    if why:
        return refuse(why, arms_=arm_names)
    # the experiment as a whole
    for what, va, vb in (("runtime", ea.runtime, eb.runtime), ("limits", ea.limits, eb.limits),
                         ("dependency mode", ea.dependencies, eb.dependencies)):
        if va != vb:
            diffs.append(Difference(what, _txt(va), _txt(vb), refuses=True))
            return refuse(f"the runs differ in {what} (A: {_txt(va)}, B: {_txt(vb)}); compare runs made with the same "
                          f"{what}", arms_=arm_names, conds=cond_names)
    # the arms compared
    arms_a = {x.name: x for x in ea.arms}
    arms_b = {x.name: x for x in eb.arms}
    for name in arm_names:
        fa, fb = _arm_fields(arms_a[name]), _arm_fields(arms_b[name])
        for key, (va, allow_key) in fa.items():
            vb = fb[key][0]
            if va == vb:
                continue
            d = Difference(f"arm {name}: {key}", _txt(va), _txt(vb), refuses=True, allow=allow_key,
                           allowed=bool(allow_key) and allow_key in allowed)
            diffs.append(d)
            if not d.allowed:
                rest = ",".join(x for x in arm_names if x != name)
                choice = (f"pass --allow {allow_key} if that is the change under test" if allow_key else
                          f"compare runs of the same arm{', or the other arms: --arms ' + rest if rest else ''}")
                return refuse(f"arm {name} differs in {key} (A: {_txt(va)}, B: {_txt(vb)}); {choice}",
                              arms_=arm_names, conds=cond_names)
    # the loads
    conds_a = {c.name: c for c in ea.conditions}
    conds_b = {c.name: c for c in eb.conditions}
    for name in cond_names:
        la, lb = _load_fields(conds_a[name]), _load_fields(conds_b[name])
        for key in la:
            if la[key] != lb.get(key):
                word = _LOAD_WORDS.get(key, key.replace("_", " "))
                diffs.append(Difference(f"condition {name}: {word}", _txt(la[key]), _txt(lb.get(key)), refuses=True))
                rest = [x for x in cond_names if x != name]
                tail = f"; or compare the other conditions: --conditions {','.join(rest)}" if rest else ""
                return refuse(f"condition {name} has another load in B ({word}: {_txt(la[key])} in A, "
                              f"{_txt(lb.get(key))} in B); compare runs made with the same load{tail}",
                              arms_=arm_names, conds=cond_names)
        ca = ", ".join(x.tool for x in conds_a[name].cross_checks) or None  # one check, several, or none
        cb = ", ".join(x.tool for x in conds_b[name].cross_checks) or None
        if ca != cb:
            diffs.append(Difference(f"condition {name}: peer cross-check", _txt(ca), _txt(cb)))
    # the services' versions: toolchains and Python packages of the arms compared
    services = {arms_a[n].service for n in arm_names} | {arms_a[n].front for n in arm_names if arms_a[n].front}
    ba, bb = _builds_of(a, services), _builds_of(b, services)
    versions: list[tuple[str, str, Any, Any]] = []  # (difference, refusal's words, in A, in B)
    for key in sorted(set(ba) & set(bb)):
        ta, tb = ba[key].toolchains, bb[key].toolchains
        versions += [(f"{key}: {tool} toolchain", f"{key} was built with another {tool}", ta.get(tool), tb.get(tool))
                     for tool in sorted(set(ta) | set(tb))]
        sa, sb = ba[key].source_hash, bb[key].source_hash
        if sa != sb:
            diffs.append(Difference(f"service source {key}", _txt(sa), _txt(sb)))
    pa, pb = a.provenance.packages, b.provenance.packages
    versions += [(f"{service}: package {pkg}", f"{service} ran with another {pkg}", pa.get(pkg), pb.get(pkg))
                 for service in sorted(services) for pkg in _packages_of(service)]
    for what, words, va, vb in versions:
        if va == vb:
            continue
        d = Difference(what, _txt(va), _txt(vb), refuses=True, allow="toolchains", allowed="toolchains" in allowed)
        diffs.append(d)
        if not d.allowed:
            return refuse(f"{words} ({_txt(va)} in A, {_txt(vb)} in B); pass --allow toolchains if that is the change "
                          "under test", arms_=arm_names, conds=cond_names)
    # the CPUs given to the server and the client (how many)
    for role in ("server", "client"):
        na, nb = len(getattr(a.cpus, role)), len(getattr(b.cpus, role))
        if na != nb:
            d = Difference(f"{role} CPUs", str(na), str(nb), refuses=True, allow="cpus", allowed="cpus" in allowed)
            diffs.append(d)
            if not d.allowed:
                return refuse(f"the {role} had {na} CPU(s) in A and {nb} in B; pass --allow cpus if that is the "
                              "change under test", arms_=arm_names, conds=cond_names)
    # listed, never refused
    prov_a, prov_b = a.provenance, b.provenance
    mach_a = (prov_a.hostname or None, prov_a.cpu_model or None, prov_a.cpu_count)
    mach_b = (prov_b.hostname or None, prov_b.cpu_model or None, prov_b.cpu_count)
    if mach_a != mach_b:
        diffs.append(Difference("machine", ", ".join(map(_txt, mach_a)), ", ".join(map(_txt, mach_b))))
    sha_a = (prov_a.git_sha or "")[:12]
    sha_b = (prov_b.git_sha or "")[:12]
    if sha_a != sha_b:
        diffs.append(Difference("benchlib commit", sha_a or "unknown", sha_b or "unknown"))
    for what, va, vb in (("trials per arm", ea.trials, eb.trials), ("seed", ea.seed, eb.seed)):
        if va != vb:
            diffs.append(Difference(what, str(va), str(vb)))
    return Comparability(arm_names, cond_names, tuple(diffs), "")


# -- the rows -------------------------------------------------------------------------------------

def _values(s: pd.DataFrame, condition: str, arm: str, metric: str, log: bool) -> tuple[np.ndarray, int, int]:
    """The valid trials' values (positive ones for a ratio metric), the trials of the arm, and
    the invalid ones."""
    g = s[(s["condition"] == condition) & (s["arm"] == arm)] if len(s) else s
    if not len(g):
        return np.empty(0), 0, 0
    ok = g["valid"].astype(bool) if "valid" in g.columns else np.ones(len(g), dtype=bool)
    if metric not in g.columns:
        return np.empty(0), len(g), int((~ok).sum())
    x = g.loc[ok, metric].to_numpy(dtype=float)
    x = x[np.isfinite(x) & (x > 0)] if log else x[np.isfinite(x)]
    return x, len(g), int((~ok).sum())


def compare_summaries(sa: pd.DataFrame, sb: pd.DataFrame, *, arms: Sequence[str], conditions: Sequence[str],
                      metrics: Sequence[str] = DEFAULT_METRICS, margin: float = DEFAULT_MARGIN, alpha: float = 0.05,
                      confidence: float = 0.95, power: float = 0.8, unavailable_a: Mapping[str, str] | None = None,
                      unavailable_b: Mapping[str, str] | None = None, history: Sequence[pd.DataFrame] = ()
                      ) -> tuple[tuple[RunComparisonRow, ...], tuple[str, ...]]:
    """The rows of a run comparison from the two runs' per-trial summaries (pure).

    Parameters
    ----------
    sa, sb: per-trial summaries of run A and run B (:meth:`benchlib.store.results.Run.summaries`:
        ``condition``, ``arm``, ``valid`` and the metric columns).
    arms, conditions: the rows (in this order), for each metric.
    metrics: summary columns (``*_ms``, ``*_rps``, ``server_cpu_us_per_req`` as ratios;
        ``error_rate`` as a difference, for which the margin does not apply).
    margin: practical margin (relative, in [0, 1)): see the module docstring.
    alpha, confidence, power: level, nominal confidence of the intervals, power of the MDE.
    unavailable_a, unavailable_b: arms that did not run in A / B, with why.
    history: per-trial summaries of the runs of the study on this machine the run-level variance
        is estimated from (run A's included, run B's not); with fewer than
        :data:`~benchlib.stats.runlevel.MIN_RUNS` having a row's valid trials, that row's interval
        and tests are the exact ones across the two runs' trials and its MDE a lower bound.

    Returns
    -------
    (rows, notes)
    """
    if not (math.isfinite(margin) and 0.0 <= margin < 1.0):
        raise ParameterError(f"margin must be a relative change in [0, 1) (0.05 = 5%), got {margin!r}")
    if not 0.0 < alpha < 0.5:
        raise ParameterError(f"alpha must be in (0, 0.5), got {alpha!r}")
    metrics = tuple(dict.fromkeys(metrics))
    if not metrics:
        raise ParameterError("metrics is empty; name at least one summary column (e.g. p50_ms)")
    infos = {m: metric_info(m) for m in metrics}
    missing = [m for m in metrics if m not in sa.columns and m not in sb.columns]
    if missing and len(sa) and len(sb):
        numeric = sorted(str(c) for c in sa.columns if str(c).endswith(("_ms", "_rps", "_us_per_req", "_rate")))
        raise ParameterError(f"metric(s) {', '.join(missing)} not in the runs' summaries; valid: {', '.join(numeric)}")
    ua, ub = dict(unavailable_a or {}), dict(unavailable_b or {})
    notes: list[str] = []
    pending: list[dict[str, Any]] = []
    for cond in conditions:
        for arm in arms:
            for metric in metrics:
                info = infos[metric]
                log = info.scale == "log"
                xa, na, bad_a = _values(sa, cond, arm, metric, log)
                xb, nb, bad_b = _values(sb, cond, arm, metric, log)
                item: dict[str, Any] = {"condition": cond, "arm": arm, "metric": metric, "info": info,
                                        "a": median_of_trials(xa, confidence), "b": median_of_trials(xb, confidence)}
                labels = {"condition": cond}
                if arm in ua or arm in ub:
                    why = "; ".join(f"in {k}: {w[arm]}" for k, w in (("A", ua), ("B", ub)) if arm in w)
                    item["verdict"] = Verdict.not_run(why, arm=arm, baseline=arm, metric=metric, labels=labels)
                elif (na and not xa.size and bad_a == na) or (nb and not xb.size and bad_b == nb):
                    why = "; ".join(f"in {k}: {bad} invalid"
                                    for k, bad, n, x in (("A", bad_a, na, xa), ("B", bad_b, nb, xb)) if n and not x.size)
                    item["verdict"] = Verdict.no_valid_trial(why, arm=arm, baseline=arm, metric=metric, labels=labels)
                elif not xa.size or not xb.size or xa.size + xb.size < 3:
                    item["status"] = "omitted" if not xa.size and not xb.size else "too_few"
                else:
                    groups = [np.log(x) if log else x for x in (_values(h, cond, arm, metric, log)[0] for h in history)]
                    level = run_level(groups) if len(history) >= MIN_RUNS else None
                    item.update(status="ok", **_row_numbers(xa, xb, log, margin, alpha, confidence, level))
                for k, bad in (("A", bad_a), ("B", bad_b)):
                    if bad and metric == metrics[0] and "verdict" not in item:
                        notes.append(f"{cond}/{arm}: {bad} invalid trial(s) of run {k} left out")
                pending.append(item)
    tested = [i for i, it in enumerate(pending) if it.get("status") == "ok"]
    m = max(1, len(tested))
    m_need = max(1, sum(1 for it in pending if it.get("status") in ("ok", "too_few")))
    p_adj = dict(zip(tested, adjust(np.array([pending[i]["p"] for i in tested]), _CORRECTION), strict=True)) \
        if tested else {}
    t_adj = dict(zip(tested, adjust(np.array([pending[i]["tost_p"] for i in tested]), _CORRECTION), strict=True)) \
        if tested else {}
    rows = []
    row_alpha = planning_alpha(alpha, m, _CORRECTION)
    for i, it in enumerate(pending):
        v = it.get("verdict")
        if v is None:
            info: MetricInfo = it["info"]
            kw: dict[str, Any] = dict(status=it["status"], alpha=alpha, margin=margin, correction=_CORRECTION,
                                      family_size=m, power=power, arm=it["arm"], baseline=it["arm"],
                                      labels={"condition": it["condition"]}, n_baseline=it["a"].n, n_arm=it["b"].n)
            if it["status"] == "too_few":
                kw["need"] = min_trials(alpha=alpha, n_comparisons=m_need, correction=_CORRECTION)
            elif it["status"] == "ok":
                log = info.scale == "log"
                lmargin = math.log1p(margin) if log else 0.0
                mde = (mde_shift(min(it["a"].n, it["b"].n), it["sigma"], alpha=row_alpha, power=power)
                       if it["level"] is None else across_runs_mde(it["se"], it["df"], alpha=row_alpha, power=power))
                kw.update(effect=it["effect"], lo=it["lo"], hi=it["hi"], tost_lo=it["tost_lo"], tost_hi=it["tost_hi"],
                          achieved=it["achieved"], p_raw=it["p"], p_adj=float(p_adj[i]), min_p=it["min_p"],
                          best_adjusted=best_case_adjusted(it["min_p"], m, _CORRECTION),
                          mde=lmargin + mde if math.isfinite(mde) else mde,
                          need=min_trials(alpha=alpha, n_comparisons=m, correction=_CORRECTION),
                          all_equal=it.get("all_equal", math.nan), p_tost=it["tost_p"], p_tost_adj=float(t_adj[i]),
                          mde_is_lower_bound=it["level"] is None)
            v = decide(info, **kw)
        rows.append(RunComparisonRow(it["condition"], it["arm"], it["metric"], it["a"], it["b"], v,
                                     float(it.get("p_shift", math.nan)), it.get("level")))
    if any(it.get("ties") for it in pending):
        notes.append("tied per-trial values: the rank p-values are exact given the ties, the intervals use the "
                     "no-ties critical values (approximate coverage)")
    if any(infos[mm].scale != "log" for mm in metrics):
        notes.append("the margin applies to ratio metrics; differences (error rates) are tested against no change")
    return tuple(rows), tuple(dict.fromkeys(notes))


def _row_numbers(xa: np.ndarray, xb: np.ndarray, log: bool, margin: float, alpha: float,
                 confidence: float, level: RunLevel | None = None) -> dict[str, Any]:
    """Effect, intervals and p-values of one row (exact rank method, unpaired; with the row's
    run-level variance ``level``, Student-t across the runs counting it, and ``se``, ``df`` for
    the MDE): ``p`` the minimum-effect test at the margin (ratio metrics; the plain test for
    differences), ``tost_p`` the equivalence test, ``p_shift`` the plain test of no shift."""
    if not log and np.all(xa == xa[0]) and np.all(xb == xa[0]):
        return dict(effect=0.0, lo=0.0, hi=0.0, tost_lo=0.0, tost_hi=0.0, achieved=confidence, p=1.0, p_shift=1.0,
                    tost_p=math.nan, min_p=1.0, sigma=0.0, all_equal=float(xa[0]), ties=False, level=None)
    a, b = (np.log(xa), np.log(xb)) if log else (xa, xb)
    lmargin = math.log1p(margin) if log and margin > 0 else math.nan
    if level is not None and a.size >= 2 and b.size >= 2:
        r = across_runs(a, b, level, confidence=confidence, alpha=alpha, margin=lmargin)
        return dict(effect=r.effect, lo=r.lo, hi=r.hi, tost_lo=r.tost_lo, tost_hi=r.tost_hi, achieved=confidence,
                    p=r.p, p_shift=r.p_shift, tost_p=r.tost_p, min_p=0.0, sigma=math.nan, se=r.se, df=r.df,
                    ties=False, level=level)
    est = estimate(a, b, paired=False, method="rank", confidence=confidence, alpha=alpha, margin=lmargin)
    p = est.beyond_p if math.isfinite(lmargin) else est.pvalue
    return dict(effect=est.effect, lo=est.lo, hi=est.hi, tost_lo=est.tost_lo, tost_hi=est.tost_hi,
                achieved=est.achieved, p=p, p_shift=est.pvalue, tost_p=est.tost_p, min_p=est.min_p, sigma=est.sigma,
                ties=est.ties, level=None)


# -- two runs -------------------------------------------------------------------------------------

def compare_runs(a: Run, b: Run, *, margin: float = DEFAULT_MARGIN, metrics: Sequence[str] = DEFAULT_METRICS,
                 arms: Sequence[str] | None = None, conditions: Sequence[str] | None = None,
                 allow: Sequence[str] = (), alpha: float = 0.05, confidence: float = 0.95,
                 power: float = 0.8, history: Sequence[Run] | None = None) -> RunComparison:
    """Run B against run A (see the module docstring).

    Parameters
    ----------
    a, b: two runs of one study (:func:`benchlib.store.results.open_run`).
    margin: practical margin (relative, 0.05 = ±5%): differences within it are not attributed
        to the change (run-level effects); only a difference beyond it reads faster/slower.
    metrics: summary columns compared (default ``p50_ms``, ``p99_ms``, ``throughput_rps``).
    arms, conditions: compare only these (default: all; then both runs must have the same).
    allow: differences named as the change under test (:data:`ALLOW`: ``config``, ``toolchains``,
        ``cpus``).
    alpha, confidence, power: level (Holm over the table), intervals' nominal confidence,
        power at which the MDE is quoted.
    history: the runs of the study on this machine the run-level variance is estimated from
        (default: :func:`run_history`, run A and the comparable runs stored beside it); run A is
        counted whether or not it is given, run B never.

    Raises
    ------
    NotComparable  the runs do not measure the same thing (one line: what differs, the choices).
    ParameterError  a bad margin, metric or ``allow`` key.
    """
    check = check_comparable(a, b, arms=arms, conditions=conditions, allow=allow)
    if not check.comparable:
        raise NotComparable(f"runs not comparable: {check.refusal}", check.differences)
    sa, sb = a.summaries(), b.summaries()
    runs = run_history(a, b) if history is None else (a, *(h for h in history if h.path not in (a.path, b.path)))
    frames = [sa, *(h.summaries() for h in runs[1:])] if len(runs) >= MIN_RUNS else []
    rows, notes = compare_summaries(sa, sb, arms=check.arms, conditions=check.conditions, metrics=metrics,
                                    margin=margin, alpha=alpha, confidence=confidence, power=power,
                                    unavailable_a=a.unavailable, unavailable_b=b.unavailable, history=frames)
    note = RUN_LEVEL_NOTE.format(margin=f"{100 * margin:g}%")
    if any(r.run_level is not None for r in rows):
        note = ESTIMATED_NOTE.format(runs=len(runs), ids=", ".join(h.run_id for h in runs),
                                     margin=f"{100 * margin:g}%")
        missing = sum(1 for r in rows if r.run_level is None and r.verdict.kind.value in ("faster", "slower",
                                                                                        "equivalent", "no_difference"))
        if missing:
            note += f" {missing} row(s) without {MIN_RUNS} runs of valid trials: their MDEs are lower bounds."
    else:
        note += " " + UNKNOWN_RATE_NOTE.format(runs=len(runs), need=MIN_RUNS)
    return RunComparison(RunFacts.of(a, sa), RunFacts.of(b, sb), rows, margin, alpha, confidence, power, _CORRECTION,
                         check.listed, note, notes,
                         tuple(h.run_id for h in runs) if len(runs) >= MIN_RUNS else ())


def run_history(a: Run, b: Run) -> tuple[Run, ...]:
    """The runs of A's study on A's machine a run-level variance can be estimated from: run A,
    then every run stored beside it (the same study folder) that is not run B, ran on the same
    machine (:attr:`RunFacts.machine`) and is comparable with A (:func:`check_comparable`, with
    the same services' source); runs that cannot be opened are passed over."""
    from benchlib.core.errors import StorageError
    from benchlib.store.results import open_run

    machine = RunFacts.of(a).machine
    out = [a]
    folder = a.path.parent
    if not folder.is_dir():
        return tuple(out)
    for p in sorted(folder.iterdir()):
        if p in (a.path, b.path) or not (p / "run.json").is_file():
            continue
        try:
            h = open_run(p)
        except (UserError, StorageError, ValueError, OSError):
            continue
        if h.study != a.study or RunFacts.of(h).machine != machine:
            continue
        c = check_comparable(a, h)
        if c.comparable and not any(d.what.startswith("service source") for d in c.differences):
            out.append(h)
    return tuple(out)
