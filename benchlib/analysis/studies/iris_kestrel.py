"""Study 02, "Iris vs Kestrel (1 KB random string)" (seed 001, malekpour's gist answering
kataras' "Iris Go vs .NET Core Kestrel in terms of HTTP performance", Aug 2017): what is its
own in ``notebooks/02_iris_vs_kestrel.ipynb``. Everything generic comes from
:mod:`benchlib.analysis`; ``docs/studies/02_iris_vs_kestrel.md`` explains the design.

The seed ran ``bombardier -c 125 -n 500000`` against ``GET /api/values/5``, answered by a
1,024-character string generated per request, and printed Kestrel 99,891 and Iris 7,501
requests/s. Here every *stack* (a service in a variant, :data:`STACKS`) is loaded on both of
its endpoints, the seed's per-request string (``random``) and one made at start (``fixed``):
arm ``<stack>-<endpoint>``, all arms in one closed-model condition, so every comparison
pairs trials of the same block. Four questions, each its own Holm family (:func:`families`):

1. ``seed``: Kestrel and the other stacks against the post's Iris, on the random string;
2. ``implementation``: each server's faithful (and verbatim) handler against its fair one;
3. ``languages``: the fair stacks against Go net/http;
4. ``generation``: each stack's random endpoint against its fixed one (what the string costs).

Kestrel needs the .NET SDK: where it is missing its rows say "not run: why".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from benchlib.analysis import Answer, Family, blocks_needed, params, peers, tables
from benchlib.analysis import conclusion as say
from benchlib.analysis import formats as fmt
from benchlib.analysis.params import Runtime, Sequential, StudyParameters
from benchlib.analysis.planned import StudyDesign
from benchlib.core.model import Arm, Condition, CrossCheck, Experiment, LoadSpec
from benchlib.stats.verdict import VerdictKind
from benchlib.store.results import Run

__all__ = [
    "BOMBARDIER_STACKS", "BOMBARDIER_WHY", "CONDITION", "COST_METRICS", "Design", "ENDPOINTS", "FAIR_ROWS", "FULL",
    "METRICS", "Parameters", "REPEAT_INVALID", "SEED_CONNECTIONS", "SEED_REQUESTS", "STACKS", "STUDY", "Stack",
    "VARIANTS", "arm_name", "bombardier_flags", "bombardier_setup", "bombardier_stacks", "bombardier_tables",
    "conclusion_markdown",
    "cpu_plan", "design", "families", "original_vs_ours", "planned_blocks", "ratio_table", "run_parameters",
    "seed_load", "seed_ratio", "study_arms", "study_condition",
]

STUDY = "02_iris_vs_kestrel"
SEED_CONNECTIONS = 125
SEED_REQUESTS = 500_000
CONDITION = "closed"
#: endpoint (manifest name) -> path: the seed's per-request string, and one made at start
ENDPOINTS: dict[str, str] = {"random": "/api/values/5", "fixed": "/api/values/fixed"}
VARIANTS: tuple[str, ...] = ("faithful", "verbatim", "fair")
FAIR_ROWS: tuple[str, ...] = ("nethttp", "actix", "node", "python")
METRICS: tuple[str, ...] = ("throughput_rps", "p50_ms", "p99_ms", "server_cpu_us_per_req")
#: The generation family's metrics: under a closed loop p50 mirrors the rate (Little's law),
#: and the cost of the string is a rate and a CPU time.
COST_METRICS: tuple[str, ...] = ("throughput_rps", "server_cpu_us_per_req")
#: a trial the load generator's guard invalidates (client CPU, schedule) is run again, at most twice
REPEAT_INVALID = 2
#: The stacks whose random arm bombardier loads by default: the seed's two servers as the post
#: ran them, and the fastest fair stack (where a client's own cost per request shows most).
BOMBARDIER_STACKS = "iris-faithful,kestrel-faithful,actix"
#: ``full=True``: the seed's size and every question (the notebook's defaults are a short run).
FULL: dict[str, Any] = {"scale": 1.0, "duration_s": 0.0, "endpoints": "random,fixed", "bombardier": "all"}


@dataclass(frozen=True)
class Stack:
    """A server in one variant; ``key`` prefixes its arms (``iris-faithful-random``)."""

    key: str
    label: str
    service: str
    variant: str


STACKS: tuple[Stack, ...] = (
    Stack("iris-faithful", "Iris, the post's handler on Go 1.8's locked math/rand", "go-iris-random", "faithful"),
    Stack("iris-verbatim", "Iris, the post's main.go on today's Go", "go-iris-random", "verbatim"),
    Stack("iris-fair", "Iris, the fair handler", "go-iris-random", "fair"),
    Stack("kestrel-faithful", "Kestrel, the post's Startup.cs", "dotnet-kestrel-random", "faithful"),
    Stack("kestrel-fair", "Kestrel, the fair handler", "dotnet-kestrel-random", "fair"),
    Stack("nethttp", "Go net/http", "go-nethttp-random", "fair"),
    Stack("actix", "Rust actix-web (release)", "rust-actix-random", "fair"),
    Stack("node", "Node.js node:http", "node-http-random", "fair"),
    Stack("python", "Python uvicorn", "python-uvicorn-random", "fair"),
)


def arm_name(stack: str, endpoint: str) -> str:
    """``("nethttp", "random")`` -> ``"nethttp-random"``."""
    return f"{stack}-{endpoint}"


def study_arms(variants: str | Sequence[str] = VARIANTS, fair_rows: str | Sequence[str] = FAIR_ROWS,
               endpoints: str | Sequence[str] = tuple(ENDPOINTS)) -> tuple[Arm, ...]:
    """Iris and Kestrel in the chosen variants (Kestrel has no ``verbatim``) and the chosen fair
    rows, each on every chosen endpoint: ``Arm("<stack>-<endpoint>", service, variant,
    endpoint=...)``, by stack, random before fixed; an unknown name is one error line."""
    v, rows = params.choices(variants, VARIANTS, "variant(s)"), params.choices(fair_rows, FAIR_ROWS, "fair row(s)")
    eps = params.choices(endpoints, tuple(ENDPOINTS), "endpoint(s)", canonical=True)
    return tuple(Arm(arm_name(s.key, e), s.service, s.variant, endpoint=e) for s in STACKS
                 if s.key in rows or (s.key.startswith(("iris-", "kestrel-")) and s.variant in v) for e in eps)


def seed_load(scale: float = 1.0, *, warmup_s: float = 1.0, duration_s: float | None = None) -> LoadSpec:
    """The seed's ``bombardier -c 125 -n 500000`` as a benchlib closed model: 125 keep-alive
    connections, one client worker, after ``warmup_s`` of warm-up (the seed had none), and
    ``round(500,000 x scale)`` measured requests (at least 1,000), or with ``duration_s``
    (seconds) that long a measured phase instead: a load bounded by time, which lets the arms
    of a block run side by side (``docs/statistics.md``, "Arms side by side")."""
    if duration_s:
        params.positive("duration_s", duration_s, "measured seconds per arm and trial")
        return LoadSpec(model="closed", connections=SEED_CONNECTIONS, duration_s=duration_s, warmup_s=warmup_s,
                        workers=1)
    params.positive("scale", scale, "1.0 = the seed's 500,000 requests per trial")
    return LoadSpec(model="closed", connections=SEED_CONNECTIONS, duration_s=None,
                    requests=max(1_000, round(SEED_REQUESTS * scale)), warmup_s=warmup_s, workers=1)


def study_condition(scale: float = 1.0, *, warmup_s: float = 1.0, duration_s: float | None = None,
                    bombardier_arms: Sequence[str] = ()) -> Condition:
    """The one condition: :func:`seed_load`, each arm on its own endpoint; with
    ``bombardier_arms``, bombardier with the seed's flags (``-c 125``, and ``-n`` the same count
    or ``-d`` the same seconds, at least 1, bombardier's shortest) on those arms' instances in every trial, before benchlib's load
    in odd blocks, after it in even ones."""
    load = seed_load(scale, warmup_s=warmup_s, duration_s=duration_s)
    size = ("requests", load.requests) if load.requests is not None else ("duration_s", max(1.0, load.duration_s or 0))
    check = (CrossCheck("bombardier", (("connections", SEED_CONNECTIONS), size),
                        arms=tuple(bombardier_arms)) if bombardier_arms else None)
    return Condition(CONDITION, load, cross_check=check)


def bombardier_flags(load: LoadSpec) -> str:
    """bombardier's flags for ``load`` as the seed wrote them: ``-c 125 -n <requests>``, or
    ``-c 125 -d <seconds>s`` for a load bounded by time."""
    size = f"-n {load.requests}" if load.requests is not None else f"-d {max(1.0, load.duration_s or 0):g}s"
    return f"-c {load.connections} {size}"


def cpu_plan(server_cpus: int = 1) -> Any:
    """Where the server runs: on ``server_cpus`` CPUs of its own, the client on the rest
    (:func:`benchlib.run.cpus.plan_cpus`), or, with every CPU (2 here), on all of them, shared
    with the load generator and bombardier: **not isolated**, for showing the faithful
    handler's lock under contention."""
    from benchlib.core.errors import ParameterError
    from benchlib.run.cpus import CpuPlan, available_cpus, plan_cpus

    cpus = available_cpus()
    if isinstance(server_cpus, int) and 1 <= server_cpus < len(cpus):
        return plan_cpus(server_count=server_cpus)
    if server_cpus == len(cpus):
        return CpuPlan(server=cpus, client=cpus, dependencies=cpus)
    raise ParameterError(f"server_cpus must be 1 to {len(cpus)} (this machine's CPUs; {len(cpus)} shares them with "
                         f"the client), got {server_cpus!r}")


