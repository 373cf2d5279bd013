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
from dataclasses import fields, replace

from tabulate import tabulate

from llumverify.settings.config import CostConfig, EngineConfig, SimConfig
from llumverify.errors import UserError
from llumverify.sim.named_profiles import PROFILES, profile_config
from llumverify.sim.run import simulate
from llumverify.sim.workload import ARTIFACT_SEED, TABLE1, generate

PAPER_TOP_RATE = {"M-M": 7.8, "L-L": 3.0, "S-L": 4.3, "sharegpt": 8.0, "burstgpt": 8.5, "L-S": 18.0, "S-S": 36.0}
# Fig. 11: where INFaaS++'s mean prefill latency crosses 1 s (linear between the paper's points);
# a string when it is already above 1 s at the paper's lowest rate.
PAPER_KNEE = {"M-M": "7.46", "L-L": "2.81", "S-L": "< 4.1", "sharegpt": "7.97", "burstgpt": "< 7.5",
              "L-S": "12.8", "S-S": "< 32"}


def knee(lengths: str, cfg: SimConfig, requests: int, paper_path: bool = False, steps: int = 7) -> float:
    """The rate (within 2.5^(1/2^steps)) where least-loaded's mean TTFT first reaches 1 s."""
    lo, hi = 0.5 * PAPER_TOP_RATE[lengths], 2.5 * PAPER_TOP_RATE[lengths]
    stream = "artifact" if paper_path and lengths not in TABLE1 else "llumverify"
    seed = ARTIFACT_SEED if stream == "artifact" else 0
    for _ in range(steps):
        mid = (lo * hi) ** 0.5
        specs = generate(requests, mid, lengths=lengths, seed=seed, stream=stream)
        ttft = simulate(specs, "least-loaded", cfg).summary["ttft_mean_s"]
        lo, hi = (lo, mid) if ttft >= 1.0 else (mid, hi)  # type: ignore[operator]
    return hi


def _overrides(items: list[str], cls: type) -> dict[str, int]:
    """FIELD=INT pairs for dataclass `cls` (a UserError names a bad one)."""
    out, known = {}, {f.name for f in fields(cls)}
    for item in items:
        name, _, value = item.partition("=")
        if name not in known or not value.lstrip("-").isdigit():
            raise UserError(f"{item!r} is not FIELD=INT with a {cls.__name__} field")
        out[name] = int(value)
    return out


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
    try:  # every input checked before the first run
        workloads = args.workloads.split(",")
        unknown = [w for w in workloads if w not in PAPER_TOP_RATE]
        if unknown:
            raise UserError(f"unknown workload(s) {', '.join(unknown)}: choose from {', '.join(PAPER_TOP_RATE)}")
        if args.requests < 1:
            raise UserError(f"--requests must be >= 1, got {args.requests}")
        cfg = profile_config(args.profile)
        cfg = replace(cfg, cost=replace(cfg.cost, **_overrides(args.cost, CostConfig)),
                      engine=replace(cfg.engine, **_overrides(args.engine, EngineConfig)))
        cfg.cost.validate()
        cfg.engine.validate()
    except UserError as exc:
        raise SystemExit(f"knee_scan.py: {exc}") from None
    rows = []
    for wl in workloads:
        k = knee(wl, cfg, args.requests, args.paper_path)
        rows.append([wl, PAPER_KNEE[wl], k, PAPER_TOP_RATE[wl], PAPER_TOP_RATE[wl] / k])
    print(tabulate(rows, headers=["workload", "paper's INFaaS++ knee", "least-loaded knee", "paper top rate",
                                  "paper top / knee"], floatfmt=".3g"))


if __name__ == "__main__":
    main()
