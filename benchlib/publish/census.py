"""The verdict census of stored runs: how much a report decided, and whether two reports agree.

The definitions are issue 23's, made harder to meet by relabelling (issue 39, item 3):

* a **headline row** is every stored verdict row (``derived/*.json`` of a run folder and of its
  companion runs ``<run_id>-<part>``) except the failure-rate rows
  (:data:`benchlib.stats.metrics.RATE_METRICS`) and rows of arms that did not run. Rows the
  design left out (``omitted``: a quantile the trials' requests cannot support) are headline
  rows the report did not decide: undecided, without an MDE, and counted apart;
* a row is **decided** when its verdict is faster, slower or equivalent;
* an undecided row's **MDE** is the verdict's own ``mde`` (relative, 80% power, its Holm
  family); a row without one (omitted, no valid trial, insufficient without a bound) or whose MDE
  is only a lower bound (one trial per arm: the between-run variance is not estimated) counts as
  infinite;
* **no valid trial** rows (every trial of an arm answered errors) and **client-bound** rows whose
  client-bound arm was at the client's limit in at least :data:`CLIENT_SHARE` of its trials (the
  figure the verdict carries: ``Verdict.client_trials``, ``client_at_limit``) are undecided rows
  the report explains; the goal allows them up to :data:`EXPLAINED_SHARE` of the headline rows.
  A client-bound row without that figure (stored before it was recorded) or below it is an
  undecided row without an MDE;
* two runs of one study **agree** on a row decided in either run when both decided it alike;
  **opposite** when both decided it in opposite directions (faster against slower); **split**
  when one run decided a direction and the other equivalence.

The **claim rows** (a run's ``derived/claims.json``: :mod:`benchlib.analysis.claims`, each seed
claim tested at its own size) are counted apart from the other rows: per run, the claim rows
that ran, those decided (holds, smaller than claimed, reversed, no difference) and each
undecided one's MDE against its claim, those not run; and with ``--against`` whether both runs
reached the same outcome on each.

``python -m benchlib.publish.census FOLDER... [--against FOLDER... | --against-findings FILE]
[--target PCT]`` prints, per run folder (``data/runs/<study>/<run_id>``), its claim rows, then its
other (headline) rows, decided rows and the MDEs of the undecided ones against the target, then
the totals and, with ``--against`` (the second report's folders, matched by study) or
``--against-findings`` (the default-scale runs recorded in a findings file such as
``data/findings.json``, whose run folders may be on another host), the agreement between the two.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from benchlib.core.errors import ParameterError
from benchlib.stats.metrics import RATE_METRICS
from benchlib.stats.verdict import DECIDED, VerdictKind

if TYPE_CHECKING:
    from benchlib.analysis.claims import ClaimAnswer

__all__ = ["CLIENT_SHARE", "DECIDED", "EXPLAINED", "EXPLAINED_SHARE", "Agreement", "Census", "Compared", "Row",
           "agreement", "census", "claim_agreement", "claim_line", "headline_rows", "main", "recorded_runs",
           "rows_of", "total"]

#: undecided kinds whose row may carry its own evidence of why no design of this study decides it
#: (:attr:`Row.explained`)
EXPLAINED: frozenset[VerdictKind] = frozenset({VerdictKind.CLIENT_BOUND, VerdictKind.NO_VALID_TRIAL})
#: the largest share of the headline rows the goal lets be explained rather than decided
EXPLAINED_SHARE = 0.10
#: a client-bound row is explained when its client-bound arm was at the client's limit in at least
#: this share of its trials (the rule of :func:`benchlib.analysis.tables.near_client_limit`)
CLIENT_SHARE = 0.5
_NOT_HEADLINE = frozenset({VerdictKind.NOT_RUN})


@dataclass(frozen=True)
class Row:
    """One headline row: where it is (``family``: the ``derived`` file's stem; ``labels``: its
    ``by`` columns as sorted JSON), its kind, and ``mde`` (relative, e.g. 0.12 for 12%;
    ``inf`` where the verdict has none or only a lower bound); ``client_share``: for a
    client-bound row, the share of its client-bound arm's trials at the client's limit (NaN when
    not recorded)."""

    study: str
    family: str
    arm: str
    baseline: str
    metric: str
    labels: str
    kind: VerdictKind
    mde: float
    client_share: float = math.nan

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        """The row's identity across two runs of one study."""
        return (self.family, self.arm, self.baseline, self.metric, self.labels)

    @property
    def decided(self) -> bool:
        return self.kind in DECIDED

    @property
    def explained(self) -> bool:
        """Undecided with the measured reason no design of the study decides it here: no valid
        trial, or client-bound with its arm at the client's limit in at least
        :data:`CLIENT_SHARE` of its trials."""
        if self.kind is VerdictKind.CLIENT_BOUND:
            return self.client_share >= CLIENT_SHARE
        return self.kind in EXPLAINED

    @property
    def omitted(self) -> bool:
        """A row the design could not report (no values): undecided, without an MDE."""
        return self.kind is VerdictKind.OMITTED


