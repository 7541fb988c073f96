"""A seed's claims as typed questions, answered at their own size from a run.

A :class:`Claim` names what the original said ("Kestrel does the job 10+ times faster") or,
where it drew no conclusion, the ratio its own table prints ("the reading it invites"), the
number (``claimed``, from ``data/reference/``), and the arms, metric and condition that ask it
here: ``numerator / denominator`` on ``metric`` in ``condition``. A study's claims are listed on
its registry entry (:attr:`benchlib.analysis.studies.registry.Study.claims`); each is one of

* ``faithful``: the original's code and load as it ran them;
* ``fair``: the same comparison with each side built and run fairly;
* ``nearest``: where the claimed stack does not run here, the nearest question that does, with
  one sentence (``nearest``) on why it is the nearest.

:func:`answer_claims_of_run` answers a run's claims (:func:`benchlib.stats.claim.answer_claims`:
the exact interval of the ratio paired by block, one-sided tests at the claimed ratio, the claim
rows one Holm family); a row whose arm did not run reads ``not run`` with why, a row whose arms
the run's design left out reads ``not in this run``. A throughput claim whose arm was bound by
benchlib's client (the verdict tables' rule, ``benchlib.analysis.questions._client_bound``) reads as a bound
("≥ X req/s, client-bound") and is answered on the servers' CPU time per request instead (the
inverse ratio: a server that serves twice the rate spends half the CPU per request), when the
run measured it. The answers are stored as ``derived/claims.json`` (:func:`save_claims`), which
the study pages, the README's findings and the census read (:func:`load_claims`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from benchlib.core.errors import ParameterError
from benchlib.stats.claim import MARGIN, ClaimData, ClaimOutcome, ClaimResult, answer_claims

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["CLAIMS_FILE", "Claim", "ClaimAnswer", "Variant", "answer_claims_of_run", "claims_markdown",
           "claims_table", "conclusion_sentence", "load_claims", "original_text", "save_claims"]

#: Where a run's claim answers are stored, in its run folder.
CLAIMS_FILE = "derived/claims.json"
#: The CPU-per-request metric a client-bound throughput claim is answered on.
CPU_METRIC = "server_cpu_us_per_req"
#: The throughput metrics (higher is better; a client-bound arm's is a lower bound).
RATE_METRICS: tuple[str, ...] = ("throughput_rps", "goodput_rps")

Variant = Literal["faithful", "fair", "nearest"]
VARIANTS: tuple[str, ...] = ("faithful", "fair", "nearest")

#: Outcome words beyond the test's: the row could not be asked in this run.
NOT_RUN = "not run"
NOT_IN_RUN = "not in this run"


@dataclass(frozen=True)
class Claim:
    """One claim row of a study.

    Attributes
    ----------
    key: the row's name (unique in the study), e.g. ``helloWorld-faithful``.
    label: the claim in a few words, e.g. ``Rust / Go, p50 at /helloWorld``.
    original: the original's words, quoted; or, where it drew no conclusion, the reading its
        table invites (``invites=True``), e.g. ``Rust's p50 2.05 ms vs Go's 1.46 ms``.
    claimed: the claimed ratio ``numerator / denominator`` on ``metric`` (1.40: the numerator's
        p50 is 1.40 times the denominator's; for throughput 2.0: twice the rate). ``1.0`` with
        ``parity``: "the numerator can reach the denominator's performance".
    reference: where the number comes from (the file and the figures it divides).
    numerator, denominator: the arms, as the study's design names them.
    metric: the summary column compared (``p50_ms``, ``throughput_rps``...).
    condition: the stored condition of both arms' trials.
    variant: ``faithful``, ``fair`` or ``nearest`` (see the module docstring).
    invites: the number is the reading the original's table invites, not a claim it stated.
    nearest: for a ``nearest`` row, one sentence on why it is the nearest question that runs.
    parity: a claim that the numerator reaches the denominator (``claimed`` 1; higher ratio is
        the claim's direction: give the throughput ratio).
    margin: the claim holds at ``claimed / (1 + margin)`` or beyond (a fraction).
    """

    key: str
    label: str
    original: str
    claimed: float
    reference: str
    numerator: str
    denominator: str
    metric: str
    condition: str
    variant: Variant = "faithful"
    invites: bool = False
    nearest: str = ""
    parity: bool = False
    margin: float = MARGIN

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ParameterError(f"claim {self.key!r}: variant {self.variant!r} is not one of {', '.join(VARIANTS)}")
        if self.variant == "nearest" and not self.nearest:
            raise ParameterError(f"claim {self.key!r}: a nearest question says in one sentence why it is the nearest")
        if not (math.isfinite(self.claimed) and self.claimed > 0):
            raise ParameterError(f"claim {self.key!r}: the claimed ratio must be a positive number, "
                                 f"got {self.claimed!r}")

    @property
    def rate(self) -> bool:
        """Whether the claim is on a throughput (higher is better)."""
        return self.metric in RATE_METRICS


@dataclass(frozen=True)
class ClaimAnswer:
    """A claim row as a run answers it.

    Attributes
    ----------
    claim: the row.
    outcome: the test's outcome (:class:`benchlib.stats.claim.ClaimOutcome` value), or ``not run``
        / ``not in this run``.
    why: for ``not run``, why (the arms' reasons); for a client-bound row, the evidence.
    ratio, lo, hi: the ratio (Hodges-Lehmann, ``numerator / denominator`` on the claim's metric)
        and its exact interval; NaN when not tested.
    achieved: the interval's achieved coverage.
    boundary: where "holds" begins (a ratio); mde_vs_claim: the smallest relative distance from
        it the design finds with 80% power at the row's Holm level (``inf``: none).
    p, p_adj: the row's p-value and its Holm-adjusted one over the study's claim rows.
    n: blocks (paired) the row used. family: claim rows in the Holm family.
    client_bound: the arms whose rate benchlib's client set (their rate is a lower bound, X
        req/s: ``bound_rps``). answered_on: the metric the outcome is on (the claim's, or the
        servers' CPU per request for a client-bound throughput claim: the inverse ratio).
    """

    claim: Claim
    outcome: str
    why: str = ""
    ratio: float = math.nan
    lo: float = math.nan
    hi: float = math.nan
    achieved: float = math.nan
    boundary: float = math.nan
    mde_vs_claim: float = math.inf
    p: float = math.nan
    p_adj: float = math.nan
    n: int = 0
    family: int = 0
    client_bound: Mapping[str, float] = field(default_factory=dict)
    answered_on: str = ""

    @property
    def decided(self) -> bool:
        """Whether the row reached one of the test's decided outcomes."""
        return self.outcome in {o.value for o in (ClaimOutcome.REVERSED, ClaimOutcome.NO_DIFFERENCE,
                                                  ClaimOutcome.HOLDS, ClaimOutcome.SMALLER)}

    @property
    def ran(self) -> bool:
        """Whether the row was asked in this run (its arms ran and were in its design)."""
        return self.outcome not in (NOT_RUN, NOT_IN_RUN)

    def to_dict(self) -> dict[str, Any]:
        """The stored form (NaN as ``None``, infinity as ``"inf"``: :func:`benchlib.stats.comparison.jsonable`)."""
        from benchlib.stats.comparison import jsonable

        out: dict[str, Any] = jsonable(asdict(self))
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ClaimAnswer:
        """Read :meth:`to_dict`'s form."""
        def num(x: Any, default: float = math.nan) -> float:
            return default if x is None else (math.inf if x == "inf" else float(x))
        return cls(Claim(**d["claim"]), str(d["outcome"]), str(d.get("why", "")), num(d.get("ratio")),
                   num(d.get("lo")), num(d.get("hi")), num(d.get("achieved")), num(d.get("boundary")),
                   num(d.get("mde_vs_claim"), math.inf), num(d.get("p")), num(d.get("p_adj")), int(d.get("n", 0)),
                   int(d.get("family", 0)), {str(k): float(v) for k, v in (d.get("client_bound") or {}).items()},
                   str(d.get("answered_on", "")))

    # -- words ----------------------------------------------------------------------------

    def ratio_text(self) -> str:
        """``1.38x [1.31, 1.45]`` (the claim's direction; a client-bound throughput ratio as a
        bound), ``-`` when not tested."""
        if not math.isfinite(self.ratio):
            return "-"
        return f"{self.ratio:.2f}x [{self.lo:.2f}, {self.hi:.2f}]"

    def outcome_text(self) -> str:
        """The outcome in words: decided outcomes as they are, ``not decided`` with its MDE
        against the claim, ``not run`` with why (each arm's reason up to its parenthesis)."""
        if self.outcome == NOT_RUN:  # each arm's reason without its how-to (the report's table has it whole)
            return "not run: " + "; ".join(part.split(" (", 1)[0] for part in self.why.split("; "))
        if self.outcome == NOT_IN_RUN:
            return "not in this run (its arms were left out of the design)"
        on = (" (on the servers' CPU time per request: the client set the rates)"
              if self.answered_on == CPU_METRIC and self.claim.metric != CPU_METRIC else
              " (the client set the rates: a ratio of lower bounds)" if self.client_bound else "")
        if self.outcome == ClaimOutcome.NOT_DECIDED.value:
            mde = f"{self.mde_vs_claim:.0%}" if math.isfinite(self.mde_vs_claim) else "none at this design"
            return f"~ not decided at this design (MDE {mde} against the claim){on}"
        return self.outcome + on


def _claim_values(summaries: pd.DataFrame, claim: Claim, metric: str, *, invert: bool) -> tuple[np.ndarray, np.ndarray]:
    """Log values of the two arms' valid trials on ``metric`` in the claim's condition, aligned
    by block (blocks where both have a value); ``invert`` swaps them (CPU per request answers a
    throughput ratio inversely)."""
    import pandas as pd

    s = summaries
    if not {metric, "condition", "arm", "block", "valid"} <= set(s.columns):
        return np.empty(0), np.empty(0)
    s = s[(s["condition"].astype(str) == claim.condition) & s["valid"].astype(bool)]
    s = s[pd.to_numeric(s[metric], errors="coerce") > 0]

    def by_block(arm: str) -> pd.Series:
        g = s[s["arm"] == arm]
        logs = pd.Series(np.log(g[metric].astype(float).to_numpy()), index=g["block"].to_numpy())
        return logs.groupby(level=0).mean()

    num, den = by_block(claim.numerator), by_block(claim.denominator)
    if invert:
        num, den = den, num
    both = num.index.intersection(den.index)
    return num.loc[both].to_numpy(), den.loc[both].to_numpy()


def _median_rate(summaries: pd.DataFrame, claim: Claim, arm: str) -> float:
    """The median rate (req/s) of ``arm``'s valid trials in the claim's condition on its metric."""
    if not {claim.metric, "condition", "arm", "valid"} <= set(summaries.columns):
        return math.nan
    s = summaries[(summaries["condition"].astype(str) == claim.condition) & (summaries["arm"] == arm)
                  & summaries["valid"].astype(bool)]
    vals = s[claim.metric].astype(float).dropna() if claim.metric in s.columns else []
    return float(np.median(vals)) if len(vals) else math.nan


def answer_claims_of_run(claims: Sequence[Claim], summaries: pd.DataFrame, *, arms: Sequence[str],
                         unavailable: Mapping[str, str], alpha: float = 0.05) -> list[ClaimAnswer]:
    """Each claim as this run answers it: ``not in this run`` when an arm was not in the run's
    design (``arms``), ``not run`` with why when one did not run (``unavailable``), else the
    claim test (:func:`benchlib.stats.claim.answer_claims`, the rows tested being one Holm
    family); a throughput claim with a client-bound arm is answered on the servers' CPU per
    request (when measured), its rates given as lower bounds."""
    from benchlib.analysis.questions import _client_bound  # the verdict tables' rule, one for both

    bound = _client_bound(summaries) if len(summaries) else {}
    data: list[ClaimData] = []
    at: dict[int, tuple[int, dict[str, float], str]] = {}
    out: list[ClaimAnswer | None] = []
    for i, c in enumerate(claims):
        missing = [a for a in (c.numerator, c.denominator) if a not in arms]
        gone = {a: unavailable[a] for a in (c.numerator, c.denominator) if a in unavailable}
        if gone:
            out.append(ClaimAnswer(c, NOT_RUN, "; ".join(f"{a}: {w}" for a, w in gone.items())))
            continue
        if missing:
            out.append(ClaimAnswer(c, NOT_IN_RUN, ", ".join(missing)))
            continue
        limited = {a: _median_rate(summaries, c, a) for a in (c.numerator, c.denominator)
                   if c.rate and (c.condition, a) in bound}
        metric = c.metric
        num, den = _claim_values(summaries, c, metric, invert=False)
        if limited:  # the servers' CPU per request where measured in two blocks or more
            cpu_num, cpu_den = _claim_values(summaries, c, CPU_METRIC, invert=True)
            if len(cpu_num) >= 2:
                metric, num, den = CPU_METRIC, cpu_num, cpu_den
        at[i] = (len(data), limited, metric)
        data.append(ClaimData(c.key, c.claimed, num, den, paired=True, margin=c.margin, parity=c.parity))
        out.append(None)
    results: list[ClaimResult] = answer_claims(data, alpha=alpha) if data else []
    family = sum(1 for r in results if r.outcome is not ClaimOutcome.TOO_FEW)
    final: list[ClaimAnswer] = []
    for i, c in enumerate(claims):
        got = out[i]
        if got is not None:
            final.append(got)
            continue
        j, limited, metric = at[i]
        r = results[j]
        final.append(ClaimAnswer(c, r.outcome.value, "", r.ratio, r.lo, r.hi, r.achieved, r.boundary, r.mde_vs_claim,
                                 r.p, r.p_adj, r.n, family, limited, metric))
    return final


def save_claims(answers: Sequence[ClaimAnswer], run_folder: str | Path) -> Path:
    """Store a run's claim answers as ``derived/claims.json`` in its folder."""
    p = Path(run_folder) / CLAIMS_FILE
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps({"claims": [a.to_dict() for a in answers]}, indent=1, ensure_ascii=False) + "\n",
                 encoding="utf-8")
    return p


def load_claims(run_folder: str | Path) -> list[ClaimAnswer]:
    """A run folder's stored claim answers (none when it has no ``derived/claims.json``)."""
    p = Path(run_folder) / CLAIMS_FILE
    if not p.exists():
        return []
    doc = json.loads(p.read_text(encoding="utf-8"))
    return [ClaimAnswer.from_dict(d) for d in doc.get("claims", [])]


def original_text(c: Claim) -> str:
    """The original's words and number: ``"Kestrel does the job 10+ times faster" (13.32x)``;
    where it drew no conclusion, ``the reading it invites: ...``; a claim of parity ``(parity)``."""
    words = f"the reading it invites: {c.original}" if c.invites else c.original
    return f"{words} (parity)" if c.parity else f"{words} ({c.claimed:.2f}x)"


def claims_table(answers: Sequence[ClaimAnswer], again: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """One row per claim: the claim, the original's number, the re-run's ratio [interval],
    its outcome, its variant (faithful, fair, the nearest question that runs) and what did not
    run and why; with ``again`` (claim key -> words, e.g. ``alike in 1 of 2``), a column saying
    how other reports of the study decided each row (``-`` for a key it lacks)."""
    rows = []
    for a in answers:
        c = a.claim
        bound = "; ".join(f"{arm} ≥ {rps:,.0f} req/s, client-bound" for arm, rps in a.client_bound.items())
        row = {"claim": c.label, "original": original_text(c), "re-run ratio [CI]": a.ratio_text(),
               "outcome": a.outcome_text(), "variant": c.variant,
               "did not run / bound": a.why if a.outcome == NOT_RUN else bound}
        if again is not None:
            row["other default reports"] = again.get(c.key, "-")
        rows.append(row)
    return rows


def claims_markdown(answers: Sequence[ClaimAnswer], again: Mapping[str, str] | None = None) -> str:
    """The block "The claim, re-run": the table (:func:`claims_table`, with ``again``'s column
    when given), then one sentence per claim row from its answer (ending with ``again``'s words
    for it, when given), and a sentence per ``nearest`` row on why it is the nearest."""
    if not answers:
        return "_This study re-runs no published claim._"
    rows = claims_table(answers, again)
    cols = list(rows[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(r[k].replace("|", "/") for k in cols) + " |" for r in rows]
    lines.append("")
    fam = max((a.family for a in answers), default=0)
    if fam:
        lines.append(f"The {fam} claim row(s) that ran are one Holm family; each is tested at its own size (holds "
                     "from the claimed ratio / 1.1 on: docs/statistics.md, \"A claim at its own size\").")
    for a in answers:
        seen = (again or {}).get(a.claim.key, "-")
        lines.append(f"- {conclusion_sentence(a)}" + (f" Other default reports: {seen}." if seen != "-" else ""))
    for a in answers:
        if a.claim.variant == "nearest":
            lines.append(f"- *Why {a.claim.label} is the nearest question that runs*: {a.claim.nearest}")
    return "\n".join(lines)


def conclusion_sentence(a: ClaimAnswer) -> str:
    """The claim row's answer in one sentence, from its data."""
    c = a.claim
    head = f"{c.label} ({c.variant})"
    if not a.ran:
        return f"{head}: {a.outcome_text()}."
    said = f"the original's {c.claimed:.2f}x" if not c.parity else "the original's parity"
    return f"{head}: {a.ratio_text()} against {said}: {a.outcome_text()}."
