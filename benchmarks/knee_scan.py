"""Where least-loaded saturates: the lowest rate at which its mean TTFT reaches 1 s (seed 0).

    python benchmarks/knee_scan.py                                   # the default (published) costs
    python benchmarks/knee_scan.py --cost decode_ns_per_seq=500000 --cost prefill_ns=100000000

Bisects the rate on a log scale between 0.5x and 2.5x the paper's top rate for each workload
(LLUMNIX.md §2) and prints the paper's top rate as a share of the knee. This is how the
"testbed-load" cost profile of experiments/paper-serving.toml was chosen: the paper's top rates
at 87-98 % of least-loaded's knee on M-M, L-L, S-L, ShareGPT and BurstGPT (S-S stays far below
its knee under every profile tried, so it is not a target). Not a test: about 20 s per profile.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from tabulate import tabulate

from llumverify.config import CostConfig, SimConfig
from llumverify.sim.run import simulate
from llumverify.sim.workload import generate

PAPER_TOP_RATE = {"M-M": 7.8, "L-L": 3.0, "S-L": 4.3, "sharegpt": 8.0, "burstgpt": 8.5, "L-S": 18.0, "S-S": 36.0}


def knee(lengths: str, cfg: SimConfig, requests: int, steps: int = 7) -> float:
    """The rate (within 2.5^(1/2^steps)) where least-loaded's mean TTFT first reaches 1 s."""
    lo, hi = 0.5 * PAPER_TOP_RATE[lengths], 2.5 * PAPER_TOP_RATE[lengths]
    for _ in range(steps):
        mid = (lo * hi) ** 0.5
        ttft = simulate(generate(requests, mid, lengths=lengths, seed=0), "least-loaded", cfg).summary["ttft_mean_s"]
        lo, hi = (lo, mid) if ttft >= 1.0 else (mid, hi)  # type: ignore[operator]
    return hi


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cost", action="append", default=[], metavar="FIELD=INT",
                        help="override one CostConfig field (repeatable)")
    parser.add_argument("--workloads", default=",".join(PAPER_TOP_RATE))
    parser.add_argument("--requests", type=int, default=5000)
    args = parser.parse_args()
    overrides = {k: int(v) for k, v in (item.split("=", 1) for item in args.cost)}
    cfg = SimConfig(cost=replace(CostConfig(), **overrides))
    rows = []
    for wl in args.workloads.split(","):
        k = knee(wl, cfg, args.requests)
        rows.append([wl, PAPER_TOP_RATE[wl], k, PAPER_TOP_RATE[wl] / k])
    print(tabulate(rows, headers=["workload", "paper top rate", "least-loaded knee", "paper / knee"], floatfmt=".3g"))


if __name__ == "__main__":
    main()