def run_parameters(full: bool, **given: Any) -> dict[str, Any]:
    """The parameters a run uses: ``given`` (the notebook's), with :data:`FULL` over them when
    ``full`` (the seed's 500,000 requests per trial, both endpoints, bombardier on every stack)."""
    return {**given, **({k: v for k, v in FULL.items() if k in given} if full else {})}


def bombardier_stacks(text: str | Sequence[str]) -> tuple[str, ...]:
    """``"iris-faithful, actix"`` -> the stack keys; ``"all"``: every stack; ``"none"`` or
    ``""``: none. An unknown name is one error line listing the valid ones."""
    if isinstance(text, str) and text.strip().lower() in ("", "none"):
        return ()
    if isinstance(text, str) and text.strip().lower() == "all":
        return tuple(s.key for s in STACKS)
    return params.choices(text, [s.key for s in STACKS], "bombardier stack(s) (or all, none)", canonical=True)


def bombardier_setup(arms: Sequence[Arm], stacks: str | Sequence[str] = BOMBARDIER_STACKS
                     ) -> tuple[tuple[str, ...], str]:
    """Which arms bombardier cross-checks, the seed's endpoint (``random``) of the chosen
    ``stacks`` (:func:`bombardier_stacks`), and a sentence saying so
    (:func:`benchlib.analysis.peers.peer_setup`: built here if missing)."""
    chosen = bombardier_stacks(stacks)
    return peers.peer_setup("bombardier", [a.name for a in arms if a.endpoint == "random"
                                           and a.name.removesuffix("-random") in chosen], bool(chosen),
                            flag='bombardier="none"')


