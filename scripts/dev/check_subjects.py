"""Commit subjects of at most 72 characters (CONTRIBUTING.md): figures and reasons go in the body.

    python scripts/dev/check_subjects.py              every commit from the one that added this
                                                      check to HEAD (what `make lint` runs)
    python scripts/dev/check_subjects.py --message F  the subject of the commit message in file F
                                                      (its first line that is not a # comment):
                                                      a commit-msg hook (CONTRIBUTING.md)

Earlier commits are history as it was written and are not checked. Outside a git checkout,
or in a clone too shallow to hold the commit that added this file, it says so and passes.
Exit status 1 names each subject over the limit with its length.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

#: the longest subject line allowed, in characters (git's own convention for one-line logs)
MAX_SUBJECT = 72
#: this file's path in the repository: the commit that added it is where checking begins
THIS = "scripts/dev/check_subjects.py"
ROOT = Path(__file__).resolve().parent.parent.parent


def _git(*args: str, root: Path = ROOT) -> str | None:
    """git's output in the repository ``root``, or None when git fails (no git, not a checkout)."""
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout


def too_long(subjects: list[tuple[str, str]]) -> list[str]:
    """One line per (commit, subject) whose subject is over MAX_SUBJECT characters."""
    return [f"{sha[:10]} subject is {len(s)} characters (at most {MAX_SUBJECT}): {s}"
            for sha, s in subjects if len(s) > MAX_SUBJECT]


def subjects_since_check(root: Path = ROOT) -> list[tuple[str, str]] | None:
    """(commit, subject) of the commit that added this file and every one after it up to HEAD,
    in the repository ``root``; None when that commit cannot be found there."""
    first = _git("log", "--diff-filter=A", "--format=%H", "--", THIS, root=root)
    if not first or not first.split():
        return None
    base = first.split()[-1]
    log = _git("log", "--format=%H%x00%s", "--ancestry-path", f"{base}..HEAD", root=root)
    own = _git("log", "-1", "--format=%H%x00%s", base, root=root)
    if log is None or own is None:
        return None
    lines = [line for line in (log + own).splitlines() if line]
    return [(sha, subject) for sha, subject in (line.split("\0", 1) for line in lines)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--message", type=Path, help="check the first line of this commit message file")
    args = ap.parse_args(argv)
    if args.message is not None:
        lines = [line for line in args.message.read_text().splitlines() if line.strip() and not line.startswith("#")]
        subject = lines[0] if lines else ""
        problems = too_long([("message", subject)])
    else:
        subjects = subjects_since_check()
        if subjects is None:
            print(f"check_subjects: no commit adding {THIS} here (not committed yet, not a git "
                  "checkout, or a shallow clone): nothing checked")
            return 0
        problems = too_long(subjects)
        if not problems:
            print(f"check_subjects: {len(subjects)} commit subjects, each at most {MAX_SUBJECT} characters")
    for p in problems:
        print(f"check_subjects: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
