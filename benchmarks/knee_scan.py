"""Where least-loaded saturates: the lowest rate at which its mean TTFT reaches 1 s (seed 0).

    python benchmarks/knee_scan.py                                   # the default (published) costs
    python benchmarks/knee_scan.py --profile testbed                 # the sourced testbed profile
    python benchmarks/knee_scan.py --cost decode_ns_per_seq=500000 --cost prefill_ns=100000000
    python benchmarks/knee_scan.py --profile testbed --paper-path --requests 10000

Bisects the rate on a log scale between 0.5x and 2.5x the paper's top rate for each workload
(LLUMNIX.md §2) and prints it next to the rate at which the paper's INFaaS++ mean prefill latency
reaches 1 s (Fig. 11, read from the artifact's figure11_paper.pdf; "<" when it is already above
1 s at the lowest rate the paper ran). A knee at the bisection's upper end means "at least".
This is how profiles are compared with the testbed (docs/simulator.md, "The testbed profile").
--paper-path draws the generated families (S-S, M-M, L-L, S-L, L-S) on the paper's own sample path
(stream "artifact", seed 0xCADE: Fig. 11's requests, scaled to each rate); ShareGPT and BurstGPT,
which the paper sampled from datasets we do not have, stay on seed 0 of our stream.
Not a test: about 30 s per profile on one core.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from tabulate import tabulate

from llumverify.config import SimConfig
from llumverify.sim.costmodel import PROFILES, profile_config
from llumverify.sim.run import simulate
from llumverify.sim.workload import TABLE1, generate

PAPER_TOP_RATE = {"M-M": 7.8, "L-L": 3.0, "S-L": 4.3, "sharegpt": 8.0, "burstgpt": 8.5, "L-S": 18.0, "S-S": 36.0}
# Fig. 11: where INFaaS++'s mean prefill latency crosses 1 s (linear between the paper's points);
# a string when it is already above 1 s at the paper's lowest rate.
PAPER_KNEE = {"M-M": "7.46", "L-L": "2.81", "S-L": "< 4.1", "sharegpt": "7.97", "burstgpt": "< 7.5",
              "L-S": "12.8", "S-S": "< 32"}


PAPER_SEED = 0xCADE  # the artifact's benchmark seeds NumPy with it before every run


def knee(lengths: str, cfg: SimConfig, requests: int, paper_path: bool = False, steps: int = 7) -> float:
    """The rate (within 2.5^(1/2^steps)) where least-loaded's mean TTFT first reaches 1 s."""
    lo, hi = 0.5 * PAPER_TOP_RATE[lengths], 2.5 * PAPER_TOP_RATE[lengths]
    stream = "artifact" if paper_path and lengths not in TABLE1 else "llumverify"
    seed = PAPER_SEED if stream == "artifact" else 0
    for _ in range(steps):
        mid = (lo * hi) ** 0.5
        specs = generate(requests, mid, lengths=lengths, seed=seed, stream=stream)
        ttft = simulate(specs, "least-loaded", cfg).summary["ttft_mean_s"]
        lo, hi = (lo, mid) if ttft >= 1.0 else (mid, hi)  # type: ignore[operator]
    return hi


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=PROFILES, default="published")
    parser.add_argument("--cost", action="append", default=[], metavar="FIELD=INT",
                        help="override one CostConfig field (repeatable), after the profile")
    parser.add_argument("--engine", action="append", default=[], metavar="FIELD=INT",
                        help="override one EngineConfig field (repeatable), after the profile")
    parser.add_argument("--workloads", default=",".join(PAPER_TOP_RATE))
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--paper-path", action="store_true",
                        help="generated families on the paper's own requests (stream artifact, seed 0xCADE)")
    args = parser.parse_args()
    cfg = profile_config(args.profile)
    cost = {k: int(v) for k, v in (item.split("=", 1) for item in args.cost)}
    engine = {k: int(v) for k, v in (item.split("=", 1) for item in args.engine)}
    cfg = replace(cfg, cost=replace(cfg.cost, **cost), engine=replace(cfg.engine, **engine))
    rows = []
    for wl in args.workloads.split(","):
        k = knee(wl, cfg, args.requests, args.paper_path)
        rows.append([wl, PAPER_KNEE[wl], k, PAPER_TOP_RATE[wl], PAPER_TOP_RATE[wl] / k])
    print(tabulate(rows, headers=["workload", "paper's INFaaS++ knee", "least-loaded knee", "paper top rate",
                                  "paper top / knee"], floatfmt=".3g"))


if __name__ == "__main__":
    main()