@dataclass(frozen=True, kw_only=True)
class Parameters(StudyParameters):
    """Study 02's parameters (its notebook's ``parameters`` cell); ``full`` sets :data:`FULL`.

    Attributes
    ----------
    runtime: ``local`` (processes) or ``docker``.
    duration_s: measured seconds per arm and trial, the load bounded by time (the arms of a
        block side by side); ``0``: the design's (1.0 s; the full scale measures the seed's
        request count instead, one arm per trial).
    scale: with a load bounded by a count (full scale), requests per trial as a fraction of
        the seed's 500,000 (at least 1,000).
    warmup_s: warm-up seconds before each measured phase.
    variants: Iris and Kestrel handlers: ``faithful``, ``verbatim``, ``fair`` (comma-separated).
    fair_rows: the other stacks with the fair handler: ``nethttp``, ``actix``, ``node``, ``python``.
    endpoints: ``random`` (the seed's), ``fixed`` (one string made at start).
    server_cpus: the server's CPUs (every CPU: shared with the client, not isolated).
    bombardier: stacks whose random arm bombardier also loads (names, ``all`` or ``none``).
    sequential: stop a question at a planned look once settled (``auto``, ``yes``, ``no``).
    """

    runtime: Runtime = "local"
    trials: int = 10
    duration_s: float = 0.0
    scale: float = 0.1
    warmup_s: float = 1.0
    variants: str = "faithful,verbatim,fair"
    fair_rows: str = "nethttp,actix,node,python"
    endpoints: str = "random"
    server_cpus: int = 1
    bombardier: str = BOMBARDIER_STACKS
    sequential: Sequential = "auto"
    seed: int = 2

    DEFAULT_DESIGN: ClassVar[Mapping[str, Any]] = {"duration_s": 1.0}
    FULL_SCALE: ClassVar[Mapping[str, Any]] = FULL


