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

``python -m benchlib.publish.census FOLDER... [--against FOLDER...] [--target PCT]`` prints, per run
folder (``data/runs/<study>/<run_id>``), its claim rows, then its other (headline) rows, decided
rows and the MDEs of the undecided ones against the target, then the totals and, with
``--against`` (the second report's folders, matched by study), the agreement between the two.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchlib.core.errors import ParameterError
from benchlib.stats.metrics import RATE_METRICS
from benchlib.stats.verdict import DECIDED, VerdictKind

__all__ = ["CLIENT_SHARE", "DECIDED", "EXPLAINED", "EXPLAINED_SHARE", "Agreement", "Census", "Row", "agreement",
           "census", "claim_agreement", "claim_line", "headline_rows", "main", "total"]

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


def headline_rows(run_folder: str | Path) -> tuple[str, str, list[Row]]:
    """``(study, run_id, rows)`` of one run folder and its companion runs (see the module doc)."""
    from benchlib.store.derived import stored_verdict, stored_verdicts

    got = stored_verdicts(run_folder)
    rows = []
    for family, verdicts in sorted(got.verdicts.items()):
        for d in verdicts:
            v = stored_verdict(d)
            if v.kind in _NOT_HEADLINE or v.metric in RATE_METRICS:
                continue
            mde = v.mde if math.isfinite(v.mde) and v.mde >= 0 and not v.mde_is_lower_bound else math.inf
            share = v.client_at_limit / v.client_trials if v.client_trials > 0 else math.nan
            rows.append(Row(got.study, family, v.arm, v.baseline, v.metric, json.dumps(dict(v.labels), sort_keys=True),
                            v.kind, mde, share))
    return got.study, got.run_id, rows


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


def claim_line(study: str, run_folder: str | Path) -> str:
    """One line on a run's claim rows: those that ran, decided (with their outcomes), not
    decided (with their MDE against the claim) and not run; "no claim rows stored" for a run
    whose notebook stored none."""
    from benchlib.analysis.claims import load_claims

    answers = load_claims(run_folder)
    if not answers:
        return f"{study:30s} claim rows: none stored (a run from before claims, or a study without them)"
    ran = [a for a in answers if a.ran]
    decided = [a for a in ran if a.decided]
    open_rows = [a for a in ran if not a.decided]
    words = ", ".join(f"{a.claim.key} {a.outcome}" for a in decided) or "none"
    undecided = ", ".join(f"{a.claim.key} (MDE {_pct(a.mde_vs_claim, 0)})" for a in open_rows) or "none"
    return (f"{study:30s} claim rows {len(answers):2d}  ran {len(ran):2d}  decided {len(decided):2d} ({words}); "
            f"not decided: {undecided}; not run {len(answers) - len(ran)}")


def claim_agreement(a_folder: str | Path, b_folder: str | Path) -> tuple[int, int, list[str]]:
    """Two runs of one study on their claim rows that ran in both: ``(alike, rows, differing)``,
    alike when both decided the same outcome; ``differing`` names each other row with its two
    outcomes."""
    from benchlib.analysis.claims import load_claims

    a = {x.claim.key: x for x in load_claims(a_folder) if x.ran}
    b = {x.claim.key: x for x in load_claims(b_folder) if x.ran}
    keys = [k for k in a if k in b]
    alike = [k for k in keys if a[k].decided and a[k].outcome == b[k].outcome]
    return len(alike), len(keys), [f"{k}: {a[k].outcome} / {b[k].outcome}" for k in keys if k not in alike]


def _runs(folders: Sequence[str]) -> dict[str, tuple[str, list[Row]]]:
    out: dict[str, tuple[str, list[Row]]] = {}
    for f in folders:
        study, run_id, rows = headline_rows(f)
        if study in out:
            raise ParameterError(f"two runs of {study} given ({out[study][0]} and {run_id}): give one per study "
                                 "(a second report's runs go after --against)")
        out[study] = (run_id, rows)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchlib.publish.census", description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="+", help="run folders (data/runs/<study>/<run_id>), one per study")
    ap.add_argument("--against", nargs="+", default=[], help="a second report's run folders, one per study")
    ap.add_argument("--target", type=float, default=10.0, help="target MDE in percent (default 10)")
    a = ap.parse_args(argv)
    if not a.target > 0:
        raise ParameterError(f"--target {a.target}: give a percentage above 0, e.g. 10")
    target = a.target / 100
    first = _runs(a.folders)
    folders = {label: {headline_rows(f)[0]: f for f in fs} for label, fs in (("first", a.folders),
                                                                             ("against", a.against))}
    for label, runs in (("first", first), ("against", _runs(a.against) if a.against else {})):
        if not runs:
            continue
        print(f"claim rows ({label}), each tested at its own size:")
        for s, f in sorted(folders[label].items()):
            print("  " + claim_line(s, f))
        print(f"other rows ({label}), target MDE {a.target:g}%:")
        parts = [census(s, rid, rows) for s, (rid, rows) in sorted(runs.items())]
        for c in parts:
            print("  " + c.line(target))
        t = total(parts)
        print("  " + t.line(target))
        print(f"  goal (every undecided row within {a.target:g}%, their median within {a.target / 2:g}%, "
              "explained rows "
              f"at most {EXPLAINED_SHARE:.0%} of {t.rows}): {'met' if t.meets(target) else 'not met'}")
    if a.against:
        second = _runs(a.against)
        agreements = [agreement(s, first[s][1], second[s][1]) for s in sorted(set(first) & set(second))]
        print("claim rows alike in both runs (the same decided outcome):")
        for s in sorted(set(first) & set(second)):
            same, n, differ = claim_agreement(folders["first"][s], folders["against"][s])
            print(f"  {s:30s} {same} of {n}" + (f"; differing: {'; '.join(differ)}" if differ else ""))
        print("agreement (other rows decided in either run):")
        for g in agreements:
            print(f"  {g.study:30s} rows {g.rows:3d}  decided in either {g.either:3d}  alike {g.alike:3d}  "
                  f"opposite {g.opposite}  direction against equivalent {g.split}  one run only {g.one:3d}")
        alike, either = sum(g.alike for g in agreements), sum(g.either for g in agreements)
        print(f"  all: decided in either {either}, alike {alike} ({_pct(alike / either if either else math.nan, 0)}), "
              f"opposite {sum(g.opposite for g in agreements)}, direction against equivalent "
              f"{sum(g.split for g in agreements)}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ParameterError as e:
        sys.exit(f"benchlib.publish.census: {e}")
