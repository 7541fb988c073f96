"""Study 01, "the same REST API in Go, .NET and Rust with MongoDB" (DotnetGoRustBenchmark):
what is its own in ``notebooks/01_rest_mongo_go_dotnet_rust.ipynb``: the arms, the seed's
loads, the questions, the original's table beside ours, the database facts and the
conclusion. Everything generic comes from :mod:`benchlib.analysis`.

The seed ran k6 ``constant-arrival-rate`` (100 pre-allocated VUs, 10 s) at 100 requests/s
on ``GET /helloWorld`` and 10/s on ``GET /users/1`` against three APIs, each limited to
1 CPU and 512 MB, and reported k6's ``http_req_duration`` once per cell. Here every
implementation runs in a ``faithful`` variant (the study's code behaviour) and a ``fair`` one
(release build, one pooled client, no per-request log, identical bodies); see
``docs/studies/01_rest_mongo.md``.

Three questions answered in **one** Holm family over both endpoints (:func:`family`):

* ``language``: every fair variant against Go fair;
* ``implementation``: each language's faithful variant against its own fair variant;
* ``original``: the faithful variants against faithful Go (the original's own comparison).

Arms that cannot run here (.NET without an SDK) stay in every table as "not run: why".
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from benchlib.analysis import Answer, Contrast, Family, params, peers, planned_rows, tables
from benchlib.analysis import conclusion as say
from benchlib.analysis import formats as fmt
from benchlib.analysis.params import Runtime, Sequential, StudyParameters
from benchlib.analysis.planned import StudyDesign
from benchlib.core.errors import ParameterError
from benchlib.core.model import Arm, Condition, CrossCheck, Experiment, Limits, LoadSpec
from benchlib.store.results import Run

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "BASELINE", "BETWEEN_TRIALS_S", "CONDITIONS", "DEFAULT_DESIGN", "DEFAULT_LOADS", "DEPENDENCIES", "Design",
    "EXTRA_KEYS", "FULL_DESIGN", "IMPLEMENTATIONS", "Implementation", "LIMITS", "METRICS", "Parameters", "QUESTIONS",
    "REPEAT_INVALID", "SEED_DURATION_S", "SEED_IN_FLIGHT", "SEED_RATE_RPS", "STUDY", "VARIANTS", "WARMUP_S",
    "conclusion_markdown", "database_info", "default_design_markdown", "design", "family", "k6_setup", "k6_tables",
    "original_vs_ours", "parse_variants", "percentile_support", "planned_family", "provenance_notes",
    "requests_per_trial", "scaled_load", "short_reasons", "study_arms", "study_conditions",
]

STUDY = "01_rest_mongo_go_dotnet_rust"


@dataclass(frozen=True)
class Implementation:
    """One implementation of the study's API: ``key`` prefixes its arm names (``go-fair``)."""

    key: str
    label: str
    service: str
    variants: tuple[str, ...]
    in_original: bool


