"""k6 v0.50.0, the load tool of study 01 (DotnetGoRustBenchmark): build it, run the study's
script shape, parse its summary.

The study ran ``k6 run --summary-trend-stats "min,avg,med,max,p(50),p(95),p(99)" script.js``
with one ``constant-arrival-rate`` scenario (``preAllocatedVUs: 100``, ``rate`` 100 or 10,
``duration: '10s'``, ``timeUnit`` left at ``1s``, ``maxVUs`` unset) whose function does one
``http.get(URL)`` and checks ``status === 200``. :func:`run_k6` writes that script for any
URL and rate, runs it pinned to the client's CPUs and returns the ``http_req_duration``
statistics in milliseconds, with the dropped iterations (arrivals k6 could not start because
every VU was busy)::

    from benchlib.loadgen.peers.k6 import run_k6
    res = run_k6("http://127.0.0.1:8080/helloWorld", rate_rps=100, duration_s=10, cpus=[0])
    res["http_req_duration_ms"]["p(99)"], res["dropped_iterations"]

k6 is not packaged for Debian: :func:`ensure_k6` builds it once with
``go install go.k6.io/k6@v0.50.0`` (``GOBIN`` in the cache, ``$BENCHLIB_CACHE/tools/``,
outside the clone; about 3 minutes cold on 2 cores) unless ``$BENCHLIB_K6`` or a ``k6`` on
``PATH`` already reports v0.50.0.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchlib.core import settings
from benchlib.core.errors import LoadGenError, ParameterError
from benchlib.loadgen.peers.common import check_url, ensure_go_tool, run_tool, tool_version_line

__all__ = [
    "K6_MODULE",
    "K6_VERSION",
    "STUDY_TREND_STATS",
    "ensure_k6",
    "k6_command",
    "k6_script",
    "k6_version",
    "parse_k6_summary",
    "run_k6",
]

K6_MODULE = "go.k6.io/k6"
K6_VERSION = "v0.50.0"
#: The study's ``--summary-trend-stats``.
STUDY_TREND_STATS = ("min", "avg", "med", "max", "p(50)", "p(95)", "p(99)")
_TREND_STAT = re.compile(r"min|max|avg|med|count|p\((\d+(\.\d+)?)\)")


def k6_version(binary: str | os.PathLike[str]) -> str | None:
    """The ``k6 version`` line of ``binary`` (e.g. ``k6 v0.50.0 (go1.26.8, linux/amd64)``), or ``None``."""
    return tool_version_line([str(binary), "version"])


def _is_pinned(binary: str | os.PathLike[str]) -> bool:
    v = k6_version(binary)
    return v is not None and v.split()[:2] == ["k6", K6_VERSION]


def ensure_k6(*, build: bool = True, timeout_s: float = 1800.0) -> Path:
    """The path of a k6 v0.50.0 binary, building it into the cache if needed.

    Looks at ``$BENCHLIB_K6``, then the cache (``$BENCHLIB_CACHE/tools/k6-v0.50.0/k6``),
    then ``k6`` on ``PATH``; any of them must report v0.50.0. Otherwise, with ``build``,
    runs ``go install go.k6.io/k6@v0.50.0`` with ``GOBIN`` in the cache (one build at a time,
    under a lock; see :func:`benchlib.loadgen.peers.common.ensure_go_tool`).

    Raises
    ------
    ParameterError     ``$BENCHLIB_K6`` names a file that is not k6 v0.50.0.
    ToolchainMissing   no k6 v0.50.0 and no ``go`` to build it (or ``build=False``).
    BuildError         ``go install`` failed (its output's tail attached).
    """
    return ensure_go_tool(name="k6", module=K6_MODULE, version=K6_VERSION, setting=settings.K6,
                          describe=k6_version, is_pinned=_is_pinned, build=build, timeout_s=timeout_s)


def k6_script(url: str, *, rate: int, duration_s: float = 10.0, pre_allocated_vus: int = 100,
              time_unit_s: float = 1.0, max_vus: int | None = None, expect_status: int = 200) -> str:
    """The study's ``k6/script.js`` for ``url``: one constant-arrival-rate scenario ``test``.

    Parameters
    ----------
    url: the URL every iteration GETs once.
    rate: iterations started per ``time_unit_s`` (the study: 100 for /helloWorld, 10 for /users/1).
    duration_s: scenario length in seconds (the study: 10).
    pre_allocated_vus: VUs allocated up front (the study: 100; ``maxVUs`` unset means no more).
    time_unit_s: k6's ``timeUnit`` in seconds (the study left the default, 1 s).
    max_vus: ``maxVUs``; ``None`` leaves it unset as the study did.
    expect_status: the ``check`` the study ran (``r.status === 200``).
    """
    if not isinstance(rate, int) or rate < 1:
        raise ParameterError(f"k6 rate must be a positive integer (iterations per time unit), got {rate!r}")
    if not duration_s > 0 or not time_unit_s > 0:
        raise ParameterError(f"duration_s and time_unit_s must be positive, got {duration_s!r}, {time_unit_s!r}")
    if pre_allocated_vus < 1 or (max_vus is not None and max_vus < pre_allocated_vus):
        raise ParameterError(f"need pre_allocated_vus >= 1 and max_vus >= pre_allocated_vus, "
                             f"got {pre_allocated_vus!r}, {max_vus!r}")
    scenario: dict[str, Any] = {
        "exec": "test",
        "executor": "constant-arrival-rate",
        "duration": f"{duration_s * 1000:g}ms",
        "preAllocatedVUs": pre_allocated_vus,
        "rate": rate,
        "timeUnit": f"{time_unit_s * 1000:g}ms",
    }
    if max_vus is not None:
        scenario["maxVUs"] = max_vus
    options = {"scenarios": {"test": scenario}}
    return (
        "import { check } from 'k6';\n"
        "import http from 'k6/http';\n\n"
        f"export const options = {json.dumps(options, indent=2)};\n\n"
        "export function test() {\n"
        f"  const res = http.get({json.dumps(url)});\n"
        "  check(res, {\n"
        f"    'is status {expect_status}': (r) => r.status === {expect_status},\n"
        "  });\n"
        "}\n"
    )


def k6_command(binary: str | os.PathLike[str], script: str | os.PathLike[str], summary_path: str | os.PathLike[str],
               *, trend_stats: Sequence[str] = STUDY_TREND_STATS) -> list[str]:
    """``k6 run --summary-trend-stats ... --summary-export FILE script.js`` (no REST API
    listener, no usage report, no colours)."""
    for stat in trend_stats:
        if not _TREND_STAT.fullmatch(stat):
            raise ParameterError(f"unknown k6 trend stat {stat!r}; valid: min, max, avg, med, count, p(N)")
    return [str(binary), "run", "--summary-trend-stats", ",".join(trend_stats), "--summary-export",
            str(summary_path), "--address", "", "--no-usage-report", "--no-color", str(script)]


def _metric(metrics: dict[str, Any], name: str) -> dict[str, Any]:
    m = metrics.get(name)
    if m is None:
        return {}
    return m.get("values", m) if isinstance(m, dict) else {}


def parse_k6_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """Parse a ``--summary-export`` JSON document.

    Returns
    -------
    dict with ``http_req_duration_ms`` (each trend stat in milliseconds, keyed as k6 names
    it: ``min``, ``avg``, ``med``, ``max``, ``p(50)``, ``p(95)``, ``p(99)``...),
    ``http_reqs`` (count), ``http_reqs_per_s``, ``iterations``, ``dropped_iterations``
    (0 when k6 reported none), ``checks_passed``, ``checks_failed``, ``http_req_failed_rate``
    and ``vus_max``.

    Raises
    ------
    LoadGenError  when the document has no ``http_req_duration`` (no request completed).
    """
    metrics = summary.get("metrics")
    if not isinstance(metrics, dict):
        raise LoadGenError("k6 summary has no 'metrics' object")
    duration = _metric(metrics, "http_req_duration")
    if not duration:
        raise LoadGenError("k6 summary has no http_req_duration metric: no request completed "
                           f"(metrics present: {', '.join(sorted(metrics)) or 'none'})")
    reqs = _metric(metrics, "http_reqs")
    checks = _metric(metrics, "checks")
    failed = _metric(metrics, "http_req_failed")
    return {
        "http_req_duration_ms": {k: float(v) for k, v in duration.items() if _TREND_STAT.fullmatch(k)},
        "http_reqs": int(reqs.get("count", 0)),
        "http_reqs_per_s": float(reqs.get("rate", 0.0)),
        "iterations": int(_metric(metrics, "iterations").get("count", 0)),
        "dropped_iterations": int(_metric(metrics, "dropped_iterations").get("count", 0)),
        "checks_passed": int(checks.get("passes", 0)),
        "checks_failed": int(checks.get("fails", 0)),
        "http_req_failed_rate": float(failed.get("value", failed.get("rate", 0.0))),
        "vus_max": int(_metric(metrics, "vus_max").get("value", _metric(metrics, "vus_max").get("max", 0))),
    }


def run_k6(
    url: str,
    *,
    rate_rps: int,
    duration_s: float = 10.0,
    pre_allocated_vus: int = 100,
    max_vus: int | None = None,
    cpus: Sequence[int] | None = None,
    trend_stats: Sequence[str] = STUDY_TREND_STATS,
    binary: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Run the study's k6 scenario against ``url`` and return :func:`parse_k6_summary`'s dict.

    ``rate_rps`` iterations per second (each one GET) for ``duration_s`` seconds with
    ``pre_allocated_vus`` VUs, pinned with ``taskset`` to ``cpus``. Adds ``command``,
    ``script``, ``k6_version``, ``wall_s``, ``cpu_s``, ``cpu_fraction`` (k6's own CPU use),
    ``stdout`` (k6's text summary) and ``offered`` (rate, duration, VUs).

    Raises
    ------
    LoadSpecError     for a non-loopback URL.
    ParameterError    for a bad rate, duration or VU count.
    ToolchainMissing  no k6 v0.50.0 and no Go to build it.
    LoadGenError      k6 failed, or its summary holds no request.
    """
    check_url(url)
    exe = Path(binary) if binary is not None else ensure_k6()
    script = k6_script(url, rate=rate_rps, duration_s=duration_s, pre_allocated_vus=pre_allocated_vus,
                       max_vus=max_vus)
    with tempfile.TemporaryDirectory(prefix="benchlib-k6-") as tmp:
        script_path = Path(tmp) / "script.js"
        summary_path = Path(tmp) / "summary.json"
        script_path.write_text(script)
        cmd = k6_command(exe, script_path, summary_path, trend_stats=trend_stats)
        run = run_tool(cmd, cpus=cpus, timeout_s=duration_s + 120)
        try:
            summary = json.loads(summary_path.read_text())
        except (OSError, ValueError) as exc:
            raise LoadGenError(f"k6 wrote no readable summary ({exc}):\n{run['stderr'][-2000:]}") from None
    out = parse_k6_summary(summary)
    out.update({
        "command": run["command"], "script": script, "k6_version": k6_version(exe), "wall_s": run["wall_s"],
        "cpu_s": run["cpu_s"], "cpu_fraction": run["cpu_fraction"], "stdout": run["stdout"],
        "offered": {"rate_rps": rate_rps, "duration_s": duration_s, "pre_allocated_vus": pre_allocated_vus,
                    "max_vus": max_vus, "expected_iterations": int(round(rate_rps * duration_s))},
    })
    return out
