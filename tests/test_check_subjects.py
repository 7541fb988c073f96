"""scripts/dev/check_subjects.py: commit subjects of at most 72 characters, from the commit that
added the check on (a throwaway repository in tmp_path; git only, nothing else runs)."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_subjects", ROOT / "scripts" / "dev" / "check_subjects.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _commit(repo: Path, path: str, subject: str) -> None:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(subject)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "add", path], check=True)
    subprocess.run([*git, "commit", "-q", "-m", subject], check=True)


def test_a_subject_is_too_long_past_72_characters_only() -> None:
    cs = _script()
    assert cs.too_long([("a" * 40, "x" * 72)]) == []
    [line] = cs.too_long([("a" * 40, "x" * 73)])
    assert line.startswith("aaaaaaaaaa subject is 73 characters (at most 72)")


def test_only_commits_from_the_one_adding_the_check_are_read(tmp_path: Path) -> None:
    cs = _script()
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    _commit(tmp_path, "old.txt", "an old subject that is longer than seventy-two characters, as history was written")
    _commit(tmp_path, cs.THIS, "add the check")
    _commit(tmp_path, "new.txt", "a new subject that is longer than seventy-two characters, which the check refuses")
    subjects = cs.subjects_since_check(tmp_path)
    assert subjects is not None and sorted(s for _, s in subjects) == sorted(
        ["add the check", "a new subject that is longer than seventy-two characters, which the check refuses"])
    assert len(cs.too_long(subjects)) == 1


def test_outside_a_checkout_nothing_is_checked(tmp_path: Path) -> None:
    assert _script().subjects_since_check(tmp_path) is None


def test_a_message_file_is_checked_by_its_first_line_that_is_not_a_comment(tmp_path: Path) -> None:
    cs = _script()
    message = tmp_path / "COMMIT_EDITMSG"
    message.write_text("# Please enter the commit message\n" + "y" * 73 + "\n\nthe body may be as long as it needs\n")
    assert cs.main(["--message", str(message)]) == 1
    message.write_text("a short subject\n\n" + "z" * 200 + "\n")
    assert cs.main(["--message", str(message)]) == 0