IMPLEMENTATIONS: tuple[Implementation, ...] = (
    Implementation("go", "Go", "go-gin-mongo", ("faithful", "fair"), True),
    Implementation("dotnet", ".NET", "dotnet-mvc-mongo", ("faithful", "fair"), True),
    Implementation("rust", "Rust", "rust-rocket-mongo", ("faithful", "fair"), True),
    Implementation("python", "Python", "python-starlette-mongo", ("fair",), False),
    Implementation("node", "Node.js", "node-fastify-mongo", ("fair",), False),
)
VARIANTS: tuple[str, ...] = ("faithful", "fair")
#: condition name (= manifest endpoint) -> path, as the seed's two tables
CONDITIONS: dict[str, str] = {"helloWorld": "/helloWorld", "users": "/users/1"}
SEED_RATE_RPS: dict[str, int] = {"helloWorld": 100, "users": 10}
SEED_DURATION_S = 10.0
SEED_IN_FLIGHT = 100  # k6 preAllocatedVUs, maxVUs unset
#: the seed had none; 1 s at the trial's rate (100 and 10 requests at scale 1), recorded, not analysed
WARMUP_S = 1.0
#: The default design (``full=False``): (rate in requests/s, measured seconds) per condition:
#: ``/users/1`` at 4x the seed's rate (40/s; the faithful Rust variant's CPU per request, 6-16 ms,
#: keeps it below ~65% busy, so it does not queue), ``/helloWorld`` at the seed's 100/s, each for
#: 3 s (120 and 300 requests: the p50). Chosen by the planner (``budget_min``) on this kind of
#: machine: at 100 requests per trial (1 s and 2.5 s, the former default) one arm's p50
#: scattered so much from trial to trial that the rows' MDEs were 30-36%; the plan's 3 s trials
#: in 10 blocks decided 6 of 8 rows, the other two at MDEs of 7.6% and 9.6% (run
#: 20261205-040627-2dae; the next run of this default, 20261205-042144-5bd5, decided 5 of 8, the
#: rest at MDEs of 13.8-23.2%: docs/studies/01_rest_mongo.md, "Where the variance comes from").
DEFAULT_LOADS: dict[str, tuple[int, float]] = {"helloWorld": (100, 3.0), "users": (40, 3.0)}
#: The designs a notebook run takes its unset parameters from (:func:`benchlib.analysis.params.design_values`):
#: by default Go and Rust only (the original's languages that run here; .NET is reported not run)
#: in 10 blocks, one more than the fewest with which Holm over the family's 8 rows (4 contrasts x
#: 2 endpoints x p50) can reach p < 0.05 (8 x 2/2^9 = 0.031): at that floor a row is decided only
#: when all its blocks agree, and its MDE is 1.3 times the one at 10 blocks (the plan's); k6 in 2
#: of them (the first and the last, one before benchlib's load, one after); at full scale every
#: implementation, the seed's load in 10 blocks, k6 in every block.
DEFAULT_DESIGN: dict[str, Any] = {"trials": 10, "cross_check_blocks": 2, "warmup_s": 0.5, "extras": "no"}
FULL_DESIGN: dict[str, Any] = {"trials": 10, "cross_check_blocks": "all", "warmup_s": WARMUP_S, "extras": "yes"}
#: the implementations beyond the original's (Python, Node.js): in the full-scale design only, by default
EXTRA_KEYS: tuple[str, ...] = ("python", "node")
#: a trial the load generator's guard invalidates (the client could not keep the schedule) is run again,
#: at most twice: on a busy machine the late sends come from other processes on the client's CPU (the
#: load worker is 6-12% busy), not from the rate; at load 2-3 a repeat was valid 10 times in 16, and
#: at the 9-block floor every trial lost costs its rows their verdict, so the second repeat (about
#: 10 s there) stays (docs/studies/01_rest_mongo.md, "Time to a verdict")
REPEAT_INVALID = 2
#: FerretDB starts once per block and is shared by the block's trials (every arm, both
#: endpoints); before each later trial ``seed.py reset`` drops and re-seeds the collection (fresh
#: data, 0.2 s instead of a 0.5 s start with seeding). Every API still starts afresh per trial.
DEPENDENCIES = "block"
#: the pause between trials (benchlib's default 0.5 s is for sockets in TIME_WAIT to settle; every
#: trial here starts a new API on a new port, and its client uses one or two keep-alive connections)
BETWEEN_TRIALS_S = 0.25
LIMITS = Limits(cpus=1, memory_mb=512)
BASELINE = "go-fair"
METRICS: tuple[str, ...] = ("p50_ms", "p90_ms", "p99_ms")
QUESTIONS: dict[str, str] = {
    "language": "languages: fair variant vs Go fair",
    "implementation": "implementation: faithful vs fair, same language",
    "original": "the original's code: faithful vs Go faithful",
}


