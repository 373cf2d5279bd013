"""Simulator cost per request as the cluster and the run grow (issue #12, deliverable 4). Not a test.

    python benchmarks/bench_scale.py --instances 16 256 --requests 10000 40000 --policy llumnix

runs ShareGPT-like requests at the same load per instance (`--rate-per-instance`, default
30/64 req/s, the issue's 30 req/s on 64 instances) on each instance count, and prints the
process CPU time per request and its ratio to the first row's (goal: <= 1.3 from 16 to 256
instances, <= 1.2 from 10k to 1M requests). --profile prints the top of a cProfile of each run.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

from llumverify.settings.config import ClusterConfig, SimConfig
from llumverify.sim.run import simulate
from llumverify.sim.workload import generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, nargs="+", default=[16, 256])
    parser.add_argument("--requests", type=int, nargs="+", default=[10_000],
                        help="one count for every instance count, or one per instance count")
    parser.add_argument("--rate-per-instance", type=float, default=30 / 64)
    parser.add_argument("--policy", default="least-loaded")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    counts = args.requests * len(args.instances) if len(args.requests) == 1 else args.requests
    if len(counts) != len(args.instances):
        parser.error("give one --requests count, or one per --instances count")
    first = 0.0
    for n_inst, n_req in zip(args.instances, counts):
        specs = generate(n_req, args.rate_per_instance * n_inst, seed=0)
        cfg = SimConfig(cluster=ClusterConfig(num_instances=n_inst))
        if args.profile:
            prof = cProfile.Profile()
            prof.runcall(simulate, specs, args.policy, cfg)
            pstats.Stats(prof).sort_stats("tottime").print_stats(12)
            continue
        start = time.process_time()
        simulate(specs, args.policy, cfg)
        per_req = (time.process_time() - start) / n_req
        first = first or per_req
        print(f"{args.policy}, {n_inst} instances, {n_req} requests: {per_req * 1e6:.1f} us CPU per request "
              f"({per_req / first:.2f}x the first row)", flush=True)


if __name__ == "__main__":
    main()
