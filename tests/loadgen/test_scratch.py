"""The load workers' scratch folders: named after their owner, removed when it is gone."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from benchlib.loadgen import launch as runner


def test_a_scratch_folder_names_its_owner_and_the_sweep_spares_live_owners(tmp_path: Path) -> None:
    made = Path(runner._scratch_dir())
    try:
        assert made.name.startswith(f"benchlib-load-p{os.getpid()}-")
    finally:
        made.rmdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead_pid = int(dead.stdout)
    assert not Path(f"/proc/{dead_pid}").exists()
    for name in (f"benchlib-load-p{dead_pid}-abc", f"benchlib-load-p{os.getpid()}-def", "benchlib-load-old1",
                 "benchlib-load-new1", "other-folder"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "worker-0.bin").write_bytes(b"x")
    old = time.time() - runner.SCRATCH_MAX_AGE_S - 60
    os.utime(tmp_path / "benchlib-load-old1", (old, old))
    removed = runner.sweep_scratch([str(tmp_path)])
    assert sorted(Path(p).name for p in removed) == ["benchlib-load-old1", f"benchlib-load-p{dead_pid}-abc"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["benchlib-load-new1", f"benchlib-load-p{os.getpid()}-def",
                                                          "other-folder"]