@dataclass(frozen=True, kw_only=True)
class Parameters(StudyParameters):
    """Study 01's parameters (its notebook's ``parameters`` cell).

    Attributes
    ----------
    sequential: stop a question at a planned look once settled (``auto``, ``yes``, ``no``).
    runtime: ``local`` (processes, limits through cgroups) or ``docker``.
    scale: multiplies the design's rates and seconds (requests per trial grow as its square).
    warmup_s: warm-up seconds before each measured phase; ``0``: the design's.
    variants: ``faithful``, ``fair`` (comma-separated).
    extras: ``yes``: also Python and Node.js; ``auto``: the design's.
    k6_check: k6 with the original script's shape beside benchlib on the faithful instances.
    cross_check_blocks: the blocks k6 runs in (a number, a fraction, ``all``); ``auto``: the design's.
    """

    sequential: Sequential = "auto"
    runtime: Runtime = "local"
    scale: float = 1.0
    warmup_s: float = 0.0
    variants: str = "faithful,fair"
    extras: str = "auto"
    k6_check: bool = True
    cross_check_blocks: str = "auto"

    DEFAULT_DESIGN: ClassVar[Mapping[str, Any]] = DEFAULT_DESIGN
    FULL_DESIGN: ClassVar[Mapping[str, Any]] = FULL_DESIGN


@dataclass(frozen=True, kw_only=True)
class Design(StudyDesign):
    """Study 01's design, with the facts its report needs: the variants and whether the extra
    rows run, the arms k6 checks and the sentence saying so."""

    variants: tuple[str, ...]
    extras: bool
    k6_arms: tuple[str, ...]
    k6_note: str


def design(p: Parameters) -> Design:
    """The arms of the chosen variants (the extra rows with ``extras``), both endpoints at
    ``scale`` with k6 beside benchlib (built here if missing), FerretDB shared per block, and
    the one family of three questions."""
    chosen = parse_variants(p.variants)
    extras = params.yes_no("extras", p.extras)
    arms = study_arms(chosen, extras=extras)
    k6_arms, k6_note = k6_setup(arms, chosen, p.k6_check)
    experiment = Experiment(
        study=STUDY, arms=arms, conditions=study_conditions(p.scale, k6_arms=k6_arms, warmup_s=p.warmup_s, full=p.full),
        trials=p.trials, seed=p.seed, runtime=p.runtime, cluster=p.cluster, limits=LIMITS,
        repeat_invalid=REPEAT_INVALID, dependencies=DEPENDENCIES, between_trials_s=BETWEEN_TRIALS_S,
        baseline=BASELINE if "fair" in chosen else "go-faithful", cross_check_blocks=p.cross_check_blocks)
    return Design(experiment=experiment, families=(family(chosen, extras=extras),), sequential=p.sequential,
                  requests=requests_per_trial(p.scale, full=p.full), reasons=short_reasons, one_table=True,
                  group_headings={c: f"`GET {path}`" for c, path in CONDITIONS.items()}, variants=chosen, extras=extras,
                  k6_arms=k6_arms, k6_note=k6_note)


def parse_variants(text: str | Sequence[str]) -> tuple[str, ...]:
    """``"faithful,fair"`` (or a list) as a tuple in the canonical order (see
    :func:`benchlib.analysis.params.choices` for the errors)."""
    return params.choices(text, VARIANTS, "variant(s)", canonical=True)


def study_arms(variants: Sequence[str] = VARIANTS, *, extras: bool = True) -> tuple[Arm, ...]:
    """Every implementation in every selected variant it has, in table order
    (``go-faithful``, ``go-fair``, ``dotnet-faithful``, ...); without ``extras``, the original's
    three only."""
    return tuple(Arm(f"{impl.key}-{v}", impl.service, v) for impl in IMPLEMENTATIONS for v in impl.variants
                 if v in variants and (extras or impl.key not in EXTRA_KEYS))