@dataclass(frozen=True, kw_only=True)
class Design(StudyDesign):
    """Study 02's design, with the sentence saying which arms bombardier checks."""

    bombardier_note: str


def design(p: Parameters) -> Design:
    """Every chosen stack on every chosen endpoint in one closed-model condition (bombardier
    beside benchlib on the chosen stacks' random arm, built here if missing), the server on
    ``server_cpus`` CPUs, and the four questions."""
    arms = study_arms(p.variants, p.fair_rows, p.endpoints)
    checked, note = bombardier_setup(arms, p.bombardier)
    condition = study_condition(p.scale, warmup_s=p.warmup_s, duration_s=p.duration_s or None,
                                bombardier_arms=checked)
    experiment = Experiment(study=STUDY, arms=arms, conditions=(condition,), trials=p.trials, seed=p.seed,
                            runtime=p.runtime, cluster=p.cluster, repeat_invalid=REPEAT_INVALID)
    return Design(experiment=experiment, families=tuple(families([a.name for a in arms])), sequential=p.sequential,
                  requests={CONDITION: int(condition.load.requests)} if condition.load.requests else None,
                  cpus=cpu_plan(p.server_cpus),
                  reasons=tables.short_reasons, bombardier_note=note)


# -- the questions -------------------------------------------------------------------------------

def _group(names: set[str], endpoint: str, labels: Mapping[str, str]) -> dict[str, str]:
    """{stored arm: label} for the stacks of ``labels`` (stack key -> label) present on ``endpoint``."""
    return {arm_name(k, endpoint): lbl for k, lbl in labels.items() if arm_name(k, endpoint) in names}


