"""Study 04, "Rust vs. Go: the benchmark": what is its own in
``notebooks/04_rust_vs_go_logging.ipynb``: the arms, the questions, the wrk cross-check's
columns and mechanisms, the seed's numbers beside ours, and the conclusion. Everything
generic comes from :mod:`benchlib.analysis`.

Arms are named ``<server>-<sink>``: the server is one of :data:`SERVERS` (``actix-debug``
is the seed's ``cargo run`` build, ``actix-release`` the fair one), the sink where its log
goes (:data:`SINKS`: ``pipe``, read by the runtime, is the seed's terminal; ``file``;
``discard``).

Each question is its own family (:func:`closed_families`, :func:`sweep_family`): one
``compare`` call with one baseline and Holm's correction over that table's rows; the
framework and logging families relabel the arms per group (the sink, the server).

Everything here reads stored data (summaries, trial metadata, logs); nothing measures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from benchlib.analysis import Answer, Family, params, peers
from benchlib.analysis import conclusion as say
from benchlib.analysis import formats as fmt
from benchlib.analysis.notebook import StudyRun
from benchlib.analysis.params import Runtime, Sequential, StudyParameters
from benchlib.analysis.planned import StudyDesign
from benchlib.core.errors import ParameterError
from benchlib.core.model import Arm, Condition, CrossCheck, Experiment, LoadSpec
from benchlib.store.results import Run

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "DEFAULT_DESIGN", "Design", "EXTRA_SERVERS", "FULL_DESIGN", "LOG_LINES_PER_REQUEST", "METRICS", "Parameters",
    "SEED_ARMS", "SERVERS", "SINKS", "STUDY", "SWEEP_FRACTIONS", "SweepDesign", "WRK_WHY", "WRK_WHY_LATENCY",
    "achieved_table", "arm_name", "check_budget", "closed_families", "conclusion_markdown", "design",
    "expected_log_lines", "gap_table", "original_vs_ours", "parse_fractions", "run_sweep", "split_arm", "study_arms",
    "sweep_family", "wrk_flags", "wrk_tables",
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
#: The designs a notebook run takes its unset parameters from (:func:`benchlib.analysis.params.design_values`).
#: Default (about 5 min on 2 cores): the seed's five arms without the extra rows, 8 blocks (the
#: fewest with which Holm over a family's 6 rows can reach p < 0.05: 6 x 2/2^8 = 0.047) of 1.5 s
#: trials (the per-trial spread is between trials: in the full run, rates shifted by 40-200% inside
#: one 30 s window, and wrk's and benchlib's 30 s windows of one instance differed by up to 30%, so
#: long trials buy little), wrk in 3 blocks, no sweep (measured: 2.6 of the 7.5 minutes with a
#: 2-rate sweep in 8 blocks, and on a loaded machine every short open-model trial was invalid; its
#: rates when ``sweep=yes``: 50 and 90% of capacity, 4 rows, 8 blocks).
#: Full scale (about 65 min): the seed's 30 s, every block with wrk, the extra rows, four rates.
DEFAULT_DESIGN: dict[str, Any] = {"trials": 8, "duration_s": 1.5, "warmup_s": 0.5, "extras": "no",
                                  "cross_check_blocks": 3, "sweep": "no", "sweep_rates": "0.5,0.9",
                                  "sweep_duration_s": 1.0}
FULL_DESIGN: dict[str, Any] = {"trials": 10, "duration_s": 30.0, "warmup_s": 1.0, "extras": "yes", "sweep": "yes",
                               "cross_check_blocks": "all", "sweep_rates": ",".join(map(str, SWEEP_FRACTIONS)),
                               "sweep_duration_s": 4.0}
METRICS: tuple[str, ...] = ("throughput_rps", "p50_ms", "p99_ms")
#: Log lines each server writes per request (fastify logs "incoming request" and "request completed").
LOG_LINES_PER_REQUEST: dict[str, int] = {"actix-debug": 1, "actix-release": 1, "go": 1, "python": 1, "node": 2}


def check_budget(budget_min: float | None, sweep: bool) -> None:
    """Refuse a budget with the sweep: the sweep is a second run, at rates taken from the closed
    run's capacity, that the budget (pilot and closed run) does not cover.

    Raises
    ------
    ParameterError  ``budget_min`` set and ``sweep`` on.
    """
    if budget_min is not None and sweep:
        raise ParameterError("budget_min with the sweep is not supported: the sweep is a second run outside the "
                             "budget; set sweep=\"no\" (or budget_min=0 for the fixed design with the sweep)")


@dataclass(frozen=True, kw_only=True)
class Parameters(StudyParameters):
    """Study 04's parameters (its notebook's ``parameters`` cell).

    Attributes
    ----------
    sequential: stop a question at a planned look once settled (``auto``, ``yes``, ``no``).
    runtime: ``local`` (processes) or ``docker``.
    duration_s, warmup_s: measured and warm-up seconds per closed-model trial (and per wrk
        run); ``0``: the design's.
    connections: closed model: keep-alive connections; sweep: most requests in flight.
    workers: client worker processes (the seed's ``wrk -t2``).
    sinks, sink_servers: the log sinks each of those servers runs with (comma-separated).
    extras: ``yes``: the rows beyond the seed (Python, Node.js); ``auto``: the design's.
    wrk_check: wrk with the seed's flags on the seed's arms, beside benchlib.
    cross_check_blocks: the blocks wrk runs in; ``auto``: the design's.
    sweep: ``yes``: the open-model sweep after the closed run; ``auto``: the design's.
    sweep_rates: its fractions of the slowest sweep arm's capacity; ``auto``: the design's.
    sweep_arms: its arms (the first is its baseline).
    sweep_duration_s: measured seconds per sweep trial; ``0``: the design's.
    """

    sequential: Sequential = "auto"
    runtime: Runtime = "local"
    duration_s: float = 0.0
    warmup_s: float = 0.0
    connections: int = 100
    workers: int = 2
    sinks: str = "pipe,discard"
    sink_servers: str = "actix-release,go"
    extras: str = "auto"
    wrk_check: bool = True
    cross_check_blocks: str = "auto"
    sweep: str = "auto"
    sweep_rates: str = "auto"
    sweep_arms: str = "actix-release-pipe,go-pipe"
    sweep_duration_s: float = 0.0
    seed: int = 4

    DEFAULT_DESIGN: ClassVar[Mapping[str, Any]] = DEFAULT_DESIGN
    FULL_DESIGN: ClassVar[Mapping[str, Any]] = FULL_DESIGN


@dataclass(frozen=True, kw_only=True)
class Design(StudyDesign):
    """Study 04's design, with what its sweep needs: whether the extra rows and the sweep run,
    the sweep's fractions of capacity and its arms."""

    extras: bool
    sweep: bool
    fractions: tuple[float, ...]
    sweep_arms: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class SweepDesign(StudyDesign):
    """The open-model sweep's design, with the closed-model capacity its rates come from
    (arm -> median requests/s of its closed-model trials)."""

    capacity: Mapping[str, float]


def design(p: Parameters) -> Design:
    """The seed's load as a closed model (wrk with the seed's flags beside benchlib on the seed's
    arms), the arms of the chosen sinks and servers (the extra rows with ``extras``), and the
    closed-model questions; a budget with the sweep is refused (:func:`check_budget`)."""
    extras, sweep = params.yes_no("extras", p.extras), params.yes_no("sweep", p.sweep)
    fractions = parse_fractions(p.sweep_rates)
    arms = study_arms(sinks=p.sinks, sink_servers=p.sink_servers, extras=extras)
    sweep_arms = params.choices(p.sweep_arms, [a.name for a in arms], "sweep arm(s)") if sweep else ()
    check_budget(p.budget_target[0], sweep)
    load = LoadSpec(model="closed", connections=p.connections, duration_s=p.duration_s, warmup_s=p.warmup_s,
                    workers=p.workers)
    wrk = (CrossCheck("wrk", (("threads", p.workers), ("connections", p.connections),
                              ("duration_s", max(1, round(p.duration_s)))), arms=SEED_ARMS) if p.wrk_check else None)
    experiment = Experiment(study=STUDY, arms=arms, conditions=(Condition("closed", load, cross_check=wrk),),
                            trials=p.trials, seed=p.seed, runtime=p.runtime, cluster=p.cluster,
                            baseline="actix-debug-pipe", cross_check_blocks=p.cross_check_blocks)
    return Design(experiment=experiment, families=tuple(closed_families([a.name for a in arms], extras=extras)),
                  sequential=p.sequential, extras=extras, sweep=sweep, fractions=fractions, sweep_arms=sweep_arms)


def wrk_flags(study: StudyRun[Parameters, Design]) -> str:
    """wrk's flags in this run (``-t2 -c100 -d2s``): its seconds follow the closed-model trials
    that ran (with a budget, the plan's), in whole seconds."""
    p = study.parameters
    return f"-t{p.workers} -c{p.connections} -d{max(1, round(study.experiment.conditions[0].load.duration_s or 0))}s"


def wrk_line(study: StudyRun[Parameters, Design]) -> str:
    """The report's line on wrk: its command and the arms it ran on, or ``off``."""
    if not study.parameters.wrk_check:
        return "- wrk cross-check: off"
    names = {a.name for a in study.experiment.arms}
    return (f"- wrk cross-check: `wrk {wrk_flags(study)} --latency` on "
            + ", ".join(a for a in SEED_ARMS if a in names))


def run_sweep(study: StudyRun[Parameters, Design]) -> StudyRun[Parameters, StudyDesign] | None:
    """The open-model sweep (``None`` when ``sweep`` is off): every sweep arm at the same
    arrival rates, at :attr:`Design.fractions` of the slowest one's closed-model capacity
    (the median of its trials' requests/s, :func:`benchlib.core.sweep.capacity`), in
    randomized blocks of its own, stored as ``<run_id>-sweep``."""
    from benchlib.core.sweep import capacity, sweep_conditions

    d, p = study.design, study.parameters
    if not d.sweep:
        return None
    caps = capacity(study.summaries, arms=d.sweep_arms, condition="closed")
    closed = study.experiment.conditions[0].load
    conditions = sweep_conditions(caps, d.fractions, closed.with_(duration_s=p.sweep_duration_s))
    experiment = Experiment(study=STUDY, arms=tuple(a for a in study.experiment.arms if a.name in d.sweep_arms),
                            conditions=conditions, trials=study.experiment.trials, seed=p.seed, runtime=p.runtime,
                            cluster=p.cluster, baseline=d.sweep_arms[0], cross_check_blocks=p.cross_check_blocks)
    family = sweep_family([c.name for c in conditions], d.sweep_arms)
    return study.run_part("sweep", SweepDesign(experiment=experiment, families=(family,), sequential=p.sequential,
                                               capacity=caps))


def achieved_table(summaries: pd.DataFrame) -> pd.DataFrame:
    """Per sweep step and arm: the offered and the achieved rate (medians over the valid
    trials) and their ratio (a server that keeps up achieves what is offered)."""
    kept = (summaries[summaries["valid"].astype(bool)].groupby(["condition", "arm"])[["offered_rps", "throughput_rps"]]
            .median())
    kept["achieved / offered"] = kept["throughput_rps"] / kept["offered_rps"]
    return kept.rename(columns={"offered_rps": "offered req/s",
                                "throughput_rps": "achieved req/s (median of trials)"}).round(3).reset_index()


# -- arms --------------------------------------------------------------------------------------

def parse_fractions(text: str) -> tuple[float, ...]:
    """``"0.5,0.9"`` -> ``(0.5, 0.9)``: the sweep's rates as fractions of capacity, each in (0, 1)."""
    out = []
    for item in (x.strip() for x in str(text).split(",") if x.strip()):
        try:
            f = float(item)
        except ValueError:
            f = math.nan
        if not (0 < f < 1):
            raise ParameterError(f"sweep rate {item!r} is not valid; valid: fractions of capacity in (0, 1), "
                                 "comma-separated, e.g. 0.5,0.9")
        out.append(f)
    if not out:
        raise ParameterError("sweep_rates is empty; valid: fractions of capacity in (0, 1), e.g. 0.5,0.9")
    return tuple(sorted(set(out)))


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
    sink_t = params.choices(sinks, SINKS, "log sink(s)")
    server_t = params.choices(sink_servers, tuple(SERVERS), "server(s) for the sink factor")
    wanted = {split_arm(a) for a in SEED_ARMS}
    if extras:
        wanted |= {(s, "pipe") for s in EXTRA_SERVERS}
    wanted |= {(srv, sink) for srv in server_t for sink in sink_t}
    order = sorted(wanted, key=lambda x: (list(SERVERS).index(x[0]), SINKS.index(x[1])))
    return tuple(Arm(arm_name(srv, sink), SERVERS[srv][0], SERVERS[srv][1], log_sink=sink) for srv, sink in order)


def expected_log_lines(arms: Sequence[str]) -> dict[str, int]:
    """Log lines each arm's server writes per request (:data:`LOG_LINES_PER_REQUEST`)."""
    return {a: LOG_LINES_PER_REQUEST[split_arm(a)[0]] for a in arms}


# -- the questions ------------------------------------------------------------------------------

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
        fams.append(Family.grouped(
            "seed", baseline="actix-debug-pipe", groups={"log to pipe": seed}, metrics=METRICS, condition="closed",
            title="1. The seed's comparison, and the build mode",
            text="Does Go beat actix-web as the seed ran them (actix-web's debug build, each request logged to a "
                 "pipe), and how much does the release build change actix-web? Baseline: actix-debug-pipe."))
    sinks_both = [s for s in SINKS if {arm_name("actix-release", s), arm_name("go", s)} <= have]
    if sinks_both:
        fams.append(Family.grouped(
            "framework", baseline="actix-release", metrics=METRICS, condition="closed",
            groups={f"log to {s}": {arm_name("actix-release", s): "actix-release", arm_name("go", s): "go"}
                    for s in sinks_both},
            title="2. The frameworks at equal logging",
            text="Go net/http against actix-web's release build, both logging to the same sink: what is left of the "
                 "gap once the build mode is fair? Baseline: actix-release at each sink."))
    by_server = {srv: {arm_name(srv, s): s for s in SINKS if arm_name(srv, s) in have} for srv in SERVERS}
    by_server = {srv: g for srv, g in by_server.items() if "pipe" in g.values() and len(g) > 1}
    if by_server:
        fams.append(Family.grouped(
            "logging", baseline="pipe", groups=by_server, metrics=METRICS, condition="closed",
            title="3. What the log sink costs, per server",
            text="The same server with its log sent to a file or discarded, against the pipe read by the runtime "
                 "(the seed's terminal): how much of each server's rate goes into logging? Baseline: the pipe."))
    extra = {a: a for a in ("go-pipe", *(arm_name(s, "pipe") for s in EXTRA_SERVERS)) if a in have}
    if extras and "go-pipe" in extra and len(extra) > 1:
        fams.append(Family.grouped(
            "extras", baseline="go-pipe", groups={"log to pipe": extra}, metrics=METRICS, condition="closed",
            title="4. The extra rows: Python (uvicorn) and Node.js (fastify)",
            text="Where do a Python and a Node.js server with the same contract and request logging land? "
                 "Baseline: go-pipe."))
    return fams


def sweep_family(conditions: Sequence[str], arms: Sequence[str]) -> Family:
    """The open-model family: every sweep arm against the first, at each offered rate."""
    if len(arms) < 2:
        raise ParameterError(f"the sweep compares at least two arms, got {list(arms)}")
    return Family.grouped(
        "sweep", baseline=arms[0], groups={c: {a: a for a in arms} for c in conditions}, metrics=("p50_ms", "p99_ms"),
        title="5. Latency at fixed arrival rates (open model)",
        text=f"At the same offered rate for both (25-90% of the slower one's closed-model capacity), how do the "
             f"latencies compare, free of coordinated omission? Baseline: {arms[0]}. Throughput is not compared "
             "here: at a fixed offered rate it equals the offered rate for a server that keeps up (the table above "
             "the verdicts shows it did), so it answers no question and would only widen the correction.")


# -- wrk beside benchlib ------------------------------------------------------------------------

#: Why wrk and benchlib can differ whatever the server (said once under the wrk notes).
WRK_WHY = (
    "What differs between the two measurements, whatever the server: wrk has no warm-up, so when it runs first it "
    "meets a server nobody has warmed up, and it opens its connections inside its timed window; benchlib warms up "
    "and starts timing after. In a closed loop each connection's cycle includes the client's own time per request "
    "(wrk is C, benchlib's workers Python on uvloop): it matters little while the server has a queue of waiting "
    "requests and more with few connections or a server faster than the client, even when no CPU is saturated. The "
    "pipe sink's reader runs in benchlib's process on the client CPU, beside whichever tool is loading.")
WRK_WHY_LATENCY = (
    "Both tools are closed-loop (a connection sends only after its last answer), so both leave out the waiting a "
    "stalled server causes (coordinated omission); with a fixed number of connections latency moves inversely with "
    "the rate (Little's law), so a rate difference shows as a latency difference; wrk's percentiles come from its "
    "own histogram of every request of its run, the cold start included.")


def wrk_tables(result: Run, summaries: Any) -> dict[str, Any]:
    """wrk beside benchlib (:mod:`benchlib.analysis.peers`, benchlib's figures from the
    summaries): ``beside`` (per trial), ``by_arm`` (medians), for display ``rate``,
    ``latency`` (per arm) and ``trials`` (per trial), labelled, and ``notes`` in words."""
    beside = peers.peer_beside(result, summaries=summaries, tool="wrk")
    by_arm = peers.peer_summary(beside)
    return {"beside": beside, "by_arm": by_arm,
            "rate": peers.peer_view(by_arm, ["arm", "peer_blocks", "trials", "bl_rps", "peer_rps", "rps_ratio", "rps_ratio_range",
                                             "rps_ratio_first", "rps_ratio_second", "bl_client_cpu", "peer_cpu",
                                             "peer_bytes", "peer_failed", "peer_error"], "wrk", index="arm"),
            "latency": peers.peer_view(by_arm, ["arm", "bl_p50", "peer_p50", "p50_ratio", "bl_p99", "peer_p99",
                                                "p99_ratio"], "wrk", index="arm"),
            "trials": peers.peer_view(beside, ["arm", "block", "order", "bl_rps", "peer_rps", "rps_ratio", "bl_p50",
                                               "peer_p50", "bl_p99", "peer_p99", "peer_cpu", "bl_client_cpu",
                                               "peer_errors"], "wrk"),
            "notes": peers.peer_notes(by_arm, "wrk", why=WRK_WHY, why_latency=WRK_WHY_LATENCY, absent=(
                "_wrk did not run (wrk_check is off, wrk is missing, or no seed arm ran)._"))}


# -- the seed's numbers beside ours -----------------------------------------------------------

def original_vs_ours(reference: Any, summaries: Any, by_arm: Any, *, wrk_flags: str = "-t2 -c100 -d30s") -> Any:
    """The seed's three wrk outputs, then ours for the matching arms: wrk with the seed's
    flags and benchlib (medians over this run's trials), with bytes per response."""
    import pandas as pd

    rows = [{"source": f"seed output {int(r['output'])} (port {int(r['port'])}), one run",
             "server": f"{r['server_stated']}; inferred: {str(r['server_inferred']).split(' (')[0]}",
             "requests/s": r["requests_per_s"], "p50 (ms)": r["p50_ms"], "p99 (ms)": r["p99_ms"],
             "bytes/response": r["bytes_per_response"]} for _, r in reference.iterrows()]
    closed = summaries[(summaries["condition"] == "closed") & summaries["valid"].astype(bool)]
    wrk = by_arm.set_index("arm") if by_arm is not None and len(by_arm) else None
    for arm in SEED_ARMS:
        if wrk is not None and arm in wrk.index:
            w = wrk.loc[arm]
            rows.append({"source": f"ours, wrk {wrk_flags} (median of {int(w['trials'])} trials)", "server": arm,
                         "requests/s": w["peer_rps"], "p50 (ms)": w["peer_p50"], "p99 (ms)": w["peer_p99"],
                         "bytes/response": w["peer_bytes"]})
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
    wrk = by_arm.set_index("arm")["peer_rps"] if by_arm is not None and len(by_arm) else pd.Series(dtype=float)
    for actix in ("actix-debug-pipe", "actix-release-pipe"):
        if "go-pipe" in wrk.index and actix in wrk.index:
            rows.append({"source": f"ours, wrk: go-pipe / {actix}", "Go / actix": wrk["go-pipe"] / wrk[actix]})
        if "go-pipe" in med.index and actix in med.index:
            rows.append({"source": f"ours, benchlib: go-pipe / {actix}", "Go / actix": med["go-pipe"] / med[actix]})
    return pd.DataFrame(rows)


# -- the conclusion ---------------------------------------------------------------------------

def _answer(fp: Any, fd: Any, g: Any) -> str:
    """Does Go beat actix-web at a fair build and the same sink (the pipe; and discarded)? By
    the kinds of the fair rows (:mod:`benchlib.analysis.conclusion`)."""
    from benchlib.stats.verdict import VerdictKind as K

    fair = say.sentence(fp, "Go", "actix-web release", "requests per second")
    if say.decided(fp) and fp.kind is K.FASTER:
        ans = f"Yes, at a fair build and the same log sink (pipe): {fair}."
    elif say.decided(fp):
        ans = f"Not when the comparison is fair (release build, same sink, pipe): {fair}."
    elif fp.kind is K.EQUIVALENT:
        ans = f"At a fair build and the same sink (pipe): {fair}."
    else:
        ans = f"This run cannot tell at a fair build and the same sink (pipe): {fair}."
    if say.estimated(fd):
        ans += " With the logs discarded: " + say.sentence(fd, "Go", "actix-web release", "requests per second") + "."
        if say.decided(fp) and say.decided(fd):
            ans += (" The same direction at both sinks." if fp.kind is fd.kind else
                    " The opposite direction, so the logging decides which one is faster.")
    return ans


def _factors(g: Any, b: Any, fp: Any, fd: Any) -> list[str]:
    """Go's lead in the seed's setup as build mode x framework, stated only from decided rows
    (:func:`benchlib.analysis.conclusion.factors_sentence`); the logging's share (a ratio of two
    estimates) has no test of its own and is not attributed."""
    out = ["*Framework or build mode?* " + say.factors_sentence(
        "Go's lead in the seed's setup (Go / actix-web debug, pipe)", g,
        (("the build mode (actix-web release / debug)", b, 1),
         ("the frameworks at the same sink (Go / actix-web release, pipe)", fp, 1)))]
    if say.estimated(fd):
        out += ["", "*The logging*: how much of the framework row comes from the pipe is the ratio of two rows' "
                "estimates (pipe and discard), which has no test of its own; the per-server logging rows above say "
                "what the pipe costs each server."]
    return out


def conclusion_markdown(answers: Mapping[str, Answer], reference: Any, *, sweep: Answer | None = None,
                        by_arm: Any = None, limited: Sequence[str] = ()) -> str:
    """The study's answer, every figure from the typed verdicts of this run's families: does
    Go beat actix here, by how much, and is it the framework, the build mode or the logging.
    ``limited``: arms whose client came near its CPU limit
    (:func:`benchlib.analysis.tables.client_limited`); their rates, and the ratios built on
    them, are bounds."""
    def v(key: str, arm: str, group: str, metric: str = "throughput_rps") -> Any:
        return answers[key].verdict(arm, metric, group=group) if key in answers else None

    ref = reference.set_index("output")["requests_per_s"]
    g, b = v("seed", "go-pipe", "log to pipe"), v("seed", "actix-release-pipe", "log to pipe")
    fp, fd = v("framework", "go", "log to pipe"), v("framework", "go", "log to discard")
    if not any(say.estimated(x) for x in (g, b, fp)):
        return "_Too few arms ran to answer the study's questions (see the status table)._"
    out = ["**Does Go beat actix-web here?**", ""]
    if say.estimated(g):
        out.append(f"- *As the seed ran them* (actix-web's debug build, every request logged to a pipe): "
                   f"{say.sentence(g, 'Go', 'actix-web debug', 'requests per second')}. The seed's wrk outputs give "
                   f"{ref[3] / ref[1]:.2f}× (output 3 / output 1) and {ref[3] / ref[2]:.2f}× (output 3 / output 2).")
    if say.estimated(b):
        out.append(f"- *The build mode*: "
                   f"{say.sentence(b, 'actix-web release', 'actix-web debug', 'requests per second')}.")
    for c in answers["framework"].family.rows() if "framework" in answers else ():
        r = v("framework", "go", str(c.group))
        if say.estimated(r):
            lat = "; ".join(say.sentence(x, "Go", "actix-web release") for m in ("p50_ms", "p99_ms")
                            if say.estimated(x := v("framework", "go", str(c.group), m)))
            out.append(f"- *Fair build, same sink ({c.group})*: "
                       f"{say.sentence(r, 'Go', 'actix-web release', 'requests per second')}"
                       + (f"; {lat}." if lat else "."))
    for c in answers["logging"].family.rows() if "logging" in answers else ():
        r = v("logging", c.labels[1], str(c.group))
        if say.estimated(r):
            out.append(f"- *Logging, {c.group}*: "
                       f"{say.sentence(r, f'log to {c.labels[1]}', 'log to pipe', 'requests per second')}.")
    out += ["", "**The answer.**", ""]
    if say.estimated(fp):
        out += [_answer(fp, fd, g), ""]
    if say.estimated(g) and say.estimated(b) and say.estimated(fp):
        out += _factors(g, b, fp, fd)
    if limited:
        out += ["", f"*Caveat*: benchlib's client (Python workers on one CPU) came near its CPU limit in most trials "
                f"of {', '.join(f'**{a}**' for a in limited)} (see the client CPU table); there the server may be "
                "faster than measured, so those arms' rates are lower bounds and every ratio in their favour is, if "
                "anything, understated (wrk, in C, needs less CPU per request: see its table)."]
    if sweep is not None and sweep.comparison is not None:
        groups = list(dict.fromkeys(str(c.group) for c in sweep.family.rows()))
        for arm in dict.fromkeys(sweep.comparison.table["arm"]):
            for metric, word in (("p50_ms", "median latency"), ("p99_ms", "p99")):
                bits = [f"{grp}: {say.sentence(r, arm, str(sweep.family.baseline), word)}" for grp in groups
                        if (r := sweep.verdict(arm, metric, group=grp)) is not None]
                if bits:
                    out += ["", "*Latency at fixed rates* (open model, no coordinated omission), at each offered "
                            "rate: " + "; ".join(bits) + "."]
    if by_arm is not None and len(by_arm):
        rr = "; ".join(f"{r['arm']} {fmt.signed_pct(r['rps_ratio'])}" for _, r in by_arm.iterrows())
        out += ["", f"*wrk beside benchlib*: wrk with the seed's flags, on the same service instances, measured "
                f"requests/s differing from benchlib's by (median per-trial ratio) {rr}."]
    return "\n".join(out)