def scaled_load(condition: str, scale: float = 1.0, *, warmup_s: float = WARMUP_S, full: bool = True) -> LoadSpec:
    """The load for ``condition`` at ``scale``: open model, constant arrivals at
    ``round(rate x scale)`` per second (at least 1) for ``seconds x scale``, at most 100 in
    flight, keep-alive (k6's VUs keep their connections), ``warmup_s`` of warm-up first; rate
    and seconds are the seed's (10 s at 100/s and 10/s) with ``full``, else
    :data:`DEFAULT_LOADS`. Requests per trial therefore grow as ``scale**2``."""
    params.positive("scale", scale, "1.0 = the seed's size")
    if condition not in SEED_RATE_RPS:
        raise ParameterError(f"unknown condition {condition!r}; valid: {', '.join(SEED_RATE_RPS)}")
    base_rate, base_s = (SEED_RATE_RPS[condition], SEED_DURATION_S) if full else DEFAULT_LOADS[condition]
    rate = max(1, int(round(base_rate * scale)))
    return LoadSpec(model="open", arrival="constant", rate_rps=rate, duration_s=base_s * scale,
                    connections=SEED_IN_FLIGHT, warmup_s=warmup_s, keep_alive=True)


def study_conditions(scale: float = 1.0, *, k6_arms: Sequence[str] | None = None,
                     warmup_s: float = WARMUP_S, full: bool = True) -> tuple[Condition, ...]:
    """The two conditions, ``helloWorld`` and ``users``, each on its own endpoint; with
    ``k6_arms``, k6 runs the study's script at the same rate and duration on those arms'
    instances in every trial (before or after benchlib's load, alternating by block)."""
    out = []
    for name in CONDITIONS:
        load = scaled_load(name, scale, warmup_s=warmup_s, full=full)
        check = None
        if k6_arms:
            check = CrossCheck("k6", (("rate_rps", int(load.rate_rps or 1)), ("duration_s", float(load.duration_s or 0)),
                                      ("pre_allocated_vus", SEED_IN_FLIGHT)), arms=tuple(k6_arms))
        out.append(Condition(name, load, endpoint=name, cross_check=check))
    return tuple(out)


def family(variants: Sequence[str] = VARIANTS, *, extras: bool = True) -> Family:
    """The three questions as one family over both endpoints, for the selected variants
    (arms that cannot run here included: they are reported as not run)."""
    have = {a.name for a in study_arms(variants, extras=extras)}
    rows = [Contrast(BASELINE, f"{i.key}-fair", question="language") for i in IMPLEMENTATIONS if i.key != "go"]
    rows += [Contrast(f"{i.key}-fair", f"{i.key}-faithful", question="implementation") for i in IMPLEMENTATIONS]
    rows += [Contrast("go-faithful", f"{i.key}-faithful", question="original") for i in IMPLEMENTATIONS
             if i.in_original and i.key != "go"]
    return Family("study", tuple(c for c in rows if c.baseline in have and c.arm in have), METRICS,
                  conditions=tuple(CONDITIONS), questions=QUESTIONS)


def requests_per_trial(scale: float = 1.0, *, full: bool = True) -> dict[str, float]:
    """Measured requests per trial by condition (rate x seconds) at ``scale``, of the full or
    default loads: which percentiles a trial supports (for ``stopping_rule(requests=...)``)."""
    return {c: (load.rate_rps or 0) * (load.duration_s or 0)
            for c, load in ((c, scaled_load(c, scale, full=full)) for c in CONDITIONS)}


def planned_family(fam: Family, unavailable: Mapping[str, str], scale: float, *, full: bool = True) -> int:
    """Rows of the Holm family the design will produce at ``scale`` (of the full or default loads)."""
    return planned_rows(fam, requests_per_trial(scale, full=full), unavailable)


