"""Study 05, "gRPC vs JSON" (seed 004, peterdeme/Grpc.Json.PerformanceTest): what is its own
in ``notebooks/05_grpc_vs_json.ipynb``: the payloads, the arms, the loads, the questions,
the seed's numbers beside ours, and the conclusion. Everything generic comes from
:mod:`benchlib.analysis`.

Arms are named ``<language>-<protocol>-<payload>``: a language of :data:`LANGUAGES` (its
service folder), a protocol of :data:`PROTOCOLS` (``grpc``; ``json``: JSON over HTTP/1.1
keep-alive; ``h2c``: JSON over HTTP/2 with prior knowledge) and a payload of
:data:`PAYLOADS` (the seed's SmallRequest and HugeRequest). Conditions are the number of
concurrent callers (:data:`CONCURRENCY`): ``c1`` is the seed's one sequential caller.

The *cost arms* ``canned-<protocol>-<payload>`` (:func:`client_cost_arms`) send the same
calls over the same client path to :data:`CANNED_SERVICE`, which answers from memory with
go-grpc-json's response bytes: what benchlib's own client costs per call on each path, and
how much of each gRPC / JSON ratio it could explain (:mod:`benchlib.analysis.client_cost`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from benchlib.analysis import Answer, Contrast, Family, params
from benchlib.analysis import conclusion as say
from benchlib.analysis.client_cost import ClientPair
from benchlib.analysis.params import Runtime, Sequential, StudyParameters
from benchlib.analysis.planned import StudyDesign
from benchlib.core.errors import ParameterError
from benchlib.core.model import Arm, Condition, CrossCheck, Experiment, LoadSpec
from benchlib.runtime.manifest import find_services_dir

__all__ = [
    "CANNED", "CANNED_SERVICE", "CONCURRENCY", "FULL", "LANGUAGES", "NOT_OFFERED", "PAYLOADS", "PROTOCOLS",
    "Parameters", "SEED_RATIO", "STUDY", "VARIANTS", "arm_name", "client_cost_arms", "client_pairs", "client_paths",
    "conclusion_markdown", "design", "endpoint_of", "families", "ghz_arms", "h2load_arms", "original_vs_ours",
    "payload_file", "split_arm", "study_arms", "study_conditions", "with_microseconds",
]

STUDY = "05_grpc_vs_json"
#: language -> its service folder
LANGUAGES: dict[str, str] = {"go": "go-grpc-json", "rust": "rust-tonic-axum", "python": "python-grpcio-uvicorn",
                             "dotnet": "dotnet-grpc-json"}
PROTOCOLS: tuple[str, ...] = ("grpc", "json", "h2c")
PAYLOADS: tuple[str, ...] = ("small", "huge")
#: (language, protocol) -> the manifest variant serving it; absent: the framework does not offer it
VARIANTS: dict[tuple[str, str], str] = {
    **{(lang, "grpc"): "grpc" for lang in LANGUAGES}, **{(lang, "json"): "json" for lang in LANGUAGES},
    ("go", "h2c"): "json", ("rust", "h2c"): "json", ("dotnet", "h2c"): "json-h2c"}
CONCURRENCY: tuple[int, ...] = (1, 16, 64)
#: The seed's implied JSON / gRPC latency ratio per payload (613.5 / 138.7 and 964.1 / 277.9).
SEED_RATIO: dict[str, float] = {"small": 613.5 / 138.7, "huge": 964.1 / 277.9}
#: The full scale (``full=True`` in the notebook): these parameters replace the defaults.
FULL: dict[str, Any] = {"trials": 12, "duration_s": 3.0, "protocols": "grpc,json,h2c", "concurrency": "1,16,64",
                        "ghz_languages": "go,rust,python,dotnet", "h2load_languages": "go,rust,python,dotnet"}
#: Why a (language, protocol) pair has no arm.
NOT_OFFERED: dict[tuple[str, str], str] = {
    ("python", "h2c"): "uvicorn speaks HTTP/1.1 only (no HTTP/2)"}
#: The cost arms' first name part, and the server they call: go-grpc-json's response bytes
#: from memory, on every protocol (one variant, one port).
CANNED = "canned"
CANNED_SERVICE = "canned-grpc-json"
#: The pause between trials (s): benchlib's default 0.5 s is for sockets in TIME_WAIT to settle;
#: every trial here starts a new server on a new port, and one caller keeps one connection.
BETWEEN_TRIALS_S = 0.25
_PROTOCOL_WORDS = {"grpc": "gRPC", "json": "JSON over HTTP/1.1", "h2c": "JSON over h2c"}


def arm_name(language: str, protocol: str, payload: str) -> str:
    """``("go", "grpc", "small")`` -> ``"go-grpc-small"``."""
    return f"{language}-{protocol}-{payload}"


def split_arm(name: str) -> tuple[str, str, str]:
    """``"go-grpc-small"`` -> ``("go", "grpc", "small")``; anything else is one error line."""
    parts = tuple(name.split("-"))
    if len(parts) != 3 or parts[0] not in (*LANGUAGES, CANNED) or parts[1] not in PROTOCOLS or parts[2] not in PAYLOADS:
        raise ParameterError(f"{name!r} is not a study 05 arm name (<language>-<protocol>-<payload>, language in "
                             f"{[*LANGUAGES, CANNED]}, protocol in {list(PROTOCOLS)}, payload in {list(PAYLOADS)})")
    return parts  # type: ignore[return-value]


def endpoint_of(protocol: str, payload: str) -> str:
    """The manifest endpoint of a protocol and payload (``small-grpc``, ``huge-json``, ``small-h2c``)."""
    return f"{payload}-{protocol}"


def study_arms(languages: str | Sequence[str] = "go,rust,python,dotnet", protocols: str | Sequence[str] = "grpc,json",
               payloads: str | Sequence[str] = "small,huge") -> tuple[Arm, ...]:
    """Every offered (language, protocol, payload) of the lists (comma-separated), ordered by
    language, protocol, payload; a pair a framework does not offer (:data:`NOT_OFFERED`) is left out."""
    langs = params.choices(languages, tuple(LANGUAGES), "language(s)", canonical=True)
    protos = params.choices(protocols, PROTOCOLS, "protocol(s)", canonical=True)
    loads = params.choices(payloads, PAYLOADS, "payload(s)", canonical=True)
    return tuple(Arm(arm_name(lang, proto, pl), LANGUAGES[lang], VARIANTS[(lang, proto)],
                     endpoint=endpoint_of(proto, pl))
                 for lang in langs for proto in protos if (lang, proto) in VARIANTS for pl in loads)


def client_cost_arms(protocols: str | Sequence[str] = "grpc,json",
                     payloads: str | Sequence[str] = "small,huge") -> tuple[Arm, ...]:
    """The cost arms ``canned-<protocol>-<payload>``: the study's calls over each client path,
    answered from memory by :data:`CANNED_SERVICE` (the same request and response bytes)."""
    protos = params.choices(protocols, PROTOCOLS, "protocol(s)", canonical=True)
    loads = params.choices(payloads, PAYLOADS, "payload(s)", canonical=True)
    return tuple(Arm(arm_name(CANNED, proto, pl), CANNED_SERVICE, "canned", endpoint=endpoint_of(proto, pl))
                 for proto in protos for pl in loads)


def client_paths(arm_names: Sequence[str]) -> dict[str, str]:
    """The cost arms among ``arm_names``, each with its path in words (``"gRPC, small"``)."""
    out = {}
    for a in arm_names:
        lang, proto, pl = split_arm(a)
        if lang == CANNED:
            out[a] = f"{_PROTOCOL_WORDS[proto]}, {pl}"
    return out


def client_pairs(arm_names: Sequence[str], protocol: str = "json") -> list[ClientPair]:
    """gRPC / ``protocol`` per language and payload, where both arms and both cost arms ran."""
    have = set(arm_names)
    return [ClientPair(f"{lang} {pl}", arm_name(lang, "grpc", pl), arm_name(lang, protocol, pl),
                       arm_name(CANNED, "grpc", pl), arm_name(CANNED, protocol, pl))
            for lang in LANGUAGES for pl in PAYLOADS
            if {arm_name(x, p, pl) for x in (lang, CANNED) for p in ("grpc", protocol)} <= have]


def payload_file(payload: str, kind: str) -> bytes:
    """The seed's message as the services send it: ``kind`` is ``request.json``,
    ``request.bin`` (protobuf), ``response.json`` or ``response.bin``."""
    return (find_services_dir() / LANGUAGES["go"] / "payloads" / f"{payload}-{kind}").read_bytes()


# -- loads -------------------------------------------------------------------------------------

def study_conditions(concurrency: str | Sequence[int], duration_s: float, warmup_s: float, *,
                     ghz: Sequence[str] = (), h2load: Sequence[str] = ()) -> tuple[Condition, ...]:
    """One closed-loop condition per number of concurrent callers (``c1`` = the seed's one
    sequential caller): N callers, each on its own keep-alive connection sending its next call
    when the last answer is complete. ghz runs beside benchlib on the gRPC arms named in
    ``ghz`` (same instance, same trial: ``--connections N --concurrency N``, same duration),
    h2load on the JSON over HTTP/1.1 arms named in ``h2load`` (``--h1 -c N -t 1``, the
    endpoint's POST body and headers, same duration)."""
    text = concurrency if isinstance(concurrency, str) else ",".join(str(c) for c in concurrency)
    chosen = params.choices(text, [str(c) for c in CONCURRENCY], "concurrency", canonical=True)
    for tool, arms, proto, what in (("ghz", ghz, "grpc", "calls gRPC methods only; not gRPC arms"),
                                    ("h2load", h2load, "json", "stands beside the JSON over HTTP/1.1 arms only; "
                                     "not such arms")):
        wrong = [a for a in arms if split_arm(a)[1] != proto]
        if wrong:
            raise ParameterError(f"{tool} {what}: {', '.join(wrong)}")
    out = []
    for c in (int(x) for x in chosen):
        load = LoadSpec(model="closed", connections=c, duration_s=duration_s, warmup_s=warmup_s)
        checks = ((CrossCheck("ghz", (("connections", c), ("concurrency", c), ("duration_s", duration_s)),
                              arms=tuple(ghz)),) if ghz else ()) + \
                 ((CrossCheck("h2load", (("connections", c), ("threads", 1), ("duration_s", duration_s)),
                              arms=tuple(h2load)),) if h2load else ())
        out.append(Condition(f"c{c}", load, cross_check=checks[0] if len(checks) == 1 else checks or None))
    return tuple(out)


def ghz_arms(languages: str | Sequence[str], payloads: str | Sequence[str] = "small,huge") -> tuple[str, ...]:
    """The gRPC arms of ``languages`` (comma-separated; empty: none) for ghz to run beside."""
    if isinstance(languages, str) and not languages.strip():
        return ()
    return tuple(a.name for a in study_arms(languages, "grpc", payloads))


def h2load_arms(languages: str | Sequence[str], payloads: str | Sequence[str] = "small,huge") -> tuple[str, ...]:
    """The JSON over HTTP/1.1 arms of ``languages`` (comma-separated; empty: none) for h2load
    to run beside."""
    if isinstance(languages, str) and not languages.strip():
        return ()
    return tuple(a.name for a in study_arms(languages, "json", payloads))


def with_microseconds(summaries: Any) -> Any:
    """The summaries with ``p50_us``, ``p99_us`` and ``mean_us`` (the seed's unit) added."""
    from benchlib.stats.metrics import with_microseconds as add_us

    return add_us(summaries.drop(columns=[c for c in ("p50_us", "p99_us", "mean_us") if c in summaries.columns]),
                  ("p50_us", "p99_us", "mean_us"))


# -- the questions -----------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class Parameters(StudyParameters):
    """Study 05's parameters (its notebook's ``parameters`` cell); ``full`` sets :data:`FULL`.

    Attributes
    ----------
    runtime: ``local`` (processes) or ``docker``.
    duration_s, warmup_s: measured and warm-up seconds per trial (and per ghz or h2load run).
    languages, protocols, payloads, concurrency: the arms and conditions (comma-separated:
        :data:`LANGUAGES`, :data:`PROTOCOLS`, :data:`PAYLOADS`, :data:`CONCURRENCY`).
    ghz_languages, h2load_languages: the languages whose gRPC (ghz) or JSON over HTTP/1.1
        (h2load) arms the peer tool also loads (``""``: none).
    client_cost: also the cost arms (benchlib's own cost per call on each path).
    sequential: stop a question at a planned look once settled (``auto``, ``yes``, ``no``).
    """

    runtime: Runtime = "local"
    trials: int = 10
    duration_s: float = 0.8
    warmup_s: float = 0.3
    languages: str = "go,rust,python,dotnet"
    protocols: str = "grpc,json"
    payloads: str = "small,huge"
    concurrency: str = "1"
    ghz_languages: str = "go"
    h2load_languages: str = "go"
    client_cost: bool = True
    sequential: Sequential = "auto"
    seed: int = 5

    FULL_SCALE: ClassVar[Mapping[str, Any]] = FULL


def design(p: Parameters) -> StudyDesign:
    """Every language x protocol x payload arm (and the cost arms), one condition per number of
    callers (ghz and h2load beside benchlib on the chosen languages' arms), and the questions,
    compared on latencies in µs (:func:`with_microseconds`)."""
    arms = study_arms(p.languages, p.protocols, p.payloads) + (
        client_cost_arms(p.protocols, p.payloads) if p.client_cost else ())
    conditions = study_conditions(p.concurrency, p.duration_s, p.warmup_s, ghz=ghz_arms(p.ghz_languages, p.payloads),
                                  h2load=h2load_arms(p.h2load_languages, p.payloads))
    experiment = Experiment(study=STUDY, arms=arms, conditions=conditions, trials=p.trials, seed=p.seed,
                            between_trials_s=BETWEEN_TRIALS_S,
                            cross_check_blocks="all" if p.full else 3, runtime=p.runtime, cluster=p.cluster,
                            baseline=arms[0].name)
    return StudyDesign(experiment=experiment, families=tuple(families([a.name for a in arms],
                                                                      [c.name for c in conditions])),
                       sequential=p.sequential, prepare=with_microseconds)


def _pairs(have: set[str], base_proto: str, proto: str, conditions: Sequence[str],
           group: str = "{lang} {payload} {cond}") -> list[Contrast]:
    return [Contrast(arm_name(lang, base_proto, pl), arm_name(lang, proto, pl), cond,
                     group.format(lang=lang, payload=pl, cond=cond), base_proto, proto)
            for cond in conditions for lang in LANGUAGES for pl in PAYLOADS
            if {arm_name(lang, base_proto, pl), arm_name(lang, proto, pl)} <= have]


def families(arm_names: Sequence[str], conditions: Sequence[str]) -> list[Family]:
    """The study's questions, one Holm family each (absent arms and conditions left out).

    1. ``faithful``: the seed's setup, one sequential caller (``c1``): gRPC against JSON over
       HTTP/1.1, per language and payload; median latency per call (µs).
    2. ``fair``: the same pairs with 16 and 64 callers: requests/s, median latency and server
       CPU time per call.
    3. ``payload``: Huge against Small, per language and protocol, one caller: median latency.
    4. ``h2c``: JSON over HTTP/2 (h2c) against JSON over HTTP/1.1, per language and payload,
       at every concurrency: does HTTP/2 alone move JSON?
    """
    have, fams = set(arm_names), []
    many = [c for c in conditions if c != "c1"]
    if "c1" in conditions and (rows := _pairs(have, "json", "grpc", ["c1"], "{lang} {payload}")):
        fams.append(Family("faithful", tuple(rows), ("p50_us",), title="1. The seed's setup: one caller, sequential "
                           "calls", text="Is a gRPC call faster than the same call as JSON over HTTP/1.1, for each "
                           "payload and language, with one caller waiting for each answer (BenchmarkDotNet's "
                           "setup)? Baseline: JSON over HTTP/1.1."))
    if many and (rows := _pairs(have, "json", "grpc", many)):
        fams.append(Family("fair", tuple(rows), ("throughput_rps", "p50_us", "server_cpu_us_per_req"),
                           title="2. Under load: 16 and 64 concurrent callers", text="With many callers at once, "
                           "does gRPC serve more calls per second, answer faster and cost the server less CPU per "
                           "call than JSON over HTTP/1.1? Baseline: JSON over HTTP/1.1."))
    rows = [Contrast(arm_name(lang, proto, "small"), arm_name(lang, proto, "huge"), "c1", f"{lang} {proto}", "small",
                     "huge") for lang in LANGUAGES for proto in PROTOCOLS
            if {arm_name(lang, proto, "small"), arm_name(lang, proto, "huge")} <= have]
    if "c1" in conditions and rows:
        fams.append(Family("payload", tuple(rows), ("p50_us",), title="3. What the payload size costs",
                           text="How much longer does a Huge call (4.8 KB of JSON, 4.2 KB of protobuf) take than a "
                           "Small one (26 / 14 bytes), per language and protocol, with one caller? (Server CPU per "
                           "call is compared under load, question 2.) Baseline: Small."))
    if rows := _pairs(have, "json", "h2c", conditions):
        fams.append(Family("h2c", tuple(rows), ("p50_us", "server_cpu_us_per_req"), title="4. JSON over HTTP/2",
                           text="Does the same JSON call change when it travels over HTTP/2 (h2c, prior "
                           "knowledge) instead of HTTP/1.1? Baseline: HTTP/1.1."))
    return fams


# -- the seed's numbers beside ours ------------------------------------------------------------

_ORDER = {**{p: i for i, p in enumerate(PAYLOADS)}, **{p: i for i, p in enumerate(PROTOCOLS)}}


def original_vs_ours(reference: Any, summaries: Any, condition: str = "c1") -> Any:
    """The seed's four BenchmarkDotNet means (µs), then ours with one caller: for each arm the
    median over trials of the per-trial mean and median latency, and JSON / gRPC per payload."""
    import pandas as pd

    rows = [{"source": "seed (.NET Core 2.0, BenchmarkDotNet)", "language": "csharp (.NET Core 2.0)",
             "payload": r["payload"], "protocol": r["protocol"], "mean (µs)": r["mean_us"],
             "median (µs)": r["median_us"]} for _, r in reference.iterrows()]
    ok = summaries[(summaries["condition"] == condition) & summaries["valid"].astype(bool)
                   & ~summaries["arm"].str.startswith(f"{CANNED}-")]
    for arm, g in ok.groupby("arm", sort=False):
        lang, proto, pl = split_arm(str(arm))
        rows.append({"source": f"ours, one caller (median of {len(g)} trials)", "language": lang, "payload": pl,
                     "protocol": proto, "mean (µs)": g["mean_ms"].median() * 1e3,
                     "median (µs)": g["p50_ms"].median() * 1e3})
    df = pd.DataFrame(rows)
    ours = df.iloc[len(reference):].sort_values(["language", "payload", "protocol"],
                                                 key=lambda c: c.map(_ORDER.get).fillna(9) if c.name != "language"
                                                 else c.map(list(LANGUAGES).index))
    df = pd.concat([df.iloc[:len(reference)], ours], ignore_index=True)
    key = ["source", "language", "payload"]
    wide = df.pivot_table(index=key, columns="protocol", values="mean (µs)", sort=False)
    if {"grpc", "json"} <= set(wide.columns):
        ratio = (wide["json"] / wide["grpc"]).rename("JSON / gRPC (means)").reset_index()
        df = df.merge(ratio, on=key, how="left")
    return df


# -- the conclusion ----------------------------------------------------------------------------

def _holds(v: Any, seed_ratio: float) -> str:
    """Whether the seed's JSON / gRPC ratio lies in our interval (the verdict's is gRPC / JSON)."""
    lo, hi = 1 / v.ci_hi if v.ci_hi > 0 else math.inf, 1 / v.ci_lo if v.ci_lo > 0 else math.inf
    iv = "our interval" if v.between_run_variance_estimated else "our within-run interval"
    if lo <= seed_ratio <= hi:
        return f"the seed's {seed_ratio:.1f}× lies inside {iv}"
    return f"the seed's {seed_ratio:.1f}× is {'above' if seed_ratio > hi else 'below'} {iv}"


def conclusion_markdown(answers: Mapping[str, Answer], languages: Sequence[str]) -> str:
    """The answers in words, every figure from this run's typed verdicts."""
    out: list[str] = []
    f = answers.get("faithful")
    if f is not None:
        out += ["**Is gRPC faster, one caller at a time (the seed's setup)?** JSON / gRPC latency per call "
                "(median of the calls in a trial, µs), per language and payload:", ""]
        for lang in languages:
            for pl in PAYLOADS:
                v = f.verdict("grpc", "p50_us", group=f"{lang} {pl}")
                if v is None:
                    continue
                if say.decided(v):
                    out.append(f"- **{lang}, {pl}**: a JSON call took **{say.inverse(v)}** a gRPC call's time "
                               f"({say.p_text(v)}; {say.says(v, 'gRPC', 'JSON', latency=True)}); {_holds(v, SEED_RATIO[pl])}.")
                else:
                    out.append(f"- **{lang}, {pl}**: {say.sentence(v, 'gRPC', 'JSON')}.")
        out.append("")
    if (fair := answers.get("fair")) is not None:
        out += ["**Under load** (gRPC / JSON requests per second; server CPU time per call):", ""]
        for c in fair.family.rows():
            r, cpu = (fair.verdict("grpc", m, group=str(c.group)) for m in ("throughput_rps", "server_cpu_us_per_req"))
            if r is not None:
                out.append(f"- **{c.group}**: {say.sentence(r, 'gRPC', 'JSON', 'calls per second')}"
                           + (f"; {say.sentence(cpu, 'gRPC', 'JSON', 'server CPU per call')}." if cpu is not None else "."))
        out.append("")
    if (pay := answers.get("payload")) is not None:
        bits = [f"{c.group}: {say.sentence(v, 'Huge', 'Small')}" for c in pay.family.rows()
                if (v := pay.verdict("huge", "p50_us", group=str(c.group))) is not None]
        if bits:
            out += ["**The payload size**, Huge calls against Small ones: " + "; ".join(bits) + ".", ""]
    if (h2 := answers.get("h2c")) is not None:
        bits = [f"{c.group}: {say.sentence(v, 'h2c', 'HTTP/1.1')}" for c in h2.family.rows()
                if (v := h2.verdict("h2c", "p50_us", group=str(c.group))) is not None]
        if bits:
            out += ["**JSON over HTTP/2**, h2c against HTTP/1.1: " + "; ".join(bits) + ".", ""]
    return "\n".join(out).strip() or "_Too few arms ran to answer the study's questions (see the status table)._"
