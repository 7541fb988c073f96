"""Study 10, your own A against B: any two services (images in the local Docker engine, or
commands), one request, one verdict, and a regression gate (``docs/ab.md``).

The two sides are services generated from the notebook's parameters
(:mod:`benchlib.runtime.adhoc`: nothing under ``services/`` is written); each is started once
and its first answer checked before anything is measured (``check_first``). Side by side by
default where the load allows it (HTTP/1.1 bounded by time; the design section says which
design ran). The questions: B against A on p50, p90, p99, throughput, server CPU per request
and error rate (one Holm family, ``derived/comparison.json``); a claimed ratio tested at its own
size (``claim``); and the gate (``regression_pct``): B regressed when, on a metric of
``gate_metrics``, B's whole interval lies more than the margin beyond A in the worse direction
(``derived/gate.json``, which ``benchlib run --fail-on-regression`` reads for its exit status).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

from benchlib.analysis import conclusion as say
from benchlib.analysis import params
from benchlib.analysis.params import Sequential, StudyParameters
from benchlib.analysis.planned import StudyDesign
from benchlib.analysis.questions import Answer, Family
from benchlib.core.errors import ParameterError
from benchlib.core.model import Arm, Condition, Experiment, LoadSpec
from benchlib.runtime.adhoc import Expect, ImageFacts, Request, Side, first_answer, local_image, write_service
from benchlib.stats.claim import ClaimResult
from benchlib.stats.verdict import Verdict

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from benchlib.analysis.notebook import StudyRun

__all__ = ["CLAIM_METRICS", "CONDITION", "GATE_FILE", "METRICS", "STUDY", "AbDesign", "Gate", "Parameters", "claim_markdown",
           "claim_result", "conclusion_markdown", "design", "gate", "gate_markdown", "read_gate", "regressed",
           "show_outcome", "sides_markdown"]

STUDY = "10_ab"
#: the one load condition's name
CONDITION = "load"
#: every metric of the verdict table
METRICS: tuple[str, ...] = ("p50_ms", "p90_ms", "p99_ms", "throughput_rps", "server_cpu_us_per_req", "error_rate")
#: the metrics a claimed ratio may name (the ratios: not the error rate, a difference)
CLAIM_METRICS: tuple[str, ...] = METRICS[:-1]
#: the gate's verdict, in the run folder
GATE_FILE = "derived/gate.json"
_WORDS = {"p50_ms": "median latency", "p90_ms": "p90 latency", "p99_ms": "p99 latency",
          "throughput_rps": "requests per second", "server_cpu_us_per_req": "server CPU per request",
          "error_rate": "error rate"}

Protocol = Literal["http1", "h2c", "grpc"]
Model = Literal["closed", "open"]


@dataclass(frozen=True, kw_only=True)
class Parameters(StudyParameters):
    """The notebook's parameters (its ``parameters`` cell; ``docs/ab.md`` explains each).

    Attributes
    ----------
    a_image, b_image: an image in the local Docker engine (``name:tag`` or id); or
    a_command, b_command: a command run here (``{port}``, ``{python}`` filled in).
    a_label, b_label: the sides' names in the report.
    a_port, b_port: a port the side always listens on; ``0``: it reads ``*_port_env``.
    a_port_env, b_port_env: the environment variable a side reads its port from.
    a_env, b_env: extra environment variables, ``NAME=VALUE,NAME2=VALUE``.
    method, path, headers (``Name: value; Name2: value``), body, body_file: the request (gRPC:
        ``path`` ``/package.Service/Method``, ``body_file`` the serialized message).
    protocol: ``http1``, ``h2c`` or ``grpc``.
    expect_status, expect_body (a substring), expect_json (``field=value,a.b=1``): a correct answer.
    model: ``closed`` (``connections`` keep-alive connections) or ``open`` (``rate_rps`` arrivals/s).
    duration_s, warmup_s: measured and warm-up seconds per trial; ``0``: the design's.
    claim: a claimed ratio B/A on ``claim_metric`` (``0``: none), tested at its size.
    regression_pct: the gate's margin in percent (``0``: no gate); gate_metrics: its metrics.
    aa: allow the same service on both sides (an A/A run: how often the gate fires on nothing).
    check_first: start each side once and check its first answer before measuring.
    ready_timeout_s: seconds a side may take to accept connections after its start.
    """

    a_image: str = ""
    b_image: str = ""
    a_command: str = ""
    b_command: str = ""
    a_label: str = "A"
    b_label: str = "B"
    a_port: int = 0
    b_port: int = 0
    a_port_env: str = "PORT"
    b_port_env: str = "PORT"
    a_env: str = ""
    b_env: str = ""
    method: str = "GET"
    path: str = "/"
    headers: str = ""
    body: str = ""
    body_file: str = ""
    protocol: Protocol = "http1"
    expect_status: int = 200
    expect_body: str = ""
    expect_json: str = ""
    model: Model = "closed"
    connections: int = 16
    rate_rps: float = 0.0
    duration_s: float = 0.0
    warmup_s: float = 0.0
    claim: float = 0.0
    claim_metric: str = "throughput_rps"
    regression_pct: float = 0.0
    gate_metrics: str = "p50_ms,p99_ms,throughput_rps"
    aa: bool = False
    check_first: bool = True
    ready_timeout_s: float = 30.0
    sequential: Sequential = "auto"

    #: 10 blocks of 2 s after 1 s of warm-up: about a minute side by side (docs/ab.md)
    DEFAULT_DESIGN: ClassVar[Mapping[str, Any]] = {"trials": 10, "duration_s": 2.0, "warmup_s": 1.0}
    FULL_DESIGN: ClassVar[Mapping[str, Any]] = {"trials": 20, "duration_s": 10.0, "warmup_s": 2.0}
    #: parameters with which the design builds without a Docker engine or starting anything
    #: (the registry's tests)
    EXAMPLE: ClassVar[Mapping[str, Any]] = {"a_command": "{python} -m http.server {port}",
                                            "b_command": "{python} -m http.server --bind 127.0.0.1 {port}",
                                            "check_first": False}


@dataclass(frozen=True)
class AbDesign(StudyDesign):
    """The study's design with what its report says of the sides: each :class:`Side`, its
    generated service's name and, for an image, the local engine's facts of it."""

    sides: tuple[Side, ...] = ()
    services: tuple[str, ...] = ()
    images: tuple[ImageFacts | None, ...] = ()


def _pairs(name: str, text: str, sep: str, between: str) -> tuple[tuple[str, str], ...]:
    """``"A=1,B=2"`` -> ``(("A", "1"), ("B", "2"))`` (one error line for an item without ``between``)."""
    out = []
    for item in (s.strip() for s in text.split(sep)):
        if not item:
            continue
        key, found, value = item.partition(between)
        if not found or not key.strip():
            raise ParameterError(f"{name} item {item!r} is not valid; valid: NAME{between}VALUE items separated by "
                                 f"{sep!r}")
        out.append((key.strip(), value.strip()))
    return tuple(out)


def _json_value(text: str) -> str | int | float | bool:
    """``1`` -> 1, ``true`` -> True, ``"x"`` -> "x", anything else as text."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, (str, int, float, bool)) else text


