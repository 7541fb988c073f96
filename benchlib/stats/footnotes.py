"""Diagnostics of a comparison, worded as footnotes (pure).

Each check looks at the per-trial summaries of one condition (and one pair of arms) and
returns plain-language notes. They never change a number; they say what could make one
misleading. The checks and their triggers (statistics reference, section 5.8):

* a change point inside a trial's measured window (column ``change_point``);
* achieved rate below 99% of the offered rate (``offered_rps`` with ``achieved_rps`` or
  ``throughput_rps``);
* closed-loop load (``load_model == "closed"``): coordinated-omission risk;
* outlier trials: log value more than 3 MADs from the arm's median of trials;
* strong autocorrelation within trials (effective n below 10% of n), informational;
* multimodality (``mvalue`` above 3.2);
* arms not interleaved in the run order, or always in the same place within blocks;
* different error rates between arms (latency is over successful requests only);
* quantiles omitted for want of requests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from benchlib.stats import diagnostics
from benchlib.stats.exact import mann_whitney
from benchlib.stats.summary import MIN_TAIL_COUNT

__all__ = ["Footnote", "FootnoteBook", "trial_label", "trial_labels", "trial_notes", "order_notes", "outlier_note",
           "outlier_hits", "error_rate_note", "omitted_note", "ACHIEVED_FRACTION", "AUTOCORR_NEFF_FRACTION"]

#: A trial is saturated when it achieved less than this fraction of its offered rate.
ACHIEVED_FRACTION = 0.99
#: Autocorrelation note when the effective n is below this fraction of n.
AUTOCORR_NEFF_FRACTION = 0.10


@dataclass
class Footnote:
    """One numbered footnote: its kind (for machines), text (for people), rows it concerns."""

    id: int
    kind: str
    text: str
    rows: list[int] = field(default_factory=list)


class FootnoteBook:
    """Numbered footnotes; the same text is given one number."""

    def __init__(self) -> None:
        self.notes: list[Footnote] = []
        self._by_text: dict[str, Footnote] = {}

    def add(self, kind: str, text: str, rows: Sequence[int] = ()) -> int:
        """Add (or find) a note and attach it to ``rows``; returns its number."""
        note = self._by_text.get(text)
        if note is None:
            note = Footnote(len(self.notes) + 1, kind, text)
            self.notes.append(note)
            self._by_text[text] = note
        for r in rows:
            if r not in note.rows:
                note.rows.append(r)
        return note.id

    def for_row(self, row: int) -> list[int]:
        """Numbers of the notes attached to a row."""
        return [n.id for n in self.notes if row in n.rows]


def trial_label(rec: pd.Series) -> str:
    """How a trial is named in notes: ``B/block 3`` or ``B/#7`` (run sequence number)."""
    arm = str(rec.get("arm", "?"))
    if "block" in rec.index and pd.notna(rec.get("block")):
        return f"{arm}/block {int(rec['block'])}"
    if "seq" in rec.index and pd.notna(rec.get("seq")):
        return f"{arm}/#{int(rec['seq'])}"
    return f"{arm}/row {rec.name}"


def trial_labels(frame: pd.DataFrame) -> list[str]:
    """:func:`trial_label` for every row of ``frame`` (fast path)."""
    arms = frame["arm"].astype(str).tolist() if "arm" in frame.columns else ["?"] * len(frame)
    for col, fmt in (("block", "{}/block {}"), ("seq", "{}/#{}")):
        if col in frame.columns and frame[col].notna().all():
            return [fmt.format(a, int(v)) for a, v in zip(arms, frame[col].tolist(), strict=True)]
    return [f"{a}/row {i}" for a, i in zip(arms, frame.index.tolist(), strict=True)]


def _fmt_list(items: list[str], most: int = 4) -> str:
    if len(items) <= most:
        return ", ".join(items)
    return ", ".join(items[:most]) + f" and {len(items) - most} more"


def trial_notes(trials: pd.DataFrame) -> list[tuple[str, str]]:
    """Notes about individual trials of one condition (any arms): steadiness, saturation,
    load model, autocorrelation, multimodality. Returns ``(kind, text)`` pairs."""
    out: list[tuple[str, str]] = []
    if "change_point" in trials.columns:
        bad = trials[trials["change_point"].fillna(False).astype(bool)]
        if len(bad):
            parts = []
            for _, r in bad.iterrows():
                extra = ""
                if "change_pct" in r.index and pd.notna(r.get("change_pct")):
                    extra = f" ({r['change_pct']:+.0f}%"
                    if "change_at_s" in r.index and pd.notna(r.get("change_at_s")):
                        extra += f" at {r['change_at_s']:.1f} s"
                    extra += ")"
                parts.append(trial_label(r) + extra)
            out.append((
                "not_steady",
                f"not steady: a level shift inside the measured window in {_fmt_list(parts)}; "
                "a longer warm-up or trial may be needed (trials kept)",
            ))
    if "offered_rps" in trials.columns:
        achieved_col = "achieved_rps" if "achieved_rps" in trials.columns else "throughput_rps"
        if achieved_col in trials.columns:
            off = trials["offered_rps"].astype(float)
            ach = trials[achieved_col].astype(float)
            low = trials[(off > 0) & (ach < ACHIEVED_FRACTION * off)]
            if len(low):
                parts = [
                    f"{trial_label(r)} {r[achieved_col]:,.0f} of {r['offered_rps']:,.0f} req/s"
                    for _, r in low.iterrows()
                ]
                out.append((
                    "saturated",
                    f"achieved rate below {ACHIEVED_FRACTION:.0%} of offered in {_fmt_list(parts)}: "
                    "the generator or the server was saturated, latency there is not at the offered load",
                ))
    if "load_model" in trials.columns and (trials["load_model"].astype(str) == "closed").any():
        out.append((
            "closed_loop",
            "closed-loop load: each connection waits for its response before sending the next, so stalls "
            "are under-sampled (coordinated omission) and tails look better than an open-loop run would "
            "show; do not compare these tails with open-loop tails",
        ))
    if "n_eff" in trials.columns and "n" in trials.columns:
        frac = trials["n_eff"].astype(float) / trials["n"].astype(float).where(trials["n"] > 0)
        hi = trials[frac < AUTOCORR_NEFF_FRACTION]
        if len(hi):
            phi = float(hi["lag1_autocorr"].max()) if "lag1_autocorr" in hi.columns else math.nan
            out.append((
                "autocorrelation",
                f"{len(hi)} of {len(trials)} trials have strongly autocorrelated requests (lag-1 up to "
                f"{phi:.2f}; effective n below {AUTOCORR_NEFF_FRACTION:.0%} of n): requests are not "
                "independent, which is why every test here is across trials (informational)",
            ))
    if "mvalue" in trials.columns:
        mv = trials["mvalue"].astype(float)
        multi = trials[mv > diagnostics.MVALUE_BIMODAL]
        if len(multi):
            word = "multimodal" if float(mv.max()) > diagnostics.MVALUE_MULTIMODAL else "bimodal"
            arms = sorted(set(map(str, multi["arm"]))) if "arm" in multi.columns else []
            out.append((
                "multimodal",
                f"{len(multi)} trial(s) ({', '.join(arms)}) look {word} (mvalue up to {float(mv.max()):.1f}): "
                "a median can jump between modes; read the shift function and the ECDF",
            ))
    return out