def short_reasons(unavailable: Mapping[str, str]) -> dict[str, str]:
    """Why each arm did not run, shortened for tables (the .NET SDK's install hint left out)."""
    return {a: "no .NET SDK (no `dotnet` on PATH)" if why.startswith("no dotnet toolchain") else why
            for a, why in unavailable.items()}


def percentile_support(scales: Sequence[float] = (0.2, 1.0, 2.0, 3.0, 5.0, 8.0), *,
                       current: float | None = None) -> pd.DataFrame:
    """Which latency percentiles a trial supports at each scale of the seed's load
    (:func:`benchlib.analysis.tables.percentile_support`), ``current`` among them, marked as
    this run's."""
    every = sorted({float(x) for x in scales} | ({float(current)} if current is not None else set()))
    loads = {f"{s:g}" + (" (this run)" if current is not None and s == current else ""):
             {c: scaled_load(c, s) for c in CONDITIONS} for s in every}
    return tables.percentile_support(loads, labels=CONDITIONS)


def default_design_markdown(p: Parameters) -> str:
    """What the default design's trials hold (rate, seconds, requests per endpoint), beside the
    seed's load the percentile table shows; "" at full scale (the seed's load itself)."""
    if p.full:
        return ""
    return ("This run uses the **default design** (`full=False`): " + ", ".join(
        f"`{CONDITIONS[c]}` at {ld.rate_rps}/s for {ld.duration_s:g} s ({int((ld.rate_rps or 0) * (ld.duration_s or 0)):,} "
        "requests)" for c, ld in ((c, scaled_load(c, p.scale, full=False)) for c in CONDITIONS))
            + " per trial; the table above is the seed's load at each scale (`full=True`).")


def k6_setup(arms: Sequence[Arm], variants: Sequence[str], enabled: bool = True) -> tuple[tuple[str, ...], str]:
    """Which arms k6 cross-checks, and a sentence saying so: the arms of the original's
    cells (Go, .NET, Rust) in their faithful variant (fair when only fair runs). k6 v0.50.0
    is built here, before any trial, if it is missing; when it cannot be, no arm is
    cross-checked and the sentence says why."""
    variant = "faithful" if "faithful" in variants else "fair"
    chosen = [a.name for a in arms if a.variant == variant and
              any(a.service == i.service and i.in_original for i in IMPLEMENTATIONS)]
    return peers.peer_setup("k6", chosen, enabled, flag="k6_check")


def k6_tables(result: Run) -> tuple[pd.DataFrame, pd.DataFrame]:
    """k6 beside benchlib (:mod:`benchlib.analysis.peers`), benchlib timed from the send time
    as k6 is: medians over the valid trials by k6's order, and one row per trial."""
    beside = peers.peer_beside(result, figures=("p50", "p95", "max"), since="sent", tool="k6")
    summary = peers.peer_summary(beside, by=("condition", "arm", "order"), main="p50")
    figs = [c for f in ("p50", "p95", "max") for c in (f"peer_{f}", f"bl_{f}")]
    return (peers.peer_view(summary, ["condition", "arm", "order", "peer_blocks", "trials", *figs, "p50_ratio"], "k6",
                            since="sent"),
            peers.peer_view(beside, ["condition", "arm", "block", "order", "status", "peer_error", "peer_requests",
                                     "peer_dropped", "peer_p50", "peer_p95", "peer_max", "bl_requests", "bl_p50",
                                     "bl_p95", "bl_max", "bl_p50_due", "p50_ratio"], "k6", since="sent", digits=None))