def _request(p: Parameters) -> Request:
    if p.body and p.body_file:
        raise ParameterError("give body or body_file, not both")
    body = p.body.encode()
    if p.body_file:
        try:
            body = Path(p.body_file).expanduser().read_bytes()
        except OSError as exc:
            raise ParameterError(f"body_file {p.body_file!r} cannot be read: {exc.strerror}") from None
    if p.protocol == "grpc" and not p.body_file:
        raise ParameterError("protocol grpc needs body_file: the serialized request message")
    method = "POST" if p.protocol == "grpc" else p.method.upper()
    return Request(method, p.path, _pairs("headers", p.headers, ";", ":"), body, p.protocol)


def _side(p: Parameters, x: str) -> Side:
    """Side ``x`` (``a`` or ``b``) from its ``x_*`` parameters."""
    def get(name: str) -> Any:
        return getattr(p, f"{x}_{name}")

    return Side(get("label"), get("image").strip(), get("command").strip(), get("port"), get("port_env"),
                _pairs(f"{x}_env", get("env"), ",", "="), p.ready_timeout_s)


def _load(p: Parameters) -> LoadSpec:
    if p.model == "open":
        rate = params.positive("rate_rps", p.rate_rps, "arrivals per second of the open model")
        return LoadSpec(model="open", rate_rps=rate, connections=max(p.connections, 1), duration_s=p.duration_s,
                        warmup_s=p.warmup_s, protocol=p.protocol)
    return LoadSpec(model="closed", connections=p.connections, duration_s=p.duration_s, warmup_s=p.warmup_s,
                    protocol=p.protocol)


