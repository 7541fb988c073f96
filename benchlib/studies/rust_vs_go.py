"""Study 04, "Rust vs. Go: the benchmark": its arms, contrasts, wrk cross-check tables and
the conclusion, so that ``notebooks/04_rust_vs_go_logging.ipynb`` stays a thin sequence of
calls.

Arms are named ``<server>-<sink>``: the server is one of :data:`SERVERS` (``actix-debug``
is the seed's ``cargo run`` build, ``actix-release`` the fair one), the sink where its log
goes (:data:`SINKS`: ``pipe``, read by the runtime, is the seed's terminal; ``file``;
``discard``).

The questions are answered by separate comparison *families* (:func:`closed_families`,
:func:`sweep_family`); each is one :func:`benchlib.stats.compare` call with one baseline
and Holm's correction over that table's rows. Families whose arms are relabelled (the
framework at each sink, the sinks per server) are built by :func:`family_summaries`.

Everything here reads stored data (summaries, trial metadata, logs); nothing measures.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchlib.errors import ParameterError
from benchlib.model import Arm

__all__ = [
    "EXTRA_SERVERS",
    "Family",
    "FamilyResult",
    "LOG_LINES_PER_REQUEST",
    "METRICS",
    "SEED_ARMS",
    "SERVERS",
    "SINKS",
    "STUDY",
    "SWEEP_FRACTIONS",
    "WRK_LABELS",
    "CLIENT_NEAR_LIMIT",
    "arm_name",
    "client_cpu",
    "client_limited",
    "closed_families",
    "conclusion_markdown",
    "family_markdown",
    "family_summaries",
    "family_table",
    "gap_table",
    "log_lines",
    "measured_minutes",
    "original_vs_ours",
    "parse_choices",
    "run_family",
    "split_arm",
    "study_arms",
    "sweep_family",
    "wrk_beside",
    "wrk_by_arm",
    "wrk_notes",
    "wrk_tables",
]

STUDY = "04_rust_vs_go_logging"
SINKS: tuple[str, ...] = ("pipe", "file", "discard")
#: server label -> (service folder, manifest variant)
SERVERS: dict[str, tuple[str, str]] = {
    "actix-debug": ("rust-actix-logger", "faithful"),
    "actix-release": ("rust-actix-logger", "fair"),
    "go": ("go-nethttp-logger", "fair"),
    "python": ("python-uvicorn-logger", "fair"),
    "node": ("node-fastify-logger", "fair"),
}
EXTRA_SERVERS: tuple[str, ...] = ("python", "node")
#: The arms matching the seed's three wrk outputs (our inference: outputs 1 and 2 are actix,
#: probably debug and release; output 3 is Go), all logging to a pipe like the seed's terminal.
SEED_ARMS: tuple[str, ...] = ("actix-debug-pipe", "actix-release-pipe", "go-pipe")
SWEEP_FRACTIONS: tuple[float, ...] = (0.25, 0.5, 0.75, 0.9)
METRICS: tuple[str, ...] = ("throughput_rps", "p50_ms", "p99_ms")
#: Log lines each server writes per request (fastify logs "incoming request" and "request completed").
LOG_LINES_PER_REQUEST: dict[str, int] = {"actix-debug": 1, "actix-release": 1, "go": 1, "python": 1, "node": 2}


# -- parameters and arms -----------------------------------------------------------------------

def parse_choices(text: str | Sequence[str], valid: Sequence[str], what: str) -> tuple[str, ...]:
    """``"pipe, discard"`` (or a list) -> ``("pipe", "discard")``, in the order given, without repeats.

    Raises
    ------
    ParameterError
        for an empty list or a name not in ``valid`` (the message lists the valid names).
    """
    items = [s.strip() for s in text.split(",")] if isinstance(text, str) else [str(s).strip() for s in text]
    items = [s for s in items if s]
    bad = [s for s in items if s not in valid]
    if bad:
        raise ParameterError(f"unknown {what} {bad}; valid: {', '.join(valid)}")
    if not items:
        raise ParameterError(f"no {what} given; valid: {', '.join(valid)}")
    return tuple(dict.fromkeys(items))


def arm_name(server: str, sink: str) -> str:
    """``("go", "pipe")`` -> ``"go-pipe"``."""
    return f"{server}-{sink}"


def split_arm(name: str) -> tuple[str, str]:
    """``"actix-release-discard"`` -> ``("actix-release", "discard")``."""
    server, _, sink = name.rpartition("-")
    if server not in SERVERS or sink not in SINKS:
        raise ParameterError(f"{name!r} is not a study 04 arm name (<server>-<sink>, server in {list(SERVERS)}, "
                             f"sink in {list(SINKS)})")
    return server, sink


def study_arms(*, sinks: str | Sequence[str] = "pipe,discard", sink_servers: str | Sequence[str] = "actix-release,go",
               extras: bool = True) -> tuple[Arm, ...]:
    """The closed-model arms: the seed's three (actix debug and release, Go; log to a pipe), the
    extra rows (Python, Node; pipe) when ``extras``, and every server of ``sink_servers`` with
    every sink of ``sinks``. Ordered by server, then sink (pipe, file, discard)."""
    sink_t = parse_choices(sinks, SINKS, "log sink(s)")
    server_t = parse_choices(sink_servers, tuple(SERVERS), "server(s) for the sink factor")
    wanted = {split_arm(a) for a in SEED_ARMS}
    if extras:
        wanted |= {(s, "pipe") for s in EXTRA_SERVERS}
    wanted |= {(srv, sink) for srv in server_t for sink in sink_t}
    order = sorted(wanted, key=lambda x: (list(SERVERS).index(x[0]), SINKS.index(x[1])))
    return tuple(Arm(arm_name(srv, sink), SERVERS[srv][0], SERVERS[srv][1], log_sink=sink) for srv, sink in order)


# -- comparison families ---------------------------------------------------------------------

@dataclass(frozen=True)
class Family:
    """One question, answered by one ``compare`` call (Holm over its rows).

    Attributes
    ----------
    key: short name (``seed``, ``framework``, ``logging``, ``extras``, ``sweep``).
    title, question: headings for the report.
    baseline: the label of the baseline arm in every group.
    groups: group label -> {stored arm name: label of that arm in this table}.
    condition: the stored condition every group's trials come from; ``None``: each group's
        label is its condition (the sweep).
    metrics: summary columns compared.
    """

    key: str
    title: str
    question: str
    baseline: str
    groups: Mapping[str, Mapping[str, str]]
    condition: str | None = "closed"
    metrics: tuple[str, ...] = METRICS

    @property
    def arms(self) -> list[str]:
        """Every stored arm the family uses."""
        return list(dict.fromkeys(a for g in self.groups.values() for a in g))


def closed_families(arm_names: Sequence[str], *, extras: bool = True) -> list[Family]:
    """The closed-model families for the arms of the experiment (absent arms are left out).

    1. ``seed``: baseline actix-debug-pipe (the seed's Rust server as it ran); rows: Go at
       the pipe (the seed's claim) and actix-release at the pipe (the build mode).
    2. ``framework``: Go / actix-release at each sink both ran with (the framework at equal
       logging).
    3. ``logging``: per server with more than one sink, every sink against the pipe.
    4. ``extras``: Python and Node against Go, all at the pipe.
    """
    have = set(arm_names)
    fams: list[Family] = []
    seed = {a: a for a in SEED_ARMS if a in have}
    if "actix-debug-pipe" in seed and len(seed) > 1:
        fams.append(Family(
            "seed", "1. The seed's comparison, and the build mode",
            "Does Go beat actix-web as the seed ran them (actix-web's debug build, each request logged to a pipe), "
            "and how much does the release build change actix-web? Baseline: actix-debug-pipe.",
            "actix-debug-pipe", {"log to pipe": seed}))
    sinks_both = [s for s in SINKS if {arm_name("actix-release", s), arm_name("go", s)} <= have]
    if sinks_both:
        fams.append(Family(
            "framework", "2. The frameworks at equal logging",
            "Go net/http against actix-web's release build, both logging to the same sink: what is left of the "
            "gap once the build mode is fair? Baseline: actix-release at each sink.",
            "actix-release",
            {f"log to {s}": {arm_name("actix-release", s): "actix-release", arm_name("go", s): "go"}
             for s in sinks_both}))
    by_server = {srv: {arm_name(srv, s): s for s in SINKS if arm_name(srv, s) in have} for srv in SERVERS}
    by_server = {srv: g for srv, g in by_server.items() if "pipe" in g.values() and len(g) > 1}
    if by_server:
        fams.append(Family(
            "logging", "3. What the log sink costs, per server",
            "The same server with its log sent to a file or discarded, against the pipe read by the runtime "
            "(the seed's terminal): how much of each server's rate goes into logging? Baseline: the pipe.",
            "pipe", by_server))
    extra = {a: a for a in ("go-pipe", *(arm_name(s, "pipe") for s in EXTRA_SERVERS)) if a in have}
    if extras and "go-pipe" in extra and len(extra) > 1:
        fams.append(Family(
            "extras", "4. The extra rows: Python (uvicorn) and Node.js (fastify)",
            "Where do a Python and a Node.js server with the same contract and request logging land? "
            "Baseline: go-pipe.",
            "go-pipe", {"log to pipe": extra}))
    return fams


def sweep_family(conditions: Sequence[str], arms: Sequence[str]) -> Family:
    """The open-model family: every sweep arm against the first, at each offered rate."""
    if len(arms) < 2:
        raise ParameterError(f"the sweep compares at least two arms, got {list(arms)}")
    return Family(
        "sweep", "5. Latency at fixed arrival rates (open model)",
        f"At the same offered rate for both (25-90% of the slower one's closed-model capacity), how do the "
        f"latencies compare, free of coordinated omission? Baseline: {arms[0]}. Throughput is not compared "
        "here: at a fixed offered rate it equals the offered rate for a server that keeps up (the table above "
        "the verdicts shows it did), so it answers no question and would only widen the correction.",
        arms[0], {c: {a: a for a in arms} for c in conditions}, condition=None, metrics=("p50_ms", "p99_ms"))


def family_summaries(summaries: Any, family: Family) -> Any:
    """The trials of ``family``: each group's arms relabelled, ``condition`` set to the group
    label (so ``compare(..., by=("condition",))`` gives one block per group)."""
    import pandas as pd

    parts = []
    for label, mapping in family.groups.items():
        cond = family.condition if family.condition is not None else label
        g = summaries[(summaries["condition"] == cond) & summaries["arm"].isin(list(mapping))].copy()
        g["arm"] = g["arm"].map(dict(mapping))
        g["condition"] = label
        parts.append(g)
    return pd.concat(parts, ignore_index=True) if parts else summaries.iloc[0:0].copy()


@dataclass
class FamilyResult:
    """A family and its comparison (``None`` when too little ran), with notes on what was left out."""

    family: Family
    comparison: Any | None
    notes: list[str] = field(default_factory=list)

    def row(self, group: str, arm: str, metric: str) -> dict[str, Any] | None:
        """The comparison row of ``arm`` (its label in this family) in ``group``, or ``None``."""
        if self.comparison is None:
            return None
        t = self.comparison.table
        hit = t[(t["condition"] == group) & (t["arm"] == arm) & (t["metric"] == metric)]
        return None if hit.empty else dict(hit.iloc[0])


def run_family(summaries: Any, family: Family, *, unavailable: Mapping[str, str] | None = None,
               seed: int = 0) -> FamilyResult:
    """Compare the family's arms (paired by block, exact rank method, Holm over the table).

    Groups whose baseline or every other arm has no valid trial are left out, with the reason
    (including "not run: ..." for arms that could not be built or started)."""
    from benchlib.stats import compare

    unavailable = dict(unavailable or {})
    data = family_summaries(summaries, family)
    valid = data[data["valid"].astype(bool)] if "valid" in data.columns else data
    notes: list[str] = []
    keep: list[str] = []
    empty: list[str] = []
    for label, mapping in family.groups.items():
        inv = {v: k for k, v in mapping.items()}
        have = set(valid.loc[valid["condition"] == label, "arm"])
        if not have and not any(inv[lbl] in unavailable for lbl in mapping.values()):
            empty.append(label)
            continue
        for lbl in mapping.values():
            if lbl not in have:
                arm = inv[lbl]
                why = unavailable.get(arm)
                notes.append(f"{arm} ({label}): " + (f"not run: {why}" if why else "no valid trial"))
        if family.baseline in have and len(have - {family.baseline}) >= 1:
            keep.append(label)
        else:
            notes.append(f"group {label!r} not compared: its baseline or every other arm has no valid trial")
    if empty:
        notes.insert(0, f"no valid trial in group(s) {', '.join(empty)} (see the status table for the reasons)")
    if not keep:
        return FamilyResult(family, None, notes)
    cmp = compare(data[data["condition"].isin(keep)], baseline=family.baseline, metrics=family.metrics,
                  by=("condition",), seed=seed)
    return FamilyResult(family, cmp, notes)


def family_markdown(fr: FamilyResult) -> str:
    """The family's heading, question, and what its correction covers (from the table)."""
    f = fr.family
    lines = [f"### {f.title}", "", f.question, ""]
    if fr.comparison is None:
        lines.append("**Not compared**: " + "; ".join(fr.notes))
        return "\n".join(lines)
    t = fr.comparison.table
    n = len(t)
    corr = str(t["correction"].iloc[0]) if "correction" in t.columns else "holm"
    corr_name = {"holm": "Holm", "bh": "Benjamini-Hochberg", "by": "Benjamini-Yekutieli"}.get(corr, corr)
    pairs = t[["condition", "arm"]].drop_duplicates().shape[0]
    text = (f"*Family*: the {n} rows of this table ({pairs} comparison(s) × {t['metric'].nunique()} metrics); "
            f"p-values are {corr_name}-adjusted over these {n} rows and no others; intervals are 95% per row; "
            "practical margin ±2%.")
    blocks = t["n_blocks"].max() if "n_blocks" in t.columns else 0
    min_p = t["min_p"].min() if "min_p" in t.columns else math.nan
    if blocks and blocks == blocks and min_p == min_p:
        text += (f" Trials are paired by block ({int(blocks)} blocks): the smallest p-value the signed-rank test "
                 f"can give is {min_p:.2g}, " + ("so every row can reach significance after the correction."
                                                 if min_p * n < 0.05 else
                                                 f"too large for {corr_name} over {n} rows: more blocks are needed."))
    lines.append(text)
    if fr.notes:
        lines += ["", "Left out: " + "; ".join(fr.notes)]
    return "\n".join(lines)


def family_table(fr: FamilyResult) -> Any:
    """:func:`benchlib.notebook.verdict_table` of the family, its ``condition`` column named ``group``."""
    import pandas as pd

    from benchlib.notebook import verdict_table

    if fr.comparison is None:
        return pd.DataFrame()
    return verdict_table(fr.comparison).rename(columns={"condition": "group"})


# -- wrk beside benchlib -----------------------------------------------------------------------

#: Column labels of :func:`wrk_beside` and :func:`wrk_by_arm` for display.
WRK_LABELS: dict[str, str] = {
    "arm": "arm", "block": "block", "wrk_order": "wrk ran",
    "bl_rps": "benchlib req/s", "wrk_rps": "wrk req/s", "rps_ratio": "wrk / benchlib req/s",
    "bl_p50_ms": "benchlib p50 (ms)", "wrk_p50_ms": "wrk p50 (ms)", "p50_ratio": "wrk / benchlib p50",
    "bl_p99_ms": "benchlib p99 (ms)", "wrk_p99_ms": "wrk p99 (ms)", "p99_ratio": "wrk / benchlib p99",
    "wrk_bytes_per_response": "wrk bytes/response", "wrk_cpu": "wrk CPU (share of 1 CPU)",
    "bl_client_cpu": "benchlib client CPU (share of 1 CPU)", "wrk_errors": "wrk errors",
    "trials": "trials (wrk ok)", "wrk_failed": "wrk failed", "wrk_error": "wrk error", "rps_ratio_range": "wrk / benchlib req/s (min-max)",
    "rps_ratio_before": "wrk / benchlib req/s, wrk first", "rps_ratio_after": "wrk / benchlib req/s, wrk second",
}


def wrk_beside(trials: Sequence[Any], summaries: Any) -> Any:
    """One row per trial that ran wrk: wrk's figures beside benchlib's for the same service
    instance (columns: see :data:`WRK_LABELS`)."""
    import pandas as pd

    s = summaries.set_index(["condition", "arm", "block"])
    rows = []
    for t in trials:
        x = t.meta.get("cross_check")
        if not x or x.get("tool") != "wrk":
            continue
        key = (t.condition, t.arm, t.block)
        bl = s.loc[key] if key in s.index else None
        load = t.meta.get("load") or {}
        per_cpu = ((load.get("client_cpu") or {}).get("per_cpu") or {})
        pct = x.get("latency_percentiles_ms") or {}
        req = x.get("requests")
        row = {
            "condition": t.condition, "arm": t.arm, "block": t.block, "status": t.meta.get("status"),
            "wrk_order": "first" if x.get("order") == "before" else "second",
            "bl_rps": float(bl["throughput_rps"]) if bl is not None else math.nan,
            "wrk_rps": x.get("requests_per_s", math.nan),
            "bl_p50_ms": float(bl["p50_ms"]) if bl is not None else math.nan,
            "wrk_p50_ms": pct.get("50", math.nan),
            "bl_p99_ms": float(bl["p99_ms"]) if bl is not None else math.nan,
            "wrk_p99_ms": pct.get("99", math.nan),
            "wrk_bytes_per_response": (x.get("bytes_read") / req) if req and x.get("bytes_read") else math.nan,
            "wrk_cpu": x.get("cpu_fraction", math.nan),
            "bl_client_cpu": max(per_cpu.values()) if per_cpu else math.nan,
            "wrk_errors": sum((x.get("errors") or {}).values()) if not x.get("error") else None,
            "wrk_error": x.get("error"),
        }
        rows.append(row)
    df = pd.DataFrame(rows)
    if len(df):
        for m in ("rps", "p50", "p99"):
            a, b = ("bl_rps", "wrk_rps") if m == "rps" else (f"bl_{m}_ms", f"wrk_{m}_ms")
            df[f"{m}_ratio"] = df[b].astype(float) / df[a].astype(float)
    return df


def wrk_by_arm(beside: Any) -> Any:
    """Per arm: medians over the trials of benchlib's and wrk's figures and of their per-trial ratios,
    the ratio's range, and its median when wrk ran first (on a server nobody had warmed up) or second."""
    import pandas as pd

    if beside is None or not len(beside):
        return pd.DataFrame()
    out = []
    for arm, all_g in beside.groupby("arm", sort=False):
        failed = all_g[all_g["wrk_error"].notna()]
        g = all_g[(all_g["status"] == "ok") & all_g["wrk_error"].isna()]
        out.append({
            "arm": arm, "trials": len(g), "wrk_failed": len(failed),
            "wrk_error": str(failed["wrk_error"].iloc[0]).splitlines()[0][:300] if len(failed) else None,
            "bl_rps": g["bl_rps"].median(), "wrk_rps": g["wrk_rps"].median(), "rps_ratio": g["rps_ratio"].median(),
            "rps_ratio_range": f"{g['rps_ratio'].min():.3f}-{g['rps_ratio'].max():.3f}" if len(g) else "–",
            "rps_ratio_before": g.loc[g["wrk_order"] == "first", "rps_ratio"].median(),
            "rps_ratio_after": g.loc[g["wrk_order"] == "second", "rps_ratio"].median(),
            "bl_p50_ms": g["bl_p50_ms"].median(), "wrk_p50_ms": g["wrk_p50_ms"].median(),
            "p50_ratio": g["p50_ratio"].median(),
            "bl_p99_ms": g["bl_p99_ms"].median(), "wrk_p99_ms": g["wrk_p99_ms"].median(),
            "p99_ratio": g["p99_ratio"].median(),
            "wrk_cpu": g["wrk_cpu"].median(), "bl_client_cpu": g["bl_client_cpu"].median(),
            "wrk_bytes_per_response": g["wrk_bytes_per_response"].median(),
        })
    return pd.DataFrame(out)


def _pct(r: float) -> str:
    return f"{100 * (r - 1):+.1f}%" if r == r else "–"


def wrk_tables(by_arm: Any) -> tuple[Any, Any]:
    """:func:`wrk_by_arm` as two display tables: requests/s (with the order and CPU columns) and
    latency (p50, p99), columns labelled with :data:`WRK_LABELS`."""
    import pandas as pd

    if by_arm is None or not len(by_arm):
        return pd.DataFrame(), pd.DataFrame()
    rate = ["arm", "trials", "bl_rps", "wrk_rps", "rps_ratio", "rps_ratio_range", "rps_ratio_before",
            "rps_ratio_after", "bl_client_cpu", "wrk_cpu", "wrk_bytes_per_response"]
    if by_arm["wrk_failed"].any():
        rate += ["wrk_failed", "wrk_error"]
    lat = ["arm", "bl_p50_ms", "wrk_p50_ms", "p50_ratio", "bl_p99_ms", "wrk_p99_ms", "p99_ratio"]
    return (by_arm[rate].rename(columns=WRK_LABELS).set_index("arm").round(3),
            by_arm[lat].rename(columns=WRK_LABELS).set_index("arm").round(3))


def wrk_notes(by_arm: Any, *, tolerance: float = 0.03) -> str:
    """Markdown: where wrk and benchlib agree within ``tolerance`` (median per-trial ratio), and
    for the arms where they do not, what this run measured that bears on why (the order of the
    two tools within the trial, each client's CPU use), then the mechanisms once."""
    if by_arm is None or not len(by_arm):
        return "_wrk did not run (wrk_check is off, wrk is missing, or no seed arm ran)._"
    names = {"rps": "requests/s", "p50": "p50", "p99": "p99"}
    lines: list[str] = []
    agree: list[str] = []
    latency_off = False
    for _, r in by_arm.iterrows():
        if r.get("wrk_failed"):
            lines.append(f"- **{r['arm']}**: wrk failed in {int(r['wrk_failed'])} trial(s): {r['wrk_error']}")
        diffs = {m: r[f"{m}_ratio"] for m in ("rps", "p50", "p99") if r[f"{m}_ratio"] == r[f"{m}_ratio"]}
        if not diffs:
            continue
        off = {m: v for m, v in diffs.items() if abs(v - 1) > tolerance}
        if not off:
            agree.append(str(r["arm"]))
            continue
        latency_off |= "p50" in off or "p99" in off
        parts = [f"**{r['arm']}**: wrk's " + ", ".join(f"{names[m]} {_pct(v)}" for m, v in off.items())
                 + f" against benchlib's (median per-trial ratio, {int(r['trials'])} trials)."]
        b, a = r["rps_ratio_before"], r["rps_ratio_after"]
        if "rps" in off and b == b and a == a:
            parts.append(f"Requests/s ratio {b:.3f} when wrk ran first in the trial, {a:.3f} when it ran second"
                         + (": the order accounts for part of it." if abs(b - a) > tolerance
                            else ": the order does not explain it."))
        cw, cb = r["wrk_cpu"], r["bl_client_cpu"]
        if "rps" in off and cw == cw and cb == cb:
            near = [n for n, c in (("wrk", cw), ("benchlib", cb)) if c >= 0.8]
            parts.append(f"Client CPU: wrk {cw:.0%}, benchlib's workers {cb:.0%}"
                         + (f"; {' and '.join(near)} came near the limit, so the client may have set the rate."
                            if near else "; neither was CPU-bound."))
        lines.append("- " + " ".join(parts))
    head = []
    if agree:
        head.append(f"- Within ±{tolerance:.0%} on requests/s, p50 and p99 (median per-trial ratios): "
                    + ", ".join(f"**{a}**" for a in agree) + ".")
    tail = []
    if lines:
        tail = ["", "What differs between the two measurements, whatever the server: wrk has no warm-up, so when "
                "it runs first it meets a server nobody has warmed up, and it opens its connections inside its "
                "timed window; benchlib warms up and starts timing after. In a closed loop each connection's "
                "cycle includes the client's own time per request (wrk is C, benchlib's workers Python on "
                "uvloop): it matters little while the server has a queue of waiting requests and more with few "
                "connections or a server faster than the client, even when no CPU is saturated. The pipe sink's "
                "reader runs in benchlib's process on the client CPU, beside whichever tool is loading."
                + (" Both tools are closed-loop (a connection sends only after its last answer), so both leave out "
                   "the waiting a stalled server causes (coordinated omission); with a fixed number of connections "
                   "latency moves inversely with the rate (Little's law), so a rate difference shows as a latency "
                   "difference; wrk's percentiles come from its own histogram of every request of its run, "
                   "the cold start included." if latency_off else "")]
    return "\n".join(head + lines + tail)


# -- the seed's numbers beside ours -----------------------------------------------------------

def original_vs_ours(reference: Any, summaries: Any, by_arm: Any, *, wrk_flags: str = "-t2 -c100 -d30s") -> Any:
    """The seed's three wrk outputs, then ours for the matching arms: wrk with the seed's
    flags and benchlib (medians over this run's trials), with bytes per response."""
    import pandas as pd

    rows = []
    for _, r in reference.iterrows():
        rows.append({"source": f"seed output {int(r['output'])} (port {int(r['port'])}), one run",
                     "server": f"{r['server_stated']}; inferred: {str(r['server_inferred']).split(' (')[0]}",
                     "requests/s": r["requests_per_s"], "p50 (ms)": r["p50_ms"], "p99 (ms)": r["p99_ms"],
                     "bytes/response": r["bytes_per_response"]})
    closed = summaries[(summaries["condition"] == "closed") & summaries["valid"].astype(bool)]
    wrk = by_arm.set_index("arm") if by_arm is not None and len(by_arm) else None
    for arm in SEED_ARMS:
        if wrk is not None and arm in wrk.index:
            w = wrk.loc[arm]
            rows.append({"source": f"ours, wrk {wrk_flags} (median of {int(w['trials'])} trials)", "server": arm,
                         "requests/s": w["wrk_rps"], "p50 (ms)": w["wrk_p50_ms"], "p99 (ms)": w["wrk_p99_ms"],
                         "bytes/response": w["wrk_bytes_per_response"]})
    for arm in SEED_ARMS:
        g = closed[closed["arm"] == arm]
        if len(g):
            rows.append({"source": f"ours, benchlib closed model (median of {len(g)} trials)", "server": arm,
                         "requests/s": g["throughput_rps"].median(), "p50 (ms)": g["p50_ms"].median(),
                         "p99 (ms)": g["p99_ms"].median(), "bytes/response": math.nan})
    return pd.DataFrame(rows)


def gap_table(reference: Any, summaries: Any, by_arm: Any) -> Any:
    """Go's requests/s over actix's: the seed's (output 3 over outputs 1 and 2) and ours
    (medians over trials, wrk and benchlib), against actix's debug and release builds."""
    import pandas as pd

    ref = reference.set_index("output")["requests_per_s"]
    rows = [{"source": "seed (output 3 / output 1)", "Go / actix": ref.get(3) / ref.get(1)},
            {"source": "seed (output 3 / output 2)", "Go / actix": ref.get(3) / ref.get(2)}]
    closed = summaries[(summaries["condition"] == "closed") & summaries["valid"].astype(bool)]
    med = closed.groupby("arm")["throughput_rps"].median()
    wrk = by_arm.set_index("arm")["wrk_rps"] if by_arm is not None and len(by_arm) else pd.Series(dtype=float)
    for actix in ("actix-debug-pipe", "actix-release-pipe"):
        if "go-pipe" in wrk.index and actix in wrk.index:
            rows.append({"source": f"ours, wrk: go-pipe / {actix}", "Go / actix": wrk["go-pipe"] / wrk[actix]})
        if "go-pipe" in med.index and actix in med.index:
            rows.append({"source": f"ours, benchlib: go-pipe / {actix}", "Go / actix": med["go-pipe"] / med[actix]})
    return pd.DataFrame(rows)


# -- was the client the limit? -----------------------------------------------------------------

#: A client CPU busier than this (share of one CPU) means the client may have set the rate;
#: the load generator's guard marks a trial invalid at 0.90.
CLIENT_NEAR_LIMIT = 0.8


def client_cpu(run: Any, *, condition: str = "closed") -> Any:
    """Per arm: how busy benchlib's client CPU was in the measured trials (share of one CPU,
    the load generator's workers summed), how many trials came near the limit
    (:data:`CLIENT_NEAR_LIMIT`) and how many the guard marked invalid for it.

    ``run`` is an :class:`~benchlib.runner.ExperimentResult` or a :class:`~benchlib.store.RunStore`."""
    import pandas as pd

    store = getattr(run, "store", run)
    per: dict[str, list[float]] = {}
    invalid: dict[str, int] = {}
    for t in store.trials():
        if t.condition != condition:
            continue
        busy = ((t.meta.get("load") or {}).get("client_cpu") or {}).get("per_cpu") or {}
        if busy:
            per.setdefault(t.arm, []).append(max(busy.values()))
        if t.meta.get("status") == "invalid" and "client CPU" in str(t.meta.get("reason")):
            invalid[t.arm] = invalid.get(t.arm, 0) + 1
    rows = []
    for arm, vals in per.items():
        v = pd.Series(vals)
        rows.append({"arm": arm, "trials": len(v), "client CPU, median": round(float(v.median()), 2),
                     "client CPU, max": round(float(v.max()), 2),
                     f"trials at ≥ {CLIENT_NEAR_LIMIT:.0%}": int((v >= CLIENT_NEAR_LIMIT).sum()),
                     "invalid (client CPU ≥ 90%)": invalid.get(arm, 0)})
    return pd.DataFrame(rows)


def client_limited(table: Any) -> list[str]:
    """The arms of :func:`client_cpu` whose client came near its limit in half of the trials or
    more, or had a trial marked invalid for it: their measured rate is a lower bound."""
    if table is None or not len(table):
        return []
    near = table[f"trials at ≥ {CLIENT_NEAR_LIMIT:.0%}"] * 2 >= table["trials"]
    return list(table.loc[near | (table["invalid (client CPU ≥ 90%)"] > 0), "arm"])


# -- how long it took -------------------------------------------------------------------------

def measured_minutes(result: Any) -> float:
    """Minutes from the first stored trial's start to the last one's end (UTC stamps in the
    trial metadata; NaN when nothing is stored)."""
    import datetime as dt

    stamps = [(t.meta.get("started_utc"), t.meta.get("finished_utc")) for t in result.trials()]
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    starts = [dt.datetime.strptime(a, fmt) for a, _ in stamps if a]
    ends = [dt.datetime.strptime(b, fmt) for _, b in stamps if b]
    if not starts or not ends:
        return math.nan
    return (max(ends) - min(starts)).total_seconds() / 60.0


# -- log lines per request --------------------------------------------------------------------

_CUT = re.compile(rb"^\[benchlib: log cut here: ([0-9,]+) lines \([0-9,]+ bytes\) left out\]$", re.M)


def _logged_lines(trial: Any, path: Any) -> int | None:
    """Lines the service wrote in ``trial``: the runtime's count (``service_log`` in the trial
    metadata), else the lines of its log file, where a cut marker (:mod:`benchlib.logs`) adds
    back the lines it stands for (the marker itself is a blank line and one line)."""
    counted = (trial.meta.get("service_log") or {}).get("lines")
    if counted:
        return int(counted)
    if not path.exists():
        return None
    n = 0
    with open(path, "rb") as fh:
        for line in fh:
            n += line.endswith(b"\n")
            if line.startswith(b"[benchlib: log cut here"):
                m = _CUT.match(line.rstrip(b"\n"))
                if m:
                    n += int(m.group(1).replace(b",", b"")) - 2
    return n


def log_lines(run: Any, *, condition: str = "closed") -> Any:
    """Per arm: the log lines its service wrote per request it was sent (benchlib's warm-up and
    measured requests plus wrk's), median over trials; discarded logs are reported as such.
    Every server logs every request (fastify: two lines), so the pipe and file arms should be
    near :data:`LOG_LINES_PER_REQUEST` (health and contract probes add a few lines). Lines come
    from the runtime's count in the trial metadata, or from the kept log (see :func:`_logged_lines`).
    Trials the guard marked invalid count too: they sent real requests and their service logged them
    (a client-bound arm would otherwise vanish from this table); failed trials do not.

    ``run`` is an :class:`~benchlib.runner.ExperimentResult` or a :class:`~benchlib.store.RunStore`."""
    import pandas as pd

    store = getattr(run, "store", run)
    per_arm: dict[str, list[float]] = {}
    sinks: dict[str, str] = {}
    for t in store.trials():
        if t.condition != condition or t.meta.get("status") not in ("ok", "invalid"):
            continue
        sink = t.meta.get("log_sink", "pipe")
        sinks[t.arm] = sink
        if sink == "discard":
            per_arm.setdefault(t.arm, [])
            continue
        lines = _logged_lines(t, store.log_path(t.condition, t.arm, t.block))
        if lines is None:
            continue
        reqs = ((t.meta.get("load") or {}).get("requests") or {}).get("total") or 0
        x = t.meta.get("cross_check") or {}
        reqs += int(x.get("requests") or 0)
        if reqs:
            per_arm.setdefault(t.arm, []).append(lines / reqs)
    rows = []
    for arm, vals in per_arm.items():
        expected = LOG_LINES_PER_REQUEST.get(arm.rpartition("-")[0], math.nan)
        med = round(float(pd.Series(vals).median()), 4) if vals else math.nan
        if not vals:
            note = "log discarded (/dev/null): nothing to count"
        elif med < 0.95 * expected:
            note = ("fewer lines than requests: the rest had not reached the log when the service was stopped "
                    "(its logger buffers in the process instead of waiting for the pipe)")
        elif med > 1.05 * expected:
            note = "more lines than requests: the service logs more than its requests"
        else:
            note = "every request logged"
        rows.append({"arm": arm, "log sink": sinks[arm], "log lines per request (median over trials)": med,
                     "expected": expected, "trials": len(vals), "note": note})
    return pd.DataFrame(rows)


# -- the conclusion ---------------------------------------------------------------------------

def _num(x: float, digits: int = 2) -> str:
    if x != x:
        return "–"
    if math.isinf(x):
        return "∞"
    return f"{x:.{digits}f}"


def _recip(x: float) -> float:
    return math.inf if x == 0 else (0.0 if math.isinf(x) else 1.0 / x)


def _ci(r: Mapping[str, Any], digits: int = 2) -> str:
    return f"{_num(r['ratio'], digits)}× [{_num(r['ci_lo'], digits)}, {_num(r['ci_hi'], digits)}]"


def _inv(r: Mapping[str, Any], digits: int = 2) -> str:
    return (f"{_num(_recip(r['ratio']), digits)}× [{_num(_recip(r['ci_hi']), digits)}, "
            f"{_num(_recip(r['ci_lo']), digits)}]")


def _ok(r: Mapping[str, Any] | None) -> bool:
    return r is not None and r.get("ratio") == r.get("ratio") and r.get("ratio") is not None


def _kind(r: Mapping[str, Any]) -> Any:
    """The typed verdict kind (:class:`benchlib.stats.verdict.VerdictKind`) of a comparison row."""
    from benchlib.stats.verdict import VerdictKind

    return VerdictKind(r["verdict_kind"])


def _says(r: Mapping[str, Any], arm: str, base: str) -> str:
    """What a throughput row's verdict says, in words."""
    from benchlib.stats.verdict import VerdictKind

    v = str(r["verdict"])
    kind = _kind(r)
    if kind is VerdictKind.FASTER:
        core = f"{arm} served more requests per second than {base}"
    elif kind is VerdictKind.SLOWER:
        core = f"{arm} served fewer requests per second than {base}"
    elif kind is VerdictKind.EQUIVALENT:
        core = f"{arm} and {base} served the same rate within ±2%"
    elif kind is VerdictKind.INSUFFICIENT:
        core = "too few trials to tell"
    else:
        core = "no difference could be shown"
    return f"verdict **{v}**: {core}"


def _direction(r: Mapping[str, Any]) -> str | None:
    """``"up"`` for a significant improvement (faster), ``"down"`` for slower, else ``None``."""
    from benchlib.stats.verdict import VerdictKind

    kind = _kind(r)
    return "up" if kind is VerdictKind.FASTER else ("down" if kind is VerdictKind.SLOWER else None)


def _p(r: Mapping[str, Any]) -> str:
    return f"Holm-adjusted p = {r['p_adj']:.2g} over {int(r['family_size'])} rows"


def conclusion_markdown(families: Mapping[str, FamilyResult], reference: Any, *,
                        sweep: FamilyResult | None = None, by_arm: Any = None, limited: Sequence[str] = ()) -> str:
    """The study's answer, every figure taken from the comparison tables of this run:
    does Go beat actix here, by how much, and is it the framework, the build mode or the logging.
    ``limited``: arms whose client came near its CPU limit (:func:`client_limited`); the answer
    says that their rates, and the ratios built on them, are bounds."""
    from benchlib.stats.verdict import VerdictKind

    out: list[str] = []
    ref = reference.set_index("output")["requests_per_s"]
    seed_gaps = f"{ref[3] / ref[1]:.2f}× (output 3 / output 1) and {ref[3] / ref[2]:.2f}× (output 3 / output 2)"
    fs, fw, lg = families.get("seed"), families.get("framework"), families.get("logging")
    g = fs.row("log to pipe", "go-pipe", "throughput_rps") if fs else None
    b = fs.row("log to pipe", "actix-release-pipe", "throughput_rps") if fs else None
    fp = fw.row("log to pipe", "go", "throughput_rps") if fw else None
    fd = fw.row("log to discard", "go", "throughput_rps") if fw else None

    out.append("**Does Go beat actix-web here?**")
    out.append("")
    if _ok(g):
        out.append(f"- *As the seed ran them* (actix-web's debug build, every request logged to a pipe): Go served "
                   f"**{_ci(g)}** actix-web's requests per second ({_p(g)}; {_says(g, 'Go', 'actix-web debug')}). "
                   f"The seed's wrk outputs give {seed_gaps}.")
    if _ok(b):
        out.append(f"- *The build mode*: actix-web's release build served **{_ci(b)}** its debug build's rate "
                   f"({_p(b)}; {_says(b, 'the release build', 'the debug build')}).")
    if fw is not None and fw.comparison is not None:
        for group in fw.family.groups:
            r = fw.row(group, "go", "throughput_rps")
            if not _ok(r):
                continue
            lat = [fw.row(group, "go", m) for m in ("p50_ms", "p99_ms")]
            lat_txt = "; ".join(f"{m} latency ratio {_ci(x)} (**{x['verdict']}**)"
                                for m, x in zip(("p50", "p99"), lat) if _ok(x))
            out.append(f"- *Fair build, same sink ({group})*: Go served **{_ci(r)}** actix-web release's rate "
                       f"(actix-web served {_inv(r)} Go's; {_p(r)}; {_says(r, 'Go', 'actix-web release')})"
                       + (f"; {lat_txt}." if lat_txt else "."))
    if lg is not None and lg.comparison is not None:
        for server, mapping in lg.family.groups.items():
            for sink in mapping.values():
                if sink == "pipe":
                    continue
                r = lg.row(server, sink, "throughput_rps")
                if _ok(r):
                    out.append(f"- *Logging, {server}*: with its log sent to {sink} instead of the pipe it served "
                               f"**{_ci(r)}** the rate ({r['pct_change']:+.0f}%; {_p(r)}; verdict **{r['verdict']}**).")
    out.append("")
    out.append("**The answer.**")
    out.append("")
    if _ok(fp):
        v = str(fp["verdict"])
        if _kind(fp) is VerdictKind.FASTER:
            ans = (f"Yes. Even against actix-web's release build, at the same log sink (pipe), Go served "
                   f"{fp['ratio']:.2f}× its requests per second.")
        elif _kind(fp) is VerdictKind.SLOWER:
            ans = (f"Not when the comparison is fair. " + (f"As the seed ran them, Go served {g['ratio']:.2f}× "
                   "actix-web's rate, but " if _ok(g) else "") + f"against actix-web's release build at the same "
                   f"log sink (pipe), Go served only {fp['ratio']:.2f}× actix-web's rate: actix-web served "
                   f"{1 / fp['ratio']:.2f}× Go's.")
        elif _kind(fp) is VerdictKind.EQUIVALENT:
            ans = "They are equivalent: with a release build and the same sink, the rates differ by less than 2%."
        else:
            ans = f"This run cannot tell: the fair comparison (release build, pipe) gives verdict {v}."
        if _ok(fd):
            vd = str(fd["verdict"])
            dp, dd = _direction(fp), _direction(fd)
            ans += f" With the logs discarded, Go served {fd['ratio']:.2f}× actix-web release's rate (verdict {vd})"
            if dd is None:
                ans += (": the same rate within ±2% there." if _kind(fd) is VerdictKind.EQUIVALENT else
                        ": undecided there.")
            else:
                ans += (": the same direction." if dd == dp else
                        ": the opposite direction, so the logging decides which one is faster.")
        out.append(ans)
        out.append("")
    if _ok(g) and _ok(b) and _ok(fp):
        bf = b["ratio"] * fp["ratio"]
        if _ok(fd):
            lf = fp["ratio"] / fd["ratio"]
            factors = {"the build mode": b["ratio"], "the frameworks themselves (logs discarded)": fd["ratio"],
                       "the logging": lf}
            prod = b["ratio"] * fd["ratio"] * lf
            out.append(
                f"*Framework, build mode or logging?* Go's lead in the seed's setup, {g['ratio']:.2f}× (measured "
                f"directly), splits into three factors that multiply: the **build mode** {b['ratio']:.2f}× (how much "
                f"faster actix-web's release build is than its debug build; it inflates Go's lead by that much), "
                f"the **frameworks themselves** with logs discarded, Go / actix-web release = {fd['ratio']:.2f}×, "
                f"and the **logging** {lf:.2f}× (Go's lead at the pipe over its lead with logs discarded, "
                f"{fp['ratio']:.2f} / {fd['ratio']:.2f}: above 1 when the pipe costs actix-web more than Go). "
                f"Their product, {prod:.2f}×, matches the directly measured {g['ratio']:.2f}× up to the estimators "
                "(each factor is a Hodges-Lehmann estimate from its own table, with its interval there).")
        else:
            factors = {"the build mode": b["ratio"], "the frameworks (at the same sink)": fp["ratio"]}
            out.append(
                f"*Framework or build mode?* Go's lead in the seed's setup, {g['ratio']:.2f}×, is the **build "
                f"mode** {b['ratio']:.2f}× (release / debug) times the **framework** gap at the same sink, "
                f"{fp['ratio']:.2f}× (product {bf:.2f}×). Run with the discard sink to separate the logging.")
        big = max(factors, key=lambda k: abs(math.log(factors[k])))
        out.append("")
        out.append(f"The largest factor, by point estimate, is **{big}** ({factors[big]:.2f}×"
                   + (", working against Go" if factors[big] < 1 else ", in Go's favour") + "); whether each "
                   "factor is a real difference is its row's verdict above.")
    if limited:
        out.append("")
        out.append(f"*Caveat*: benchlib's client (Python workers on one CPU) came near its CPU limit in most trials "
                   f"of {', '.join(f'**{a}**' for a in limited)} (see the client CPU table); there the server may "
                   "be faster than measured, so those arms' rates are lower bounds and every ratio in their favour "
                   "is, if anything, understated (wrk, in C, needs less CPU per request: see its table).")
    if sweep is not None and sweep.comparison is not None:
        arms = list(dict.fromkeys(sweep.comparison.table["arm"]))
        for arm in arms:
            for metric, word in (("p50_ms", "median latency"), ("p99_ms", "p99")):
                bits = []
                for cond in sweep.family.groups:
                    r = sweep.row(cond, arm, metric)
                    if _ok(r):
                        bits.append(f"{cond}: {_ci(r)} (**{r['verdict']}**)")
                if bits:
                    out.append("")
                    out.append(f"*Latency at fixed rates* (open model, no coordinated omission): {arm}'s {word} "
                               f"over {sweep.family.baseline}'s at each offered rate: " + "; ".join(bits) + ".")
    if by_arm is not None and len(by_arm):
        rr = "; ".join(f"{r['arm']} {_pct(r['rps_ratio'])}" for _, r in by_arm.iterrows())
        out.append("")
        out.append(f"*wrk beside benchlib*: wrk with the seed's flags, on the same service instances, measured "
                   f"requests/s differing from benchlib's by (median per-trial ratio) {rr}.")
    if not any(_ok(x) for x in (g, b, fp)):
        return "_Too few arms ran to answer the study's questions (see the status table)._"
    return "\n".join(out)
