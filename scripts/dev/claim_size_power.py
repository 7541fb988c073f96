"""Size and power of the claim test (benchlib.stats.claim.answer_claims) at the default design,
simulated through the same code (a simulation, not a timing: it runs anywhere).

Each replicate draws ``blocks`` paired blocks: a block level shared by both arms (paired out),
then the arm's log value = level + log(true ratio) (numerator only) + noise of SD ``sd`` per arm
(so the per-block log ratio has SD ``sd * sqrt(2)``). A family of ``rows`` claim rows with
the same truth is answered at once (one Holm family). It prints, per scenario, how often each
outcome was read: at the claim's boundary C/(1+m) "holds" is the error the test controls (at
most alpha/2 per row); at C it is the power; at 1 "no difference"; below 1 "reversed".

    python scripts/dev/claim_size_power.py                 # the table of docs/statistics.md
    python scripts/dev/claim_size_power.py --replicates 200 --blocks 8 --sd 0.05
"""

from __future__ import annotations

import argparse
import math
from collections import Counter

import numpy as np

from benchlib.stats.claim import MARGIN, ClaimData, ClaimOutcome, answer_claims

OUTCOMES = [o.value for o in ClaimOutcome if o is not ClaimOutcome.TOO_FEW]


def simulate(true: float, claimed: float, *, blocks: int, sd: float, rows: int, replicates: int,
             seed: int) -> Counter[str]:
    """Outcome counts over ``replicates`` x ``rows`` rows."""
    rng = np.random.default_rng(seed)
    out: Counter[str] = Counter()
    for _ in range(replicates):
        family = []
        for k in range(rows):
            level = rng.normal(0.0, 0.3, blocks)
            den = level + rng.normal(0.0, sd, blocks)
            num = level + math.log(true) + rng.normal(0.0, sd, blocks)
            family.append(ClaimData(f"r{k}", claimed, num, den))
        out.update(r.outcome.value for r in answer_claims(family))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicates", type=int, default=1000)
    ap.add_argument("--blocks", type=int, nargs="+", default=[8, 10])
    ap.add_argument("--sd", type=float, nargs="+", default=[0.03, 0.10])
    ap.add_argument("--claimed", type=float, default=2.0)
    ap.add_argument("--rows", type=int, default=2)
    a = ap.parse_args()
    c = a.claimed
    scenarios = [("1.2 C (beyond)", 1.2 * c), ("C (as claimed)", c), ("C/(1+m) (boundary)", c / (1 + MARGIN)),
                 ("C/(1+m)^2", c / (1 + MARGIN) ** 2), ("1.3 (smaller)", 1.3), ("1 (none)", 1.0),
                 ("0.8 (reversed)", 0.8)]
    print(f"claimed C = {c:g}, margin m = {MARGIN:.0%}, {a.rows} rows per Holm family, {a.replicates} replicates; "
          "share of rows read as each outcome")
    print("| blocks | SD per arm | true ratio | " + " | ".join(OUTCOMES) + " |")
    print("|---|---|---|" + "---|" * len(OUTCOMES))
    for blocks in a.blocks:
        for sd in a.sd:
            for i, (name, true) in enumerate(scenarios):
                got = simulate(true, c, blocks=blocks, sd=sd, rows=a.rows, replicates=a.replicates, seed=1000 + i)
                n = sum(got.values())
                print(f"| {blocks} | {sd:.0%} | {name} | " + " | ".join(f"{got[o] / n:.3f}" for o in OUTCOMES) + " |")


if __name__ == "__main__":
    main()