def families(arm_names: Sequence[str]) -> list[Family]:
    """The study's questions for the arms of the experiment (arms not run included: their
    rows say so), each one Holm family; a family whose baseline is absent, or that has no
    other arm, is left out."""
    names = set(arm_names)
    out: list[Family] = []

    def add(key: str, baseline: str, groups: Mapping[str, Mapping[str, str]], metrics: Sequence[str], title: str,
            text: str) -> None:
        groups = {g: m for g, m in groups.items() if baseline in m.values() and len(m) > 1}
        if groups:
            out.append(Family.grouped(key, baseline=baseline, groups=groups, metrics=metrics, condition=CONDITION,
                                      title=title, text=text))

    others = {k: k for k in ("kestrel-faithful", "kestrel-fair", *FAIR_ROWS)}
    add("seed", "iris-faithful", {"random": _group(names, "random", {"iris-faithful": "iris-faithful", **others})},
        METRICS, "1. The seed's comparison: Kestrel and the other stacks against the post's Iris",
        "On the seed's endpoint (a fresh 1 KB string per request), how do Kestrel (the post's code) and the fair "
        "stacks compare with Iris running the post's handler? The seed printed Kestrel at 13.3× Iris's requests/s. "
        "Baseline: iris-faithful.")
    impl = {"Iris": _group(names, "random", {"iris-fair": "fair", "iris-faithful": "faithful",
                                             "iris-verbatim": "verbatim"}),
            "Kestrel": _group(names, "random", {"kestrel-fair": "fair", "kestrel-faithful": "faithful"})}
    add("implementation", "fair", impl, METRICS, "2. The implementation: the post's handlers against fair ones",
        "The same server with the post's handler (faithful: Go 1.8's generator, one global mutex taken 1,024 times "
        "per response; verbatim: the post's code on today's lock-free generator) against the fair handler "
        "(per-thread generator, headers set): what does the post's way of making the string cost? Baseline: fair.")
    langs = {k: k for k in ("iris-fair", "kestrel-fair", "actix", "node", "python")}
    add("languages", "nethttp", {"random": _group(names, "random", {"nethttp": "nethttp", **langs})}, METRICS,
        "3. Languages and frameworks: the fair stacks against Go net/http",
        "Every stack with the same contract (a fresh 1 KB string per request from a per-thread generator, "
        "Content-Type and Content-Length set) against Go's standard library. Baseline: nethttp.")
    add("generation", "fixed", {s.key: {arm_name(s.key, "fixed"): "fixed", arm_name(s.key, "random"): "random"}
                                for s in STACKS if {arm_name(s.key, e) for e in ENDPOINTS} <= names},
        COST_METRICS, "4. What generating the string costs: random against fixed, per stack",
        "Each stack's fresh string per request (the seed's reading of \"1KB randomly generated string\") against "
        "the same 1 KB made once at start (the other reading): the difference is the generation. Baseline: fixed.")
    return out


def planned_blocks(fams: Sequence[Family], unavailable: Mapping[str, str], scale: float) -> dict[str, tuple[int, int]]:
    """Per family: its rows at ``scale`` and the blocks Holm needs (:func:`benchlib.analysis.blocks_needed`)."""
    return {f.key: blocks_needed(f, {CONDITION: seed_load(scale).requests or 0}, unavailable) for f in fams}


# -- bombardier beside benchlib, and the seed's numbers beside ours ------------------------------

#: Why bombardier and benchlib can differ whatever the server (said once under the notes).
BOMBARDIER_WHY = (
    "What differs between the two, whatever the server: bombardier (Go, fasthttp, one goroutine per connection) has "
    "no warm-up, so when it runs first it meets a server nobody has warmed up, and it opens its 125 connections "
    "inside its timed run; benchlib warms up and starts timing after. Both are closed loops, so each connection's "
    "cycle includes the client's own time per request: bombardier's compiled client needs less CPU per request than "
    "benchlib's Python worker, which matters when the server is faster than the client (see the client CPU table). "
    "bombardier's latencies are whole microseconds from its own histogram; the seed's \"Reqs/sec\" row is the mean "
    "of request rates bombardier samples every 20 ms, the table's requests/s is requests over the run's time.")


def bombardier_tables(result: Run, summaries: Any) -> dict[str, Any]:
    """bombardier beside benchlib (:func:`benchlib.analysis.peers.peer_tables`)."""
    return peers.peer_tables(result, summaries, "bombardier", why=BOMBARDIER_WHY, absent=(
        "_bombardier did not run (bombardier_check is off, it could not be built, or no arm ran on the random "
        "endpoint)._"))


