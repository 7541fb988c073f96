"""What a notebook's kernel hands back while it runs, through files named in its environment:
its progress lines (``$BENCHLIB_PROGRESS_FILE``), relayed to the caller as they come, and the
folders of the runs it executed (``$BENCHLIB_RUNS_FILE``), read once it is done."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from benchlib.core import settings
from benchlib.run.progress import parse_line

__all__ = ["progress_relay", "run_folders"]


@contextmanager
def progress_relay(show: Callable[[str], None] | None,
                    left: Callable[[float | None], str] | None = None) -> Iterator[dict[str, str]]:
    """Set up ``$BENCHLIB_PROGRESS_FILE`` for the kernel and relay its lines' text to ``show``
    (followed by ``left(seconds left in this run)`` for the lines that carry it)."""
    if show is None:
        yield {}
        return
    fd, path = tempfile.mkstemp(prefix="benchlib-progress-", suffix=".log")
    os.close(fd)
    stop = threading.Event()

    def follow() -> None:
        with open(path) as fh:
            while True:
                line = fh.readline()
                if line:
                    got = parse_line(line.rstrip("\n"))
                    show(got.text + (left(got.left_s) if left is not None and got.left_s is not None else ""))
                elif stop.is_set():
                    return
                else:
                    time.sleep(0.2)

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    try:
        yield {settings.PROGRESS_FILE.name: path}
    finally:
        stop.set()
        t.join(timeout=5)
        os.unlink(path)


@contextmanager
def run_folders() -> Iterator[tuple[dict[str, str], list[Path]]]:
    """Set up ``$BENCHLIB_RUNS_FILE`` for the kernel; yields (its environment, a list that holds
    the run folders the runner recorded there once the context is left)."""
    fd, path = tempfile.mkstemp(prefix="benchlib-runs-", suffix=".txt")
    os.close(fd)
    folders: list[Path] = []
    try:
        yield {settings.RUNS_FILE.name: path}, folders
    finally:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        folders.extend(dict.fromkeys(Path(line) for line in lines if line.strip()))
        os.unlink(path)
