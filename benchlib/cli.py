"""The ``benchlib`` command: thin wrappers over the library functions notebooks use.

::

    benchlib run NOTEBOOK [-p NAME VALUE]... [--fail-on-regression PCT]
                                                 execute one notebook, export its HTML report
                                                 (reports/NOTEBOOK.html, kept as
                                                 reports/NOTEBOOK/RUN_ID.html with the run's
                                                 data) and refresh reports/index.html; with
                                                 --fail-on-regression (study 10_ab) status 1
                                                 when B regressed beyond PCT
    benchlib report [NOTEBOOK...] [-p NAME VALUE]...
                                                 every study notebook (or those named) to
                                                 reports/*.html plus reports/index.html
                                                 (reports already there stay listed)
    benchlib plan RUN [--target MDE]...          the design planner: a stored run as the pilot,
                                                 its variance components and the blocks and
                                                 seconds per trial a target MDE needs
    benchlib compare RUN_A RUN_B [--margin PCT] [--fail-on-regression PCT] [--json]
                                                 run B against run A of one study: per condition,
                                                 arm and metric the ratio B/A with its exact
                                                 interval and a verdict (benchlib.analysis.runcompare);
                                                 status 1 on a regression beyond the threshold
    benchlib --version                           benchlib's version (and git commit in a checkout)
    benchlib services                            the services, their variants and availability
    benchlib cleanup [--run-id ID] [--all]       remove benchlib's leftover containers, and kill
                                                 services whose benchlib process is gone
    benchlib images bootstrap                    create the base image locally (no registry)

Both end with a summary: each notebook's outcome and report, then one line per arm a run did
not run and why (a missing toolchain, a runtime that is not available such as Docker with no
engine, a failed build; read from the runs' stored ``run.json``). Arms not run are no failure:
the reports are written and show them, and the status is 0 when nothing else went wrong.
User errors print one line (``benchlib: error: ...``) and exit with status 2, also when the
bad input is found inside the notebook (a ``LoadSpecError``, ``ParameterError``, ... raised
there); a failed notebook exits with status 1 after its report (with the error) is written.

SIGINT (Ctrl-C), SIGTERM and SIGHUP take one path: the notebook's kernel stops its load and
its services, the trials stored so far are kept, and the command exits with status 128 + the
signal's number (130, 143, 129) after one line saying so (see :mod:`benchlib.publish.kernel_stop`).
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from typing import Any

from benchlib.core.errors import BenchlibError, UserError

__all__ = ["main"]


def _params(pairs: Sequence[Sequence[str]] | None) -> dict[str, Any]:
    return {name: value for name, value in (pairs or [])}


def _cmd_run(args: argparse.Namespace) -> int:
    from benchlib.publish.closing_summary import summary_lines
    from benchlib.publish.execute import run_notebook
    from benchlib.publish.index import write_index
    from benchlib.run.settle import settle_env

    parameters = _params(args.parameter)
    if args.fail_on_regression is not None:  # the gate of study 10_ab: its margin parameter
        parameters.setdefault("regression_pct", f"{100 * args.fail_on_regression:g}")
    with settle_env(args.settle, args.settle_max):  # the run waits for it after its builds
        run = run_notebook(args.notebook, parameters, reports_dir=args.reports_dir,
                           html=not args.no_html, show=None if args.quiet else print, with_raw=args.with_raw)
    print(f"executed: {run.executed}")
    if run.html:
        print(f"report:   {run.html}")
    if run.kept:
        print(f"kept:     {run.kept.html or run.kept.executed} (data: {', '.join(str(p) for p in run.kept.runs)})")
    if run.html:
        print(f"index:    {write_index([run], run.html.parent)}")
    print("\n".join(summary_lines([run])))
    if not run.ok:
        if run.user_error:
            print(f"benchlib: error: {run.notebook.stem}: {run.reason}", file=sys.stderr)
            return 2
        print(f"benchlib: {run.notebook.stem} failed: {run.reason}", file=sys.stderr)
        return 1
    return _gate_status(run.runs)


def _gate_status(runs: Sequence[Any]) -> int:
    """1 when a run the notebook made stored a failed regression gate (study ``10_ab``'s
    ``derived/gate.json``: B's whole interval beyond the margin in the worse direction), one
    line each; else 0."""
    from benchlib.analysis.studies.a_vs_b import read_gate

    status = 0
    for folder in runs:
        g = read_gate(folder)
        if g is not None and g.failed:
            print(f"benchlib: regression beyond {100 * g.margin:g}% on {', '.join(g.failed)} "
                  f"(run {folder}; derived/gate.json)", file=sys.stderr)
            status = 1
    return status


def _cmd_report(args: argparse.Namespace) -> int:
    from benchlib.publish.closing_summary import summary_lines
    from benchlib.publish.report import build_reports
    from benchlib.run.settle import settle_env

    with settle_env(args.settle, args.settle_max):  # each run waits for it after its builds
        runs = build_reports(args.notebooks or None, _params(args.parameter), reports_dir=args.reports_dir,
                             show=None if args.quiet else print, with_raw=args.with_raw)
    failed = [r for r in runs if not r.ok]
    if runs:
        print(f"index: {runs[0].executed.parent / 'index.html'}")
    print("\n".join(summary_lines(runs)))
    for r in failed:
        if r.user_error:
            print(f"benchlib: error: {r.notebook.stem}: {r.reason}", file=sys.stderr)
        else:
            print(f"benchlib: {r.notebook.stem} failed: {r.reason}", file=sys.stderr)
    status = 1 if any(not r.user_error for r in failed) else (2 if failed else 0)
    if args.publish:  # the site of the same reports folder (make report's last step)
        from benchlib.core.errors import BenchlibError

        args.out, args.runs = None, None
        try:
            _cmd_publish(args)
        except BenchlibError as e:
            print(f"benchlib: error: {e}", file=sys.stderr)
            return status or 2
    return status


def _cmd_publish(args: argparse.Namespace) -> int:
    from pathlib import Path

    from benchlib.publish.notebooks import project_root
    from benchlib.publish.site import build_site

    reports = Path(args.reports_dir) if args.reports_dir else project_root() / "reports"
    site = build_site(reports, args.out, runs_root=args.runs)
    print(f"site: {site.out / 'index.html'} ({len(site.pages)} pages, {site.size_bytes / 1e6:.1f} MB, "
          f"built in {site.seconds:.1f} s; relative links only: copy the folder anywhere)")
    return 0


def version_text() -> str:
    """``benchlib <version>``, plus ``(git <commit>[, modified])`` when benchlib is imported
    from a git checkout (:func:`benchlib.core.provenance.git_info`)."""
    from pathlib import Path

    import benchlib
    from benchlib.core.provenance import git_info

    text = f"benchlib {benchlib.__version__}"
    checkout = Path(benchlib.__file__).resolve().parent.parent
    if (checkout / ".git").exists():  # a checkout's own .git (a folder, or a file in a worktree)
        git = git_info(checkout)
        if git.get("sha"):
            text += f" (git {str(git['sha'])[:12]}{', modified' if git.get('dirty') else ''})"
    return text


class _VersionAction(argparse.Action):
    """``--version``: print :func:`version_text` (computed only when asked) and exit."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print benchlib's version (and git commit in a checkout) and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(version_text())
        parser.exit()


def _cmd_plan(args: argparse.Namespace) -> int:
    from benchlib.analysis.pilot import main as planner

    return planner(args.planner_args, prog="benchlib plan")


def percent(text: str) -> float:
    """A percentage as given on the command line (``5``, ``5%``, ``2.5%``) as a fraction (0.05)."""
    body = str(text).strip().removesuffix("%").strip()
    try:
        value = float(body)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage; give e.g. 5 or 5% (= 5%)") from None
    if not (0.0 <= value < 100.0):
        raise argparse.ArgumentTypeError(f"{text!r}: give a percentage in [0, 100), e.g. 5%")
    return value / 100.0


def _cmd_compare(args: argparse.Namespace) -> int:
    from benchlib.analysis.runcompare import compare_runs
    from benchlib.store.results import open_run

    def names(text: str | None) -> list[str] | None:
        return None if text is None else [x.strip() for x in text.split(",") if x.strip()]

    a, b = open_run(args.run_a, root=args.runs_dir), open_run(args.run_b, root=args.runs_dir)
    kw = {} if args.margin is None else {"margin": args.margin}
    if args.metrics:
        kw["metrics"] = names(args.metrics)
    result = compare_runs(a, b, arms=names(args.arms), conditions=names(args.conditions), allow=args.allow or (),
                          alpha=args.alpha, **kw)
    print(result.to_json() if args.json else result.to_text(only_significant=args.only_significant), end="")
    if args.fail_on_regression is None:
        return 0
    worse = result.regressions(args.fail_on_regression)
    for r in worse:
        v = r.verdict
        print(f"benchlib compare: regression beyond {100 * args.fail_on_regression:g}%: {r.condition}/{r.arm} "
              f"{r.metric} {v.estimate:.3f} [{v.ci_lo:.3f}, {v.ci_hi:.3f}] ({v.text})", file=sys.stderr)
    return 1 if worse else 0


def _cmd_services(args: argparse.Namespace) -> int:
    from benchlib.runtime import toolchains
    from benchlib.runtime.manifest import list_services

    services = list_services(args.services_dir)
    width = max((len(n) for n in services), default=10)
    for name, m in services.items():
        ok, why = toolchains.availability(m)
        status = "available" if ok else f"not runnable here: {why}"
        print(f"{name:<{width}}  {m.language:<7} {m.framework:<22} variants={','.join(m.variants):<18} {status}")
    return 0


def _cmd_cleanup(args: argparse.Namespace) -> int:
    from benchlib.runtime.cleanup import sweep

    print(sweep(run_id=args.run_id, all_owners=args.all, kill_orphans=True))
    return 0


def _cmd_images(args: argparse.Namespace) -> int:
    from benchlib.runtime.docker.images import bootstrap_base_image

    result = bootstrap_base_image(tag=args.tag) if args.tag else bootstrap_base_image()
    print(result)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (also used to document the CLI)."""
    parser = argparse.ArgumentParser(prog="benchlib", description="Reproducible, statistically rigorous "
                                     "web-service benchmarks as Jupyter notebooks.")
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def add_params(p: argparse.ArgumentParser) -> None:
        p.add_argument("-p", "--parameter", nargs=2, action="append", metavar=("NAME", "VALUE"),
                       help="set a notebook parameter (repeatable)")
        p.add_argument("--reports-dir", default=None, help="where executed notebooks and HTML go (default: reports/)")
        p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
        p.add_argument("--with-raw", action="store_true",
                       help="also keep the runs' per-request rows and logs beside their kept reports "
                            "(reports/<study>/<run_id>/trials/; a run's rows can weigh hundreds of MB)")
        p.add_argument("--settle", type=float, default=None, metavar="LOAD",
                       help="each run starts its first trial (after its builds) only when the 1-min load average "
                            "is below LOAD (e.g. 0.3: a reference run on a quiet machine); waits at most --settle-max s")
        p.add_argument("--settle-max", type=float, default=600.0, metavar="S",
                       help="the longest wait for --settle, in seconds (default 600); then it starts anyway")

    p_run = sub.add_parser("run", help="execute one notebook and export its HTML report")
    p_run.add_argument("notebook", help="notebook path, file name or stem (e.g. 00_quickstart)")
    add_params(p_run)
    p_run.add_argument("--no-html", action="store_true", help="skip the HTML export")
    p_run.add_argument("--fail-on-regression", type=percent, default=None, metavar="PCT",
                       help="study 10_ab: exit with status 1 when B's whole interval lies more than PCT beyond A's "
                            "in the worse direction on its gate_metrics (sets -p regression_pct), e.g. 5%%")
    p_run.set_defaults(func=_cmd_run)

    p_rep = sub.add_parser("report", help="execute study notebooks and export HTML reports plus an index")
    p_rep.add_argument("notebooks", nargs="*", help="notebooks to run (default: all study notebooks)")
    p_rep.add_argument("--publish", action="store_true", help="then build the site of every kept run in the same "
                       "reports folder (benchlib publish --reports-dir ...; make report does)")
    add_params(p_rep)
    p_rep.set_defaults(func=_cmd_report)

    # its arguments are the planner's own (benchlib.analysis.pilot, imported only when it runs): main() hands them on
    p_pub = sub.add_parser("publish", help="build the static site of every kept run (studies, history plots, "
                                          "runs, reports)")
    p_pub.add_argument("--reports-dir", default=None, help="where the kept runs are (default: reports/)")
    p_pub.add_argument("--out", default=None, help="the site's folder (default: <reports-dir>/site)")
    p_pub.add_argument("--runs", default=None, help="where the runs' trials are, for the latest-vs-previous "
                       "comparison (default: data/runs, or $BENCHLIB_DATA)")
    p_pub.set_defaults(func=_cmd_publish)

    p_plan = sub.add_parser("plan", add_help=False,
                            help="the design planner: blocks and seconds per trial for a target MDE, from a stored "
                                 "run (benchlib plan --help)")
    p_plan.add_argument("planner_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p_plan.set_defaults(func=_cmd_plan)

    p_cmp = sub.add_parser(
        "compare", help="run B against run A of one study: ratios with exact intervals and verdicts",
        description="Compare two stored runs of one study per condition, arm and metric: the ratio B/A with its "
                    "exact interval across the two runs' trials, Holm over the table, verdicts (faster/slower only "
                    "beyond the margin, equivalent, ~ with the MDE). Exit status: 0, or 1 with --fail-on-regression "
                    "when a row is decided slower beyond the threshold, 2 for bad input or runs that are not "
                    "comparable. Run-level effects (the machine that day) are not sampled by one run's trials: "
                    "the margin is how much of them you accept as noise.")
    p_cmp.add_argument("run_a", metavar="RUN_A", help="the baseline run: its folder, <study>/<run_id> or its run id")
    p_cmp.add_argument("run_b", metavar="RUN_B", help="the run compared with it")
    p_cmp.add_argument("--margin", type=percent, default=None, metavar="PCT",
                       help="practical margin in percent (default 5): differences within it are not called "
                            "faster/slower, and equivalence is tested against it")
    p_cmp.add_argument("--fail-on-regression", type=percent, default=None, metavar="PCT",
                       help="exit with status 1 when a row is decided slower (costlier, ...) with its whole interval "
                            "beyond this percentage, e.g. 5%%")
    p_cmp.add_argument("--only-significant", action="store_true", help="show only rows decided faster or slower")
    p_cmp.add_argument("--json", action="store_true", help="print the comparison as JSON instead of the table")
    p_cmp.add_argument("--metrics", default=None, help="summary columns, comma-separated (default p50_ms,p99_ms,"
                                                       "throughput_rps)")
    p_cmp.add_argument("--arms", default=None, help="compare only these arms (comma-separated; in both runs)")
    p_cmp.add_argument("--conditions", default=None, help="compare only these conditions (comma-separated)")
    p_cmp.add_argument("--allow", action="append", default=None, metavar="WHAT",
                       help="accept this difference as the change under test (repeatable): config (an arm's "
                            "variant, environment, log sink), toolchains (services' toolchain or package "
                            "versions), cpus (CPUs given to server and client)")
    p_cmp.add_argument("--alpha", type=float, default=0.05, help="level, Holm over the table (default 0.05)")
    p_cmp.add_argument("--runs-dir", default=None, help="where run ids are looked up (default data/runs)")
    p_cmp.set_defaults(func=_cmd_compare)

    p_svc = sub.add_parser("services", help="list the services under test and whether they can run here")
    p_svc.add_argument("--services-dir", default=None)
    p_svc.set_defaults(func=_cmd_services)

    p_clean = sub.add_parser("cleanup", help="remove containers left by earlier runs (by label)")
    p_clean.add_argument("--run-id", default=None, help="only this run's leftovers")
    p_clean.add_argument("--all", action="store_true",
                         help="also containers started from another machine or an earlier boot, and those of "
                              "benchlib processes still running")
    p_clean.set_defaults(func=_cmd_cleanup)

    p_img = sub.add_parser("images", help="manage the Docker base image")
    img_sub = p_img.add_subparsers(dest="images_command", metavar="ACTION")
    img_sub.required = True
    p_boot = img_sub.add_parser("bootstrap", help="create the base image locally when it cannot be pulled")
    p_boot.add_argument("--tag", default=None, help="image tag (default: debian:bookworm-slim; also debian:<suite>[-slim] "
                        "or rust:<version>-slim-<suite> from the host's Rust toolchain)")
    p_boot.set_defaults(func=_cmd_images)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``benchlib`` command; returns the exit status."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["plan"]:  # the planner parses its own arguments (options may come first)
        args = argparse.Namespace(func=_cmd_plan, planner_args=argv[1:])
    else:
        args = parser.parse_args(argv)
    try:
        status: int = args.func(args)
        return status
    except UserError as exc:
        print(f"benchlib: error: {exc}", file=sys.stderr)
        return 2
    except BenchlibError as exc:
        notes = getattr(exc, "__notes__", [])
        print(f"benchlib: error: {type(exc).__name__}: {exc}", file=sys.stderr)
        for note in notes:
            print(note, file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        from benchlib.core.signals import signal_name

        signum = int(getattr(exc, "signum", signal.SIGINT))
        print(f"benchlib: interrupted by {signal_name(signum)}; the load and the services were stopped, stored "
              "trials are kept (re-run with the same run_id to resume)", file=sys.stderr)
        return 128 + signum


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