def _per_stack(result: Run, summaries: Any) -> dict[str, dict[str, list[float]]]:
    """For each random-endpoint arm: bombardier's sampled Reqs/sec mean, mean and max latency
    (trials whose benchlib load was valid and whose bombardier ran), and benchlib's rate,
    mean and max latency (valid trials)."""
    out: dict[str, dict[str, list[float]]] = {}
    for t in result.trials:
        p = t.peer
        if t.valid and p is not None and p.ok and t.condition == CONDITION:
            d = out.setdefault(t.arm, {})
            for k, v in (("b_rps", (p.raw.get("reqs_per_s_sampled") or {}).get("mean", float("nan"))),
                         ("b_avg", p.mean_ms), ("b_max", p.max_ms)):
                d.setdefault(k, []).append(float(v))
    ok = summaries[summaries["valid"].astype(bool) & (summaries["condition"] == CONDITION)] if len(summaries) else summaries
    for arm, g in ok.groupby("arm") if len(ok) else ():
        out.setdefault(arm, {}).update(rps=list(g["throughput_rps"]), avg=list(g["mean_ms"]), max=list(g["max_ms"]))
    return out


def original_vs_ours(result: Any, reference: Any, summaries: Any, *, unavailable: Mapping[str, str] | None = None,
                     flags: str = "-c 125 -n 500000") -> Any:
    """The seed's two bombardier outputs (Reqs/sec mean, latency mean and max), then ours on
    the seed's endpoint for every stack: bombardier with the seed's flags and benchlib
    (median over trials [interval], with its achieved level); stacks not run say why (``unavailable``)."""
    import pandas as pd

    from benchlib.stats.verdict import Verdict, render

    cols = ["source", "server", "trials", "requests/s", "latency avg (ms)", "latency max (ms)"]
    rows = [dict(zip(cols, (f"original: bombardier {r['command_inferred'].split(' http')[0][11:]}, one run",
                            f"{r['server']} ({r['framework']}), {r['cpu']}", 1, fmt.num(float(r["reqs_per_s_avg"])),
                            fmt.num(float(r["latency_avg_ms"])), fmt.num(float(r["latency_max_ms"]))), strict=True))
            for _, r in reference.iterrows()]
    per = _per_stack(result, summaries)
    why = dict(unavailable or {})

    def mci(vals: list[float]) -> str:
        return tables.median_of_trials(vals).text

    for s in STACKS:
        arm = arm_name(s.key, "random")
        if arm in why:
            rows.append(dict(zip(cols, ("ours", s.label, 0, render(Verdict.not_run(why[arm])), "", ""), strict=True)))
        elif arm in per:
            d = per[arm]
            if d.get("b_rps"):
                rows.append(dict(zip(cols, (f"ours: bombardier {flags} (Reqs/sec mean)", s.label, len(d["b_rps"]),
                                            mci(d["b_rps"]), mci(d["b_avg"]), mci(d["b_max"])), strict=True)))
            if d.get("rps"):
                rows.append(dict(zip(cols, ("ours: benchlib, closed model", s.label, len(d["rps"]), mci(d["rps"]),
                                            mci(d["avg"]), mci(d["max"])), strict=True)))
    return pd.DataFrame(rows, columns=cols)


def seed_ratio(reference: Any) -> float:
    """The seed's Kestrel / Iris Reqs/sec (99,891 / 7,501)."""
    ref = reference.set_index("server")["reqs_per_s_avg"].astype(float)
    return float(ref["Kestrel"] / ref["Iris"])