def rows_of(study: str, verdicts: Mapping[str, Sequence[Mapping[str, object]]]) -> list[Row]:
    """The headline rows (see the module doc) of a study's stored verdicts: family (the
    ``derived`` file's stem) -> its verdicts as stored (``Verdict.to_dict``)."""
    from benchlib.store.derived import stored_verdict

    rows = []
    for family, stored in sorted(verdicts.items()):
        for d in stored:
            v = stored_verdict(d)
            if v.kind in _NOT_HEADLINE or v.metric in RATE_METRICS:
                continue
            mde = v.mde if math.isfinite(v.mde) and v.mde >= 0 and not v.mde_is_lower_bound else math.inf
            share = v.client_at_limit / v.client_trials if v.client_trials > 0 else math.nan
            rows.append(Row(study, family, v.arm, v.baseline, v.metric, json.dumps(dict(v.labels), sort_keys=True),
                            v.kind, mde, share))
    return rows


def headline_rows(run_folder: str | Path) -> tuple[str, str, list[Row]]:
    """``(study, run_id, rows)`` of one run folder and its companion runs (see the module doc)."""
    from benchlib.store.derived import stored_verdicts

    got = stored_verdicts(run_folder)
    return got.study, got.run_id, rows_of(got.study, got.verdicts)


@dataclass(frozen=True)
class Compared:
    """One study's run as the census compares it: its run id, headline rows and claim answers."""

    run_id: str
    rows: list[Row]
    claims: Sequence[ClaimAnswer]


def recorded_runs(path: str | Path) -> dict[str, Compared]:
    """The default-scale runs recorded in a findings file (``data/findings.json``,
    :mod:`benchlib._project.studypages`), by study: their verdicts and claim answers as recorded,
    for comparing a new report with them when their run folders are not on this host."""
    from benchlib.analysis.claims import ClaimAnswer

    p = Path(path)
    if not p.exists():
        raise ParameterError(f"no findings file {str(p)!r}: give the file `studypages record` writes, "
                             "e.g. data/findings.json")
    # the file's format is benchlib._project.studypages' (project tooling, above this package):
    # {"findings": {key: {"study", "run_id", "scale", "verdicts", "claims", ...}}}, read here as data
    found = json.loads(p.read_text(encoding="utf-8")).get("findings", {})
    return {str(f["study"]): Compared(str(f["run_id"]), rows_of(str(f["study"]), f.get("verdicts", {})),
                                      [ClaimAnswer.from_dict(c) for c in f.get("claims", ())])
            for f in found.values() if f.get("scale", "default") == "default"}


@dataclass(frozen=True)
class Census:
    """The census of one run (or of several, summed: ``study`` then ``"all"``).

    ``mdes``: the undecided rows' MDEs (relative; ``inf`` for none), explained rows excluded;
    ``omitted``: of those, rows the design could not report; ``unexplained_bound``: of those,
    client-bound rows without the figure that would explain them.
    """

    study: str
    run_id: str
    rows: int
    decided: int
    explained: int
    mdes: tuple[float, ...]
    omitted: int = 0
    unexplained_bound: int = 0

    def within(self, target: float) -> int:
        """Undecided (not explained) rows whose MDE is at most ``target`` (relative)."""
        return sum(m <= target for m in self.mdes)

    def median_mde(self) -> float:
        """The median MDE of the undecided rows (``nan`` when every row was decided)."""
        return statistics.median(self.mdes) if self.mdes else math.nan

    def meets(self, target: float) -> bool:
        """The goal: every undecided row within ``target``, their median within half of it,
        explained rows at most :data:`EXPLAINED_SHARE` of the headline rows."""
        med = self.median_mde()
        return (self.within(target) == len(self.mdes) and (math.isnan(med) or med <= target / 2)
                and self.explained <= EXPLAINED_SHARE * self.rows)

    def line(self, target: float) -> str:
        """One line: rows, decided, explained, undecided MDEs against ``target``."""
        mdes = [m for m in self.mdes if math.isfinite(m)]
        spread = (f"MDE median {_pct(self.median_mde())}, max {_pct(max(self.mdes))}"
                  if self.mdes else "none undecided")
        apart = [f"omitted by the design: {self.omitted}" if self.omitted else "",
                 f"client-bound without the figure: {self.unexplained_bound}" if self.unexplained_bound else ""]
        apart_text = "".join(f" ({a})" for a in apart if a)
        return (f"{self.study:30s} {self.run_id:22s} rows {self.rows:3d}  decided {self.decided:3d} "
                f"({_pct(self.decided / self.rows if self.rows else math.nan, 0)})  explained {self.explained:2d}  "
                f"undecided {len(self.mdes):3d}: {spread}; within {_pct(target, 0)}: {self.within(target)}"
                f"{'' if len(mdes) == len(self.mdes) else f', without an MDE: {len(self.mdes) - len(mdes)}'}"
                f"{apart_text}")


