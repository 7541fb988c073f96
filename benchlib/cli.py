"""The ``benchlib`` command: thin wrappers over the library functions notebooks use.

::

    benchlib run NOTEBOOK [-p NAME VALUE]...     execute one notebook, export its HTML report
                                                 (reports/NOTEBOOK.html, kept as
                                                 reports/NOTEBOOK/RUN_ID.html with the run's
                                                 data) and refresh reports/index.html
    benchlib report [NOTEBOOK...] [-p NAME VALUE]...
                                                 every study notebook (or those named) to
                                                 reports/*.html plus reports/index.html
                                                 (reports already there stay listed)
    benchlib plan RUN [--target MDE]...          the design planner: a stored run as the pilot,
                                                 its variance components and the blocks and
                                                 seconds per trial a target MDE needs
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
signal's number (130, 143, 129) after one line saying so (see :mod:`benchlib.report`).
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any, Sequence

from benchlib.errors import BenchlibError, UserError

__all__ = ["main"]


def _params(pairs: Sequence[Sequence[str]] | None) -> dict[str, Any]:
    return {name: value for name, value in (pairs or [])}


def _cmd_run(args: argparse.Namespace) -> int:
    from benchlib.report import run_notebook, summary_lines, write_index

    run = run_notebook(args.notebook, _params(args.parameter), reports_dir=args.reports_dir,
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
            print(f"benchlib: error: {run.notebook.stem}: {run.error}", file=sys.stderr)
            return 2
        print(f"benchlib: {run.notebook.stem} failed: {run.error}", file=sys.stderr)
        return 1
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from benchlib.report import build_reports, summary_lines

    runs = build_reports(args.notebooks or None, _params(args.parameter), reports_dir=args.reports_dir,
                         show=None if args.quiet else print, with_raw=args.with_raw)
    failed = [r for r in runs if not r.ok]
    if runs:
        print(f"index: {runs[0].executed.parent / 'index.html'}")
    print("\n".join(summary_lines(runs)))
    for r in failed:
        if r.user_error:
            print(f"benchlib: error: {r.notebook.stem}: {r.error}", file=sys.stderr)
        else:
            print(f"benchlib: {r.notebook.stem} failed: {r.error}", file=sys.stderr)
    if any(not r.user_error for r in failed):
        return 1
    return 2 if failed else 0


def version_text() -> str:
    """``benchlib <version>``, plus ``(git <commit>[, modified])`` when benchlib is imported
    from a git checkout (:func:`benchlib.provenance.git_info`)."""
    from pathlib import Path

    import benchlib
    from benchlib.provenance import git_info

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


def _cmd_services(args: argparse.Namespace) -> int:
    from benchlib import toolchains
    from benchlib.manifest import list_services

    services = list_services(args.services_dir)
    width = max((len(n) for n in services), default=10)
    for name, m in services.items():
        ok, why = toolchains.availability(m)
        status = "available" if ok else f"not runnable here: {why}"
        print(f"{name:<{width}}  {m.language:<7} {m.framework:<22} variants={','.join(m.variants):<18} {status}")
    return 0


def _cmd_cleanup(args: argparse.Namespace) -> int:
    from benchlib.cleanup import sweep

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

    p_run = sub.add_parser("run", help="execute one notebook and export its HTML report")
    p_run.add_argument("notebook", help="notebook path, file name or stem (e.g. 00_quickstart)")
    add_params(p_run)
    p_run.add_argument("--no-html", action="store_true", help="skip the HTML export")
    p_run.set_defaults(func=_cmd_run)

    p_rep = sub.add_parser("report", help="execute study notebooks and export HTML reports plus an index")
    p_rep.add_argument("notebooks", nargs="*", help="notebooks to run (default: all study notebooks)")
    add_params(p_rep)
    p_rep.set_defaults(func=_cmd_report)

    # its arguments are the planner's own (benchlib.analysis.pilot, imported only when it runs): main() hands them on
    p_plan = sub.add_parser("plan", add_help=False,
                            help="the design planner: blocks and seconds per trial for a target MDE, from a stored "
                                 "run (benchlib plan --help)")
    p_plan.add_argument("planner_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p_plan.set_defaults(func=_cmd_plan)

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
        from benchlib.signals import signal_name

        signum = int(getattr(exc, "signum", signal.SIGINT))
        print(f"benchlib: interrupted by {signal_name(signum)}; the load and the services were stopped, stored "
              "trials are kept (re-run with the same run_id to resume)", file=sys.stderr)
        return 128 + signum


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