def original_vs_ours(run: Run, reference: pd.DataFrame) -> pd.DataFrame:
    """The seed's k6 table beside ours, for the same cells (endpoint x implementation):
    the original's single run; our k6 runs on the faithful services (median over trials);
    benchlib on the faithful and on the fair services (median over trials [interval, with
    its achieved level]),
    measured from the send time as k6's ``http_req_duration`` is. Percentiles a trial cannot
    support are "–"; arms not run here say why."""
    import pandas as pd

    from benchlib.stats.verdict import Verdict, render
    from benchlib.store.records.rows import figures

    cols = {"min": "min", "avg": "mean", "med": "p50", "max": "max", "p95": "p95", "p99": "p99"}
    ours: dict[tuple[str, str, str], list[dict[str, float]]] = {}
    for t in run.trials:
        if t.valid:
            f = figures(t.rows(), since="sent", quantiles=(0.5, 0.95, 0.99))
            ours.setdefault((t.condition, t.arm, "benchlib"), []).append({c: f[k] for c, k in cols.items()})
            if t.peer is not None and t.peer.ok:
                ours.setdefault((t.condition, t.arm, "k6"), []).append({c: t.peer.figure(k) for c, k in cols.items()})
    why = short_reasons(run.unavailable)
    rows = []
    for cond, path in CONDITIONS.items():
        for impl in IMPLEMENTATIONS:
            cell = {"endpoint": path, "implementation": impl.label}
            for _, r in reference[(reference["endpoint"] == path) & (reference["service"] == impl.service)].iterrows():
                rows.append({**cell, "source": "original: k6, one run", "trials": 1,
                             **{c: fmt.num(float(r[f"{c}_ms"])) for c in cols}})
            for variant in impl.variants:
                arm = f"{impl.key}-{variant}"
                if arm in why:
                    rows.append({**cell, "source": f"ours: {variant}", "trials": 0, "min": render(Verdict.not_run(why[arm]))})
                elif arm in run.arms:
                    for tool in ("k6", "benchlib"):
                        vals = ours.get((cond, arm, tool), [])
                        if tool == "benchlib" or vals:
                            rows.append({**cell, "source": f"ours: {variant}, {tool}", "trials": len(vals),
                                         **{c: tables.median_of_trials([v[c] for v in vals]).text
                                            for c in cols}})
    return pd.DataFrame(rows, columns=["endpoint", "implementation", "source", "trials", *cols]).fillna("")


def database_info(result: Run, *, timeout_s: float = 60.0) -> dict[str, Any]:
    """Which MongoDB server ran: ``services/ferretdb/seed.py info`` against one extra start of
    the arms' dependency (same runtime, same build), plus the version line of the FerretDB
    log of every FerretDB instance (one per block, or per trial in runs before
    :data:`DEPENDENCIES`). Stored as ``derived/database.json`` in the run folder (read from
    there on resume)."""
    from benchlib.run.cpus import plan_cpus
    from benchlib.runtime import StartOptions, get_runtime
    from benchlib.runtime.local import free_port
    from benchlib.runtime.manifest import get_manifest

    path = result.path / "derived" / "database.json"
    if path.exists():
        return dict(json.loads(path.read_text()))
    info: dict[str, Any] = {}
    try:
        manifest = get_manifest("ferretdb")
        svc = manifest.resolve()
        rt = get_runtime(result.require_experiment().runtime)
        deps_cpus = result.cpus.dependencies or plan_cpus().dependencies
        with rt.start(rt.prepare(svc), StartOptions(port=free_port(), cpus=deps_cpus, log_sink="discard",
                                                     run_id=result.run_id)) as h:
            out = subprocess.run([sys.executable, str(manifest.directory / "seed.py"), "info", "--host", h.host,
                                  "--port", str(h.port)], capture_output=True, text=True, timeout=timeout_s, check=False)
        if out.returncode == 0:
            info.update(json.loads(out.stdout))
        else:
            info["error"] = (out.stderr or out.stdout).strip()[-500:]
        info["variant"] = svc.variant
    except Exception as exc:  # noqa: BLE001 - provenance must not break the report; the reason is shown
        info["error"] = f"{type(exc).__name__}: {exc}"
    versions: Counter[str] = Counter()
    for log in sorted((result.path / "logs").rglob("*.ferretdb.log")):
        m = re.search(r"Starting FerretDB (v\d+(?:\.\d+)*)", log.read_text(errors="replace")[:20_000])
        versions[m.group(1) if m else "no version line"] += 1
    info["trial_logs"] = dict(versions)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(info, indent=1, sort_keys=True, default=str) + "\n")
    return info