def _pct(x: float, digits: int = 1) -> str:
    return "-" if math.isnan(x) else ("inf" if math.isinf(x) else f"{100 * x:.{digits}f}%")


def census(study: str, run_id: str, rows: Sequence[Row]) -> Census:
    """The census of one run's headline rows."""
    undecided = [r for r in rows if not r.decided and not r.explained]
    # a client-bound row the census cannot count as explained has no MDE of its own
    mdes = (math.inf if r.kind is VerdictKind.CLIENT_BOUND else r.mde for r in undecided)
    return Census(study, run_id, len(rows), sum(r.decided for r in rows), sum(r.explained for r in rows),
                  tuple(sorted(mdes)), sum(r.omitted for r in rows),
                  sum(r.kind is VerdictKind.CLIENT_BOUND for r in undecided))


def total(parts: Iterable[Census]) -> Census:
    """Several runs' censuses summed (``study`` "all")."""
    ps = list(parts)
    return Census("all", "", sum(p.rows for p in ps), sum(p.decided for p in ps), sum(p.explained for p in ps),
                  tuple(sorted(m for p in ps for m in p.mdes)), sum(p.omitted for p in ps),
                  sum(p.unexplained_bound for p in ps))


@dataclass(frozen=True)
class Agreement:
    """Two runs of one study on the rows both hold: ``alike`` (decided the same in both),
    ``opposite`` (decided in opposite directions: faster in one, slower in the other),
    ``split`` (a direction in one, equivalent in the other), ``one`` (decided in one run only)."""

    study: str
    rows: int
    alike: int
    opposite: int
    one: int
    split: int = 0

    @property
    def either(self) -> int:
        """Rows decided in at least one of the two runs."""
        return self.alike + self.opposite + self.split + self.one

    def share(self) -> float:
        """``alike`` over ``either`` (``nan`` when neither run decided a row)."""
        return self.alike / self.either if self.either else math.nan


def agreement(study: str, a: Sequence[Row], b: Sequence[Row]) -> Agreement:
    """How two runs of one study agree on the headline rows both hold."""
    ka, kb = {r.key: r for r in a}, {r.key: r for r in b}
    keys = set(ka) & set(kb)
    both = [k for k in keys if ka[k].decided and kb[k].decided and ka[k].kind != kb[k].kind]
    alike = sum(ka[k].decided and kb[k].decided and ka[k].kind == kb[k].kind for k in keys)
    opposite = sum(ka[k].kind.directional and kb[k].kind.directional for k in both)
    one = sum(ka[k].decided != kb[k].decided for k in keys)
    return Agreement(study, len(keys), alike, opposite, one, len(both) - opposite)


def _answers(run: str | Path | Sequence[ClaimAnswer]) -> Sequence[ClaimAnswer]:
    """A run's claim answers: given, or stored in its folder (none when it stored none)."""
    from benchlib.analysis.claims import load_claims

    return load_claims(run) if isinstance(run, (str, Path)) else run


def claim_line(study: str, run: str | Path | Sequence[ClaimAnswer]) -> str:
    """One line on a run's claim rows (``run``: its folder, or its claim answers): those that ran,
    decided (with their outcomes), not decided (with their MDE against the claim) and not run;
    "no claim rows stored" for a run whose notebook stored none."""
    answers = _answers(run)
    if not answers:
        return f"{study:30s} claim rows: none stored (a run from before claims, or a study without them)"
    ran = [a for a in answers if a.ran]
    decided = [a for a in ran if a.decided]
    open_rows = [a for a in ran if not a.decided]
    words = ", ".join(f"{a.claim.key} {a.outcome}" for a in decided) or "none"
    undecided = ", ".join(f"{a.claim.key} (MDE {_pct(a.mde_vs_claim, 0)})" for a in open_rows) or "none"
    return (f"{study:30s} claim rows {len(answers):2d}  ran {len(ran):2d}  decided {len(decided):2d} ({words}); "
            f"not decided: {undecided}; not run {len(answers) - len(ran)}")