def order_notes(trials: pd.DataFrame, baseline: str, arm: str) -> list[tuple[str, str]]:
    """Run-order notes for one pair of arms: not interleaved, or not counterbalanced."""
    out: list[tuple[str, str]] = []
    pair = trials[trials["arm"].astype(str).isin([baseline, arm])]
    if "seq" in pair.columns and pair["seq"].notna().all() and len(pair) >= 4:
        labels = pair.sort_values("seq", kind="stable")["arm"].astype(str).tolist()
        runs, p = diagnostics.runs_interleaving(labels)
        if runs <= 2 or p < 0.01:
            out.append((
                "no_blocking",
                f"{arm} and {baseline} were not interleaved in the run order ({runs} runs of "
                f"{len(labels)} trials, p={p:.2g} under random order): drift over the session cannot be told "
                "apart from a difference; run randomized blocks",
            ))
    elif "seq" not in pair.columns and "block" not in pair.columns:
        out.append((
            "no_blocking",
            f"no run order or blocks recorded for {arm} and {baseline}: drift cannot be checked",
        ))
    if "block" in pair.columns and "position" in pair.columns and pair["position"].notna().all() and len(pair) >= 8:
        blk = pair["block"].to_numpy()
        pos = pair["position"].to_numpy(dtype=float)
        arms = pair["arm"].astype(str).to_numpy()
        firsts = []
        for bval in np.unique(blk[pd.notna(blk)]):
            sel = blk == bval
            if len(set(arms[sel])) == 2 and len(set(pos[sel])) == int(sel.sum()):
                firsts.append(str(arms[sel][np.argmin(pos[sel])]))
        if len(firsts) >= 4 and len(set(firsts)) == 1:
            out.append((
                "order",
                f"{firsts[0]} ran first in every block with {baseline} and {arm}: "
                "order effects (warm caches, thermal state) are not balanced",
            ))
    return out


def outlier_hits(values: pd.Series, labels: Sequence[str]) -> list[str]:
    """Trials whose log value is more than 3 MADs from their arm's median: ``"B/block 3 (+3.4 MAD)"``."""
    dist = diagnostics.outlier_trials(np.log(values.to_numpy(dtype=float)))
    return [f"{lab} ({d:+.1f} MAD)" for lab, d in zip(labels, dist, strict=True) if abs(d) > diagnostics.OUTLIER_MADS]


def outlier_note(hits: Sequence[str], metric: str) -> str | None:
    """The note naming outlier trials (None when there are none)."""
    if not hits:
        return None
    return (
        f"outlier trial(s) by log {metric}: {_fmt_list(list(hits))} from their arm's median of trials "
        "(kept; rank methods are robust to them)"
    )


def error_rate_note(a: pd.Series, b: pd.Series, baseline: str, arm: str, alpha: float) -> str | None:
    """A note when the arms' error rates differ (exact rank test, raw p below alpha, or one arm
    with errors where the other has none)."""
    xa = a.to_numpy(dtype=float)
    xb = b.to_numpy(dtype=float)
    xa = xa[np.isfinite(xa)]
    xb = xb[np.isfinite(xb)]
    if xa.size == 0 or xb.size == 0 or (xa.max() == 0 and xb.max() == 0):
        return None
    p = mann_whitney(xa, xb).pvalue
    none_vs_some = (xa.max() == 0) != (xb.max() == 0)
    if p >= alpha and not none_vs_some:
        return None
    return (
        f"error rates differ: {baseline} {100 * np.median(xa):.2g}%, {arm} {100 * np.median(xb):.2g}% "
        f"(median of trials, p={p:.2g}); latency is over successful requests only, so the arm with more "
        "failures may look faster than it is (survivorship)"
    )


def omitted_note(metric: str, n_missing: int, n_total: int, q: float | None) -> str:
    """A note for a quantile left out of some or all trials."""
    need = ""
    if q is not None:
        need = f": it needs {int(math.ceil(MIN_TAIL_COUNT / (1 - q) - 1e-9)):,} successful requests per trial"
    return f"{metric} omitted in {n_missing} of {n_total} trials{need} (n(1-q) >= {MIN_TAIL_COUNT})"