def design(p: Parameters) -> AbDesign:
    """The two sides as generated services, checked (images present here, each side's first
    answer), one load, every metric of B against A in one family.

    Raises
    ------
    ParameterError  one line: a side given twice or not at all, an image not in the local
        engine, both sides on one fixed port side by side, the same service on both sides
        without ``aa``, a side that does not start or answers wrongly, a bad request or load.
    """
    sides = (_side(p, "a"), _side(p, "b"))
    a, b = sides
    if a.label == b.label:
        raise ParameterError(f"a_label and b_label are both {a.label!r}; give the sides different names")
    if a.port and a.port == b.port and p.side_by_side != "no":
        raise ParameterError(f"a_port and b_port are both {a.port}: the sides cannot listen at once (side by side); "
                             "let one take its port from the environment (its *_port 0 and *_port_env), or run them "
                             "one after the other with side_by_side no")
    request = _request(p)
    expect = Expect(p.expect_status, p.expect_body, tuple((k, _json_value(v)) for k, v in
                                                           _pairs("expect_json", p.expect_json, ",", "=")))
    images = tuple(local_image(s.image, s.label) if s.image else None for s in sides)
    what = [(img.id if img is not None else s.command, s.port, s.port_env, s.env) for s, img in zip(sides, images)]
    if what[0] == what[1] and not p.aa:
        same = f"image {images[0].id[:19]}" if images[0] is not None else a.what
        raise ParameterError(f"both sides are the same {same}: with aa True an A/A run measures how often "
                             "the gate fires on no difference; otherwise give B another image or command")
    services = tuple(write_service(s, request, expect, image=img) for s, img in zip(sides, images))
    metrics = params.choices(p.gate_metrics, METRICS, "gate metric(s)")
    if p.claim:  # the claim's ratio and metric checked now, by the code that tests it after the run
        params.choices(p.claim_metric, CLAIM_METRICS, "claim metric")
        from benchlib.stats.claim import ClaimData, answer_claims

        answer_claims([ClaimData("claim", p.claim, np.empty(0), np.empty(0))])
    load = _load(p)
    if p.check_first:
        for s, name in zip(sides, services):
            first_answer(name, s.runtime, s.label)
    arms = tuple(Arm(s.label, name, runtime=s.runtime) for s, name in zip(sides, services))
    experiment = Experiment(study=STUDY, arms=arms, conditions=(Condition(CONDITION, load),), trials=p.trials,
                            seed=p.seed, runtime=a.runtime, cluster=p.cluster, baseline=a.label)
    family = Family.against("ab", a.label, [a.label, b.label], conditions=[CONDITION], metrics=METRICS,
                            title=f"{b.label} against {a.label}")
    del metrics  # checked here; the gate reads them again from the parameters
    return AbDesign(experiment=experiment, families=(family,), sequential=p.sequential, one_table=True,
                    sides=sides, services=services, images=images)


# -- the report's own parts ------------------------------------------------------------------

def sides_markdown(d: AbDesign) -> str:
    """One line per side: its label, what it is and, for an image, its id and repository digests."""
    out = []
    for s, img in zip(d.sides, d.images):
        facts = ""
        if img is not None:
            digests = ", ".join(f"`{x}`" for x in img.repo_digests) or "none (built or loaded here, never pushed)"
            facts = f"; image id `{img.id}`, created {img.created or '?'}; repository digests: {digests}"
        port = f"port {s.port} (fixed)" if s.port else f"its port from ${s.port_env}"
        env = f"; environment {', '.join(f'{k}={v}' for k, v in s.env)}" if s.env else ""
        out.append(f"- **{s.label}**: {s.what} ({s.runtime} runtime, {port}{env}){facts}")
    return "\n".join(out)


def _words(metric: str) -> str:
    return _WORDS.get(metric, metric)


def conclusion_markdown(answer: Answer, a: str, b: str) -> str:
    """One sentence per metric, by its verdict kind's template (B against A)."""
    return "\n".join(f"- {say.sentence(answer.verdict(b, m, group=CONDITION), b, a, _words(m))}" for m in METRICS)


def regressed(v: Verdict | None, margin: float) -> bool:
    """Whether ``v`` (B against A) is a regression the gate fails on: its whole interval lies
    more than ``margin`` (relative, 0.05 = 5%) beyond A in the metric's worse direction (an
    error rate, a difference of fractions: more than ``margin``, 0.05 = 5 percentage points). An interval that is
    unbounded (too few blocks) never fails; the interval is the verdict table's, so the gate's
    false-alarm rate at a design is that of one exact interval per metric (``docs/ab.md``)."""
    if v is None or not (math.isfinite(v.ci_lo) and math.isfinite(v.ci_hi)):
        return False
    if v.effect != "ratio":
        return v.ci_lo > margin if v.better == "lower" else v.ci_hi < -margin
    return v.ci_lo > 1.0 + margin if v.better == "lower" else v.ci_hi < 1.0 / (1.0 + margin)