def ratio_table(reference: Any, seed: Answer | None, by_arm: Any) -> Any:
    """Each stack against the post's Iris on the seed's endpoint: the seed's Kestrel / Iris,
    then ours: benchlib's ratio of requests/s (Hodges-Lehmann over paired blocks [95% CI],
    with its verdict), bombardier's ratio of its medians (``by_arm``:
    :func:`bombardier_tables`' ``by_arm``), and the server CPU per request ratio."""
    import pandas as pd

    cols = ["stack / iris-faithful", "requests/s, benchlib [95% CI]", "verdict",
            "requests/s, bombardier (ratio of medians)", "server CPU per request [95% CI]"]
    rows = [dict(zip(cols, ("Kestrel / Iris (the seed: one bombardier run each)", f"{seed_ratio(reference):.2f}×"),
                     strict=False))]
    rps = by_arm.set_index("arm")["peer_rps"] if by_arm is not None and len(by_arm) else pd.Series(dtype=float)
    base = rps.get(arm_name("iris-faithful", "random"), float("nan"))
    for c in seed.family.rows() if seed is not None else ():
        v, cpu = (seed.verdict(c.labels[1], m, group="random") if seed is not None else None
                  for m in ("throughput_rps", "server_cpu_us_per_req"))
        rb = rps.get(c.arm, float("nan")) / base
        rows.append(dict(zip(cols, (c.labels[1], say.ratio(v) if say.estimated(v) else say.effect(v),
                                    v.text if say.estimated(v) else "", fmt.fixed(rb) + ("×" if rb == rb else ""),
                                    say.ratio(cpu) if say.estimated(cpu) else ""), strict=True)))
    return pd.DataFrame(rows, columns=cols).fillna("")


# -- the conclusion ---------------------------------------------------------------------------

def _list(answer: Answer | None, metric: str = "throughput_rps", *, label: str = "arm", what: str = "") -> str:
    """Every row of ``answer`` that ran, each by its kind's template
    (:func:`benchlib.analysis.conclusion.sentence`; "; "-joined); ``label``: the row's arm
    label, its ``group``, or ``both``."""
    if answer is None:
        return "nothing ran"
    def name(c: Any, i: int) -> str:
        return str({"arm": c.labels[i]}.get(label, f"{c.group} {c.labels[i]}"))

    out = [say.sentence(v, name(c, 1), name(c, 0), what)
           for c in answer.family.rows()
           if (v := answer.verdict(c.labels[1], metric, group=str(c.group))) is not None
           and v.kind is not VerdictKind.NOT_RUN]
    return "; ".join(out) or "nothing ran"


def _beside_seed(v: Any, ratio: float) -> str:
    """Where a decided ratio's interval lies against the seed's (a single-trial row's interval
    is called within-run)."""
    iv = "interval" if v.between_run_variance_estimated else "within-run interval"
    if v.ci_hi < ratio:
        return f"below the seed's {ratio:.1f}× ({iv} up to {v.ci_hi:.2f}×)"
    if v.ci_lo > ratio:
        return f"above the seed's {ratio:.1f}× ({iv} from {v.ci_lo:.2f}×)"
    return f"consistent with the seed's {ratio:.1f}× ({iv} {v.ci_lo:.2f}-{v.ci_hi:.2f}×)"


def _in_short(kestrel: Any, found: list[tuple[str, Any]], impl: Any, ratio: float, unbound: Sequence[str]) -> str:
    """The answer in a few sentences, from the verdicts' kinds: a ratio only from a decided row
    whose rate the server set (``unbound``: arm labels whose rate the client or the machine set)."""
    cost = (" " + say.sentence(impl, "The post's Iris handler", "its fair handler", "server CPU per request") + "."
            if impl is not None else "")
    if say.estimated(kestrel):
        label, name, v = "kestrel-faithful", "Kestrel with the post's code", kestrel
    else:
        ranked = [x for x in found if say.decided(x[1])]
        if not ranked:
            return ("Kestrel did not run here, and no stack that did is decided against the post's Iris at this "
                    "design (see each row's verdict above)." + cost)
        label, v = max(ranked, key=lambda x: x[1].estimate)
        name = f"Kestrel did not run here. Against the post's Iris, the fastest decided stack, {label},"
    if arm_name(label, "random") in unbound or "iris-faithful-random" in unbound:
        return (f"{name}: its rate was set by the client or the machine, not by its server, so no throughput ratio is "
                "headlined (compare server CPU per request above, or this stack and the post's Iris)." + cost)
    if not say.decided(v):
        return say.sentence(v, name, "the post's Iris", "requests per second") + "." + cost
    out = f"{name} served {v.estimate:.2f}× the post's Iris's rate (**{v.text}**), {_beside_seed(v, ratio)}.{cost}"
    if v.ci_hi < ratio:
        out += (f" Here the per-request random string does not make this Iris {ratio:.1f} times slower than the "
                "other stacks; what made the seed's gap is not tested here (Kestrel did not run, and the seed's "
                "machine, Go and Iris versions differ: see the limits).")
    return out


