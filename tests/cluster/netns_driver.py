"""The driver of ``test_netns_hosts.py``: run inside the head node's network namespace (the
Ray driver needs a raylet of its own node), it runs one trial with the service on the node
carrying ``benchlib_svc`` and the load from the two load nodes, and prints what the test
checks as one JSON line. Usage: ``python netns_driver.py OUT_DIR`` (``RAY_ADDRESS`` set)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from benchlib.core.model import Arm, Condition, Experiment, LoadSpec
from benchlib.run.runner import run_experiment


def main(out_dir: Path) -> None:
    spec = LoadSpec(model="open", rate_rps=100, duration_s=1.0, warmup_s=0.2, connections=2, workers=1)
    exp = Experiment("netns-hosts", (Arm("a", "python-aiohttp-hello"),), (Condition("main", spec),), trials=1,
                     seed=1, between_trials_s=0, repeat_disturbed=0, cluster="auto?service=benchlib_svc&server_cpus=1")
    run = run_experiment(exp, out_dir=out_dir, progress=False)
    (trial,) = run.trials
    rows = trial.rows()
    hosts = trial.load.extra["cluster"]["hosts"] if trial.load is not None else []
    print(json.dumps({
        "status": trial.status, "reason": trial.reason,
        "rows": int(len(rows)), "per_host": np.bincount(trial.hosts()).tolist(),
        "intended_unique": int(np.unique(rows["t_intended_ns"]).size),
        "hosts": [{"address": h["ip"], "node_id": h["node_id"], "rows": h["rows"]} for h in hosts],
        "service_node": trial.meta["enforced"]["service_node"],
        "ok_responses": int((rows["status"] == 200).sum()),
    }))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
