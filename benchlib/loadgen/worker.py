"""The worker process: pins itself, runs one :class:`~benchlib.loadgen.engine.Engine` on
uvloop, and hands its rows back through a file.

Started by :func:`benchlib.loadgen.launch.run_load` as a fresh interpreter
(``python -m benchlib.loadgen.worker FD``: spawn semantics, fork+exec, nothing of the
parent's state or event loop is inherited, and unlike ``multiprocessing``'s spawn the
caller's ``__main__`` is never re-imported, so a plain script without an
``if __name__ == "__main__"`` guard works too). ``FD`` is one end of a socket pair wrapped
in a :class:`multiprocessing.connection.Connection`. Messages on it:

* parent -> worker: ``("config", cfg_dict, cpus, rows_path)`` first;
* worker -> parent: ``("ready", info)`` once imported, pinned, tuned and, in the open model
  with keep-alive, its connection pool open (the engine's event loop runs from then on);
* parent -> worker: ``("start", start_ns)`` (absolute ``CLOCK_MONOTONIC`` ns) or ``("abort",)``;
* worker -> parent: ``("progress", dict)`` now and then;
* worker -> parent: ``("done", stats)`` after writing its rows to ``rows_path``; when the
  engine failed during the trial, ``stats["error"]`` holds its traceback and the rows are
  what it recorded up to then (every request due until the failure is one of them);
* worker -> parent: ``("error", traceback_text)`` when it failed before the trial or could
  not write its rows.
"""

from __future__ import annotations