def conclusion_markdown(answers: Mapping[str, Answer], reference: Any, *, client_bound: Sequence[str] = (),
                        not_server_bound: Sequence[str] = ()) -> str:
    """The study's answer, every figure from this run's typed verdicts: the seed's claim
    (Kestrel, when it ran), how far the other stacks are from the post's Iris against the
    seed's 13.3×, what the post's handler and the string itself cost, and the caveats
    (``client_bound``: arms whose client came near its CPU limit; ``not_server_bound``: arms
    whose server used less than 90% of its CPU)."""
    seed, impl, gen, langs = (answers.get(k) for k in ("seed", "implementation", "generation", "languages"))
    ratio = seed_ratio(reference)
    out = ["**Does Kestrel serve the 1 KB random string 10+ times faster than Iris?**", "",
           f"- *The seed*: Kestrel {fmt.num(float(reference['reqs_per_s_avg'].max()))} against Iris "
           f"{fmt.num(float(reference['reqs_per_s_avg'].min()))} Reqs/sec (bombardier, one run each): {ratio:.1f}×."]
    k = seed.verdict("kestrel-faithful", "throughput_rps", group="random") if seed is not None else None
    out.append("- *Kestrel with the post's code*: " + (
        say.sentence(k, "Kestrel", "Iris", "requests per second") + "." if say.estimated(k) else
        f"{say.sentence(k, 'Kestrel', 'Iris')}; the seed's own comparison is not repeated on this machine."))
    found = [(c.labels[1], v) for c in (seed.family.rows() if seed is not None else ())
             if seed is not None and say.estimated(v := seed.verdict(c.labels[1], "throughput_rps", group="random"))]
    if found:
        out.append(f"- *The other stacks against the post's Iris* (requests/s): {_list(seed)}.")
    if impl is not None:
        out.append(f"- *The post's handlers* (against the same server's fair handler): requests/s "
                   f"{_list(impl, label='both', what='requests per second')}; server CPU per request: "
                   f"{_list(impl, 'server_cpu_us_per_req', label='both')}.")
    if gen is not None:
        out.append(f"- *What the fresh string costs* (random against fixed, server CPU per request): "
                   f"{_list(gen, 'server_cpu_us_per_req', label='group')}.")
    if langs is not None:
        out.append(f"- *Languages and frameworks* (fair stacks against Go net/http, requests/s): {_list(langs)}.")
    for arms, what in ((client_bound, "the client came near its CPU limit in most trials of"),
                       (not_server_bound, "the server used less than 90% of its CPU in most trials of")):
        if arms:
            out.append(f"- *Caveat*: {what} {', '.join(f'**{x}**' for x in arms)}: their rate was not set by the "
                       "server's CPU (but by the client, or other work on the machine), so they compare on server CPU "
                       "per request rather than on requests/s.")
    if found:
        vi = impl.verdict("faithful", "server_cpu_us_per_req", group="Iris") if impl is not None else None
        out += ["", f"**In short**: {_in_short(k, found, vi, ratio, [*client_bound, *not_server_bound])}"]
    return "\n".join(out)
