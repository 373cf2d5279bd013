"""SimPy events per simulated request, by kind: where a P/D request's cost goes (docs/simulator.md,
"Where a P/D request's cost goes"). Not a test: `python benchmarks/events_per_request.py [--pd 4:12]`.

Counts every event the run schedules (all are processed before it ends), keyed by the event's type
and its first callbacks' names as they are when it is processed, on the bench_sim.py workload
(16 instances x 10,000 ShareGPT-like requests at 7.5 req/s, vllm-v1, least-loaded).
"""

from __future__ import annotations

import argparse
from collections import Counter

from llumverify.settings.config import ClusterConfig, EngineConfig, SimConfig
from llumverify.sim import waits
from llumverify.sim.run import simulate
from llumverify.sim.workload import generate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pd", default="", help="P:D prefill/decode instances (P + D = 16); default colocated")
    parser.add_argument("--requests", type=int, default=10_000)
    args = parser.parse_args()
    scheduled: list[tuple[str, list]] = []
    schedule = waits.Environment.schedule

    def counting(env: waits.Environment, event, priority: int = waits.NORMAL, delay: int | float = 0) -> None:
        scheduled.append((type(event).__name__, event.callbacks))  # the list callbacks are appended to
        schedule(env, event, priority, delay)

    waits.Environment.schedule = counting  # type: ignore[method-assign]
    cfg = SimConfig(engine=EngineConfig(generation="vllm-v1"), cluster=ClusterConfig(pd=args.pd))
    simulate(generate(args.requests, 7.5, seed=0), "least-loaded", cfg)
    kinds = Counter(f"{kind}: {', '.join(getattr(c, '__qualname__', type(c).__name__) for c in cbs[:2]) or '-'}"
                    for kind, cbs in scheduled)
    print(f"{len(scheduled) / args.requests:.1f} events per request ({len(scheduled):,} for {args.requests:,}), "
          f"{'pd ' + args.pd if args.pd else 'colocated'}:")
    for name, n in kinds.most_common():
        print(f"  {n / args.requests:5.2f}  {name}")


if __name__ == "__main__":
    main()
