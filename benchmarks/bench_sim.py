"""Simulator speed: requests per wall-second, 16 instances x 10,000 ShareGPT-like requests at
7.5 req/s under least-loaded dispatch (best of 3; `--policy llumnix` adds migration). Not a test:
run `python benchmarks/bench_sim.py`.

--step-by-step measures the reference path that executes every decode step; --profile prints
the top of a cProfile of one run.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

from llumverify.settings.config import ClusterConfig, EngineConfig, SimConfig
from llumverify.sim.run import simulate
from llumverify.sim.workload import generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=7.5)
    parser.add_argument("--policy", default="least-loaded")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--step-by-step", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--engine", default="vllm-0.2", help="engine generation: vllm-0.2 or vllm-v1")
    parser.add_argument("--pd", default="", help="P:D prefill/decode instances (P + D = 16; the issue-14 benchmark uses --engine vllm-v1)")
    args = parser.parse_args()
    specs = generate(args.requests, args.rate, seed=0)
    cfg = SimConfig(engine=EngineConfig(generation=args.engine), cluster=ClusterConfig(pd=args.pd),
                    fast=not args.step_by_step)
    if args.profile:
        prof = cProfile.Profile()
        prof.runcall(simulate, specs, args.policy, cfg)
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)
        return
    best = min(_timed(specs, args.policy, cfg) for _ in range(args.repeat))
    path = "step-by-step" if args.step_by_step else "closed-form"
    print(f"{args.requests} requests, 16 instances, {args.rate} req/s, {args.engine}{' pd ' + args.pd if args.pd else ''}, {args.policy}, {path}: "
          f"best of {args.repeat} {best:.3f} s = {args.requests / best:,.0f} requests per wall-second")


def _timed(specs: list, policy: str, cfg: SimConfig) -> float:
    start = time.perf_counter()
    simulate(specs, policy, cfg)
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