def claim_agreement(first: str | Path | Sequence[ClaimAnswer],
                    second: str | Path | Sequence[ClaimAnswer]) -> tuple[int, int, list[str]]:
    """Two runs of one study (run folders, or their claim answers) on their claim rows that ran
    in both: ``(alike, rows, differing)``, alike when both decided the same outcome;
    ``differing`` names each other row with its two outcomes."""
    a = {x.claim.key: x for x in _answers(first) if x.ran}
    b = {x.claim.key: x for x in _answers(second) if x.ran}
    keys = [k for k in a if k in b]
    alike = [k for k in keys if a[k].decided and a[k].outcome == b[k].outcome]
    return len(alike), len(keys), [f"{k}: {a[k].outcome} / {b[k].outcome}" for k in keys if k not in alike]


def _runs(folders: Sequence[str]) -> dict[str, Compared]:
    from benchlib.analysis.claims import load_claims

    out: dict[str, Compared] = {}
    for f in folders:
        study, run_id, rows = headline_rows(f)
        if study in out:
            raise ParameterError(f"two runs of {study} given ({out[study].run_id} and {run_id}): give one per study "
                                 "(a second report's runs go after --against)")
        out[study] = Compared(run_id, rows, load_claims(f))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchlib.publish.census", description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", help="run folders (data/runs/<study>/<run_id>), one per study")
    against = ap.add_mutually_exclusive_group()
    against.add_argument("--against", nargs="+", default=[], help="a second report's run folders, one per study")
    against.add_argument("--against-findings", metavar="FILE",
                         help="the default-scale runs recorded in a findings file (e.g. data/findings.json)")
    ap.add_argument("--target", type=float, default=10.0, help="target MDE in percent (default 10)")
    a = ap.parse_args(argv)
    if not a.target > 0:
        raise ParameterError(f"--target {a.target}: give a percentage above 0, e.g. 10")
    target = a.target / 100
    first = _runs(a.folders)
    second = (_runs(a.against) if a.against else recorded_runs(a.against_findings) if a.against_findings else {})
    label = "recorded" if a.against_findings else "against"
    for name, runs in (("first", first), (label, second)):
        if not runs:
            continue
        print(f"claim rows ({name}), each tested at its own size:")
        for s, c in sorted(runs.items()):
            print("  " + claim_line(s, c.claims))
        print(f"other rows ({name}), target MDE {a.target:g}%:")
        parts = [census(s, c.run_id, c.rows) for s, c in sorted(runs.items())]
        for p in parts:
            print("  " + p.line(target))
        t = total(parts)
        print("  " + t.line(target))
        print(f"  goal (every undecided row within {a.target:g}%, their median within {a.target / 2:g}%, "
              "explained rows "
              f"at most {EXPLAINED_SHARE:.0%} of {t.rows}): {'met' if t.meets(target) else 'not met'}")
    if second:
        common = sorted(set(first) & set(second))
        print(f"claim rows alike in both runs (the same decided outcome; {label}: {_source(a)}):")
        for s in common:
            same, n, differ = claim_agreement(first[s].claims, second[s].claims)
            print(f"  {s:30s} {same} of {n}" + (f"; differing: {'; '.join(differ)}" if differ else ""))
        agreements = [agreement(s, first[s].rows, second[s].rows) for s in common]
        print("agreement (other rows decided in either run):")
        for g in agreements:
            print(f"  {g.study:30s} rows {g.rows:3d}  decided in either {g.either:3d}  alike {g.alike:3d}  "
                  f"opposite {g.opposite}  direction against equivalent {g.split}  one run only {g.one:3d}")
        alike, either = sum(g.alike for g in agreements), sum(g.either for g in agreements)
        print(f"  all: decided in either {either}, alike {alike} ({_pct(alike / either if either else math.nan, 0)}), "
              f"opposite {sum(g.opposite for g in agreements)}, direction against equivalent "
              f"{sum(g.split for g in agreements)}")
    return 0


def _source(a: argparse.Namespace) -> str:
    """The second report's source in words: its folders' run ids or the findings file."""
    return f"the runs recorded in {a.against_findings}" if a.against_findings else "the folders after --against"


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ParameterError as e:
        sys.exit(f"benchlib.publish.census: {e}")
