"""Service logs are read (pipe) or written (file) in full, but kept bounded per trial."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from benchlib.runtime import StartOptions, get_runtime
from benchlib.runtime.local import free_port
from benchlib.runtime.logs import compact_log
from benchlib.runtime.manifest import load_manifest


def test_compact_log_keeps_head_and_tail_and_counts(tmp_path: Path) -> None:
    p = tmp_path / "x.log"
    p.write_bytes(b"".join(f"line {i}\n".encode() for i in range(100_000)))
    info = compact_log(p, cap_bytes=10_000)
    assert info["truncated"] and info["lines"] == 100_000 and info["bytes"] > 600_000
    text = p.read_text()
    assert text.startswith("line 0\n") and text.endswith("line 99999\n") and "[benchlib: log cut here:" in text
    assert p.stat().st_size < 10_200
    small = tmp_path / "y.log"
    small.write_text("a\nb\n")
    assert compact_log(small, cap_bytes=10_000) == {"lines": 2, "bytes": 4, "kept_bytes": 4, "truncated": False}


@pytest.mark.integration
@pytest.mark.parametrize("sink", ["pipe", "file"])
def test_a_chatty_service_is_read_in_full_but_kept_bounded(tmp_path: Path, sink: str) -> None:
    d = tmp_path / "chatty"
    d.mkdir()
    (d / "service.toml").write_text(textwrap.dedent("""
        name = "chatty"
        language = "python"
        framework = "none"
        toolchains = ["python"]
        [run]
        command = ["{python}", "-c", '''
import os, socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(os.environ["PORT"]))); s.listen()
for i in range(200_000):
    print("request %d GET / 200 0.1ms" % i)
sys.stdout.flush()
s.accept()
''']
        port_env = "PORT"
        [health]
        kind = "tcp"
    """))
    rt = get_runtime("local")
    log = tmp_path / "svc.log"
    h = rt.start(rt.prepare(load_manifest(d).resolve()), StartOptions(port=free_port(), cpus=(1,), log_sink=sink,
                                                                    log_path=log, log_cap_bytes=100_000))
    import time

    time.sleep(1.5)
    h.stop()
    assert h.log_lines == 200_000 and h.log_bytes > 4_000_000
    text = log.read_text()
    assert "[benchlib: log cut here:" in text and "request 199999 GET" in text and text.startswith("request 0 GET")
    assert log.stat().st_size < 150_000