def provenance_notes(run: Run, d: Design) -> list[str]:
    """The provenance's own lines: which MongoDB server ran (:func:`database_info`) and what k6
    cross-checked."""
    db = database_info(run)
    gone = sorted(set(d.k6_arms) & set(run.unavailable))
    return [f"- MongoDB server: {db.get('server', '?')} {db.get('ferretdb_version') or ''}, backend "
            f"{db.get('backend', '?')}, reports MongoDB {db.get('mongodb_compat_version', '?')}"
            + (f" ({db['error']})" if db.get("error") else "")
            + f"; FerretDB version line in the trials' logs: {db.get('trial_logs')}",
            f"- k6: {d.k6_note}" + (f" ({', '.join(gone)} not run)" if gone else "")]


# -- the conclusion ---------------------------------------------------------------------------

def conclusion_markdown(answer: Answer, reference: pd.DataFrame, variants: Sequence[str] = VARIANTS) -> str:
    """The conclusion in words, every sentence from a template of its rows' verdict kinds
    (:mod:`benchlib.analysis.conclusion`; median latency, p50): per endpoint, the original's
    ratio, ours with the original's code, the languages (fair vs fair) and the implementations
    (faithful vs fair), and the faithful ratio split into those factors when every row is decided."""
    if answer.comparison is None:
        return "_No comparison could be computed (fewer than two arms ran)._"
    lines = []
    labels = {i.key: i.label for i in IMPLEMENTATIONS}
    p50 = "median latency"
    for cond, path in CONDITIONS.items():
        def v(base: str, arm: str) -> Any:
            return answer.verdict(arm, "p50_ms", group=cond, baseline=base)  # noqa: B023 - called in this iteration

        lines.append(f"**`GET {path}`**, median latency (p50), exact 95% intervals:")
        ref = reference[reference["endpoint"] == path].set_index("service")
        r_orig, r_lang = v("go-faithful", "rust-faithful"), v(BASELINE, "rust-fair")
        r_rust, r_go = v("rust-fair", "rust-faithful"), v("go-fair", "go-faithful")
        if {"go-gin-mongo", "rust-rocket-mongo"} <= set(ref.index):
            rust, go = ref.loc["rust-rocket-mongo", "med_ms"], ref.loc["go-gin-mongo", "med_ms"]
            lines.append(f"- the original (one run each): Rust / Go medians {rust:g} / {go:g} ms. "
                         + say.whole_sentence("Its Rust/Go difference", r_orig, "Rust faithful", "Go faithful", p50))
        if "fair" in variants:
            lines.append("- **languages** (fair variants, vs Go fair): " + "; ".join(
                say.sentence(v(BASELINE, f"{k}-fair"), f"{labels[k]} fair", "Go fair", p50)
                for k in ("rust", "python", "node", "dotnet")))
        if set(variants) == set(VARIANTS):
            lines.append("- **implementation** (faithful / fair, same language: per-request clients, debug build, "
                         "per-request logs, bodies): " + "; ".join(
                             say.sentence(v(f"{k}-fair", f"{k}-faithful"), f"{labels[k]} faithful", f"{labels[k]} fair",
                                          p50) for k in ("go", "rust", "dotnet")))
            lines.append("- **in short**: " + say.factors_sentence(
                "the faithful Rust/Go ratio", r_orig,
                (("the languages/frameworks (Rust fair / Go fair)", r_lang, 1),
                 ("Rust's implementation (faithful / fair)", r_rust, 1),
                 ("Go's implementation (fair / faithful)", r_go, -1))))
        lines.append("")
    return "\n".join(lines)