import asyncio
import os
import resource
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["worker_main"]


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _peak_rss_bytes() -> int:
    """This process's peak resident set size (bytes): ``VmHWM`` of ``/proc/self/status``.

    Not ``ru_maxrss``: the kernel carries that over from the parent's memory at fork across
    the exec, so in a worker started from a large process (a long pytest run, a notebook
    kernel) it reports the parent's size.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


async def _recv(pipe: Connection) -> tuple[Any, ...]:
    """The next message on ``pipe``, awaited on the running loop (its connections' events
    are served meanwhile)."""
    loop = asyncio.get_running_loop()
    readable: asyncio.Future[None] = loop.create_future()
    fd = pipe.fileno()
    loop.add_reader(fd, lambda: readable.done() or readable.set_result(None))
    try:
        await readable
    finally:
        loop.remove_reader(fd)
    msg: tuple[Any, ...] = pipe.recv()
    return msg


def worker_main(pipe: Connection, cfg_dict: dict[str, Any], cpus: list[int] | None, rows_path: str) -> None:
    """Entry point of one worker process (see the module docstring). A config with ``arms``
    (an interleaved trial: one engine config and one window array per arm,
    :mod:`benchlib.loadgen.slices`) runs one sliced engine per arm in the same event loop and
    writes each arm's rows to ``<rows_path>.<arm index>.npy``; its ``done`` message holds a list
    of stats, one per arm."""
    try:
        if cpus:
            os.sched_setaffinity(0, cpus)
        import numpy as np
        import uvloop

        from benchlib.loadgen.engine import Engine, EngineConfig, records_to_rows, tune_socket_limits

        arms = cfg_dict.get("arms")
        engines: list[Any] = []
        if arms is not None:
            from benchlib.loadgen.slices import SlicedEngine

            cfgs = [EngineConfig(**a) for a in arms]
            tune_socket_limits(sum(c.connections for c in cfgs))
            progress = lambda info: pipe.send(("progress", info))  # noqa: E731
            engines = [SlicedEngine(c, 0, np.asarray(w, dtype=np.int64), progress if i == 0 else None)
                       for i, (c, w) in enumerate(zip(cfgs, cfg_dict["windows"]))]
        else:
            if cfg_dict.get("protocol", "http1") != "http1":  # HTTP/2: h2c or gRPC
                from benchlib.loadgen.h2engine import H2Engine as Engine  # type: ignore[assignment]
                from benchlib.loadgen.h2engine import H2EngineConfig as EngineConfig  # type: ignore[assignment]
            cfg = EngineConfig(**cfg_dict)
            tune_socket_limits(cfg.connections)
            engines = [Engine(cfg, 0, lambda info: pipe.send(("progress", info)))]
        timing: dict[str, Any] = {}

        async def run_one(engine: Any) -> None:
            try:
                tasks = [engine.run()]
                if arms is not None and engine.closed_model:
                    tasks.append(engine.activate())
                await asyncio.gather(*tasks)
            except Exception:  # noqa: BLE001 - the rows recorded so far still go back
                timing.setdefault("errors", {})[id(engine)] = traceback.format_exc()

        async def session() -> bool:
            # the keep-alive pool is open before "ready": the start instant comes after it
            for engine in engines:
                await engine.open_pool()
            pipe.send(("ready", {"pid": os.getpid(), "cpus": sorted(os.sched_getaffinity(0))}))
            msg = await _recv(pipe)
            if msg[0] != "start":
                return False
            for engine in engines:
                engine.set_start(int(msg[1]))
            timing.update(t0_ns=int(msg[2]), rss0=_peak_rss_bytes(), cpu0=_cpu_s(), wall0=time.monotonic_ns())
            await asyncio.gather(*(run_one(e) for e in engines))
            return True

        if not uvloop.run(session()):
            return
        t0_ns, rss0, cpu0, wall0 = timing["t0_ns"], timing["rss0"], timing["cpu0"], timing["wall0"]
        wall1 = time.monotonic_ns()
        cpu1 = _cpu_s()
        rss1 = _peak_rss_bytes()
        out = []
        for i, engine in enumerate(engines):
            path = rows_path if arms is None else f"{rows_path}.{i}.npy"
            rows = records_to_rows(engine.records, t0_ns)
            np.save(path, rows, allow_pickle=False)
            lags = np.frombuffer(engine.lags, dtype=np.int64) if len(engine.lags) else np.zeros(0, np.int64)
            np.save(path + ".lag.npy", lags, allow_pickle=False)
            stats = engine.stats()
            traffic_wall_s = stats["traffic_wall_s"] or max(wall1 - max(wall0, engine.start_ns), 1) / 1e9
            # the process's CPU time is shared by the arms of an interleaved trial: each arm's
            # stats carry the whole worker's (the client CPU the guard judges)
            traffic_cpu_s = (stats["traffic_cpu_s"] if arms is None else cpu1 - cpu0) or (cpu1 - cpu0)
            stats.update(
                {
                    "pid": os.getpid(),
                    "cpus": sorted(os.sched_getaffinity(0)),
                    "cpu_s": cpu1 - cpu0,
                    "wall_s": (wall1 - wall0) / 1e9,
                    "traffic_wall_s": traffic_wall_s,
                    "cpu_fraction": traffic_cpu_s / traffic_wall_s,
                    "record_buffer_bytes": engine.records.__alloc__(),
                    "records": len(rows),
                    "peak_rss_growth_bytes": rss1 - rss0,
                    "peak_rss_bytes": rss1,
                    "error": timing.get("errors", {}).get(id(engine)),
                }
            )
            out.append(stats)
        pipe.send(("done", out[0] if arms is None else out))
    except BaseException:  # noqa: BLE001 - everything goes back to the parent
        try:
            pipe.send(("error", traceback.format_exc()))
        except Exception:  # noqa: BLE001 - the parent is gone: nothing left to tell
            pass
    finally:
        pipe.close()


def main(argv: list[str] | None = None) -> None:
    """``python -m benchlib.loadgen.worker FD``: receive the config on FD and run."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    pipe = Connection(int(args[0]))
    msg = pipe.recv()
    if msg[0] != "config":
        pipe.send(("error", f"expected a config message first, got {msg[0]!r}"))
        return
    worker_main(pipe, msg[1], msg[2], msg[3])


if __name__ == "__main__":
    main()