@dataclass(frozen=True)
class Gate:
    """The regression gate's verdict: ``margin`` (relative), the ``metrics`` it looked at and
    those on which B regressed (``failed``); ``checked`` False when no margin was given."""

    margin: float
    metrics: tuple[str, ...]
    failed: tuple[str, ...]
    checked: bool = True

    @property
    def passed(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict[str, Any]:
        return {"margin": self.margin, "metrics": list(self.metrics), "failed": list(self.failed),
                "checked": self.checked, "passed": self.passed}


def gate(answer: Answer, b: str, margin_pct: float, metrics: str, run_dir: Path | None = None) -> Gate:
    """The gate on ``answer`` (B's rows) at ``margin_pct`` percent over ``metrics``
    (comma-separated); stored as ``derived/gate.json`` in ``run_dir`` when given."""
    names = params.choices(metrics, METRICS, "gate metric(s)")
    checked = bool(margin_pct)
    margin = params.positive("regression_pct", margin_pct, "percent; 0: no gate") / 100.0 if checked else 0.0
    failed = tuple(m for m in names if checked and regressed(answer.verdict(b, m, group=CONDITION), margin))
    result = Gate(margin, names, failed, checked)
    if run_dir is not None:
        path = Path(run_dir) / GATE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result.to_dict(), indent=1) + "\n")
    return result


def read_gate(run_dir: Path) -> Gate | None:
    """The gate a run stored (``None``: none stored)."""
    path = Path(run_dir) / GATE_FILE
    if not path.is_file():
        return None
    d = json.loads(path.read_text())
    return Gate(float(d["margin"]), tuple(d["metrics"]), tuple(d["failed"]), bool(d.get("checked", True)))


def gate_markdown(g: Gate, answer: Answer, a: str, b: str) -> str:
    """The gate in words (its rows' intervals from ``answer``)."""
    if not g.checked:
        return (f"No regression gate (regression_pct 0). With `-p regression_pct 5` (or `benchlib run ... "
                f"--fail-on-regression 5%`) the run fails when {b}'s whole interval lies more than 5% beyond "
                f"{a}'s in the worse direction on {', '.join(g.metrics)}.")
    rows = []
    for m in g.metrics:
        v = answer.verdict(b, m, group=CONDITION)
        where = f"{v.estimate:.3f} [{v.ci_lo:.3f}, {v.ci_hi:.3f}]" if v is not None and math.isfinite(v.estimate) \
            else "not compared"
        rows.append(f"{m} {where}: **{'regressed' if m in g.failed else 'passes'}**")
    head = (f"**Regression gate: {'FAILED' if g.failed else 'passed'}** (margin {100 * g.margin:g}%: a metric "
            f"fails when {b}'s whole interval lies beyond the margin in the worse direction; ratios {b}/{a}): ")
    return head + "; ".join(rows) + "."


def claim_result(summaries: pd.DataFrame, a: str, b: str, claimed: float, metric: str) -> ClaimResult:
    """The claimed ratio B/A on ``metric`` tested at its own size (blocks paired, valid trials)."""
    from benchlib.stats.claim import ClaimData, answer_claims

    s = summaries[summaries["valid"].astype(bool) & (summaries["condition"] == CONDITION)]
    wide = s.pivot_table(index="block", columns="arm", values=metric, aggfunc="first").dropna()
    num = np.log(wide[b].to_numpy(float)) if b in wide else np.empty(0)  # ClaimData: log per-trial values
    den = np.log(wide[a].to_numpy(float)) if a in wide else np.empty(0)
    return answer_claims([ClaimData(f"{b}/{a} {metric}", claimed, num, den)])[0]


def claim_markdown(r: ClaimResult, a: str, b: str, metric: str) -> str:
    """The claim's row in words: the claimed ratio, the ratio measured with its interval, the outcome."""
    if not math.isfinite(r.ratio):
        return f"Claim {b}/{a} = {r.claimed:g} on {_words(metric)}: **{r.outcome.value}** ({r.n} blocks)."
    mde = f"{100 * r.mde_vs_claim:.0f}%" if math.isfinite(r.mde_vs_claim) else "none at this design"
    tail = f"; the design's MDE against the claim: {mde}" if not r.decided else ""
    return (f"Claim {b}/{a} = {r.claimed:g} on {_words(metric)} (holds from {r.boundary:.3g}): measured "
            f"{r.ratio:.3f} [{r.lo:.3f}, {r.hi:.3f}] over {r.n} blocks, p = {r.p:.3g}: **{r.outcome.value}**{tail}.")


def show_outcome(study: StudyRun[Parameters, AbDesign]) -> None:
    """The study's own sections after the verdicts: the claim (when one was given), the gate
    (stored as ``derived/gate.json``) and the conclusion in words."""
    from benchlib.analysis.display import show

    p, d = study.parameters, study.design
    a, b = d.sides[0].label, d.sides[1].label
    answer = study.answer()
    if p.claim:
        show(claim_markdown(claim_result(study.summaries, a, b, p.claim, p.claim_metric), a, b, p.claim_metric))
    g = gate(answer, b, p.regression_pct, p.gate_metrics, Path(study.run.store.path))
    show(gate_markdown(g, answer, a, b))
    show(conclusion_markdown(answer, a, b))
